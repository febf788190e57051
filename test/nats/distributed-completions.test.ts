// POST /v1/completions in distributed mode: the gateway in one process, the inference worker in
// another, reached over Connect (NATS for heartbeats and usage). The raw prompt and the
// prompt's tokens for echo travel on the proto (GenerateRequest.raw_prompt,
// GenerateStarted.tokenized_prompt), so the answers equal the embedded server's rules.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDistributed, type DistributedTessera } from "../../bin/distributed.js";
import { TextCompletionChunkSchema, TextCompletionSchema } from "../../gateway/schemas/completion-response.js";
import { loadConfig } from "../../lib/config.js";
import { silentLogger } from "../../lib/logger.js";
import { newApiKey, TEST_SERVING_ID, TINY_MODEL_DIR } from "../helpers/tessera.js";
import { startNatsServer, type NatsServerHandle } from "./nats-server.js";

let server: NatsServerHandle;
let scratch: string;
const running: DistributedTessera[] = [];
const key = newApiKey();
let client: OpenAI;

function config(env: Record<string, string>) {
  return loadConfig({
    env: {
      TESSERA_HOST: "127.0.0.1",
      TESSERA_PORT: "0",
      TESSERA_NATS_URL: server.url,
      TESSERA_MODELS_CONFIG: join(scratch, "models.config.json"),
      TESSERA_BOOTSTRAP_KEY: key,
      TESSERA_ADMIN_TOKEN: "admin-token-for-this-test-0001",
      TESSERA_INTRA_OP_THREADS: "1",
      TESSERA_SHUTDOWN_TIMEOUT_MS: "1000",
      ...env,
    },
  });
}

beforeAll(async () => {
  server = await startNatsServer();
  scratch = mkdtempSync(join(tmpdir(), "tessera-distributed-completions-"));
  const common = { release_date: "2026-11-22", model_dir: TINY_MODEL_DIR, serving_id: TEST_SERVING_ID };
  writeFileSync(
    join(scratch, "models.config.json"),
    JSON.stringify({ models: [{ id: "textmodel-26b", kind: "text", family: "textmodel", version: "26b", description: "t", ...common }] }),
  );
  const worker = await startDistributed({ config: config({ TESSERA_WORKER_ID: "w-1" }), logger: silentLogger(), services: ["inference"] });
  running.push(worker);
  const front = await startDistributed({
    config: config({ TESSERA_WORKER_ID: "front" }),
    logger: silentLogger(),
    services: ["gateway", "accounting", "registry", "decision"],
  });
  running.push(front);
  client = new OpenAI({ apiKey: key, baseURL: `${front.url}/v1`, maxRetries: 0, timeout: 60_000 });
  const end = Date.now() + 10_000;
  while ((await client.models.list()).data.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}, 120_000);

afterAll(async () => {
  for (const app of running.reverse()) await app.close();
  await server?.dispose();
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

const PROMPT = "Once upon a time, in a small town by the sea, there lived";
const ask = { model: "textmodel-26b", prompt: PROMPT, max_tokens: 24 };

describe("completions across processes", () => {
  it("a raw prompt, not templated; echo with logprobs lists the prompt's tokens from the remote worker", async () => {
    const plain = TextCompletionSchema.parse(await client.completions.create(ask));
    const chat = await client.chat.completions.create({
      model: "textmodel-26b",
      messages: [{ role: "user", content: PROMPT }],
      max_tokens: 1,
    });
    expect(plain.usage.prompt_tokens).toBeLessThan(chat.usage!.prompt_tokens);

    const echoed = TextCompletionSchema.parse(await client.completions.create({ ...ask, echo: true, logprobs: 1 }));
    const { text, logprobs } = echoed.choices[0]!;
    expect(text).toBe(PROMPT + plain.choices[0]!.text);
    const promptTokens = echoed.usage.prompt_tokens;
    expect(logprobs!.tokens.slice(0, promptTokens).join("")).toBe(PROMPT);
    expect(logprobs!.token_logprobs.slice(0, promptTokens).every((l) => l === null)).toBe(true);
    expect(logprobs!.tokens).toHaveLength(promptTokens + echoed.usage.completion_tokens);
  });

  it("streamed: the same text, usage on the last chunk", async () => {
    const plain = await client.completions.create(ask);
    const chunks = [];
    for await (const chunk of await client.completions.create({ ...ask, stream: true }))
      chunks.push(TextCompletionChunkSchema.parse(chunk));
    expect(chunks.map((c) => c.choices[0]?.text ?? "").join("")).toBe(plain.choices[0]!.text);
    expect(chunks.at(-1)!.usage).toEqual(plain.usage);
  });
});
