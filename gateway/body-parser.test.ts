import { afterAll, describe, expect, it } from "vitest";
import { createBodyParser } from "./body-parser.js";
import { HttpError } from "./errors.js";

// A low threshold, so that small bodies take the worker's path too.
const parser = createBodyParser({ workerFromBytes: 64 });
afterAll(() => parser.close());

const bytes = (text: string) => Buffer.from(text);
const big = (value: unknown) => bytes(JSON.stringify({ pad: "x".repeat(100), value }));

describe("body parser", () => {
  it("parses a body below the threshold inline and one above it on the worker, to the same value", async () => {
    expect(parser.parse(bytes('{"a":1}'))).toEqual({ a: 1 });
    await expect(parser.parse(big([1, "two", null]))).resolves.toEqual({ pad: "x".repeat(100), value: [1, "two", null] });
  });

  it("answers the worker's refusals as the same HttpError as inline parsing", async () => {
    const broken = bytes(`{"pad": "${"x".repeat(100)}", "value": [1, 2`);
    const refused = await Promise.resolve(parser.parse(broken)).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(HttpError);
    expect((refused as HttpError).options.code).toBe("json_invalid");
    const deep = bytes(`{"pad": "${"x".repeat(100)}", "v": ${"[".repeat(200)}${"]".repeat(200)}}`);
    const tooDeep = await Promise.resolve(parser.parse(deep)).catch((err: unknown) => err);
    expect((tooDeep as HttpError).options.code).toBe("json_too_deep");
  });

  it("prepares a chat body on the worker (validation included)", async () => {
    const chat = { model: "m", messages: [{ role: "user", content: "y".repeat(200) }] };
    const prepared = (await parser.parse(bytes(JSON.stringify(chat)), "chat")) as { ok: boolean; request: { messages: unknown[] } };
    expect(prepared.ok).toBe(true);
    expect(prepared.request.messages).toHaveLength(1);
    const invalid = (await parser.parse(bytes(JSON.stringify({ ...chat, messages: [] })), "chat")) as {
      ok: boolean;
      error: { param: string };
    };
    expect(invalid).toMatchObject({ ok: false, error: { param: "messages" } });
  });

  it("parses many bodies at once, each answered with its own value", async () => {
    const values = await Promise.all(Array.from({ length: 20 }, (_, i) => parser.parse(big(i))));
    expect(values.map((v) => (v as { value: number }).value)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});
