// The prompt × schema pairs of bench/structured.ts: structured and tool-call requests as a new
// user writes them (no maxLength or maxItems; the server must still finish the value).
// Extraction, classification, nested arrays of objects, enums, integers, optional and nullable
// fields, tool calls with 1–3 tools under a named, required or auto tool_choice.
import type OpenAI from "openai";

type Body = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
export interface StructuredCase {
  name: string;
  body: Omit<Body, "model">;
  /** The schema the reply (or each call's arguments) must validate against, by tool name for calls. */
  schema: object | Record<string, object>;
  kind: "json_schema" | "json_object" | "tools";
}

const str = { type: "string" };
const int = { type: "integer" };
const obj = (properties: Record<string, object>, required = Object.keys(properties)) => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});

const PERSON = obj({ name: str, age: int });
const CONTACT = obj({ name: str, email: str, phone: { type: ["string", "null"] } });
const SENTIMENT = obj({ sentiment: { enum: ["positive", "negative", "neutral"] }, confidence: { type: "number" } });
const TOPIC = obj({ topic: { enum: ["sports", "politics", "science", "music", "food", "travel"] }, reason: str });
const RECIPE = obj({ title: str, servings: int, ingredients: { type: "array", items: obj({ item: str, quantity: str }) } });
const ADDRESS = obj({ name: str, address: obj({ street: str, city: str, country: str, postal_code: str }) });
const EVENT = obj({ title: str, date: str, attendees: { type: "array", items: str }, location: { type: ["string", "null"] } });
const MOVIE = obj(
  { title: str, year: int, genres: { type: "array", items: { enum: ["drama", "comedy", "action", "horror", "sci-fi"] } } },
  ["title", "year"],
);
const STEPS = obj({ steps: { type: "array", items: obj({ explanation: str, output: str }) }, final_answer: str });
const BOOK = obj({ title: str, author: str, pages: { type: "integer", minimum: 1 }, rating: { type: "integer", minimum: 1, maximum: 5 } });
const PRODUCT = obj({ name: str, price: { type: "number" }, in_stock: { type: "boolean" }, tags: { type: "array", items: str } }, [
  "name",
  "price",
]);
const COUNTER = { type: "integer" };
const YESNO = obj({ answer: { type: "boolean" }, explanation: str });
const TEAM = obj({ team: str, members: { type: "array", items: obj({ name: str, role: str, years: int }) } });
const WEATHER = obj({ city: str, unit: { enum: ["celsius", "fahrenheit"] } }, ["city"]);
const SEARCH = obj({ query: str, max_results: { type: "integer", minimum: 1, maximum: 20 } }, ["query"]);
const EMAIL = obj({ to: str, subject: str, body: str });
const CALC = obj({ expression: str });
const TIME = obj({ timezone: str });

const schemaCase = (name: string, prompt: string, schema: object): StructuredCase => ({
  name,
  kind: "json_schema",
  schema,
  body: {
    messages: [{ role: "user", content: prompt }],
    response_format: {
      type: "json_schema",
      json_schema: { name: name.replace(/\W/g, "_"), schema: schema as Record<string, unknown>, strict: true },
    },
  },
});

const objectCase = (name: string, prompt: string): StructuredCase => ({
  name,
  kind: "json_object",
  schema: { type: "object" },
  body: { messages: [{ role: "user", content: prompt }], response_format: { type: "json_object" } },
});

const tool = (name: string, parameters: object, description: string): OpenAI.Chat.ChatCompletionTool => ({
  type: "function",
  function: { name, description, parameters: parameters as Record<string, unknown> },
});
const TOOLS = {
  get_weather: tool("get_weather", WEATHER, "Current weather in a city"),
  web_search: tool("web_search", SEARCH, "Search the web"),
  send_email: tool("send_email", EMAIL, "Send an email"),
  calculator: tool("calculator", CALC, "Evaluate an arithmetic expression"),
  get_time: tool("get_time", TIME, "Current time in a timezone"),
};
type ToolName = keyof typeof TOOLS;
const PARAMS: Record<ToolName, object> = { get_weather: WEATHER, web_search: SEARCH, send_email: EMAIL, calculator: CALC, get_time: TIME };

const toolCase = (name: string, prompt: string, tools: ToolName[], choice: "auto" | "required" | ToolName): StructuredCase => ({
  name,
  kind: "tools",
  schema: Object.fromEntries(tools.map((t) => [t, PARAMS[t]])),
  body: {
    messages: [{ role: "user", content: prompt }],
    tools: tools.map((t) => TOOLS[t]),
    tool_choice: choice === "auto" || choice === "required" ? choice : { type: "function", function: { name: choice } },
  },
});

