// A running pool's models changing (a model pulled again or removed while serving): new requests
// go to the new engine at once, a reply running on the old one finishes whole, and the old engine
// closes only after it. The old engine's forwards are held at a gate, so the reply is surely
// running when the pool changes.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { afterAll, describe, expect, it, vi } from "vitest";
import { InferenceService, Role } from "../../../gen/tessera/inference/v1/inference_pb.js";
import { silentLogger } from "../../../lib/logger.js";
import { endlessTinyModel } from "../../../test/helpers/endless-model.js";
import { TINY_MODEL_DIR } from "../../../test/helpers/tessera.js";
import type { ForwardRunner } from "../decoder/forward.js";
import { inferenceRoutes } from "../server.js";
import { loadModelPool, type ModelPool } from "./model-pool.js";

const scratch = mkdtempSync(join(tmpdir(), "tessera-pool-changes-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The runner of the engine named `endless-model`, waiting at `gate` before each forward while it is set. */
function gatedPool(): { load: () => Promise<ModelPool>; hold: () => void; release: () => void } {
  let gate: Promise<void> | undefined;
  let open = () => {};
  const gated = (inner: ForwardRunner): ForwardRunner => ({
    ...inner,
    async run(inputs, fetch) {
      if (gate !== undefined) await gate;
      return inner.run(inputs, fetch);
    },
  });
  return {
    load: () =>
      loadModelPool({
        models: [{ servingId: "m", dir: endlessTinyModel(mkdtempSync(join(scratch, "endless-"))) }],
        slots: 1,
        queue: 2,
        intraOpThreads: 1,
        logger: silentLogger(),
        wrapRunner: (inner, name) => (name === "endless-model" ? gated(inner) : inner),
      }),
    hold: () => {
      gate = new Promise((r) => (open = r));
    },
    release: () => {
      gate = undefined;
      open();
    },
  };
}

async function reply(pool: ModelPool, maxTokens: number, onStarted?: () => void) {
  const client = createClient(InferenceService, createRouterTransport(inferenceRoutes({ pool, workerId: "w" })));
  let text = "";
  let finished: { reason: string; completionTokens: number } | undefined;
  for await (const res of client.generate({
    model: "m",
    messages: [{ role: Role.USER, content: [{ part: { case: "text", value: "Tell me a story." } }] }],
    options: { maxTokens },
  })) {
    if (res.event.case === "started") onStarted?.();
    if (res.event.case === "delta") text += res.event.value.content;
    if (res.event.case === "finished")
      finished = { reason: String(res.event.value.finishReason), completionTokens: res.event.value.usage?.completionTokens ?? 0 };
  }
  return { text, finished };
}

/** A reply of `maxTokens` started on the pool's engine for "m", its forwards held at the gate; the engine's close watched. */
async function heldReply(pool: ModelPool, gate: ReturnType<typeof gatedPool>, maxTokens: number) {
  const old = pool.engine("m")!;
  const closed = vi.spyOn(old, "close");
  let started = () => {};
  const running = new Promise<void>((r) => (started = r));
  gate.hold();
  const running_ = reply(pool, maxTokens, started);
  await running;
  return { old, closed, reply: running_ };
}

describe("a running pool's models change", () => {
  it("replace: new requests reach the new model at once; a running reply finishes whole on the old, which closes after it", async () => {
    const gate = gatedPool();
    const pool = await gate.load();
    try {
      const { old, closed, reply: longReply } = await heldReply(pool, gate, 200);
      await pool.replace([{ servingId: "m", dir: TINY_MODEL_DIR }]);
      expect(pool.engine("m")).not.toBe(old);
      expect(pool.engine("m")!.name).toBe("tiny-model");
      expect(old.info().slots.free).toBe(0); // the long reply still runs, held at the gate
      const fresh = await reply(pool, 8); // answered by the new engine while the old one is held
      expect(fresh.finished?.completionTokens).toBeGreaterThan(0);
      expect(closed).not.toHaveBeenCalled();
      gate.release();
      const whole = await longReply;
      expect(whole.finished?.completionTokens).toBe(200); // the endless model talks to max_tokens: not cut
      await vi.waitFor(() => expect(closed).toHaveBeenCalledTimes(1), { timeout: 5_000, interval: 100 });
      expect(pool.servingIds).toEqual(["m"]);
      expect(pool.runtimes.map((r) => r.name)).toEqual(["tiny-model"]);
    } finally {
      gate.release();
      await pool.close();
    }
  }, 60_000);

  it("remove: the id is no longer served; a running reply finishes, then the engine closes", async () => {
    const gate = gatedPool();
    const pool = await gate.load();
    const { closed, reply: longReply } = await heldReply(pool, gate, 120);
    pool.remove(["m"]);
    expect(pool.engine("m")).toBeUndefined();
    expect(pool.servingIds).toEqual([]);
    expect(pool.slotsTotal).toBe(0);
    gate.release();
    expect((await longReply).finished?.completionTokens).toBe(120);
    await vi.waitFor(() => expect(closed).toHaveBeenCalledTimes(1), { timeout: 5_000, interval: 100 });
    await pool.close();
    expect(closed).toHaveBeenCalledTimes(1);
  }, 60_000);
});
