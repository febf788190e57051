import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { startFakeInferenceWorker, type FakeWorker } from "../helpers/fake-worker.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()!.close();
});

async function start(...args: Parameters<typeof startTestTessera>): Promise<TestTessera> {
  const tessera = await startTestTessera(...args);
  running.push(tessera);
  return tessera;
}

const chatBody = JSON.stringify({ model: "textmodel-26b", messages: [{ role: "user", content: "hello" }], max_tokens: 8 });
const post = { method: "POST", headers: { "content-type": "application/json" }, body: chatBody };

describe("first start", () => {
  it("creates one key on an empty store, prints it once and never logs it", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tessera-restart-"));
    running.push({ close: async () => rmSync(dataDir, { recursive: true, force: true }) });
    const first = await startTestTessera({ env: { TESSERA_BOOTSTRAP_KEY: "" }, dataDir });
    const printed = first.printed.join("");
    const key = /(tsr_[A-Za-z0-9_-]+)/.exec(printed)?.[1];
    expect(key).toBeDefined();
    expect(first.createdKey).toBe(key);
    expect(first.printed).toHaveLength(1);
    first.announceWorker();
    expect((await first.fetch("/v1/models", { key: key! })).status).toBe(200);
    expect(first.logs.join("\n")).not.toContain(key!);
    expect(first.logs.join("\n")).toMatch(/created the first API key/);
    await first.close();

    const again = await start({ env: { TESSERA_BOOTSTRAP_KEY: "" }, dataDir });
    expect(again.printed).toEqual([]);
    expect(again.createdKey).toBeUndefined();
    again.announceWorker();
    expect((await again.fetch("/v1/models", { key: key! })).status).toBe(200);
  });

  it("with TESSERA_BOOTSTRAP_KEY, makes that key work and generates none", async () => {
    const tessera = await start();
    expect(tessera.printed).toEqual([]);
    const { keys } = await tessera.clients.accounting.listKeys({});
    expect(keys).toHaveLength(1);
    expect(keys[0]!.name).toBe("bootstrap");
    tessera.announceWorker();
    expect((await tessera.fetch("/v1/models")).status).toBe(200);
  });
});

describe("models", () => {
  it("starts without its model directory: a warning, an empty listing, not ready", async () => {
    const tessera = await start();
    expect(tessera.logs.join("\n")).toMatch(/model directory not found/);
    expect(await (await tessera.fetch("/v1/models")).json()).toMatchObject({ models: [] });
    expect((await tessera.fetch("/readyz")).status).toBe(503);
  });

  it.each(["in-process", "router"] as const)(
    "serves the tiny test model end to end over the %s transport: ready, listed, chat and decisions answered",
    async (internalTransport) => {
      const tessera = await start({ models: "tiny", internalTransport });
      expect((await tessera.fetch("/readyz")).status).toBe(200);
      const listing = (await (await tessera.fetch("/v1/models")).json()) as { models: { name: string }[] };
      expect(listing.models.map((m) => m.name)).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1"]);

      const chat = await tessera.fetch("/v1/chat/completions", post);
      expect(chat.status).toBe(200);
      const completion = (await chat.json()) as { model: string; usage: { prompt_tokens: number; completion_tokens: number } };
      expect(completion.model).toBe("textmodel-26b");
      expect(completion.usage.prompt_tokens).toBeGreaterThan(0);

      const decision = await tessera.fetch("/v1/systemone", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "jev-latest", state: { a: 1 }, questions: { "q 1": { type: "noul" } } }),
      });
      expect(decision.status).toBe(200);
      expect(await decision.json()).toMatchObject({
        model: "decisionmodel-0.1",
        answers: { "q 1": { type: "noul" } },
        usage: { output_tokens: 0 },
      });

      const workers = await tessera.clients.registry.listWorkers({});
      expect(workers.workers.map((w) => [w.id, w.models])).toEqual([["embedded-test-worker", ["tessera-test-model"]]]);
    },
  );
});

describe("graceful shutdown", () => {
  let worker: FakeWorker | undefined;
  afterEach(async () => {
    await worker?.close();
    worker = undefined;
  });

  /** A remote worker whose generations take `ms` (or until cancelled), recording cancellations. */
  async function slowWorker(ms: number, cancelled: string[]) {
    return startFakeInferenceWorker({
      countTokens: () => ({ tokens: 3 }),
      async *generate(req, ctx) {
        yield { event: { case: "started", value: { model: req.model, promptTokens: 3, workerId: "slow" } } };
        await new Promise<void>((resolve, reject) => {
          let done = false;
          const timer = setTimeout(() => {
            done = true;
            resolve();
          }, ms);
          ctx.signal.addEventListener("abort", () => {
            if (done) return;
            clearTimeout(timer);
            cancelled.push(req.requestId);
            reject(new ConnectError("cancelled", Code.Canceled));
          });
        });
        yield { event: { case: "delta", value: { content: "done", blockIndex: 0 } } };
        yield { event: { case: "finished", value: { finishReason: 1, usage: { promptTokens: 3, completionTokens: 1, totalTokens: 4 } } } };
      },
    });
  }

  it("lets a request in flight finish, refuses new connections, then closes", async () => {
    const cancelled: string[] = [];
    worker = await slowWorker(400, cancelled);
    const tessera = await startTestTessera();
    tessera.announceWorker({ id: "slow", address: worker.url });
    const inFlight = tessera.fetch("/v1/chat/completions", post);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const closing = tessera.close();
    await new Promise((resolve) => setTimeout(resolve, 50));

    const refused = connect(tessera.port, "127.0.0.1");
    const [err] = (await once(refused, "error")) as [NodeJS.ErrnoException];
    expect(err.code).toBe("ECONNREFUSED");

    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe("done");
    await closing;
    expect(cancelled).toEqual([]);
    expect(tessera.logs.join("\n")).toMatch(/"shut down"/);
  });

  it("cancels what still runs after the grace period", async () => {
    const cancelled: string[] = [];
    worker = await slowWorker(60_000, cancelled);
    const tessera = await startTestTessera({ env: { TESSERA_SHUTDOWN_TIMEOUT_MS: "300" } });
    tessera.announceWorker({ id: "slow", address: worker.url });
    const inFlight = tessera.fetch("/v1/chat/completions", post).then(
      (r) => r.text(),
      (e: unknown) => e,
    );
    await new Promise((resolve) => setTimeout(resolve, 150));
    const started = Date.now();
    await tessera.close();
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(await inFlight).toBeInstanceOf(Error);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(cancelled).toHaveLength(1);
    expect(tessera.logs.join("\n")).toMatch(/cancelling them/);
  });
});
