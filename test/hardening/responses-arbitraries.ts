// Request bodies of POST /v1/responses: mostly valid, every field sometimes wrong, left out,
// doubled, or joined by dangerous keys; the stateful fields sometimes set.
import fc from "fast-check";
import { OMIT, field, jsonSchema, num, obj, optional, record, text, tokenLimit, type J } from "./json-arbitraries.js";

const textPart: fc.Arbitrary<J> = record({
  type: field(fc.constantFrom("input_text", "output_text", "input_text", "input_image", "refusal")),
  text: field(text),
});

const content: fc.Arbitrary<J> = fc.oneof({ weight: 3, arbitrary: text }, { weight: 1, arbitrary: fc.array(textPart, { maxLength: 3 }) });

const callId = fc.constantFrom("call_1", "call_2", "__proto__", "");

const item: fc.Arbitrary<J> = fc.oneof(
  {
    weight: 4,
    arbitrary: record({
      type: field(fc.constant("message"), { omit: 3 }),
      role: field(fc.constantFrom("user", "assistant", "system", "developer", "tool")),
      content: field(content),
    }),
  },
  {
    weight: 1,
    arbitrary: record({
      type: field(fc.constant("function_call")),
      call_id: field(callId),
      name: field(fc.constantFrom("get_weather", "f")),
      arguments: field(fc.oneof(fc.constant('{"city":"Paris"}'), text)),
    }),
  },
  {
    weight: 1,
    arbitrary: record({
      type: field(fc.constant("function_call_output")),
      call_id: field(callId),
      output: field(fc.oneof(text, fc.array(textPart, { maxLength: 2 }))),
    }),
  },
  {
    weight: 1,
    arbitrary: record({
      type: field(fc.constant("reasoning")),
      summary: field(fc.array(record({ type: field(fc.constant("summary_text")), text: field(text) }), { maxLength: 2 })),
    }),
  },
  { weight: 1, arbitrary: record({ type: field(fc.constantFrom("item_reference", "web_search_call")), id: field(text) }) },
);

const tool: fc.Arbitrary<J> = record({
  type: field(fc.constantFrom("function", "function", "web_search")),
  name: field(fc.constantFrom("get_weather", "f", "bad name", "")),
  description: field(text),
  parameters: field(jsonSchema),
});

const maxTokens = tokenLimit([num(1.5)]);

/** A request the service must answer 200 (when the model is served). */
export function validResponsesBody(): fc.Arbitrary<J> {
  const message = fc.record({ role: fc.constantFrom("user", "system", "developer", "assistant"), text }).map(({ role, text: t }) =>
    obj([
      ["role", role],
      ["content", t],
    ]),
  );
  return fc
    .record({
      input: fc.oneof(text, fc.array(message, { minLength: 1, maxLength: 3 })),
      instructions: optional(text),
      maxTokens: fc.integer({ min: 1, max: 4 }).map(num),
      stream: optional(fc.boolean()),
      format: optional(fc.constantFrom("text", "json_object")),
      reasoning: optional(fc.constantFrom("none", "low", "high")),
      store: optional(fc.constant(false)),
    })
    .map((r) =>
      obj([
        ["model", "textmodel-26b"],
        ["input", r.input],
        ["instructions", r.instructions],
        ["max_output_tokens", r.maxTokens],
        ["stream", r.stream],
        ["text", r.format === OMIT ? OMIT : obj([["format", obj([["type", r.format]])]])],
        ["reasoning", r.reasoning === OMIT ? OMIT : obj([["effort", r.reasoning]])],
        ["store", r.store],
      ]),
    );
}

function hostileResponsesBody(): fc.Arbitrary<J> {
  return record({
    model: field(fc.constantFrom("textmodel-26b", "textmodel-26b", "no-such-model", ""), { omit: 1 }),
    input: field(fc.oneof(text, fc.array(item, { maxLength: 4 })), { junk: 1, omit: 1 }),
    instructions: field(text, { valid: 1, omit: 4 }),
    max_output_tokens: field(maxTokens, { omit: 1 }),
    stream: field(fc.boolean(), { omit: 3 }),
    text: field(
      record({
        format: field(
          fc.oneof(
            record({ type: field(fc.constantFrom("text", "json_object")) }),
            record({ type: field(fc.constant("json_schema")), name: field(text), schema: field(jsonSchema) }),
          ),
        ),
      }),
      { valid: 1, omit: 6 },
    ),
    tools: field(fc.array(tool, { maxLength: 2 }), { valid: 1, omit: 6 }),
    tool_choice: field(
      fc.oneof(
        fc.constantFrom("auto", "none", "required"),
        record({ type: field(fc.constantFrom("function", "allowed_tools")), name: field(fc.constant("get_weather")) }),
      ),
      { valid: 1, omit: 8 },
    ),
    reasoning: field(record({ effort: field(fc.constantFrom("none", "low", "medium", "extreme")) }), { valid: 1, omit: 6 }),
    store: field(fc.boolean(), { valid: 1, omit: 6 }),
    previous_response_id: field(text, { valid: 1, omit: 12 }),
    background: field(fc.boolean(), { valid: 1, omit: 12 }),
    metadata: field(record({ run: field(text) }), { valid: 1, omit: 8 }),
    temperature: field(fc.double({ min: 0, max: 2, noNaN: true }).map(num), { valid: 1, omit: 6 }),
  });
}

/** One valid request in three, two where something may be wrong anywhere. */
export function responsesBody(): fc.Arbitrary<J> {
  return fc.oneof({ weight: 1, arbitrary: validResponsesBody() }, { weight: 2, arbitrary: hostileResponsesBody() });
}
