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
