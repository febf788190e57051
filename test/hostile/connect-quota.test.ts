// Quotas hold on the public port's Connect calls as on the JSON routes (issue 39, item 1): a
// Generate holds its prompt + max_tokens and a Decide the bound of its input tokens (or its exact
// count) before it runs, so parallel calls never use more than the quota. Before: admitted while
// any token was left and charged afterwards (a text quota of 200 → 3,832 used by 12 Generate).
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionService, QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService, Role } from "../../gen/tessera/inference/v1/inference_pb.js";
import { startTestTessera, TEST_SERVING_ID, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_LOG_LEVEL: "warn" } });
});
afterAll(async () => {
  await tessera?.close();
});

function transport(apiKey: string, kind: "connect" | "grpc-web" = "connect") {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${apiKey}`);
    return next(req);
  };
  const options = { baseUrl: tessera.url, httpVersion: "1.1" as const, interceptors: [bearer] };
  return kind === "connect" ? createConnectTransport(options) : createGrpcWebTransport(options);
}

async function outcome(call: Promise<unknown>): Promise<"ok" | Code> {
  try {
    await call;
    return "ok";
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

async function account(accountId: string) {
  const { account } = await tessera.clients.accounting.getAccount({ accountId });
  return account!;
}

describe("quotas on the public port's Connect calls", () => {
  it("12 parallel Generate on a text quota of 200 never use more than 200", async () => {
    const { apiKey, accountId } = await tessera.createKey({ textQuota: 200 });
    const client = createClient(InferenceService, transport(apiKey));
    const generate = async () => {
      const stream = client.generate({
        model: TEST_SERVING_ID,
        messages: [{ role: Role.USER, content: [{ part: { case: "text", value: "Count to ten." } }] }],
        options: { maxTokens: 48 },
      });
      for await (const _ of stream);
    };
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => outcome(generate())));
    expect(outcomes.filter((o) => o === "ok").length, JSON.stringify(outcomes)).toBeGreaterThan(0);
    expect(outcomes.filter((o) => o === Code.ResourceExhausted).length, JSON.stringify(outcomes)).toBeGreaterThan(0);
    for (const o of outcomes) expect(["ok", Code.ResourceExhausted]).toContain(o);
    const after = await account(accountId);
    expect(after.textReservedTokens).toBe(0n);
    expect(after.textUsedTokens).toBeGreaterThan(0n);
    expect(after.textUsedTokens).toBeLessThanOrEqual(200n);
  });

  it("a Generate whose max_tokens does not fit is refused before it runs, charged nothing", async () => {
    const { apiKey, accountId } = await tessera.createKey({ textQuota: 200 });
    const client = createClient(InferenceService, transport(apiKey, "grpc-web"));
    const stream = client.generate({
      model: TEST_SERVING_ID,
      messages: [{ role: Role.USER, content: [{ part: { case: "text", value: "Hi" } }] }],
      options: { maxTokens: 500 },
    });
    const refused = await outcome(
      (async () => {
        for await (const _ of stream);
      })(),
    );
    expect(refused).toBe(Code.ResourceExhausted);
    expect((await account(accountId)).textUsedTokens).toBe(0n);
  });

  it("6 parallel Decide on a decision quota of 100 never use more than 100", async () => {
    const { apiKey, accountId } = await tessera.createKey({ decisionQuota: 100 });
    const client = createClient(DecisionService, transport(apiKey));
    const decide = () =>
      client.decide({
        model: "decisionmodel-latest",
        state: { kind: { case: "stringValue", value: "Win a free cruise now!!!" } },
        questionList: [
          { id: "spam", question: { type: QuestionType.NOUL } },
          { id: "ham", question: { type: QuestionType.NOUL } },
        ],
      });
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => outcome(decide())));
    for (const o of outcomes) expect(["ok", Code.ResourceExhausted]).toContain(o);
    expect(outcomes.filter((o) => o === Code.ResourceExhausted).length, JSON.stringify(outcomes)).toBeGreaterThan(0);
    const after = await account(accountId);
    expect(after.decisionReservedTokens).toBe(0n);
    expect(after.decisionUsedTokens).toBeLessThanOrEqual(100n);
  });

  it("a Decide that fits only by its exact count is answered and charged exactly that", async () => {
    const probe = createClient(DecisionService, transport((await tessera.createKey({})).apiKey));
    const request = {
      model: "decisionmodel-latest",
      state: { kind: { case: "stringValue" as const, value: "Win a free cruise now!!!" } },
      questionList: [{ id: "spam", question: { type: QuestionType.NOUL } }],
    };
    const cost = Number((await probe.decide(request)).usage!.inputTokens);
    const { apiKey, accountId } = await tessera.createKey({ decisionQuota: cost + 3 });
    const client = createClient(DecisionService, transport(apiKey));
    await client.decide(request);
    expect((await account(accountId)).decisionUsedTokens).toBe(BigInt(cost));
    expect(await outcome(client.decide(request))).toBe(Code.ResourceExhausted);
    expect((await account(accountId)).decisionUsedTokens).toBe(BigInt(cost));
  });
});
