import { describe, expect, it } from "vitest";
import { createCheckpoints } from "./checkpoints.js";
import type { SettleUsage } from "./gate.js";

describe("stream checkpoints", () => {
  it("sends the first at once, then the latest at most once per interval, and nothing after stop", async () => {
    const sent: SettleUsage[] = [];
    const checkpoints = createCheckpoints((usage) => sent.push(usage), 50);
    checkpoints.update({ promptTokens: 10, completionTokens: 0 });
    expect(sent).toEqual([{ promptTokens: 10, completionTokens: 0 }]);
    for (let c = 1; c <= 5; c++) checkpoints.update({ promptTokens: 10, completionTokens: c });
    expect(sent).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 80));
    expect(sent).toEqual([
      { promptTokens: 10, completionTokens: 0 },
      { promptTokens: 10, completionTokens: 5 },
    ]);
    checkpoints.update({ promptTokens: 10, completionTokens: 9 });
    checkpoints.stop();
    await new Promise((r) => setTimeout(r, 80));
    expect(sent).toHaveLength(2);
  });
});
