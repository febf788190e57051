// A shutdown that comes right after an error answer: the request's settlement (run after the
// answer is sent) must reach the store before the store closes. It used to be written to a
// closed LMDB environment, which threw out of an lmdb timer and killed the process.
import { describe, expect, it } from "vitest";
import { startTestTessera } from "../helpers/tessera.js";

describe("shutdown after error answers", () => {
  it("waits for the settlements of answered requests before closing the store", async () => {
    const crashes: unknown[] = [];
    const onCrash = (err: unknown) => crashes.push(err);
    process.on("uncaughtException", onCrash);
    try {
      for (let i = 0; i < 5; i++) {
        const tessera = await startTestTessera({ models: "none" });
        // Admitted first (the decision route admits before reading the body), then refused: 422.
        const res = await tessera.fetch("/v1/systemone", { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
        expect(res.status).toBe(422);
        await tessera.close();
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(tessera.logs.filter((line) => line.includes("settling failed"))).toEqual([]);
      }
    } finally {
      process.off("uncaughtException", onCrash);
    }
    expect(crashes).toEqual([]);
  });
});
