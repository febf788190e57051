import type { ChatSpecialTokens } from "../core/model-config.js";
import { withBoundedBasics, withIntegerRanges, withNumberBounds } from "./number-bounds.js";
import { checkSchema, type SchemaLimits } from "./schema-check.js";

/** What a reply must follow, as the request said it (chat-prompt.ts decides which applies). */
export type GrammarSpec =
  /** response_format json_schema: one JSON value of the schema. */
  | { kind: "json_schema"; schema: unknown }
  /** response_format json_object: one JSON object. */
  | { kind: "json_object" }
  /** A forced call (named or required tool): the prompt ends at `"arguments": `; the reply is the arguments, `}</tool_call>`, end. */
  | { kind: "tool_arguments"; tool: string; parameters: unknown }
  /** tool_choice auto: free text, and every `<tool_call>` opened is a complete call of one of the tools. */
  | { kind: "tool_calls"; tools: { name: string; parameters: unknown }[] }
  /**
   * One call in Gemma 4's markup, the prompt (or the reply so far) ending at its open tag: `call:NAME`
   * of one of the tools, its arguments as a JSON object of its parameters (JSON-quoted keys and
   * strings, which reply-gemma4.ts reads beside Gemma's own `<|"|>` strings), the close tag, end.
   * A canvas model's forced call and its auto call once opened (docs/constrained-decoding.md, "On a canvas").
   */
  | { kind: "gemma4_call"; tools: { name: string; parameters: unknown }[] };

/** The one-line JSON style of the chat template: `{"a": 1, "b": [2, 3]}`. */
const SEPARATORS: [string, string] = [", ", ": "];

/** Parameters of a tool that declares none: an empty object. */
const NO_PARAMETERS = { type: "object", properties: {} };

export type SchemaToEBNF = (
  schema: string,
  anyWhitespace: boolean,
  indent: number,
  separators: [string, string],
  strictMode: boolean,
) => Promise<string>;

/** A grammar ready for the compiler: an EBNF grammar or a structural tag. */
export type GrammarSource = { ebnf: string } | { structuralTag: object };

/** Checks every schema of `spec` (SchemaError naming the problem) before anything is compiled. */
export function checkSpec(spec: GrammarSpec, limits?: SchemaLimits): void {
  if (spec.kind === "json_schema") checkSchema(spec.schema, "response_format.json_schema.schema", limits);
  if (spec.kind === "tool_arguments") checkSchema(spec.parameters ?? NO_PARAMETERS, `tools[${spec.tool}].parameters`, limits);
  if (spec.kind === "tool_calls" || spec.kind === "gemma4_call") {
    for (const tool of spec.tools) checkSchema(tool.parameters ?? NO_PARAMETERS, `tools[${tool.name}].parameters`, limits);
  }
}

/**
 * The grammar of a spec. With `numberBounds`, integers and numbers are bounded first
 * (number-bounds.ts). Schemas become EBNF with XGrammar's own converter, in strict mode
 * (no properties or items beyond the schema's: every reply still validates, and the model
 * cannot pad an object) and with the template's fixed separators and no free whitespace, so
 * keys and punctuation are forced and committed by jump-forward. A call is written with the
 * model's own delimiters (`tags.toolCall`).
 */
export async function grammarSource(
  spec: GrammarSpec,
  toEBNF: SchemaToEBNF,
  tags: ChatSpecialTokens,
  numberBounds = true,
): Promise<GrammarSource> {
  const [open, close] = tags.toolCall;
  const ebnf = async (schema: unknown, strict = true) => {
    const given = schema ?? NO_PARAMETERS;
    if (!numberBounds) return withSafeStrings(await toEBNF(JSON.stringify(given), false, -1, SEPARATORS, strict));
    const bounded = withNumberBounds(given);
    const converted = await toEBNF(JSON.stringify(bounded.schema), false, -1, SEPARATORS, strict);
    return withSafeStrings(withIntegerRanges(withBoundedBasics(converted), bounded.ranges));
  };
  switch (spec.kind) {
    case "json_schema":
      return { ebnf: await ebnf(spec.schema) };
    case "json_object":
      return { ebnf: await ebnf({ type: "object" }, false) };
    case "tool_arguments":
      return {
        structuralTag: {
          type: "structural_tag",
          format: {
            type: "sequence",
            elements: [
              { type: "grammar", grammar: await ebnf(spec.parameters) },
              { type: "const_string", value: `}${close}` },
            ],
          },
        },
      };
    case "tool_calls": {
      const tags = [];
      for (const tool of spec.tools) {
        tags.push({
          type: "tag",
          begin: `${open}{"name": ${JSON.stringify(tool.name)}, "arguments": `,
          content: { type: "grammar", grammar: await ebnf(tool.parameters) },
          end: `}${close}`,
        });
      }
      return { structuralTag: { type: "structural_tag", format: { type: "triggered_tags", triggers: [open], tags } } };
    }
    case "gemma4_call": {
      const tags = [];
      for (const tool of spec.tools) {
        tags.push({
          type: "tag",
          begin: `call:${tool.name}`,
          content: { type: "grammar", grammar: await ebnf(tool.parameters) },
          end: close,
        });
      }
      return { structuralTag: { type: "structural_tag", format: tags.length === 1 ? tags[0] : { type: "or", elements: tags } } };
    }
  }
}

/**
 * Tightens every negated character class of a converted schema (the characters of JSON strings,
 * and of `[^…]` in patterns): no raw control character (JSON forbids them; one of XGrammar's
 * string rules lets them through) and no `<`, so no string can hold `</tool_call>`, `<think>`
 * or any other tag the reply parser acts on, whether as one special token or spelled out.
 * A string that needs `<` writes it as the escape `\u003c`, which is the same JSON value.
 */
export function withSafeStrings(ebnf: string): string {
  let out = "";
  let i = 0;
  while (i < ebnf.length) {
    const c = ebnf[i]!;
    if (c === '"' || c === "[") {
      // A quoted literal or a character class, copied through its closing quote or bracket.
      const close = c === '"' ? '"' : "]";
      let j = i + 1;
      while (j < ebnf.length && ebnf[j] !== close) j += ebnf[j] === "\\" ? 2 : 1;
      const body = ebnf.slice(i, j);
      out += c === "[" && body.startsWith("[^") ? `${body}\\0-\\x1f<]` : `${body}${close}`;
      i = j + 1;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** The cache key of a spec: equal specs share one compiled grammar. */
export function specKey(spec: GrammarSpec): string {
  return JSON.stringify(spec);
}
