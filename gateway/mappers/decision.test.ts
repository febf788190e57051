import { create, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  AnswerSchema,
  DecideResponseSchema,
  IdentifiedAnswerSchema,
  QuestionType,
  type DecideRequest,
} from "../../gen/tessera/decision/v1/decision_pb.js";
import { validationError } from "../../services/decision/service.js";
import type { Violation } from "../../lib/decision-types/rules.js";
import { decisionResponseToJson, decisionViolationsOf, parseDecisionRequest } from "./decision.js";

const valid = () => ({
  model: "decisionmodel-latest",
  state: { email: "Win a prize now", from: "x@y.z" },
  questions: {
    spam: { type: "noul", instructions: "Is this spam?", criteria: { true: "unsolicited", false: "wanted" } },
    topic: { type: "choice", criteria: { money: "about money", work: null, "🎉 party": { fun: true } } },
    urgency: { type: "score", instructions: { ask: "how urgent" }, criteria: ["low", "mid", "high"] },
  },
});

function ok(body: unknown): DecideRequest {
  const r = parseDecisionRequest(body, "req-1");
  if (!r.ok) throw new Error(`expected valid, got ${JSON.stringify(r.violations)}`);
  return r.request;
}

function violations(body: unknown): Violation[] {
  const r = parseDecisionRequest(body);
  if (r.ok) throw new Error("expected violations");
  return r.violations;
}

const locs = (vs: Violation[]) => vs.map((v) => JSON.stringify(v.loc));

describe("parseDecisionRequest: valid bodies", () => {
  it("maps every field to the proto request, questions in the order sent", () => {
    const req = ok(valid());
    expect(req.requestId).toBe("req-1");
    expect(req.model).toBe("decisionmodel-latest");
    expect(toJson(ValueSchema, req.state!)).toEqual(valid().state);
    expect(req.questionList.map((q) => q.id)).toEqual(["spam", "topic", "urgency"]);
    expect(Object.keys(req.questions)).toEqual([]);
    const [spam, topic, urgency] = req.questionList.map((q) => q.question!);
    expect(spam!.type).toBe(QuestionType.NOUL);
    expect(spam!.criteria.case).toBe("noul");
    expect(topic!.criteria.case === "choice" && topic!.criteria.value.options.map((o) => o.name)).toEqual(["money", "work", "🎉 party"]);
    expect(topic!.criteria.case === "choice" && topic!.criteria.value.options[1]!.description).toBeUndefined();
    expect(urgency!.criteria.case === "score" && urgency!.criteria.value.levels).toEqual(["low", "mid", "high"]);
    expect(toJson(ValueSchema, urgency!.instructions!)).toEqual({ ask: "how urgent" });
  });

  it("accepts states that are strings, objects and arrays", () => {
    for (const state of ["", "text", {}, [], [1, { a: null }]]) expect(ok({ ...valid(), state }).state).toBeDefined();
  });

  it("echoes any non-empty id byte for byte, including prototype names", () => {
    const ids = ["with space", "a.b.c", "ünï©ødé 日本", "😀", "__proto__", "constructor", "toString", "hasOwnProperty", " "];
    const body = JSON.parse(
      `{"model":"m","state":"s","questions":{${ids.map((id) => `${JSON.stringify(id)}:{"type":"noul"}`).join(",")}}}`,
    );
    const req = ok(body);
    expect(req.questionList.map((q) => q.id)).toEqual(ids);
    expect(({} as Record<string, unknown>)["type"]).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("type");
  });

  it("accepts noul criteria omitted, null, one side, both sides, and null sides", () => {
    for (const criteria of [undefined, null, {}, { true: "yes" }, { false: ["no"] }, { true: { a: 1 }, false: null }]) {
      ok({ ...valid(), questions: { q: { type: "noul", criteria } } });
    }
  });

  it("accepts 1 and 255 options with unicode names and any description kind", () => {
    ok({ ...valid(), questions: { q: { type: "choice", criteria: { "only one": null } } } });
    const options = Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`选项 ${i}`, i % 2 ? null : { i }]));
    const req = ok({ ...valid(), questions: { q: { type: "choice", criteria: options } } });
    const q = req.questionList[0]!.question!;
    expect(q.criteria.case === "choice" && q.criteria.value.options).toHaveLength(255);
    const proto = JSON.parse(
      '{"model":"m","state":"s","questions":{"q":{"type":"choice","criteria":{"__proto__":"p","constructor":null}}}}',
    );
    const q2 = ok(proto).questionList[0]!.question!;
    expect(q2.criteria.case === "choice" && q2.criteria.value.options.map((o) => o.name)).toEqual(["__proto__", "constructor"]);
  });

  it("accepts 2 and 10 levels of any unicode text", () => {
    ok({ ...valid(), questions: { q: { type: "score", criteria: ["bas", "haut"] } } });
    const levels = Array.from({ length: 10 }, (_, i) => `niveau ${i} ★`);
    const q = ok({ ...valid(), questions: { q: { type: "score", criteria: levels } } }).questionList[0]!.question!;
    expect(q.criteria.case === "score" && q.criteria.value.levels).toEqual(levels);
  });

  it("accepts object, array and null levels as the text the model reads", () => {
    const criteria = [{ label: "calm" }, ["angry", { very: true }], null, "plain"];
    const q = ok({ ...valid(), questions: { q: { type: "score", criteria } } }).questionList[0]!.question!;
    expect(q.criteria.case === "score" && q.criteria.value.levels).toEqual(['{"label":"calm"}', '["angry",{"very":true}]', "", "plain"]);
  });

  it("ignores unknown top-level and question fields; null instructions are absent", () => {
    const req = ok({
      ...valid(),
      stream: true,
      temperature: 3,
      extra: { x: 1 },
      questions: { q: { type: "noul", instructions: null, weight: 2 } },
    });
    expect(req.questionList[0]!.question!.instructions).toBeUndefined();
  });
});

