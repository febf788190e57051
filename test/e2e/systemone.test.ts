// POST /v1/systemone over real HTTP against the embedded server with the tiny test model.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny" });
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

interface DecisionJson {
  model: string;
  answers: Record<string, AnswerJson>;
  usage: { input_tokens: number; output_tokens: number };
}
type AnswerJson = {
  type: string;
  noul?: number;
  choice?: string;
  score?: number;
  probabilities?: Record<string, number>;
  legend?: Record<string, string>;
  confidence?: number;
};

/** Either error shape: `detail` is the list of violations (422) or one `{error_type, message}`. */
type ErrorJson = {
  detail: { loc: unknown[]; msg: string; type: string }[] & { error_type?: string; message?: string };
};

async function post(
  body: unknown,
  key?: string,
): Promise<{ status: number; text: string; json: ErrorJson & Partial<DecisionJson>; headers: Headers }> {
  const res = await tessera.fetch("/v1/systemone", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(key !== undefined ? { key } : {}),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text), headers: res.headers };
}

async function decide(body: unknown): Promise<DecisionJson> {
  const res = await post(body);
  expect(res.status, res.text).toBe(200);
  return res.json as DecisionJson;
}

const state = {
  order: "A-1092",
  items: [
    { sku: "desk", qty: 1 },
    { sku: "chair", qty: 4 },
  ],
  note: "Customer asks whether the chairs can arrive before the desk, because of an office opening on Friday.",
};
const questions = {
  expedite: { type: "noul", instructions: "Should this order be expedited?", criteria: { true: "ship today", false: "normal schedule" } },
  carrier: {
    type: "choice",
    instructions: "Which carrier?",
    criteria: { "post 📮": null, courier: "same-day in the city", freight: { min_kg: 50 } },
  },
  effort: { type: "score", criteria: ["trivial", "some", "a lot"] },
};

function numbersOf(a: AnswerJson): number[] {
  if (a.type === "noul") return [a.noul!];
  const ps = Object.values(a.probabilities!);
  return a.type === "choice" ? [a.confidence!, ...ps] : [a.score!, a.confidence!, ...ps];
}

function expectSame(got: AnswerJson | undefined, want: AnswerJson | undefined) {
  expect(got?.type).toBe(want?.type);
  if (got!.type !== "noul") expect(Object.keys(got!.probabilities!)).toEqual(Object.keys(want!.probabilities!));
  const g = numbersOf(got!);
  const w = numbersOf(want!);
  g.forEach((x, i) => {
    expect(Math.abs(x - w[i]!)).toBeLessThan(1e-6);
  });
}

