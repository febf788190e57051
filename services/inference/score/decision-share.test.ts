import { describe, expect, it } from "vitest";
import { Overloaded } from "../core/engine-errors.js";
import { DecisionShare } from "./decision-share.js";

/** A decision that runs until `finish` is called, telling its lane. */
function held() {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  let lane: object | undefined;
  const work = async (l: object) => {
    lane = l;
    await done;
  };
  return { work, finish: () => finish(), lane: () => lane };
}

describe("DecisionShare", () => {
  it("runs one client's decisions in one lane, another client's and unnamed ones in their own", async () => {
    const share = new DecisionShare("m", 4, 0);
    const [a1, a2, b, none] = [held(), held(), held(), held()];
    const runs = [
      share.run("acct-a", undefined, a1.work),
      share.run("acct-a", undefined, a2.work),
      share.run("acct-b", undefined, b.work),
      share.run(undefined, undefined, none.work),
    ];
    await new Promise((r) => setImmediate(r));
    expect(a1.lane()).toBe(a2.lane());
    expect(b.lane()).not.toBe(a1.lane());
    expect(none.lane()).not.toBe(a1.lane());
    for (const d of [a1, a2, b, none]) d.finish();
    await Promise.all(runs);
  });

  it("refuses a decision beyond its slots and queue as Overloaded, naming decision slots", async () => {
    const share = new DecisionShare("m", 1, 1);
    const [first, second] = [held(), held()];
    const runs = [share.run("a", undefined, first.work), share.run("a", undefined, second.work)];
    const refused = await share.run("b", undefined, async () => undefined).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(Overloaded);
    expect((refused as Error).message).toMatch(/all 1 decision slots are busy and the wait queue is full/);
    first.finish();
    second.finish();
    await Promise.all(runs);
    // Slots given back: the next one runs.
    await expect(share.run("b", undefined, async () => 7)).resolves.toBe(7);
  });
});
