import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ServeProcess, spawnTesseraServe } from "../helpers/serve-process.js";
import { newApiKey } from "../helpers/tessera.js";
import { convertedFixtures, HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const MODELS = ["sdar-tiny", "fast-dllm-v2-tiny"] as const;
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    // An enum keeps the random tiny model's arguments short: the grammar holds it to one of these.
    parameters: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Rome"] } }, required: ["city"] },
  },
};

interface ChatJson {
  model: string;
  choices: {
    message: { content: string | null; tool_calls?: { function: { name: string; arguments: string } }[] };
    finish_reason: string;
  }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

describe.skipIf(!HAVE_CONVERT_VENV)("converted models served by `tessera serve` from a models config", () => {
  let server: ServeProcess;
  const key = newApiKey();
  const scratch = mkdtempSync(join(tmpdir(), "tessera-serve-converted-"));

  beforeAll(async () => {
    const fx = await convertedFixtures();
    const entry = (id: string, kind: string, family: string, dir: string) => ({
      id,
      kind,
      family,
      version: "tiny",
      release_date: "2026-11-24",
      description: `${family}, converted by tessera convert (random tiny weights)`,
      model_dir: dir,
      serving_id: family,
    });
    writeFileSync(
      join(scratch, "models.config.json"),
      JSON.stringify({
        models: [
          entry("sdar-tiny", "text", "sdar", fx.models.sdar),
          entry("fast-dllm-v2-tiny", "text", "fast-dllm-v2", fx.models.fastDllm),
          entry("sdar-decisions", "decision", "sdar", fx.models.sdar),
          entry("fast-dllm-v2-decisions", "decision", "fast-dllm-v2", fx.models.fastDllm),
        ],
        latest: [],
      }),
    );
    server = await spawnTesseraServe(
      {
        TESSERA_MODELS_CONFIG: join(scratch, "models.config.json"),
        TESSERA_DATA_DIR: join(scratch, "data"),
        TESSERA_BOOTSTRAP_KEY: key,
        TESSERA_INTRA_OP_THREADS: "1",
      },
      120_000,
    );
  }, 600_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const post = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  it.each(MODELS)("%s: chat without streaming", async (model) => {
    const res = await post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 12 });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatJson;
    expect(body.model).toBe(model);
    expect(typeof body.choices[0]!.message.content).toBe("string");
    expect(["stop", "length"]).toContain(body.choices[0]!.finish_reason);
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(12);
  });

  it.each(MODELS)("%s: chat streamed as server-sent events", async (model) => {
    const res = await post("/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 12,
      stream: true,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.at(-1)).toBe("data: [DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { choices: { finish_reason: string | null }[] });
    expect(chunks.some((c) => c.choices[0]?.finish_reason !== null && c.choices[0]?.finish_reason !== undefined)).toBe(true);
  });

  it.each(MODELS)("%s: a forced tool call comes back as OpenAI tool_calls, parsed from the template's <tool_call>", async (model) => {
    const res = await post("/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [weatherTool],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 96,
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatJson;
    const choice = body.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls?.[0]?.function.name).toBe("get_weather");
    const args = JSON.parse(choice.message.tool_calls![0]!.function.arguments) as Record<string, unknown>;
    expect(["Paris", "Rome"]).toContain(args.city);
  });

  it.each(["sdar-decisions", "fast-dllm-v2-decisions"])(
    "%s: decisions with ordinary-token labels in the model's own chat format",
    async (model) => {
      const res = await post("/v1/systemone", {
        model,
        state: { order: "A-1092", note: "chairs before the desk" },
        questions: {
          expedite: { type: "noul", instructions: "Should this order be expedited?" },
          carrier: { type: "choice", instructions: "Which carrier?", criteria: { post: null, courier: "same day", freight: null } },
          effort: { type: "score", criteria: ["trivial", "some", "a lot"] },
        },
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { answers: Record<string, { noul?: number; probabilities?: Record<string, number> }> };
      expect(body.answers.expedite!.noul).toBeGreaterThan(0);
      expect(body.answers.expedite!.noul).toBeLessThan(1);
      const ps = Object.values(body.answers.carrier!.probabilities!);
      expect(Math.abs(ps.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-9);
      expect(Object.keys(body.answers.effort!.probabilities!)).toEqual(["0", "1", "2"]);
    },
  );
});