describe("parseDecisionRequest: every rule", () => {
  const cases: [string, unknown, string[], string[]][] = [
    ["body not an object", [1], ['["body"]'], ["dict_type"]],
    ["body null", null, ['["body"]'], ["dict_type"]],
    ["model missing", { ...valid(), model: undefined }, ['["body","model"]'], ["missing"]],
    ["model not a string", { ...valid(), model: 3 }, ['["body","model"]'], ["string_type"]],
    ["model empty", { ...valid(), model: "" }, ['["body","model"]'], ["string_too_short"]],
    ["state missing", { ...valid(), state: undefined }, ['["body","state"]'], ["missing"]],
    ["state a number", { ...valid(), state: 1 }, ['["body","state"]'], ["value_type"]],
    ["state a boolean", { ...valid(), state: true }, ['["body","state"]'], ["value_type"]],
    ["state null", { ...valid(), state: null }, ['["body","state"]'], ["value_type"]],
    ["questions missing", { ...valid(), questions: undefined }, ['["body","questions"]'], ["missing"]],
    ["questions an array", { ...valid(), questions: [{ type: "noul" }] }, ['["body","questions"]'], ["dict_type"]],
    ["questions empty", { ...valid(), questions: {} }, ['["body","questions"]'], ["too_short"]],
    ["empty id", { ...valid(), questions: { "": { type: "noul" } } }, ['["body","questions",""]'], ["string_too_short"]],
    ["question not an object", { ...valid(), questions: { q: "noul" } }, ['["body","questions","q"]'], ["dict_type"]],
    ["type missing", { ...valid(), questions: { q: {} } }, ['["body","questions","q","type"]'], ["missing"]],
    ["type unknown", { ...valid(), questions: { q: { type: "yesno" } } }, ['["body","questions","q","type"]'], ["enum"]],
    ["type not a string", { ...valid(), questions: { q: { type: 1 } } }, ['["body","questions","q","type"]'], ["enum"]],
    [
      "instructions a number",
      { ...valid(), questions: { q: { type: "noul", instructions: 5 } } },
      ['["body","questions","q","instructions"]'],
      ["value_type"],
    ],
    [
      "noul criteria an array",
      { ...valid(), questions: { q: { type: "noul", criteria: ["a", "b"] } } },
      ['["body","questions","q","criteria"]'],
      ["dict_type"],
    ],
    [
      "noul criteria a string",
      { ...valid(), questions: { q: { type: "noul", criteria: "yes" } } },
      ['["body","questions","q","criteria"]'],
      ["dict_type"],
    ],
    [
      "noul criteria unknown key",
      { ...valid(), questions: { q: { type: "noul", criteria: { yes: "a" } } } },
      ['["body","questions","q","criteria","yes"]'],
      ["extra_forbidden"],
    ],
    [
      "noul description a number",
      { ...valid(), questions: { q: { type: "noul", criteria: { true: 1 } } } },
      ['["body","questions","q","criteria","true"]'],
      ["value_type"],
    ],
    ["choice criteria missing", { ...valid(), questions: { q: { type: "choice" } } }, ['["body","questions","q","criteria"]'], ["missing"]],
    [
      "choice criteria null",
      { ...valid(), questions: { q: { type: "choice", criteria: null } } },
      ['["body","questions","q","criteria"]'],
      ["missing"],
    ],
    [
      "choice criteria an array",
      { ...valid(), questions: { q: { type: "choice", criteria: ["a", "b"] } } },
      ['["body","questions","q","criteria"]'],
      ["dict_type"],
    ],
    [
      "choice without options",
      { ...valid(), questions: { q: { type: "choice", criteria: {} } } },
      ['["body","questions","q","criteria"]'],
      ["too_short"],
    ],
    [
      "choice with 256 options",
      {
        ...valid(),
        questions: { q: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`o${i}`, null])) } },
      },
      ['["body","questions","q","criteria"]'],
      ["too_long"],
    ],
    [
      "choice description a boolean",
      { ...valid(), questions: { q: { type: "choice", criteria: { a: true } } } },
      ['["body","questions","q","criteria","a"]'],
      ["value_type"],
    ],
    ["score criteria missing", { ...valid(), questions: { q: { type: "score" } } }, ['["body","questions","q","criteria"]'], ["missing"]],
    [
      "score criteria an object",
      { ...valid(), questions: { q: { type: "score", criteria: { "0": "low", "1": "high" } } } },
      ['["body","questions","q","criteria"]'],
      ["list_type"],
    ],
    [
      "score with 1 level",
      { ...valid(), questions: { q: { type: "score", criteria: ["only"] } } },
      ['["body","questions","q","criteria"]'],
      ["too_short"],
    ],
    [
      "score with 11 levels",
      { ...valid(), questions: { q: { type: "score", criteria: Array.from({ length: 11 }, (_, i) => `l${i}`) } } },
      ['["body","questions","q","criteria"]'],
      ["too_long"],
    ],
    [
      "score level a number or a boolean",
      { ...valid(), questions: { q: { type: "score", criteria: ["a", 2, true] } } },
      ['["body","questions","q","criteria",1]', '["body","questions","q","criteria",2]'],
      ["value_type", "value_type"],
    ],
  ];
  it.each(cases)("%s", (_name, body, wantLocs, wantTypes) => {
    const vs = violations(body);
    expect(locs(vs)).toEqual(wantLocs);
    expect(vs.map((v) => v.type)).toEqual(wantTypes);
    for (const v of vs) expect(v.msg.length).toBeGreaterThan(0);
  });

  it("lists every problem at once", () => {
    const vs = violations({
      model: 7,
      state: false,
      questions: {
        "a b": { type: "choice", criteria: [] },
        "x.y": { type: "score", criteria: { a: 1 }, instructions: 1 },
        ok: { type: "noul" },
        "": { type: "maybe" },
      },
    });
    expect(locs(vs)).toEqual([
      '["body","model"]',
      '["body","state"]',
      '["body","questions","a b","criteria"]',
      '["body","questions","x.y","instructions"]',
      '["body","questions","x.y","criteria"]',
      '["body","questions",""]',
      '["body","questions","","type"]',
    ]);
  });

  it("refuses nesting deeper than 64 without overflowing the stack", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const vs = violations({ ...valid(), state: deep });
    expect(vs).toEqual([{ loc: ["body", "state"], msg: expect.stringContaining("64"), type: "too_deep" }]);
    let ok64: unknown = "x";
    for (let i = 0; i < 64; i++) ok64 = { a: ok64 };
    ok({ ...valid(), state: ok64 });
  });

  it("never pollutes prototypes, whatever the keys", () => {
    const body = JSON.parse(
      '{"model":"m","state":{"__proto__":{"polluted":1}},"__proto__":{"polluted":2},"questions":{"__proto__":{"type":"choice","criteria":{"__proto__":{"polluted":3},"constructor":{"prototype":{"polluted":4}}}}}}',
    );
    const r = parseDecisionRequest(body);
    expect(r.ok).toBe(true);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("polluted");
  });

  it("never throws on arbitrary JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (body) => {
        const r = parseDecisionRequest(body);
        expect(typeof r.ok).toBe("boolean");
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue(), (questions, state) => {
        parseDecisionRequest({ model: "m", state, questions });
      }),
      { numRuns: 2000 },
    );
  });
});

