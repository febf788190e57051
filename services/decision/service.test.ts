import { readFileSync } from "node:fs";
import { toJsonString, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DecisionService,
  QuestionType,
  ValidationFailureSchema,
  type Answer,
  type DecideRequest,
  type DecideResponse,
} from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService, ScoreRequestSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { parseDecisionRequest } from "../../lib/decision-types/request-json.js";
import { silentLogger } from "../../lib/logger.js";
import { softmax } from "../../lib/decision-types/probabilities.js";
import { markUserText } from "../../lib/user-text-span.js";
import { decisionRoutes } from "./server.js";
import { fakeInference, fakeRegistry, type FakeInference } from "../../test/helpers/decision-doubles.js";

const decisionJson: JsonObject = JSON.parse(readFileSync(new URL("../../training/templates/decision.json", import.meta.url), "utf8"));

function setup(fake: FakeInference = fakeInference(decisionJson)) {
  const registry = createClient(
    RegistryService,
    createRouterTransport(({ service }) => service(RegistryService, fakeRegistry())),
  );
  const inference = createClient(
    InferenceService,
    createRouterTransport(({ service }) => service(InferenceService, fake.impl)),
  );
  const served: string[] = [];
  const transport = createRouterTransport(
    decisionRoutes({
      registry,
      inferenceFor: (servingId) => {
        served.push(servingId);
        return inference;
      },
      logger: silentLogger(),
    }),
  );
  return { client: createClient(DecisionService, transport), fake, served };
}

/** A request as the gateway builds it from JSON. */
function request(body: unknown): DecideRequest {
  const parsed = parseDecisionRequest(body, "req-test");
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.violations));
  return parsed.request;
}

const questions = {
  spam: { type: "noul", instructions: "Is this spam?", criteria: { true: "unsolicited" } },
  topic: { type: "choice", instructions: "Topic?", criteria: { money: "about money", work: null, "🎉": { fun: true } } },
  urgency: { type: "score", criteria: ["low", "mid", "high", "critical"] },
  plain: { type: "noul" },
};
const state = { subject: "WIN a prize", body: "Click now to claim 1,000,000 credits", from: "promo@example.com" };

function answersById(res: DecideResponse): Map<string, Answer> {
  return new Map(res.answerList.map((a) => [a.id, a.answer!]));
}

async function expectCode(p: Promise<unknown>, code: Code): Promise<ConnectError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  expect(err, "expected an error").toBeDefined();
  expect(Code[err!.code]).toBe(Code[code]);
  return err!;
}

