// The decision service on the real inference engine and the deterministic tiny test model:
// answers are independent of the other questions and of the ids (metamorphic, within 1e-6),
// and the readout matches reading each question alone.
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionService, type Answer, type DecideResponse } from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { parseDecisionRequest } from "../../lib/decision-types/request-json.js";
import { silentLogger } from "../../lib/logger.js";
import { loadModelPool, type ModelPool } from "../inference/engine/model-pool.js";
import { createInferenceService } from "../inference/service.js";
import { softmax } from "../../lib/decision-types/probabilities.js";
import { decisionRoutes } from "./server.js";
import { DEFAULT_CATALOG, fakeRegistry } from "../../test/helpers/decision-doubles.js";

const TINY_MODEL_DIR = fileURLToPath(new URL("../../test/fixtures/tiny-model", import.meta.url));
const TOLERANCE = 1e-6;

let pool: ModelPool;
let decision: Client<typeof DecisionService>;
let inference: Client<typeof InferenceService>;
/** The same with rows never cut (one forward per row, however long): the reference for chunked rows. */
let unchunkedPool: ModelPool;
let unchunked: Client<typeof DecisionService>;

/** The decision and inference services over a pool of the tiny model. */
function decisionClient(over: ModelPool, logger = silentLogger()) {
  const client = createClient(
    InferenceService,
    createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool: over, workerId: "w1" }))),
  );
  const registry = createClient(
    RegistryService,
    createRouterTransport(({ service }) => service(RegistryService, fakeRegistry(DEFAULT_CATALOG))),
  );
  return {
    inference: client,
    decision: createClient(DecisionService, createRouterTransport(decisionRoutes({ registry, inferenceFor: () => client, logger }))),
  };
}

beforeAll(async () => {
  // The default limits (TESSERA_MAX_DECISION_ROW_TOKENS, TESSERA_MAX_DECISION_WORK_TOKENS).
  pool = await loadModelPool({ models: [{ servingId: "bundled", dir: TINY_MODEL_DIR }], slots: 2, queue: 8, intraOpThreads: 1 });
  ({ inference, decision } = decisionClient(pool));
  unchunkedPool = await loadModelPool({
    models: [{ servingId: "bundled", dir: TINY_MODEL_DIR }],
    slots: 1,
    queue: 8,
    intraOpThreads: 1,
    maxScoreRowTokens: 4096,
  });
  unchunked = decisionClient(unchunkedPool).decision;
});

afterAll(async () => {
  await Promise.all([pool?.close(), unchunkedPool?.close()]);
});

async function decide(body: unknown, client = decision): Promise<Map<string, Answer>> {
  const parsed = parseDecisionRequest(body, randomUUID());
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.violations));
  const res: DecideResponse = await client.decide(parsed.request);
  expect(res.model).toBe("decisionmodel-0.1");
  return new Map(res.answerList.map((a) => [a.id, a.answer!]));
}

/** Every number of an answer, in a fixed order. */
function numbers(a: Answer): number[] {
  const r = a.result;
  switch (r.case) {
    case "noul":
      return [r.value.probability];
    case "choice":
      return [r.value.confidence, ...r.value.probabilities.map((p) => p.probability)];
    case "score":
      return [r.value.score, r.value.confidence, ...r.value.probabilities];
    default:
      throw new Error("answer without result");
  }
}

function expectSameAnswer(got: Answer | undefined, want: Answer | undefined) {
  expect(got).toBeDefined();
  expect(got!.type).toBe(want!.type);
  if (got!.result.case === "choice" && want!.result.case === "choice") {
    expect(got!.result.value.probabilities.map((p) => p.option)).toEqual(want!.result.value.probabilities.map((p) => p.option));
  }
  const g = numbers(got!);
  const w = numbers(want!);
  expect(g).toHaveLength(w.length);
  g.forEach((x, i) => {
    expect(Math.abs(x - w[i]!)).toBeLessThan(TOLERANCE);
  });
}

// About 300 tokens of state, so the prefix spans several complete blocks and a partial tail.
const state = {
  ticket: "TCK-20931",
  customer: { name: "Ada Example", plan: "enterprise", since: "2019-04-01" },
  messages: [
    "The export job has failed three nights in a row with a timeout after 30 minutes.",
    "We rely on the nightly export for our compliance reports; the auditors arrive on Monday.",
    "I already tried reducing the date range, but the job still fails on the first batch.",
  ],
  tags: ["export", "timeout", "compliance"],
};

const questions = {
  urgent: { type: "noul", instructions: "Is this ticket urgent?", criteria: { true: "needs an answer today" } },
  team: {
    type: "choice",
    instructions: "Which team should handle it?",
    criteria: { billing: null, "data platform": "exports, pipelines", support: "general questions" },
  },
  mood: { type: "score", instructions: "How upset is the customer?", criteria: ["calm", "concerned", "upset", "furious"] },
  plain: { type: "noul" },
  many: {
    type: "choice",
    criteria: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`option ${i} 🔧`, i % 3 === 0 ? null : `description ${i}`])),
  },
};