describe("decisionResponseToJson", () => {
  const response = () =>
    create(DecideResponseSchema, {
      model: "decisionmodel-0.1",
      usage: { inputTokens: 123, outputTokens: 0 },
      answerList: [
        { id: "__proto__", answer: { type: QuestionType.NOUL, result: { case: "noul", value: { probability: 0.25 } } } },
        {
          id: "pick 🎯",
          answer: {
            type: QuestionType.CHOICE,
            result: {
              case: "choice",
              value: {
                choice: "constructor",
                probabilities: [
                  { option: "constructor", probability: 0.7 },
                  { option: "b", probability: 0.3 },
                ],
                confidence: 0.12,
              },
            },
          },
        },
        {
          id: "rate",
          answer: {
            type: QuestionType.SCORE,
            result: {
              case: "score",
              value: { score: 1.5, legend: ["low", "high", "top"], probabilities: [0.1, 0.3, 0.6], confidence: 0.2 },
            },
          },
        },
      ],
    });

  it("writes the API document's shapes, answers keyed by the ids sent", () => {
    const json = JSON.parse(JSON.stringify(decisionResponseToJson(response())));
    expect(Object.keys(json.answers)).toEqual(["__proto__", "pick 🎯", "rate"]);
    expect(json).toEqual({
      model: "decisionmodel-0.1",
      answers: JSON.parse(
        '{"__proto__":{"type":"noul","noul":0.25},' +
          '"pick 🎯":{"type":"choice","choice":"constructor","probabilities":{"constructor":0.7,"b":0.3},"confidence":0.12},' +
          '"rate":{"type":"score","score":1.5,"legend":{"0":"low","1":"high","2":"top"},"probabilities":{"0":0.1,"1":0.3,"2":0.6},"confidence":0.2}}',
      ),
      usage: { input_tokens: 123, output_tokens: 0 },
    });
    expect(Object.prototype).not.toHaveProperty("type");
  });

  it('keys legend and probabilities of a score "0"…"L−1" alike', () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { minLength: 2, maxLength: 10 }), (legend) => {
        const res = create(DecideResponseSchema, {
          model: "m",
          answerList: [
            create(IdentifiedAnswerSchema, {
              id: "q",
              answer: create(AnswerSchema, {
                type: QuestionType.SCORE,
                result: { case: "score", value: { score: 0, legend, probabilities: legend.map(() => 1 / legend.length), confidence: 0 } },
              }),
            }),
          ],
        });
        const a = JSON.parse(JSON.stringify(decisionResponseToJson(res))).answers.q;
        const keys = legend.map((_, i) => String(i));
        expect(Object.keys(a.legend)).toEqual(keys);
        expect(Object.keys(a.probabilities)).toEqual(keys);
        expect(Object.values(a.legend)).toEqual(legend);
      }),
    );
  });

  it("falls back to the answers map for responses without answer_list", () => {
    const res = create(DecideResponseSchema, {
      model: "m",
      answers: { q: { type: QuestionType.NOUL, result: { case: "noul", value: { probability: 1 } } } },
    });
    expect(decisionResponseToJson(res).answers).toEqual({ q: { type: "noul", noul: 1 } });
  });

  it("never writes NaN or Infinity", () => {
    const res = create(DecideResponseSchema, {
      model: "m",
      answerList: [{ id: "q", answer: { type: QuestionType.NOUL, result: { case: "noul", value: { probability: Number.NaN } } } }],
    });
    expect(JSON.stringify(decisionResponseToJson(res))).toContain('"noul":0');
  });
});

describe("decisionViolationsOf", () => {
  it("reads the service's ValidationFailure detail", () => {
    const err = validationError([{ loc: ["body", "questions", "q", "criteria"], msg: "m", type: "too_long" }]);
    expect(decisionViolationsOf(err)).toEqual([{ loc: ["body", "questions", "q", "criteria"], msg: "m", type: "too_long" }]);
    expect(decisionViolationsOf(new ConnectError("unknown model", Code.InvalidArgument))).toBeUndefined();
    expect(decisionViolationsOf(new Error("x"))).toBeUndefined();
  });
});