describe("DecisionService.Decide (fake inference over the in-memory transport)", () => {
  it("answers every question with its type, the versioned model id and the usage of Score", async () => {
    const { client, fake } = setup();
    const res = await client.decide(request({ model: "decisionmodel-latest", state, questions }));
    expect(res.model).toBe("decisionmodel-0.1");
    expect(res.answerList.map((a) => a.id)).toEqual(["spam", "topic", "urgency", "plain"]);
    expect(Object.keys(res.answers).sort()).toEqual(["plain", "spam", "topic", "urgency"]);
    const a = answersById(res);
    expect(a.get("spam")!.type).toBe(QuestionType.NOUL);
    expect(a.get("topic")!.type).toBe(QuestionType.CHOICE);
    expect(a.get("urgency")!.type).toBe(QuestionType.SCORE);

    expect(fake.scoreCalls).toHaveLength(1);
    const call = fake.scoreCalls[0]!;
    expect(call.model).toBe("bundled");
    expect(call.requestId).toBe("req-test");
    // The state is marked as user text (lib/user-text-span.ts): the engine tokenizes it as text.
    expect(call.prefix).toContain(`State:\n${markUserText(JSON.stringify(state))}\n`);
    expect(call.suffixes.map((s) => s.labels.length)).toEqual([2, 3, 4, 2]);
    expect(call.suffixes[0]!.labels).toEqual(["<|yes|>", "<|no|>"]);
    const m = markUserText;
    expect(call.suffixes[1]!.text).toContain(
      `<|opt_0|> ${m("money")}: ${m("about money")}\n<|opt_1|> ${m("work")}\n<|opt_2|> ${m("🎉")}: ${m('{"fun":true}')}\n`,
    );

    const prefixTokens = call.prefix.split(/\s+/).filter(Boolean).length;
    const suffixTokens = call.suffixes.reduce((n, s) => n + s.text.split(/\s+/).filter(Boolean).length + 1, 0);
    expect(res.usage).toMatchObject({ inputTokens: prefixTokens + suffixTokens, outputTokens: 0 });
  });

  it("computes each answer from the label logits of its own suffix", async () => {
    const logits = [
      [2, -1],
      [0.5, 3, -2],
      [0, 1, 2, 3],
      [0, 0],
    ];
    const fake = fakeInference(decisionJson, { logitsFor: (_req, i) => logits[i]! });
    const { client } = setup(fake);
    const a = answersById(await client.decide(request({ model: "jev-latest", state, questions })));
    const spam = a.get("spam")!.result;
    expect(spam.case === "noul" && spam.value.probability).toBeCloseTo(softmax([2, -1])[0]!, 15);
    const topic = a.get("topic")!.result;
    if (topic.case !== "choice") throw new Error("choice expected");
    expect(topic.value.choice).toBe("work");
    expect(topic.value.probabilities.map((p) => p.option)).toEqual(["money", "work", "🎉"]);
    topic.value.probabilities.forEach((p, i) => {
      expect(p.probability).toBeCloseTo(softmax([0.5, 3, -2])[i]!, 15);
    });
    const urgency = a.get("urgency")!.result;
    if (urgency.case !== "score") throw new Error("score expected");
    const p = softmax([0, 1, 2, 3]);
    expect(urgency.value.score).toBeCloseTo(
      p.reduce((s, pi, i) => s + i * pi, 0),
      14,
    );
    expect(urgency.value.legend).toEqual(["low", "mid", "high", "critical"]);
    expect(a.get("plain")!.result).toMatchObject({ case: "noul", value: { probability: 0.5 } });
  });

  it("applies the model's temperature per question type", async () => {
    const hot = { ...decisionJson, temperatures: { noul: 2, choice: 0.5, score: 1 } };
    const fake = fakeInference(hot, { logitsFor: (req, i) => (req.suffixes[i]!.labels.length === 2 ? [1, 0] : [1, 0, 0]) });
    const { client } = setup(fake);
    const a = answersById(
      await client.decide(
        request({
          model: "decisionmodel-0.1",
          state: "s",
          questions: { n: { type: "noul" }, c: { type: "choice", criteria: { a: null, b: null, c: null } } },
        }),
      ),
    );
    expect(a.get("n")!.result.value).toMatchObject({ probability: softmax([1, 0], 2)[0] });
    const c = a.get("c")!.result;
    expect(c.case === "choice" && c.value.probabilities[0]!.probability).toBeCloseTo(softmax([1, 0, 0], 0.5)[0]!, 15);
  });

  it("never returns NaN or Infinity, whatever inference sends", async () => {
    const fake = fakeInference(decisionJson, {
      logitsFor: (req, i) => req.suffixes[i]!.labels.map((_, j) => [NaN, Infinity, -Infinity, 1e308][j % 4]!),
    });
    const { client } = setup(fake);
    const res = await client.decide(request({ model: "decisionmodel-latest", state, questions }));
    expect(JSON.stringify(res)).not.toMatch(/NaN|Infinity|null/);
    for (const { answer } of res.answerList) {
      const r = answer!.result;
      const numbers =
        r.case === "noul"
          ? [r.value.probability]
          : r.case === "choice"
            ? [r.value.confidence, ...r.value.probabilities.map((p) => p.probability)]
            : [r.value!.score, r.value!.confidence, ...r.value!.probabilities];
      for (const n of numbers) expect(Number.isFinite(n)).toBe(true);
    }
  });

  describe("answers are independent of the other questions and of the ids", () => {
    const base = { model: "decisionmodel-latest", state };

    it("renaming, reordering, adding and removing questions leaves every answer unchanged", async () => {
      const { client } = setup();
      const ref = answersById(await client.decide(request({ ...base, questions })));

      const renamed = answersById(
        await client.decide(
          request({
            ...base,
            questions: { "autre nom ✨": questions.spam, "x.y z": questions.topic, __proto__x: questions.urgency, "0": questions.plain },
          }),
        ),
      );
      expect(renamed.get("autre nom ✨")).toEqual(ref.get("spam"));
      expect(renamed.get("x.y z")).toEqual(ref.get("topic"));
      expect(renamed.get("__proto__x")).toEqual(ref.get("urgency"));
      expect(renamed.get("0")).toEqual(ref.get("plain"));

      const reordered = answersById(
        await client.decide(
          request({
            ...base,
            questions: { plain: questions.plain, urgency: questions.urgency, topic: questions.topic, spam: questions.spam },
          }),
        ),
      );
      for (const id of Object.keys(questions)) expect(reordered.get(id)).toEqual(ref.get(id));

      const added = answersById(
        await client.decide(
          request({
            ...base,
            questions: {
              ...questions,
              extra: { type: "choice", criteria: { a: null, b: "B" } },
              more: { type: "score", criteria: ["x", "y"] },
            },
          }),
        ),
      );
      for (const id of Object.keys(questions)) expect(added.get(id)).toEqual(ref.get(id));

      const removed = answersById(await client.decide(request({ ...base, questions: { topic: questions.topic } })));
      expect([...removed.keys()]).toEqual(["topic"]);
      expect(removed.get("topic")).toEqual(ref.get("topic"));
    });

    it("holds for random question sets, ids and permutations (property)", async () => {
      const { client } = setup();
      const question = fc.oneof(
        fc.record({ type: fc.constant("noul"), instructions: fc.option(fc.string(), { nil: undefined }) }),
        fc.record({
          type: fc.constant("choice"),
          criteria: fc
            .uniqueArray(fc.string(), { minLength: 1, maxLength: 6 })
            .map((names) => Object.fromEntries(names.map((n) => [n, null]))),
        }),
        fc.record({ type: fc.constant("score"), criteria: fc.array(fc.string(), { minLength: 2, maxLength: 10 }) }),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.array(question, { minLength: 1, maxLength: 6 }),
          fc.uniqueArray(fc.string({ minLength: 1 }), { minLength: 12, maxLength: 12 }),
          fc.integer(),
          async (qs, ids, seed) => {
            const toBody = (order: number[], idOf: (i: number) => string) =>
              JSON.parse(
                `{"model":"jev-latest","state":"fixed state","questions":{${order.map((i) => `${JSON.stringify(idOf(i))}:${JSON.stringify(qs[i])}`).join(",")}}}`,
              );
            const order = qs.map((_, i) => i);
            const shuffled = [...order].sort((a, b) => ((a * 7919 + seed) % 13) - ((b * 7919 + seed) % 13) || a - b);
            const a = answersById(await client.decide(request(toBody(order, (i) => ids[i]!))));
            const b = answersById(await client.decide(request(toBody(shuffled.slice(1).concat(shuffled.slice(0, 1)), (i) => ids[i + 6]!))));
            for (const i of order) expect(b.get(ids[i + 6]!)).toEqual(a.get(ids[i]!));
          },
        ),
        { numRuns: 40 },
      );
    });

    it("question ids never reach the model", async () => {
      const { client, fake } = setup();
      const ids = ["ID-SECRET-ONE", "ID-SECRET-🔑", "ID SECRET.three", "__proto__", "constructor"];
      const entries = ids.map((id, i) => `${JSON.stringify(id)}:${JSON.stringify(Object.values(questions)[i % 4])}`);
      const body = JSON.parse(`{"model":"jev-latest","state":${JSON.stringify(state)},"questions":{${entries.join(",")}}}`);
      const res = await client.decide(request(body));
      expect(res.answerList.map((a) => a.id)).toEqual(ids);
      const seen = fake.scoreCalls.map((c) => toJsonString(ScoreRequestSchema, c)).join("\n");
      for (const id of ids.slice(0, 3)) expect(seen).not.toContain(id);
      expect(seen).not.toContain("SECRET");
      expect(seen).not.toContain("__proto__");
      expect(seen).not.toContain("constructor");
    });
  });

  it("accepts questions in the proto map too (direct gRPC callers), and reports the versioned id", async () => {
    const { client } = setup();
    const res = await client.decide({
      model: "textmodel-26b",
      state: { kind: { case: "stringValue", value: "hello" } },
      questions: {
        a: { type: QuestionType.NOUL },
        b: { type: QuestionType.SCORE, criteria: { case: "score", value: { levels: ["x", "y"] } } },
      },
    });
    expect(res.model).toBe("textmodel-26b");
    expect(res.answerList.map((a) => a.id).sort()).toEqual(["a", "b"]);
    expect(Object.keys(res.answers).sort()).toEqual(["a", "b"]);
  });

  it("lists every problem of a proto request in a ValidationFailure detail", async () => {
    const { client, fake } = setup();
    const err = await expectCode(
      client.decide({
        model: "",
        state: { kind: { case: "numberValue", value: 3 } },
        questionList: [
          { id: "", question: { type: QuestionType.NOUL } },
          { id: "dup", question: { type: QuestionType.NOUL } },
          { id: "c", question: { type: QuestionType.CHOICE } },
          {
            id: "c2",
            question: { type: QuestionType.CHOICE, criteria: { case: "choice", value: { options: [{ name: "a" }, { name: "a" }] } } },
          },
          {
            id: "many",
            question: {
              type: QuestionType.CHOICE,
              criteria: { case: "choice", value: { options: Array.from({ length: 256 }, (_, i) => ({ name: `o${i}` })) } },
            },
          },
          { id: "s", question: { type: QuestionType.SCORE, criteria: { case: "score", value: { levels: ["one"] } } } },
          {
            id: "s11",
            question: { type: QuestionType.SCORE, criteria: { case: "score", value: { levels: Array.from({ length: 11 }, String) } } },
          },
          { id: "t", question: { type: QuestionType.UNSPECIFIED } },
          { id: "i", question: { type: QuestionType.NOUL, instructions: { kind: { case: "boolValue", value: true } } } },
          { id: "n", question: { type: QuestionType.NOUL, criteria: { case: "score", value: { levels: ["a", "b"] } } } },
          { id: "m" },
        ],
        questions: { dup: { type: QuestionType.NOUL } },
      }),
      Code.InvalidArgument,
    );
    const [detail] = err.findDetails(ValidationFailureSchema);
    expect(detail!.violations.map((v) => [v.loc.join("/"), v.type])).toEqual([
      ["body/model", "missing"],
      ["body/state", "value_type"],
      ["body/questions/", "string_too_short"],
      ["body/questions/c/criteria", "missing"],
      ["body/questions/c2/criteria/a", "duplicate"],
      ["body/questions/many/criteria", "too_long"],
      ["body/questions/s/criteria", "too_short"],
      ["body/questions/s11/criteria", "too_long"],
      ["body/questions/t/type", "enum"],
      ["body/questions/i/instructions", "value_type"],
      ["body/questions/n/criteria", "dict_type"],
      ["body/questions/m", "missing"],
      ["body/questions/dup", "duplicate"],
    ]);
    expect(fake.scoreCalls).toHaveLength(0);
    await expectCode(client.decide({ model: "m", state: { kind: { case: "stringValue", value: "s" } } }), Code.InvalidArgument);
  });

  it('answers an unknown model with InvalidArgument "unknown model"', async () => {
    const { client } = setup();
    const err = await expectCode(
      client.decide(request({ model: "gpt-17", state: "s", questions: { q: { type: "noul" } } })),
      Code.InvalidArgument,
    );
    expect(err.rawMessage).toBe('unknown model "gpt-17"');
    expect(err.findDetails(ValidationFailureSchema)).toEqual([]);
  });

  it("says so when a model has fewer labels than a question has options", async () => {
    const small = { ...decisionJson, labels: { ...(decisionJson["labels"] as JsonObject), choice: ["<|opt_0|>", "<|opt_1|>"] } };
    const { client } = setup(fakeInference(small));
    const err = await expectCode(
      client.decide(
        request({ model: "jev-latest", state: "s", questions: { q: { type: "choice", criteria: { a: null, b: null, c: null } } } }),
      ),
      Code.InvalidArgument,
    );
    const [detail] = err.findDetails(ValidationFailureSchema);
    expect(detail!.violations[0]!.loc).toEqual(["body", "questions", "q", "criteria"]);
    expect(detail!.violations[0]!.msg).toMatch(/at most 2 options/);
  });

  it("answers a type the model has no template for with InvalidArgument naming the model and type, and the other types as before", async () => {
    const { choice: _, ...templates } = decisionJson["question_templates"] as JsonObject;
    const { client } = setup(fakeInference({ ...decisionJson, question_templates: templates }));
    const err = await expectCode(
      client.decide(
        request({
          model: "jev-latest",
          state: "s",
          questions: { ok: { type: "noul" }, q: { type: "choice", criteria: { a: null, b: null } } },
        }),
      ),
      Code.InvalidArgument,
    );
    expect(err.rawMessage).toMatch(/^model "[^"]+" has no template for question type "choice" .*question "q"/);
    expect(err.findDetails(ValidationFailureSchema)).toEqual([]);
    const ok = await client.decide(request({ model: "jev-latest", state: "s", questions: { ok: { type: "noul" } } }));
    expect(ok.answerList).toHaveLength(1);
  });

  it("refuses a state and question longer than the model's context", async () => {
    const { client } = setup(fakeInference(decisionJson, { maxPositions: 50 }));
    const err = await expectCode(
      client.decide(request({ model: "jev-latest", state: "word ".repeat(60), questions: { q: { type: "noul" } } })),
      Code.InvalidArgument,
    );
    expect(err.rawMessage).toMatch(/reads at most 50/);
  });

  it("refuses a model without decision.json, and reads a model's config once", async () => {
    const none = setup(fakeInference(undefined));
    const err = await expectCode(
      none.client.decide(request({ model: "jev-latest", state: "s", questions: { q: { type: "noul" } } })),
      Code.InvalidArgument,
    );
    expect(err.rawMessage).toMatch(/no decision configuration/);

    const { client, fake } = setup();
    await Promise.all([1, 2, 3].map(() => client.decide(request({ model: "jev-latest", state: "s", questions: { q: { type: "noul" } } }))));
    await client.decide(request({ model: "textmodel-26b", state: "s", questions: { q: { type: "noul" } } }));
    expect(fake.modelInfoCalls).toBe(1);
  });

  it("passes inference errors through with their code", async () => {
    const fake = fakeInference(decisionJson);
    fake.impl.score = () => {
      throw new ConnectError("worker gone", Code.Unavailable);
    };
    const { client } = setup(fake);
    await expectCode(client.decide(request({ model: "jev-latest", state: "s", questions: { q: { type: "noul" } } })), Code.Unavailable);
  });

  it("rejects a malformed inference reply instead of answering from it", async () => {
    const fake = fakeInference(decisionJson, { logitsFor: () => [1] });
    const { client } = setup(fake);
    await expectCode(client.decide(request({ model: "jev-latest", state: "s", questions: { q: { type: "noul" } } })), Code.Internal);
  });
});
