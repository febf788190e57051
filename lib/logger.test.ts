import { describe, expect, it } from "vitest";
import { createLogger, TurnBatchedDestination } from "./logger.js";

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("TurnBatchedDestination", () => {
  it("writes the lines of one turn of the event loop together, in order, once the turn is over", async () => {
    const writes: string[] = [];
    const destination = new TurnBatchedDestination({ write: (text) => writes.push(text) });
    destination.write("a\n");
    destination.write("b\n");
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual(["a\nb\n"]);
    destination.write("c\n");
    await nextTurn();
    expect(writes).toEqual(["a\nb\n", "c\n"]);
  });

  it("writes what is pending at once on flush, and nothing twice", async () => {
    const writes: string[] = [];
    const destination = new TurnBatchedDestination({ write: (text) => writes.push(text) });
    destination.write("a\n");
    let flushed = false;
    destination.flush(() => (flushed = true));
    expect(flushed).toBe(true);
    expect(writes).toEqual(["a\n"]);
    await nextTurn();
    expect(writes).toEqual(["a\n"]);
  });

  it("carries a pino logger's lines, one JSON object each", async () => {
    const writes: string[] = [];
    const logger = createLogger({ destination: new TurnBatchedDestination({ write: (text) => writes.push(text) }) });
    logger.info({ reqId: "req_1", apiKey: "tsr_secret" }, "request");
    logger.warn("second");
    await nextTurn();
    expect(writes).toHaveLength(1);
    const lines = writes[0]!
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((l) => [l["level"], l["msg"]])).toEqual([
      ["info", "request"],
      ["warn", "second"],
    ]);
    expect(lines[0]!["apiKey"]).toBe("[redacted]");
  });
});
