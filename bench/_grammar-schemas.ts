// Real-world JSON schemas for bench/grammar.ts's compile times: the shapes of OpenAI's
// structured-output cookbook (extraction, reasoning steps, recursive UI, moderation), a
// 20-property record, nested arrays, and common tool parameters.
const str = { type: "string" };
const strs = { type: "array", items: str };

const twentyProperties = Object.fromEntries(
  [
    ["id", { type: "integer" }],
    ["first_name", str],
    ["last_name", str],
    ["email", { type: "string", format: "email" }],
    ["phone", { type: ["string", "null"] }],
    ["age", { type: "integer", minimum: 0, maximum: 150 }],
    ["country", { enum: ["US", "GB", "DE", "FR", "JP", "IN", "BR", "other"] }],
    ["city", str],
    ["street", str],
    ["postal_code", { type: "string", pattern: "^[0-9A-Z -]{3,10}$" }],
    ["is_active", { type: "boolean" }],
    ["signup_date", { type: "string", format: "date" }],
    ["plan", { enum: ["free", "pro", "enterprise"] }],
    ["seats", { type: "integer", minimum: 1, maximum: 1000 }],
    ["monthly_spend", { type: "number" }],
    ["tags", strs],
    ["referrer", { type: ["string", "null"] }],
    ["notes", str],
    ["score", { type: "number" }],
    ["manager_id", { type: ["integer", "null"] }],
  ].map(([k, v]) => [k, v]),
);

export const REAL_WORLD_SCHEMAS: Record<string, object> = {
  research_paper: {
    type: "object",
    properties: { title: str, authors: strs, abstract: str, keywords: strs },
    required: ["title", "authors", "abstract", "keywords"],
    additionalProperties: false,
  },
  math_reasoning: {
    type: "object",
    properties: {
      steps: {
        type: "array",
        items: {
          type: "object",
          properties: { explanation: str, output: str },
          required: ["explanation", "output"],
          additionalProperties: false,
        },
      },
      final_answer: str,
    },
    required: ["steps", "final_answer"],
    additionalProperties: false,
  },
  ui_component: {
    type: "object",
    properties: {
      type: { type: "string", enum: ["div", "button", "header", "section", "field", "form"] },
      label: str,
      children: { type: "array", items: { $ref: "#" } },
      attributes: {
        type: "array",
        items: { type: "object", properties: { name: str, value: str }, required: ["name", "value"], additionalProperties: false },
      },
    },
    required: ["type", "label", "children", "attributes"],
    additionalProperties: false,
  },
  moderation: {
    type: "object",
    properties: {
      is_violating: { type: "boolean" },
      category: { anyOf: [{ enum: ["violence", "sexual", "self_harm"] }, { type: "null" }] },
      explanation_if_violating: { type: ["string", "null"] },
    },
    required: ["is_violating", "category", "explanation_if_violating"],
    additionalProperties: false,
  },
  customer_record_20: {
    type: "object",
    properties: twentyProperties,
    required: Object.keys(twentyProperties),
    additionalProperties: false,
  },
  nested_arrays: {
    type: "object",
    properties: {
      matrix: { type: "array", items: { type: "array", items: { type: "array", items: { type: "number" } } } },
      orders: {
        type: "array",
        items: {
          type: "object",
          properties: {
            order_id: str,
            lines: {
              type: "array",
              items: {
                type: "object",
                properties: { sku: str, quantity: { type: "integer", minimum: 1 }, options: strs },
                required: ["sku", "quantity"],
              },
            },
          },
          required: ["order_id", "lines"],
        },
      },
    },
    required: ["matrix", "orders"],
  },
  entities: {
    type: "object",
    properties: {
      people: {
        type: "array",
        items: { type: "object", properties: { name: str, role: str, organization: { type: ["string", "null"] } }, required: ["name"] },
      },
      places: strs,
      dates: { type: "array", items: { type: "string", pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" } },
    },
    required: ["people", "places", "dates"],
  },
  get_weather: {
    type: "object",
    properties: {
      location: { type: "string", description: "City and country" },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    },
    required: ["location", "unit"],
    additionalProperties: false,
  },
  calendar_event: {
    type: "object",
    properties: { name: str, date: { type: "string", format: "date" }, participants: strs },
    required: ["name", "date", "participants"],
    additionalProperties: false,
  },
  product_catalog: {
    type: "object",
    $defs: {
      price: {
        type: "object",
        properties: { amount: { type: "number" }, currency: { enum: ["USD", "EUR", "GBP"] } },
        required: ["amount", "currency"],
      },
      product: {
        type: "object",
        properties: { name: str, price: { $ref: "#/$defs/price" }, variants: { type: "array", items: { $ref: "#/$defs/product" } } },
        required: ["name", "price"],
      },
    },
    properties: { products: { type: "array", items: { $ref: "#/$defs/product" } } },
    required: ["products"],
  },
};
