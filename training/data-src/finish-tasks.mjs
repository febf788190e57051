// Finishing values (model v2): JSON replies and tool calls over many schema shapes whose
// values are short and copied from the message, with the closing brace and the end of turn
// right after the last value, so constrained replies end instead of looping.
import { chatPromptAndReply, pyJson } from "./render.mjs";

export const NAMES = [
  "Maria",
  "John",
  "Aiko",
  "Omar",
  "Lena",
  "Ravi",
  "Chloe",
  "Pedro",
  "Ingrid",
  "Kwame",
  "Sofia",
  "Tom",
  "Mei",
  "Lucas",
  "Amara",
  "Noah",
];
export const CITIES = [
  "Lyon",
  "Oslo",
  "Madrid",
  "Nairobi",
  "Osaka",
  "Lima",
  "Toronto",
  "Berlin",
  "Cairo",
  "Perth",
  "Dublin",
  "Austin",
  "Porto",
  "Seoul",
];
const COLORS = ["red", "blue", "green", "yellow", "black", "white", "orange", "purple"];
const STATUSES = [
  ["open", "closed"],
  ["active", "inactive", "pending"],
  ["low", "medium", "high"],
  ["yes", "no", "maybe"],
];

/** Field makers: each returns {schema, value, text} where text mentions the value in the message. */
const FIELDS = {
  name: (rng) => {
    const v = rng.pick(NAMES);
    return { schema: { type: "string" }, value: v, text: rng.pick([`name ${v}`, `${v}`, `called ${v}`]) };
  },
  city: (rng) => {
    const v = rng.pick(CITIES);
    return { schema: { type: "string" }, value: v, text: rng.pick([`city ${v}`, `in ${v}`, `from ${v}`]) };
  },
  age: (rng) => {
    const v = 1 + rng.int(95);
    return { schema: { type: "integer" }, value: v, text: rng.pick([`age ${v}`, `${v} years old`, `aged ${v}`]) };
  },
  count: (rng) => {
    const v = rng.int(500);
    return { schema: { type: "integer", minimum: 0 }, value: v, text: `${v} items` };
  },
  price: (rng) => {
    const v = Math.round(rng.next() * 10000) / 100;
    return { schema: { type: "number" }, value: v, text: `price ${v}` };
  },
  color: (rng) => {
    const v = rng.pick(COLORS);
    return { schema: { type: "string", enum: COLORS }, value: v, text: `colour ${v}` };
  },
  status: (rng) => {
    const opts = rng.pick(STATUSES);
    const v = rng.pick(opts);
    return { schema: { type: "string", enum: opts }, value: v, text: `status ${v}` };
  },
  active: (rng) => {
    const v = rng.chance(0.5);
    return { schema: { type: "boolean" }, value: v, text: v ? "it is active" : "it is not active" };
  },
  word: (_rng, ctx) => ({ schema: { type: "string" }, value: ctx.word, text: `the word ${ctx.word}` }),
  tags: (rng, ctx) => {
    const v = rng.sample(ctx.words, 1 + rng.int(3));
    return { schema: { type: "array", items: { type: "string" } }, value: v, text: `tags ${v.join(", ")}` };
  },
  nickname: (rng) => {
    const given = rng.chance(0.5);
    const v = given ? rng.pick(NAMES).toLowerCase() : null;
    return { schema: { type: ["string", "null"] }, value: v, text: given ? `nickname ${v}` : "no nickname" };
  },
};

function record(rng, ctx) {
  const keys = rng.sample(Object.keys(FIELDS), 1 + rng.int(4));
  const fields = keys.map((k) => [k, FIELDS[k](rng, ctx)]);
  if (rng.chance(0.2)) {
    const inner = rng.sample(["city", "name", "age"], 1 + rng.int(2)).map((k) => [k, FIELDS[k](rng, ctx)]);
    const key = rng.pick(["address", "owner", "details"]);
    fields.push([
      key,
      {
        schema: { type: "object", properties: Object.fromEntries(inner.map(([k, f]) => [k, f.schema])), required: inner.map(([k]) => k) },
        value: Object.fromEntries(inner.map(([k, f]) => [k, f.value])),
        text: `${key}: ${inner.map(([, f]) => f.text).join(", ")}`,
      },
    ]);
  }
  const schema = {
    type: "object",
    properties: Object.fromEntries(fields.map(([k, f]) => [k, f.schema])),
    required: fields.map(([k]) => k),
  };
  if (rng.chance(0.5)) schema.additionalProperties = false;
  return { schema, value: Object.fromEntries(fields.map(([k, f]) => [k, f.value])), text: fields.map(([, f]) => f.text).join("; ") };
}

const ASK = [
  (t) => `Extract the fields from this: ${t}.`,
  (t) => `Give me the data as JSON. ${t}.`,
  (t) => `${t}. Return it as a JSON object.`,
  (t) => `Fill in the record from the note: ${t}.`,
  (t) => `Turn this into JSON: ${t}`,
];

/** A JSON reply to a schema (or json_object mode naming the keys), values copied from the message. */
export function jsonFinishChat(rng, ctx) {
  const r = record(rng, ctx);
  const withSchema = rng.chance(0.75);
  const vars = { response_format: "json" };
  if (withSchema) vars.json_schema = r.schema;
  let content = rng.pick(ASK)(r.text);
  if (!withSchema) content += ` Keys: ${Object.keys(r.value).join(", ")}.`;
  const out = chatPromptAndReply(
    [
      { role: "user", content },
      { role: "assistant", content: pyJson(r.value) },
    ],
    vars,
  );
  return { task: "finish_json", ...out, schema: r.schema, value: r.value };
}

const TOOL_VERBS = ["create_record", "save_contact", "log_event", "update_profile", "book_trip", "add_item", "set_status", "lookup"];

/** A tool call whose arguments are copied from the message; 1-3 tools, auto / required / forced. */
export function toolFinishChat(rng, ctx) {
  const n = 1 + rng.int(3);
  const tools = rng.sample(TOOL_VERBS, n).map((name) => ({ name, rec: record(rng, ctx) }));
  const pick = rng.pick(tools);
  const toolObjects = tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: `${t.name.replace(/_/g, " ")}.`, parameters: t.rec.schema },
  }));
  const mode = rng.pick(["auto", "auto", "required", "forced"]);
  const content = `${rng.pick(["Please", "Use the tool to", "Call"])} ${pick.name.replace(/_/g, " ")}: ${pick.rec.text}.`;
  const call = { role: "assistant", content: "", tool_calls: [{ name: pick.name, arguments: pyJson(pick.rec.value) }] };
  const vars = { tools: toolObjects, tool_choice: mode === "forced" ? "required" : mode };
  if (mode === "forced") vars.forced_tool = pick.name;
  const out = chatPromptAndReply([{ role: "user", content }, call], vars);
  return { task: `finish_tool_${mode}`, ...out, schema: pick.rec.schema, value: pick.rec.value, tool: pick.name };
}

/** Hand-written structured prompts of the kind that looped before (issue 21), for the evaluation. */
export const STRUCTURED_EVAL_FIXED = [
  {
    content: "Give me a person with name and age.",
    schema: { type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name", "age"] },
  },
  { content: "Describe yourself as JSON.", schema: null },
  {
    content: "Where does Lena live? She lives at 4 Elm Road in Porto.",
    schema: {
      type: "object",
      properties: {
        address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } }, required: ["street", "city"] },
      },
      required: ["address"],
    },
  },
  {
    content: "Pick a number between 1 and 10.",
    schema: { type: "object", properties: { number: { type: "integer" } }, required: ["number"] },
  },
];
