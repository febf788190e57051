import { describe, expect, it } from "vitest";
import { inLane } from "./canvas-lane.js";

/** A call that records when it starts and ends, and ends when `finish` is called. */
function call(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const run = async () => {
    log.push(`${name} start`);
    await done;
    log.push(`${name} end`);
    return name;
  };
  return { run, finish: () => finish() };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("inLane", () => {
  it("runs one lane's calls one at a time, in order; another lane's beside them", async () => {
    const log: string[] = [];
    const lane = {};
    const [a, b, other] = [call(log, "a"), call(log, "b"), call(log, "other")];
    const runs = [inLane(lane, a.run), inLane(lane, b.run), inLane({}, other.run)];
    await tick();
    expect(log).toEqual(["a start", "other start"]);
    b.finish(); // b has not started: it must still wait for a
    await tick();
    expect(log).toEqual(["a start", "other start"]);
    a.finish();
    other.finish();
    await expect(Promise.all(runs)).resolves.toEqual(["a", "b", "other"]);
    expect(log.indexOf("b start")).toBeGreaterThan(log.indexOf("a end"));
  });

  it("a call that fails fails alone: the lane's next call runs", async () => {
    const lane = {};
    const failed = inLane(lane, async () => {
      throw new Error("forward failed");
    });
    const next = inLane(lane, async () => 7);
    await expect(failed).rejects.toThrow("forward failed");
    await expect(next).resolves.toBe(7);
  });
});
