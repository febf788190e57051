import { describe, expect, it } from "vitest";
import { fairRunner, forwardWork } from "./fair-runner.js";
import type { ForwardInputs, ForwardRunner } from "./forward.js";

const inputs = (batch: number, seq: number, past = 0) => ({ batch, seq, past }) as ForwardInputs;

describe("fairRunner", () => {
  it("runs one forward at a time and lets a lane of small steps pass a lane of big forwards", async () => {
    const order: string[] = [];
    let running = 0;
    const inner: ForwardRunner = {
      async run(input) {
        running++;
        expect(running).toBe(1);
        order.push(input.seq === 64 ? "step" : "readout");
        await new Promise((r) => setTimeout(r, 2));
        running--;
        return {};
      },
    };
    const runner = fairRunner(inner);
    const decision = {};
    const generation = {};
    // A decision of 5 readout forwards of 2,048 row tokens, and a generation of 20 steps of 64.
    const readouts = (async () => {
      for (let i = 0; i < 5; i++) await runner.run(inputs(1, 2048), { present: false, output: "logits" }, decision);
    })();
    const steps = (async () => {
      for (let i = 0; i < 20; i++) await runner.run(inputs(1, 64), { present: false, output: "readout" }, generation);
    })();
    await Promise.all([readouts, steps]);
    // FIFO by whole request would run the 5 readouts first; here every step runs before the 2nd readout.
    const secondReadout = order.indexOf("readout", order.indexOf("readout") + 1);
    expect(order.lastIndexOf("step")).toBeLessThan(secondReadout);
    expect(order.filter((o) => o === "step")).toHaveLength(20);
  });

  it("passes a failure to its caller only, and goes on", async () => {
    const runner = fairRunner({
      async run(input) {
        if (input.batch === 2) throw new Error("boom");
        return {};
      },
    });
    await expect(runner.run(inputs(2, 1), { present: false, output: "logits" })).rejects.toThrow("boom");
    await expect(runner.run(inputs(1, 1), { present: false, output: "logits" })).resolves.toEqual({});
  });

  it("weighs a forward by its rows, tokens and past", () => {
    expect(forwardWork(inputs(1, 64))).toBe(68);
    expect(forwardWork(inputs(4, 64, 960))).toBe(4 * 64 * 2);
  });
});