describe("POST /v1/systemone", () => {
  it("answers every question with the documented shape, model version and usage", async () => {
    const res = await post({ model: "decisionmodel-latest", state, questions });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get("x-service-request-id")).toBeTruthy();
    const body = res.json as DecisionJson;
    expect(body.model).toBe("decisionmodel-0.1");
    expect(Object.keys(body.answers)).toEqual(["expedite", "carrier", "effort"]);

    const expedite = body.answers["expedite"]!;
    expect(Object.keys(expedite).sort()).toEqual(["noul", "type"]);
    expect(expedite.type).toBe("noul");
    expect(expedite.noul).toBeGreaterThanOrEqual(0);
    expect(expedite.noul).toBeLessThanOrEqual(1);

    const carrier = body.answers["carrier"]!;
    expect(Object.keys(carrier).sort()).toEqual(["choice", "confidence", "probabilities", "type"]);
    expect(Object.keys(carrier.probabilities!)).toEqual(["post 📮", "courier", "freight"]);
    const ps = Object.values(carrier.probabilities!);
    expect(Math.abs(ps.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-9);
    expect(carrier.probabilities![carrier.choice!]).toBe(Math.max(...ps));
    const entropy = -ps.reduce((h, p) => h + (p > 0 ? p * Math.log(p) : 0), 0);
    expect(carrier.confidence).toBeCloseTo(1 - entropy / Math.log(3), 9);

    const effort = body.answers["effort"]!;
    expect(Object.keys(effort).sort()).toEqual(["confidence", "legend", "probabilities", "score", "type"]);
    expect(effort.legend).toEqual({ "0": "trivial", "1": "some", "2": "a lot" });
    expect(Object.keys(effort.probabilities!)).toEqual(["0", "1", "2"]);
    const expected = Object.values(effort.probabilities!).reduce((s, p, i) => s + i * p, 0);
    expect(effort.score).toBeCloseTo(expected, 12);

    expect(Number.isInteger(body.usage.input_tokens)).toBe(true);
    expect(body.usage.input_tokens).toBeGreaterThan(0);
    expect(body.usage.output_tokens).toBe(0);
    expect(res.text).not.toMatch(/NaN|Infinity/);
  });

  it("accepts the aliases and every listed id, reporting the versioned id", async () => {
    for (const [model, answeredBy] of [
      ["jev-latest", "decisionmodel-0.1"],
      ["decisionmodel-latest", "decisionmodel-0.1"],
      ["decisionmodel-0.1", "decisionmodel-0.1"],
      ["textmodel-26b", "textmodel-26b"],
    ]) {
      const body = await decide({ model, state: "s", questions: { q: { type: "noul" } } });
      expect(body.model).toBe(answeredBy);
    }
  });

  it("echoes ids, option names and levels byte for byte, prototype names included", async () => {
    const raw =
      `{"model":"jev-latest","state":["a",1],"questions":{` +
      `"__proto__":{"type":"noul"},` +
      `"constructor":{"type":"choice","criteria":{"__proto__":"p","constructor":null,"toString":[1]}},` +
      `"with space.and dots":{"type":"score","criteria":["ｌｏｗ","高","🔥"]},` +
      `"日本語 ✓":{"type":"noul"}}}`;
    const res = await post(raw);
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"__proto__":{"type":"noul"');
    const answers = JSON.parse(res.text).answers;
    expect(Object.keys(answers)).toEqual(["__proto__", "constructor", "with space.and dots", "日本語 ✓"]);
    expect(Object.keys(answers.constructor.probabilities)).toEqual(["__proto__", "constructor", "toString"]);
    expect(answers["with space.and dots"].legend).toEqual({ "0": "ｌｏｗ", "1": "高", "2": "🔥" });
  });

  it("leaves each answer unchanged when questions are renamed, reordered, added or removed (within 1e-6)", async () => {
    const base = { model: "decisionmodel-latest", state };
    const ref = (await decide({ ...base, questions })).answers;

    const renamed = (
      await decide({ ...base, questions: { "e x p": questions.expedite, "c.a.r": questions.carrier, ëffort: questions.effort } })
    ).answers;
    expectSame(renamed["e x p"], ref["expedite"]);
    expectSame(renamed["c.a.r"], ref["carrier"]);
    expectSame(renamed["ëffort"], ref["effort"]);

    const reordered = (
      await decide({ ...base, questions: { effort: questions.effort, expedite: questions.expedite, carrier: questions.carrier } })
    ).answers;
    for (const id of Object.keys(questions)) expectSame(reordered[id], ref[id]);

    const added = (
      await decide({
        ...base,
        questions: { ...questions, more: { type: "choice", criteria: { x: null } }, other: { type: "noul", instructions: "?" } },
      })
    ).answers;
    for (const id of Object.keys(questions)) expectSame(added[id], ref[id]);
    expect(added["more"]).toEqual({ type: "choice", choice: "x", probabilities: { x: 1 }, confidence: 1 });

    const removed = (await decide({ ...base, questions: { carrier: questions.carrier } })).answers;
    expect(Object.keys(removed)).toEqual(["carrier"]);
    expectSame(removed["carrier"], ref["carrier"]);
  });

  it("handles 128 options and 10 levels", async () => {
    const body = await decide({
      model: "jev-latest",
      state: { x: 1 },
      questions: {
        wide: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 128 }, (_, i) => [`opción ${i}`, null])) },
        tall: { type: "score", criteria: Array.from({ length: 10 }, (_, i) => `${i}/9`) },
      },
    });
    expect(Object.keys(body.answers["wide"]!.probabilities!)).toHaveLength(128);
    expect(Object.keys(body.answers["tall"]!.legend!)).toHaveLength(10);

    // The API takes 255 options; this model has 128 labels and says so.
    const wider = await post({
      model: "jev-latest",
      state: "s",
      questions: { wide: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`o${i}`, null])) } },
    });
    expect(wider.status).toBe(422);
    expect(wider.json.detail).toEqual([
      {
        loc: ["body", "questions", "wide", "criteria"],
        msg: "this model supports at most 128 options of a choice question, got 129",
        type: "value_error",
      },
    ]);
  });

  it("answers 422 with every problem found", async () => {
    const res = await post({
      model: 1,
      state: null,
      questions: {
        a: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`o${i}`, null])) },
        b: { type: "score", criteria: { "0": "low", "1": "high" } },
        c: { type: "maybe" },
        d: { type: "noul", criteria: { true: 5 } },
      },
    });
    expect(res.status).toBe(422);
    expect(res.headers.get("x-service-request-id")).toBeTruthy();
    expect(res.json.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual([
      ["body", "model"],
      ["body", "state"],
      ["body", "questions", "a", "criteria"],
      ["body", "questions", "b", "criteria"],
      ["body", "questions", "c", "type"],
      ["body", "questions", "d", "criteria", "true"],
    ]);
    for (const d of res.json.detail) {
      expect(typeof d.msg).toBe("string");
      expect(typeof d.type).toBe("string");
    }
    const empty = await post({ model: "jev-latest", state: "s", questions: {} });
    expect(empty.status).toBe(422);
    expect(empty.json.detail).toEqual([{ loc: ["body", "questions"], msg: expect.any(String), type: "too_short" }]);
  });

  it("answers 400 for an unknown model and for a state longer than the model's context", async () => {
    const unknown = await post({ model: "no-such-model", state: "s", questions: { q: { type: "noul" } } });
    expect(unknown.status).toBe(400);
    expect(unknown.json.detail.error_type).toBe("invalid_request_error");
    expect(unknown.json.detail.message).toMatch(/unknown model|no-such-model/);

    const long = await post({ model: "jev-latest", state: "lorem ipsum dolor sit amet ".repeat(800), questions: { q: { type: "noul" } } });
    expect(long.status).toBe(400);
    expect(long.json.detail.error_type).toBe("invalid_request_error");
    expect(long.json.detail.message).toMatch(/too long|at most|context/);
  });

  it("ignores unknown top-level fields and malformed bodies never get a 5xx", async () => {
    const ok = await post({ model: "jev-latest", state: "s", questions: { q: { type: "noul" } }, stream: true, whatever: [1] });
    expect(ok.status).toBe(200);
    for (const body of [
      "[]",
      "null",
      '"x"',
      "{",
      '{"questions":{"q":null}}',
      '{"model":"jev-latest","state":{},"questions":{"q":{"type":"score","criteria":[1,2]}}}',
    ]) {
      const res = await tessera.fetch("/v1/systemone", { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(res.status, body).toBeGreaterThanOrEqual(400);
      expect(res.status, body).toBeLessThan(500);
      await res.body?.cancel();
    }
  });

  it("charges the decision quota exactly the input tokens it reports", async () => {
    const key = await tessera.createKey();
    let total = 0;
    for (const qs of [questions, { one: questions.expedite }]) {
      const res = await post({ model: "jev-latest", state, questions: qs }, key.apiKey);
      expect(res.status, res.text).toBe(200);
      total += (res.json as DecisionJson).usage.input_tokens;
    }
    const usage = await tessera.clients.accounting.getUsage({ keyId: key.keyId });
    const charged = usage.days.reduce((n, d) => n + Number(d.decisionInputTokens), 0);
    expect(charged).toBe(total);
  });
});
