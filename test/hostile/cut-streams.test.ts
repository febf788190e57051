// A stream cut short is charged what it delivered (issue 11, item 5; docs/reliability.md): its
// prompt once it started, plus the completion tokens of what reached the client, never 0 and
// never the whole max_tokens; for the chat route's SSE and for Generate called over Connect.
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceService, Role } from "../../gen/tessera/inference/v1/inference_pb.js";
import { startTestTessera, TEST_SERVING_ID, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_LOG_LEVEL: "warn" } });
});
afterAll(async () => {
  await tessera?.close();
});

const MAX_TOKENS = 2048;

/** The account's text tokens used once nothing is held any more (the cut request has settled). */
async function settledTextUsed(accountId: string): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const { account } = await tessera.clients.accounting.getAccount({ accountId });
    if (account!.textReservedTokens === 0n && account!.textUsedTokens > 0n) return Number(account!.textUsedTokens);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the cut request never settled");
}

describe("a stream cut short", () => {
  it("over SSE, the client leaving after the first content: charged its prompt and some completion, less than max_tokens", async () => {
    const { apiKey, accountId } = await tessera.createKey({ textQuota: 10_000_000 });
    const controller = new AbortController();
    const res = await tessera.fetch("/v1/chat/completions", {
      method: "POST",
      key: apiKey,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "textmodel-26b",
        max_tokens: MAX_TOKENS,
        stream: true,
        messages: [{ role: "user", content: "Count to ten." }],
      }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = "";
    let read = "";
    while (!/"content":"[^"]/.test(read)) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended before any content");
      read += new TextDecoder().decode(value);
    }
    for (const m of read.matchAll(/"content":"((?:[^"\\]|\\.)*)"/g)) text += JSON.parse(`"${m[1]}"`) as string;
    controller.abort();
    const used = await settledTextUsed(accountId);
    const prompt = await promptTokensOf("Count to ten.");
    expect(used).toBeGreaterThan(prompt);
    expect(used).toBeLessThan(prompt + MAX_TOKENS);
    expect(text.length).toBeGreaterThan(0);
  });

  it("over Connect (Generate on the public port), cancelled after the first delta: charged prompt + that delta's completion tokens or more", async () => {
    const { apiKey, accountId } = await tessera.createKey({ textQuota: 10_000_000 });
    const bearer: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${apiKey}`);
      return next(req);
    };
    const client = createClient(
      InferenceService,
      createConnectTransport({ baseUrl: tessera.url, httpVersion: "1.1", interceptors: [bearer] }),
    );
    const controller = new AbortController();
    let prompt = 0;
    let firstDelta = 0;
    try {
      for await (const event of client.generate(
        {
          model: TEST_SERVING_ID,
          messages: [{ role: Role.USER, content: [{ part: { case: "text", value: "Count to ten." } }] }],
          options: { maxTokens: MAX_TOKENS },
        },
        { signal: controller.signal },
      )) {
        if (event.event.case === "started") prompt = event.event.value.promptTokens;
        if (event.event.case === "delta") {
          firstDelta = event.event.value.completionTokens;
          controller.abort();
        }
        if (event.event.case === "finished") throw new Error("the generation finished before the cut");
      }
    } catch (err) {
      if (!controller.signal.aborted) throw err;
    }
    expect(firstDelta).toBeGreaterThan(0);
    const used = await settledTextUsed(accountId);
    expect(used).toBeGreaterThanOrEqual(prompt + firstDelta);
    expect(used).toBeLessThan(prompt + MAX_TOKENS);
  });
});

async function promptTokensOf(content: string): Promise<number> {
  const res = await tessera.fetch("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "textmodel-26b", max_tokens: 1, messages: [{ role: "user", content }] }),
  });
  return ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
}