export const STRUCTURED_CASES: StructuredCase[] = [
  schemaCase("person", "Give me a person with name and age.", PERSON),
  schemaCase("person from text", "Extract the person: Maria Lopez is a 34-year-old architect from Seville.", PERSON),
  schemaCase("contact", "Extract the contact details: John Smith, john@example.com, no phone.", CONTACT),
  schemaCase("contact 2", "Extract the contact: Aiko Tanaka, aiko.t@mail.jp, +81 3 1234 5678.", CONTACT),
  schemaCase("sentiment", "Classify the sentiment: I loved this movie, it was wonderful!", SENTIMENT),
  schemaCase("sentiment 2", "Classify the sentiment: The food was cold and the waiter was rude.", SENTIMENT),
  schemaCase("topic", "What is the topic of: The striker scored twice in the final minutes.", TOPIC),
  schemaCase("topic 2", "What is the topic of: Researchers found water ice on the moon.", TOPIC),
  schemaCase("recipe", "Give me a simple pancake recipe.", RECIPE),
  schemaCase("recipe 2", "Write a recipe for a tomato salad.", RECIPE),
  schemaCase("address", "Give me a fictional person with a full postal address.", ADDRESS),
  schemaCase("address 2", "Extract: Hans Müller lives at Hauptstraße 5, 10115 Berlin, Germany.", ADDRESS),
  schemaCase("event", "Create a calendar event for a team lunch on Friday with Ana and Bo.", EVENT),
  schemaCase("event 2", "Plan a birthday party event.", EVENT),
  schemaCase("movie", "Describe a famous science fiction movie.", MOVIE),
  schemaCase("movie 2", "Tell me about the movie Titanic.", MOVIE),
  schemaCase("steps", "Solve 8x + 7 = -23 step by step.", STEPS),
  schemaCase("steps 2", "How many minutes are in a day? Show your steps.", STEPS),
  schemaCase("book", "Recommend a classic novel.", BOOK),
  schemaCase("book 2", "Describe the book Moby Dick.", BOOK),
  schemaCase("product", "Describe a product for sale in a hardware store.", PRODUCT),
  schemaCase("integer", "How many legs does a spider have?", COUNTER),
  schemaCase("integer 2", "Pick a number between 1 and 100.", COUNTER),
  schemaCase("yes/no", "Is the sky blue? Answer as JSON.", YESNO),
  schemaCase("team", "Describe a small software team of three people.", TEAM),
  schemaCase("team 2", "List the members of a band and their roles.", TEAM),
  objectCase("json_object describe", "Describe yourself as JSON."),
  objectCase("json_object city", "Give facts about Paris as JSON."),
  objectCase("json_object list", "Return a JSON object with a list of three fruits."),
  objectCase("json_object user", "Create a JSON user profile."),
  objectCase("json_object config", "Write a JSON config for a web server."),
  toolCase("auto weather", "What is the weather in Madrid? Use the tool, then answer.", ["get_weather"], "auto"),
  toolCase("auto search", "Search the web for the tallest building in the world.", ["web_search", "get_weather"], "auto"),
  toolCase("auto 3 tools", "Email my boss that I am late.", ["send_email", "web_search", "get_time"], "auto"),
  toolCase("auto time", "What time is it in Tokyo?", ["get_time", "get_weather"], "auto"),
  toolCase("required weather", "What is the weather in Oslo?", ["get_weather"], "required"),
  toolCase("required 2 tools", "What is 17 times 23?", ["calculator", "web_search"], "required"),
  toolCase("required 3 tools", "Send an email to ana@example.com about the meeting.", ["send_email", "get_time", "calculator"], "required"),
  toolCase("named weather", "Weather in Lisbon, in fahrenheit please.", ["get_weather"], "get_weather"),
  toolCase("named search", "Find recent news about electric cars.", ["web_search", "get_weather"], "web_search"),
  toolCase("named email", "Tell the team the release is delayed.", ["send_email", "get_time"], "send_email"),
  toolCase("named calc", "Compute the area of a circle of radius 3.", ["calculator"], "calculator"),
  toolCase("named time", "Time in New York?", ["get_time", "calculator", "web_search"], "get_time"),
  toolCase("auto calc", "What is 2 to the power of 10?", ["calculator"], "auto"),
];