describe("decisions on the tiny model", () => {
  it("answers every type with finite, in-range numbers", async () => {
    const a = await decide({ model: "decisionmodel-latest", state, questions });
    expect([...a.keys()]).toEqual(Object.keys(questions));
    for (const answer of a.values()) {
      for (const x of numbers(answer)) {
        expect(Number.isFinite(x)).toBe(true);
        expect(x).toBeGreaterThanOrEqual(0);
      }
    }
    const team = a.get("team")!.result;
    if (team.case !== "choice") throw new Error("choice expected");
    expect(team.value.probabilities.reduce((s, p) => s + p.probability, 0)).toBeCloseTo(1, 12);
    const mood = a.get("mood")!.result;
    if (mood.case !== "score") throw new Error("score expected");
    expect(mood.value.score).toBeCloseTo(
      mood.value.probabilities.reduce((s, p, i) => s + i * p, 0),
      12,
    );
  });

  it("renaming, reordering, adding and removing questions leaves each answer unchanged (within 1e-6)", async () => {
    const base = { model: "jev-latest", state };
    const ref = await decide({ ...base, questions });

    const renamedIds = { urgent: "été ☀️", team: "a.b c", mood: "__proto__", plain: "constructor", many: "0" };
    const renamedBody = JSON.parse(
      `{"model":"jev-latest","state":${JSON.stringify(state)},"questions":{${Object.entries(questions)
        .map(([id, q]) => `${JSON.stringify(renamedIds[id as keyof typeof renamedIds])}:${JSON.stringify(q)}`)
        .join(",")}}}`,
    );
    const renamed = await decide(renamedBody);
    for (const [id, newId] of Object.entries(renamedIds)) expectSameAnswer(renamed.get(newId), ref.get(id));

    const reversed = await decide({ ...base, questions: Object.fromEntries(Object.entries(questions).reverse()) });
    for (const id of Object.keys(questions)) expectSameAnswer(reversed.get(id), ref.get(id));

    const added = await decide({
      ...base,
      questions: {
        extra1: { type: "score", criteria: ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"] },
        ...questions,
        extra2: { type: "noul", instructions: { a: [1, 2] } },
      },
    });
    for (const id of Object.keys(questions)) expectSameAnswer(added.get(id), ref.get(id));

    for (const id of Object.keys(questions)) {
      const alone = await decide({ ...base, questions: { [id]: questions[id as keyof typeof questions] } });
      expectSameAnswer(alone.get(id), ref.get(id));
    }
  });

  it("is P(yes) = softmax of the inference logits at the answer slot, with the model's temperature", async () => {
    const a = await decide({
      model: "decisionmodel-0.1",
      state: "Short state.",
      questions: { q: { type: "noul", instructions: "Is it short?" } },
    });
    const { renderDecisionPrompt } = await import("../../lib/decision-types/render.js");
    const info = await inference.getModelInfo({ model: "bundled" });
    const rendered = renderDecisionPrompt(info.decision!, "Short state.", { type: "noul", instructions: "Is it short?" });
    const scores = await inference.score({
      model: "bundled",
      prefix: rendered.prefix,
      suffixes: [{ text: rendered.suffix, labels: rendered.labels }],
    });
    const t = (info.decision!["temperatures"] as { noul: number }).noul;
    const r = a.get("q")!.result;
    expect(r.case === "noul" && r.value.probability).toBeCloseTo(softmax(scores.results[0]!.logits, t)[0]!, 12);
  });

  it("answers a typical wide request with the default limits: 8 questions of 16 options on a 1,000-token state", async () => {
    let longState = "";
    for (let i = 0; (await inference.countTokens({ model: "bundled", text: longState })).tokens < 1000; i++) {
      longState += `Message ${i}: the parcel arrived late and the box was dented. `;
    }
    const criteria = Object.fromEntries(
      Array.from({ length: 16 }, (_, i) => [`category ${i}`, i % 3 === 0 ? `kind ${i} of message` : null]),
    );
    const body = {
      model: "decisionmodel-latest",
      state: longState,
      questions: Object.fromEntries(
        Array.from({ length: 8 }, (_, q) => [`q${q}`, { type: "choice", instructions: `Question ${q}?`, criteria }]),
      ),
    };
    const a = await decide(body);
    expect(a.size).toBe(8);
    for (const answer of a.values()) {
      const r = answer.result;
      if (r.case !== "choice") throw new Error("choice expected");
      expect(r.value.probabilities.reduce((s, p) => s + p.probability, 0)).toBeCloseTo(1, 12);
    }
  });

  it("answers 128 options with short descriptions and 10 levels with the default limits, as one unchunked forward does", async () => {
    const body = {
      model: "decisionmodel-latest",
      state: "The parcel arrived two days late and the box was dented, but the support team replaced it at once.",
      questions: {
        wide: {
          type: "choice",
          instructions: "Which category fits this message best?",
          criteria: Object.fromEntries(
            Array.from({ length: 128 }, (_, i) => [`category ${i}`, i % 3 === 0 ? `kind ${i} of message` : null]),
          ),
        },
        tall: { type: "score", criteria: Array.from({ length: 10 }, (_, i) => `level ${i}`) },
      },
    };
    const a = await decide(body);
    const wide = a.get("wide")!.result;
    if (wide.case !== "choice") throw new Error("choice expected");
    expect(wide.value.probabilities).toHaveLength(128);
    expect(wide.value.probabilities.reduce((s, p) => s + p.probability, 0)).toBeCloseTo(1, 12);
    const tall = a.get("tall")!.result;
    if (tall.case !== "score") throw new Error("score expected");
    expect(tall.value.legend).toHaveLength(10);
    expect(tall.value.probabilities.reduce((s, p) => s + p, 0)).toBeCloseTo(1, 12);
    const reference = await decide(body, unchunked);
    for (const id of ["wide", "tall"]) {
      const got = numbers(a.get(id)!);
      const want = numbers(reference.get(id)!);
      expect(got).toHaveLength(want.length);
      got.forEach((x, i) => {
        expect(Math.abs(x - want[i]!)).toBeLessThan(1e-5);
      });
    }
  });
});
