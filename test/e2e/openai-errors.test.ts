// Errors the official `openai` client can read on every route: one body carries OpenAI's
// `error` and, on the System One routes, the `detail` their clients parse.
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { caughtApiError as caught, openaiClientFor, serveTesseraForFile } from "../helpers/openai.js";
import type { TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;

serveTesseraForFile((served) => ({ tessera } = served));
const clientWith = (apiKey: string) => openaiClientFor(tessera, apiKey, 30_000);

describe("readable errors with the openai client", () => {
  it("GET /v1/models with an unknown key: 401 the SDK reads, detail kept for System One clients", async () => {
    const err = await caught(clientWith("tsr_unknown").models.list());
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.message).not.toContain("no body");
    expect(err.type).toBe("authentication_error");
    expect(err.requestID).toMatch(/^req_/);
    const body = err.error as { message: string };
    expect(body.message.length).toBeGreaterThan(5);
    const raw = await tessera.fetch("/v1/models", { key: "tsr_unknown" });
    const json = (await raw.json()) as { detail: { error_type: string; message: string }; error: { type: string; message: string } };
    expect(json.detail).toEqual({ error_type: "authentication_error", message: json.error.message });
    expect(json.error.type).toBe("authentication_error");
  });

  it("POST /v1/systemone: a validation failure is a 422 whose message names the field", async () => {
    const err = await caught(
      clientWith(tessera.key).post("/systemone", { body: { model: "decisionmodel-latest", state: "x", questions: {} } }),
    );
    expect(err.status).toBe(422);
    expect(err.message).toMatch(/questions/);
    expect(err.type).toBe("invalid_request_error");
  });

  it("POST /v1/chat/completions: n = 2 is a 400 naming n", async () => {
    const err = await caught(
      clientWith(tessera.key).chat.completions.create({ model: "textmodel-26b", messages: [{ role: "user", content: "hi" }], n: 2 }),
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe("n");
    expect(err.message).toMatch(/only one choice/);
  });
});
