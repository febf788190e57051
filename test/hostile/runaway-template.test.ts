// A model directory whose chat template runs away on longer conversations (issue 38, item 2:
// range(10**10) on a third message ended the whole process in V8's "invalid size error"): that
// request is refused with a 400 naming the budget, and the same server answers the next one.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTinyServe, type TinyServe } from "../helpers/hostile.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";

const RUNAWAY = "{% if messages|length > 2 %}{% for i in range(10**10) %}{% endfor %}{% endif %}";
const scratch = mkdtempSync(join(tmpdir(), "tessera-runaway-template-"));
let serve: TinyServe;

beforeAll(async () => {
  const modelDir = join(scratch, "model");
  cpSync(TINY_MODEL_DIR, modelDir, { recursive: true });
  const file = join(modelDir, "tokenizer_config.json");
  const config = JSON.parse(readFileSync(file, "utf8")) as { chat_template: string };
  config.chat_template = RUNAWAY + config.chat_template;
  writeFileSync(file, JSON.stringify(config));
  serve = await startTinyServe("runaway-template", modelDir);
}, 90_000);

afterAll(async () => {
  await serve?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const chat = (turns: number) =>
  fetch(`${serve.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${serve.key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "textmodel-26b",
      max_tokens: 2,
      messages: Array.from({ length: turns }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `turn ${i}` })),
    }),
  });

describe("a chat template that runs away", () => {
  it("fails only the request that reaches the loop, with a 400; the server answers the next", { timeout: 60_000 }, async () => {
    expect((await chat(1)).status).toBe(200);
    const started = Date.now();
    const refused = await chat(3);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toMatch(/chat template cannot render this conversation: range\(\) of 10000000000 items/);
    expect((await chat(1)).status).toBe(200);
    expect(serve.child.exitCode).toBeNull();
  });
});
