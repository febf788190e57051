// Request bodies of the two POST endpoints: mostly valid, every field sometimes wrong, left
// out, doubled, or joined by dangerous keys.
import fc from "fast-check";
import { Obj, OMIT, field, jsonSchema, junk, key, num, obj, optional, record, text, tokenLimit, type J } from "./json-arbitraries.js";

// --- chat completions --------------------------------------------------------------------------

const imageUrl = fc.constantFrom(
  "data:image/png;base64,iVBORw0KGgo=",
  "http://169.254.169.254/latest/meta-data/",
  "https://example.com/cat.png",
  "file:///etc/passwd",
  "data:text/html;base64,PHNjcmlwdD4=",
  "data:image/png;base64,",
  "ftp://x/y",
);

const contentPart: fc.Arbitrary<J> = fc.oneof(
  record({ type: field(fc.constant("text")), text: field(text) }),
  record({
    type: field(fc.constant("image_url")),
    image_url: field(fc.oneof(record({ url: field(imageUrl), detail: field(fc.constantFrom("auto", "low", "high")) }), imageUrl)),
  }),
);

const content: fc.Arbitrary<J> = fc.oneof(
  { weight: 3, arbitrary: text },
  { weight: 1, arbitrary: fc.array(contentPart, { maxLength: 3 }) },
);

const toolCall: fc.Arbitrary<J> = record({
  id: field(fc.constantFrom("call_1", "call_2", "__proto__")),
  type: field(fc.constant("function")),
  function: field(
    record({ name: field(fc.constantFrom("get_weather", "f")), arguments: field(fc.oneof(fc.constant('{"city":"Paris"}'), text)) }),
  ),
});

const message: fc.Arbitrary<J> = fc.oneof(
  {
    weight: 4,
    arbitrary: record({
      role: field(fc.constantFrom("user", "system", "developer")),
      content: field(content),
      name: field(text, { omit: 6 }),
    }),
  },
  {
    weight: 1,
    arbitrary: record({
      role: field(fc.constant("assistant")),
      content: field(fc.oneof(content, fc.constant(null))),
      tool_calls: field(fc.array(toolCall, { maxLength: 2 }), { omit: 3 }),
      reasoning: field(text, { omit: 4 }),
    }),
  },
  {
    weight: 1,
    arbitrary: record({
      role: field(fc.constant("tool")),
      content: field(content),
      tool_call_id: field(fc.constantFrom("call_1", "call_2", "nope")),
    }),
  },
);

const tool: fc.Arbitrary<J> = record({
  type: field(fc.constant("function")),
  function: field(
    record({ name: field(fc.constantFrom("get_weather", "f", "bad name", "")), description: field(text), parameters: field(jsonSchema) }),
  ),
});

const maxTokens = tokenLimit();

export interface ChatBodyOptions {
  /** Leave max_tokens out only this rarely (a server with a real model generates the default 1024 then). */
  maxTokensOmit?: number;
}

/** One valid request in three, two where something may be wrong anywhere. */
export function chatBody(options: ChatBodyOptions = {}): fc.Arbitrary<J> {
  return fc.oneof({ weight: 1, arbitrary: validChatBody(options) }, { weight: 2, arbitrary: hostileChatBody(options) });
}

const nonEmpty = fc.string({ minLength: 1, maxLength: 12 });

/** A request the service must answer 200 (when the model is served). */
export function validChatBody(options: ChatBodyOptions = {}): fc.Arbitrary<J> {
  const textParts = fc.array(
    fc.record({ text }).map(({ text: t }) =>
      obj([
        ["type", "text"],
        ["text", t],
      ]),
    ),
    { minLength: 1, maxLength: 2 },
  );
  const validMessage = fc
    .record({ role: fc.constantFrom("user", "system", "developer", "assistant"), content: fc.oneof(text, textParts) })
    .map(({ role, content: c }) =>
      obj([
        ["role", role],
        ["content", c],
      ]),
    );
  return fc
    .record({
      messages: fc.array(validMessage, { minLength: 1, maxLength: 4 }),
      maxTokens: options.maxTokensOmit === 0 ? fc.integer({ min: 1, max: 4 }).map(num) : optional(fc.integer({ min: 1, max: 4 }).map(num)),
      stream: optional(fc.boolean()),
      usage: optional(fc.boolean()),
      stop: optional(fc.array(nonEmpty, { maxLength: 4 })),
      format: optional(fc.constantFrom("text", "json_object")),
      tools: fc.boolean(),
      thinking: optional(fc.boolean()),
      temperature: optional(fc.double({ min: 0, max: 2, noNaN: true }).map(num)),
    })
    .map((r) =>
      obj([
        ["model", "textmodel-26b"],
        ["messages", r.messages],
        ["max_tokens", r.maxTokens],
        ["stream", r.stream],
        ["stream_options", r.stream === true && r.usage !== OMIT ? obj([["include_usage", r.usage]]) : OMIT],
        ["stop", r.stop],
        ["response_format", r.format === OMIT ? OMIT : obj([["type", r.format]])],
        [
          "tools",
          r.tools
            ? [
                obj([
                  ["type", "function"],
                  [
                    "function",
                    obj([
                      ["name", "lookup"],
                      ["parameters", obj([["type", "object"]])],
                    ]),
                  ],
                ]),
              ]
            : OMIT,
        ],
        ["tool_choice", r.tools ? "auto" : OMIT],
        ["chat_template_kwargs", r.thinking === OMIT ? OMIT : obj([["enable_thinking", r.thinking]])],
        ["temperature", r.temperature],
      ]),
    );
}

