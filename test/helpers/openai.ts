import OpenAI from "openai";
import { afterAll, beforeAll, expect } from "vitest";
import { startTestTessera, type TestTessera, type TestTesseraOptions } from "./tessera.js";

/** The official openai client of `tessera` with `apiKey`: no retries, so each call is one request. */
export function openaiClientFor(tessera: Pick<TestTessera, "url">, apiKey: string, timeout = 60_000): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout });
}

export interface ServedTessera {
  tessera: TestTessera;
  /** The openai client of the server's bootstrap key. */
  client: OpenAI;
}

/**
 * Starts a Tessera (the tiny model unless told) before the file's tests and closes it after
 * them; `take` receives it once it is up.
 */
export function serveTesseraForFile(take: (served: ServedTessera) => void, options: TestTesseraOptions = { models: "tiny" }): void {
  let tessera: TestTessera | undefined;
  beforeAll(async () => {
    tessera = await startTestTessera(options);
    take({ tessera, client: openaiClientFor(tessera, tessera.key) });
  }, 120_000);
  afterAll(async () => {
    await tessera?.close();
  });
}

/** The openai APIError `work` rejects with (it must reject with one). */
export async function caughtApiError(work: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.APIError);
  return err as InstanceType<typeof OpenAI.APIError>;
}

/**
 * `count` chat requests at once, every other one streamed: each settles as 200 or the error the
 * client threw (an overloaded server's 529s among them).
 */
export function chatBurst(
  client: OpenAI,
  params: OpenAI.ChatCompletionCreateParamsNonStreaming,
  count: number,
): Promise<(200 | unknown)[]> {
  const attempts = Array.from({ length: count }, (_, i) =>
    i % 2 === 0
      ? client.chat.completions.create(params).then(
          () => 200,
          (e: unknown) => e,
        )
      : client.chat.completions
          .create({ ...params, stream: true })
          .then(async (stream) => {
            for await (const _ of stream) void _;
            return 200;
          })
          .catch((e: unknown) => e),
  );
  return Promise.all(attempts);
}
