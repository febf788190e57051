// Prototype pollution: a body carrying {"__proto__": {"polluted": 1}} (or constructor.prototype)
// at any level of any endpoint's JSON leaves Object.prototype as it was, in this very process
// (the server runs in it, on the tiny model through the real engine); and where such keys are
// data (question ids, option names) they come back as sent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { Num, Obj, toText, type J } from "./json-arbitraries.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny", env: { TESSERA_DEFAULT_RPM: "1000000" } });
});
afterAll(async () => {
  await tessera?.close();
});

const o = (entries: [string, J][]) => new Obj(entries);
const POISONS: [string, J][] = [
  ["__proto__", o([["polluted", new Num("1")]])],
  ["constructor", o([["prototype", o([["polluted", new Num("1")]])]])],
  ["prototype", o([["polluted", new Num("1")]])],
];

const CHAT: J = o([
  ["model", "textmodel-26b"],
  ["max_tokens", new Num("1")],
  [
    "messages",
    [
      o([
        ["role", "system"],
        ["content", "be brief"],
      ]),
      o([
        ["role", "user"],
        [
          "content",
          [
            o([
              ["type", "text"],
              ["text", "hi"],
            ]),
          ],
        ],
      ]),
    ],
  ],
  [
    "tools",
    [
      o([
        ["type", "function"],
        [
          "function",
          o([
            ["name", "lookup"],
            ["description", "d"],
            [
              "parameters",
              o([
                ["type", "object"],
                ["properties", o([["q", o([["type", "string"]])]])],
              ]),
            ],
          ]),
        ],
      ]),
    ],
  ],
  [
    "response_format",
    o([
      ["type", "json_schema"],
      [
        "json_schema",
        o([
          ["name", "s"],
          ["schema", o([["type", "object"]])],
        ]),
      ],
    ]),
  ],
  ["stream_options", o([["include_usage", true]])],
  ["chat_template_kwargs", o([["enable_thinking", false]])],
]);

const DECISION: J = o([
  ["model", "decisionmodel-latest"],
  [
    "state",
    o([
      [
        "user",
        o([
          ["name", "Ann"],
          ["tags", [o([["k", "v"]])]],
        ]),
      ],
    ]),
  ],
  [
    "questions",
    o([
      [
        "spam",
        o([
          ["type", "noul"],
          [
            "criteria",
            o([
              ["true", o([["means", "spam"]])],
              ["false", "ham"],
            ]),
          ],
          ["instructions", o([["lang", "en"]])],
        ]),
      ],
      [
        "lang",
        o([
          ["type", "choice"],
          [
            "criteria",
            o([
              ["en", o([["d", "English"]])],
              ["fr", "French"],
            ]),
          ],
        ]),
      ],
      [
        "rate",
        o([
          ["type", "score"],
          ["criteria", ["low", "high"]],
        ]),
      ],
    ]),
  ],
]);

/** Every object of the document: the path to it, for naming the case. */
function objectPaths(value: J, path: string[] = []): string[][] {
  if (Array.isArray(value)) return value.flatMap((item, i) => objectPaths(item, [...path, String(i)]));
  if (!(value instanceof Obj)) return [];
  return [path, ...value.entries.flatMap(([k, v]) => objectPaths(v, [...path, k]))];
}

/** The document with `entry` added to the object at `path`. */
function inject(value: J, path: string[], entry: [string, J]): J {
  if (path.length === 0) return value instanceof Obj ? new Obj([entry, ...value.entries]) : value;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, i) => (String(i) === head ? inject(item, rest, entry) : item));
  if (value instanceof Obj) return new Obj(value.entries.map(([k, v]) => [k, k === head ? inject(v, rest, entry) : v]));
  return value;
}

const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype).sort();

function expectPristine(): void {
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTOTYPE_NAMES);
  expect(Object.keys(Object.prototype)).toEqual([]);
  expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  expect(([] as unknown as { polluted?: unknown }).polluted).toBeUndefined();
  expect(Object.getPrototypeOf({})).toBe(Object.prototype);
}

async function post(path: string, body: J): Promise<Response> {
  return tessera.fetch(path, { method: "POST", body: toText(body), headers: { "content-type": "application/json" } });
}

describe("prototype pollution", () => {
  for (const [name, path, document] of [
    ["chat completions", "/v1/chat/completions", CHAT],
    ["decisions", "/v1/systemone", DECISION],
  ] as const) {
    it(`${name}: a poisoned key at every level of the body leaves Object.prototype untouched`, async () => {
      const paths = objectPaths(document);
      expect(paths.length).toBeGreaterThan(10);
      let answered = 0;
      for (const at of paths) {
        for (const poison of POISONS) {
          const res = await post(path, inject(document, at, poison));
          const text = await res.text();
          // The poison is an unknown field or a value of the wrong type: answered, never a 5xx.
          expect(res.status, `${poison[0]} at ${at.join(".") || "(root)"}: ${text}`).toBeLessThan(500);
          if (res.status === 200) answered++;
          expectPristine();
        }
      }
      // Most places ignore the extra key, so most requests are answered in full.
      expect(answered).toBeGreaterThan(paths.length);
    });
  }

  it("keeps __proto__, constructor and prototype as question ids and option names, answered under the names sent", async () => {
    const ids = ["__proto__", "constructor", "prototype", "hasOwnProperty", "toString"];
    const options: [string, J][] = [
      ["__proto__", "first"],
      ["constructor", "second"],
      ["valueOf", null],
    ];
    const body = o([
      ["model", "decisionmodel-latest"],
      ["state", "a support ticket"],
      [
        "questions",
        o(
          ids.map((id, i): [string, J] => [
            id,
            i === 0
              ? o([
                  ["type", "choice"],
                  ["criteria", o(options)],
                ])
              : o([["type", "noul"]]),
          ]),
        ),
      ],
    ]);
    const res = await post("/v1/systemone", body);
    expect(res.status).toBe(200);
    const answer = (await res.json()) as {
      answers: Record<string, { type: string; choice?: string; probabilities?: Record<string, number> }>;
    };
    expect(Object.getPrototypeOf(answer.answers)).toBe(Object.prototype);
    expect(Object.keys(answer.answers).sort()).toEqual([...ids].sort());
    const choice = Object.getOwnPropertyDescriptor(answer.answers, "__proto__")!.value as {
      type: string;
      choice: string;
      probabilities: object;
    };
    expect(choice.type).toBe("choice");
    expect(Object.keys(choice.probabilities).sort()).toEqual(["__proto__", "constructor", "valueOf"]);
    expect(["__proto__", "constructor", "valueOf"]).toContain(choice.choice);
    expect(Object.getOwnPropertyDescriptor(answer.answers, "constructor")!.value).toMatchObject({ type: "noul" });
    expectPristine();
  });
});
