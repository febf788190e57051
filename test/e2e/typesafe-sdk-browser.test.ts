// The official TypeSafe JavaScript SDK in headless Chromium, bundled for the page by esbuild,
// calling Tessera across origins with CORS on: its own headers (x-typesafe-sdk,
// x-typesafe-runtime, and x-typesafe-retry-count on retries) pass the preflight, and the page
// reads the request id from every answer, errors included.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPage, type RecordedPage } from "../helpers/browser.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";
import { REPO_ROOT, startTestTessera, type TestTessera } from "../helpers/tessera.js";

/** The SDK as one script that sets `window.TypeSafe`. */
async function bundleSdk(): Promise<string> {
  const out = await build({
    stdin: { contents: 'export * from "@typesafe-ai/sdk";', resolveDir: REPO_ROOT, loader: "js" },
    bundle: true,
    format: "iife",
    globalName: "TypeSafe",
    platform: "browser",
    write: false,
    logLevel: "silent",
  });
  return out.outputFiles[0]!.text;
}

/** Runs in the page: the SDK's calls, each attempt of its fetch counted. */
const PAGE_RUN = `async ({ url, key, limitedKey }) => {
  const { TypeSafeClient, choice, noul, score } = window.TypeSafe;
  const statuses = [];
  const client = (apiKey) =>
    new TypeSafeClient({
      apiKey,
      baseURL: url,
      dangerouslyAllowBrowser: true,
      logLevel: "off",
      timeout: 60000,
      retry: { maxRetryAfterMs: 0, backoffInitialMs: 10 },
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        statuses.push(res.status);
        return res;
      },
    });
  const failure = async (work) => {
    try {
      await work;
      return null;
    } catch (e) {
      return { name: e.constructor.name, status: e.status, message: e.message, requestId: e.requestId ?? null };
    }
  };
  let refused = null;
  try {
    new TypeSafeClient({ apiKey: key, baseURL: url });
  } catch (e) {
    refused = e.constructor.name;
  }
  const ok = await client(key)
    .systemOne({
      state: { ticket: "I was charged twice." },
      questions: {
        urgent: noul("Is this urgent?"),
        topic: choice("What is it about?", { billing: null, technical: null }),
        mood: score("How upset?", [{ label: "calm" }, { label: "angry" }, null]),
      },
    })
    .withResponse();
  const badKey = await failure(client("tsr_unknown").systemOne({ state: "s", questions: { q: noul() } }));
  statuses.length = 0;
  const limited = client(limitedKey);
  await limited.systemOne({ state: "s", questions: { q: noul() } });
  const limitedError = await failure(limited.systemOne({ state: "s", questions: { q: noul() } }));
  return { refused, requestId: ok.requestId ?? null, answers: ok.data.answers, badKey, limitedError, limitedStatuses: statuses };
}`;

interface PageResult {
  refused: string | null;
  requestId: string | null;
  answers: { urgent: { noul: number }; topic: { choice: string }; mood: { legend: Record<string, string> } };
  badKey: { name: string; status: number; message: string; requestId: string | null };
  limitedError: { name: string; status: number; requestId: string | null };
  limitedStatuses: number[];
}

describe("@typesafe-ai/sdk in a browser (headless Chromium, CORS on)", () => {
  let pageServer: Server;
  let origin: string;
  let tessera: TestTessera;
  let browser: RecordedPage | undefined;

  beforeAll(async () => {
    const sdk = await bundleSdk();
    const html = `<!doctype html><meta charset="utf-8"><title>sdk</title><script>${sdk}</script>`;
    pageServer = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(html);
    });
    await new Promise<void>((resolve) => pageServer.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    tessera = await startTestTessera({ models: "tiny", env: { TESSERA_CORS_ORIGINS: origin } });
  }, 120_000);
  afterAll(async () => {
    await browser?.browser.close();
    await tessera?.close();
    await new Promise((resolve) => pageServer?.close(resolve));
  });

  it("answers the page's calls, retries a 429 with x-typesafe-retry-count, and exposes the request id", async () => {
    const limited = await tessera.createKey({ rpm: 1 });
    browser = await openPage();
    await browser.page.goto(origin);
    await roomInThisMinute(20_000);
    const run = await browser.page.evaluateHandle(PAGE_RUN);
    const result = (await run.evaluate((fn: unknown, args) => (fn as (a: typeof args) => Promise<unknown>)(args), {
      url: tessera.url,
      key: tessera.key,
      limitedKey: limited.apiKey,
    })) as PageResult;

    expect(result.refused).toBe("TypeSafeError"); // without dangerouslyAllowBrowser
    expect(result.requestId).toMatch(/^req_[0-9a-f]{32}$/);
    expect(result.answers.urgent.noul).toBeGreaterThan(0);
    expect(["billing", "technical"]).toContain(result.answers.topic.choice);
    expect(result.answers.mood.legend).toEqual({ "0": '{"label":"calm"}', "1": '{"label":"angry"}', "2": "" });
    expect(result.badKey).toMatchObject({ name: "AuthenticationError", status: 401, requestId: expect.stringMatching(/^req_/) });
    expect(result.badKey.message).toMatch(/^401 /);
    // The retries carry x-typesafe-retry-count: a preflight refusing it would fail them as connection errors.
    expect(result.limitedError).toMatchObject({ name: "RateLimitError", status: 429, requestId: expect.stringMatching(/^req_/) });
    expect(result.limitedStatuses).toEqual([200, 429, 429, 429]);
    // Chromium's own notes of the refused answers (401, 429) are the only console errors.
    expect(browser.errors.filter((e) => !/status of (401|429)/.test(e))).toEqual([]);
  });
});