function hostileChatBody(options: ChatBodyOptions): fc.Arbitrary<J> {
  return record({
    model: field(fc.constantFrom("textmodel-26b", "textmodel-26b", "no-such-model", ""), { omit: 1 }),
    messages: field(fc.array(message, { minLength: 1, maxLength: 4 }), { junk: 1, omit: 1 }),
    max_tokens: field(maxTokens, { omit: options.maxTokensOmit ?? 1 }),
    max_completion_tokens: field(maxTokens, { valid: 1, omit: 8 }),
    stream: field(fc.boolean(), { omit: 3 }),
    stream_options: field(record({ include_usage: field(fc.boolean()) }), { valid: 1, omit: 6 }),
    stop: field(fc.oneof(text, fc.array(text, { maxLength: 5 })), { valid: 1, omit: 6 }),
    response_format: field(
      fc.oneof(
        record({ type: field(fc.constantFrom("text", "json_object")) }),
        record({ type: field(fc.constant("json_schema")), json_schema: field(jsonSchema) }),
      ),
      { valid: 1, omit: 6 },
    ),
    tools: field(fc.array(tool, { maxLength: 2 }), { valid: 1, omit: 6 }),
    tool_choice: field(
      fc.oneof(
        fc.constantFrom("auto", "none", "required"),
        record({ type: field(fc.constant("function")), function: field(record({ name: field(fc.constant("get_weather")) })) }),
      ),
      { valid: 1, omit: 8 },
    ),
    chat_template_kwargs: field(record({ enable_thinking: field(fc.boolean()) }), { valid: 1, omit: 8 }),
    n: field(fc.constantFrom(num(1), num(2)), { valid: 1, omit: 8 }),
    temperature: field(fc.double({ min: 0, max: 2, noNaN: true }).map(num), { valid: 1, omit: 6 }),
    seed: field(fc.integer().map(num), { valid: 1, omit: 8 }),
    user: field(text, { valid: 1, omit: 8 }),
  });
}

// --- decisions -----------------------------------------------------------------------------------

const description: fc.Arbitrary<J> = fc.oneof(
  { weight: 4, arbitrary: text },
  { weight: 1, arbitrary: junk },
  { weight: 1, arbitrary: fc.constant(null) },
);

const questionId = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("spam", "lang", "q1", "q2", "__proto__", "constructor", "prototype", "0", "hasOwnProperty") },
  { weight: 1, arbitrary: key },
);

const question: fc.Arbitrary<J> = fc.oneof(
  record({
    type: field(fc.constant("noul")),
    criteria: field(record({ true: field(description), false: field(description) }), { omit: 3 }),
    instructions: field(description, { omit: 3 }),
  }),
  record({
    type: field(fc.constant("choice")),
    criteria: field(fc.array(fc.tuple(questionId, description), { minLength: 1, maxLength: 5 }).map((entries) => new Obj(entries))),
    instructions: field(description, { omit: 3 }),
  }),
  record({
    type: field(fc.constant("score")),
    criteria: field(fc.array(text, { minLength: 2, maxLength: 10 })),
    instructions: field(description, { omit: 3 }),
  }),
  record({ type: field(fc.constantFrom("bogus", "NOUL", "")), criteria: field(junk) }),
);

const state: fc.Arbitrary<J> = fc.oneof({ weight: 3, arbitrary: text }, { weight: 2, arbitrary: junk });

/** One valid request in three, two where something may be wrong anywhere. */
export function decisionBody(): fc.Arbitrary<J> {
  return fc.oneof({ weight: 1, arbitrary: validDecisionBody() }, { weight: 2, arbitrary: hostileDecisionBody() });
}

/** A request the service must answer 200 (when the model is served), with exactly one answer per id. */
export function validDecisionBody(): fc.Arbitrary<J> {
  const id = fc.oneof(fc.constantFrom("spam", "lang", "__proto__", "constructor", "prototype", "0"), nonEmpty);
  const validQuestion: fc.Arbitrary<J> = fc.oneof(
    fc.option(fc.tuple(text, text), { freq: 2 }).map((sides) =>
      obj([
        ["type", "noul"],
        [
          "criteria",
          sides === null
            ? OMIT
            : obj([
                ["true", sides[0]],
                ["false", sides[1]],
              ]),
        ],
      ]),
    ),
    fc.uniqueArray(fc.tuple(id, text), { minLength: 1, maxLength: 6, selector: ([name]) => name }).map((options) =>
      obj([
        ["type", "choice"],
        ["criteria", new Obj(options)],
      ]),
    ),
    fc.array(text, { minLength: 2, maxLength: 10 }).map((levels) =>
      obj([
        ["type", "score"],
        ["criteria", levels],
      ]),
    ),
  );
  const validState = fc.oneof(
    text,
    fc.array(fc.tuple(nonEmpty, text), { maxLength: 3 }).map((entries) => new Obj(entries)),
  );
  return fc
    .record({
      model: fc.constantFrom("decisionmodel-latest", "jev-latest", "decisionmodel-0.1"),
      state: validState,
      questions: fc.uniqueArray(fc.tuple(id, validQuestion), { minLength: 1, maxLength: 5, selector: ([name]) => name }),
    })
    .map(({ model, state: st, questions }) =>
      obj([
        ["model", model],
        ["state", st],
        ["questions", new Obj(questions)],
      ]),
    );
}

function hostileDecisionBody(): fc.Arbitrary<J> {
  return record({
    model: field(fc.constantFrom("decisionmodel-latest", "jev-latest", "decisionmodel-0.1", "textmodel-26b", "nope", ""), { omit: 1 }),
    state: field(state, { omit: 1 }),
    questions: field(
      fc.array(fc.tuple(questionId, question), { minLength: 1, maxLength: 4 }).map((entries) => new Obj(entries)),
      { omit: 1 },
    ),
  });
}
