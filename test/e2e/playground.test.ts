// The playground page at `/`, driven in headless Chromium (Debian's `chromium` package through
// playwright-core; no browser download) against the embedded server serving the bundled model
// (models/tessera-bd-small): a key pasted, a chat whose blocks are seen masked then committed,
// a stopped reply, a decision read as percentages, the models listing, an API error as the API
// sent it, a narrow screen; no page error and no request to any other origin. Screenshots of
// each tab go to a temporary folder, or to docs/ with TESSERA_SCREENSHOTS=docs
// (`npm run screenshots`).
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPlayground } from "../../web/build.js";
import { failedLoad, openPage, watchDenoiseView } from "../helpers/browser.js";
import { REPO_ROOT, startTestTessera, type TestTessera } from "../helpers/tessera.js";

const SHOTS = process.env["TESSERA_SCREENSHOTS"] === "docs" ? join(REPO_ROOT, "docs") : mkdtempSync(join(tmpdir(), "tessera-shots-"));

let tessera: TestTessera;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let requested: string[] = [];

beforeAll(async () => {
  await buildPlayground();
  tessera = await startTestTessera({
    env: { TESSERA_MODELS_CONFIG: join(REPO_ROOT, "models.config.json"), TESSERA_INTRA_OP_THREADS: "2" },
  });
  ({ browser, page, errors: pageErrors, requested } = await openPage());
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await tessera?.close();
});

interface Seen {
  block: string;
  masked: number;
  committed: number;
  done: boolean;
}

// Code that runs in the page is given as text (this test is compiled without the DOM's types)
// and evaluated by the DevTools protocol: the page's CSP refuses string evaluation itself.

const WATCH_DENOISING = watchDenoiseView(["masked", "committed"]);

/** Elements that reach past the right edge of the viewport, named. */
const WIDER_THAN_SCREEN = `[...document.querySelectorAll("body *")]
  .filter((e) => e.offsetParent !== null && e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
  .map((e) => e.tagName.toLowerCase() + "." + e.className + " " + Math.round(e.getBoundingClientRect().right) + "px")`;

describe("playground", () => {
  it("serves the page at / with a strict CSP, its assets, and chats with the bundled model while the blocks denoise", async () => {
    const response = await page.goto(`${tessera.url}/`);
    expect(response!.status()).toBe(200);
    expect(response!.headers()["content-security-policy"]).toMatch(/^default-src 'self'/);
    await page.getByTestId("api-key").fill(tessera.key);
    await expect.poll(() => page.locator("#chat-model").inputValue()).toBe("textmodel-26b");
    await page.fill("#chat-max-tokens", "96");

    await page.evaluate(WATCH_DENOISING);
    await page.getByTestId("chat-input").fill("Write a short note about the weather.");
    await page.getByTestId("chat-input").press("Enter");
    const reply = page.locator('[data-testid="chat-reply"]');
    await page.waitForSelector('[data-testid="chat-reply"][data-done="true"]', { state: "attached", timeout: 90_000 });
    expect((await reply.textContent())!.length).toBeGreaterThan(0);
    expect(await reply.getAttribute("data-stopped")).toBeNull();

    const states = (await page.evaluate("window.seen")) as Seen[];
    // While the reply streams, a block is seen with masked cells, and then, in the same
    // block, cells that were masked are seen committed.
    const during = states.filter((s) => !s.done && s.block !== "");
    const maskedThenCommitted = during.some((s, i) =>
      during.slice(i + 1).some((later) => later.block === s.block && s.masked > later.masked && later.committed > s.committed),
    );
    expect(during.some((s) => s.masked > 0)).toBe(true);
    expect(maskedThenCommitted).toBe(true);
    expect(states.at(-1)!.committed).toBeGreaterThan(0);
    // The block history: forwards and tokens per forward of each finished block.
    const rows = page.locator(".denoise-history tbody tr");
    expect(await rows.count()).toBeGreaterThan(0);
    for (const row of await rows.all()) {
      const [block, forwards, tokens, rate] = (await row.locator("td").allTextContents()).map(Number);
      expect(block).toBeGreaterThanOrEqual(0);
      expect(forwards).toBeGreaterThan(0);
      expect(rate).toBeCloseTo(tokens! / forwards!, 1);
    }
    expect(await page.locator(".message.assistant .meta").last().textContent()).toMatch(
      /^(stop|length) · \d+ tokens · \d+ forwards · [\d.]+ s · x-service-request-id \S+$/,
    );
    // The input is empty again and the conversation holds the question.
    expect(await page.getByTestId("chat-input").inputValue()).toBe("");
    await page.screenshot({ path: join(SHOTS, "playground-chat.png"), fullPage: true });
  });

  it("Shift+Enter adds a new line; Esc stops a reply and the next one still runs", async () => {
    const input = page.getByTestId("chat-input");
    await page.fill("#chat-max-tokens", "2048");
    await input.fill("Tell me a long story");
    await input.press("Shift+Enter");
    expect(await input.inputValue()).toBe("Tell me a long story\n");
    await input.press("Enter");
    await page.waitForSelector('[data-testid="denoise-view"] [data-state="committed"]');
    await page.keyboard.press("Escape");
    await page.waitForSelector('[data-testid="chat-reply"][data-done="true"][data-stopped="true"]', { state: "attached", timeout: 30_000 });
    expect(await page.getByTestId("chat-send").isDisabled()).toBe(false);
    // The slot is freed: the server's busy gauge drops back to 0.
    await expect
      .poll(async () => {
        const metrics = await (await fetch(`${tessera.url}/metrics`)).text();
        return /tessera_generation_slots_busy\{[^}]*\} (\S+)/.exec(metrics)?.[1];
      })
      .toBe("0");
    await page.fill("#chat-max-tokens", "16");
    await input.fill("hi");
    await page.getByTestId("chat-send").click();
    await page.waitForSelector('[data-testid="chat-reply"][data-done="true"]:not([data-stopped])', { state: "attached", timeout: 60_000 });
  });

  it("runs a decision and shows each question's percentages and the request id", async () => {
    await page.getByTestId("tab-decisions").click();
    await expect.poll(() => page.locator("#decision-model").inputValue()).toBe("decisionmodel-latest");
    await page.click('[data-template="choice"]');
    await page.click('[data-template="score"]');
    const questions = JSON.parse(await page.getByTestId("decision-questions").inputValue()) as Record<string, { type: string }>;
    expect(Object.fromEntries(Object.entries(questions).map(([id, q]) => [id, q.type]))).toEqual({
      spam: "noul",
      topic: "choice",
      urgency: "score",
    });
    await page.getByTestId("decision-run").click();
    const result = page.getByTestId("decision-result");
    await page.waitForSelector('[data-testid="decision-result"] [data-question="urgency"]');
    const text = (await result.textContent())!;
    for (const id of ["spam", "topic", "urgency"]) expect(text).toContain(id);
    expect(text).toMatch(/x-service-request-id \S+/);
    expect(text).toMatch(/model decisionmodel-0\.1/);
    const percents = async (id: string) =>
      (await result.locator(`[data-question="${id}"] .bar-value`).allTextContents()).map((t) => Number(/^([\d.]+)%$/.exec(t)![1]));
    const spam = await percents("spam");
    expect(spam).toHaveLength(2);
    expect(spam[0]! + spam[1]!).toBeCloseTo(100, 0);
    const topic = await percents("topic");
    expect(topic).toHaveLength(3);
    expect(topic.reduce((a, b) => a + b, 0)).toBeCloseTo(100, 0);
    expect(await percents("urgency")).toHaveLength(3);
    expect(await result.locator('[data-question="urgency"]').textContent()).toMatch(/expected score \d\.\d\d \(0–2\) · confidence/);
    await page.screenshot({ path: join(SHOTS, "playground-decisions.png"), fullPage: true });
  });

  it("shows a validation error as the API sends it", async () => {
    await page.getByTestId("decision-questions").fill('{"q": {"type": "choice"}}');
    await page.getByTestId("decision-run").click();
    const error = page.locator("#decision-error");
    await error.waitFor({ state: "visible" });
    expect(await error.textContent()).toMatch(/^422 invalid_request_error/);
    expect(await error.textContent()).toContain("questions.q");
  });

  it("lists the models with descriptions and release dates", async () => {
    await page.getByTestId("tab-models").click();
    const rows = page.locator("#models-body tr");
    await expect.poll(() => rows.count()).toBe(3);
    const text = (await page.getByTestId("models-table").textContent())!;
    for (const name of ["textmodel-26b", "decisionmodel-0.1", "decisionmodel-latest", "2026-11-22", "tessera-bd-small"])
      expect(text).toContain(name);
    await page.screenshot({ path: join(SHOTS, "playground-models.png"), fullPage: true });
    for (const shot of ["chat", "decisions", "models"]) {
      expect(
        readFileSync(join(SHOTS, `playground-${shot}.png`))
          .subarray(1, 4)
          .toString(),
      ).toBe("PNG");
    }
  });

  it("shows a wrong key's 401 with its type, keeps the key out of storage unless asked", async () => {
    await page.getByTestId("api-key").fill("tsr_not_a_real_key");
    await page.click("#models-reload");
    const error = page.locator("#models-error");
    await expect.poll(() => error.textContent()).toMatch(/^401 authentication_error/);
    expect(await page.evaluate("sessionStorage.length")).toBe(0);
    await page.check("#remember-key");
    expect(await page.evaluate("Object.values(sessionStorage)")).toEqual(["tsr_not_a_real_key"]);
    await page.uncheck("#remember-key");
    expect(await page.evaluate("sessionStorage.length")).toBe(0);
    await page.getByTestId("api-key").fill(tessera.key);
  });

  it("is readable at a phone's width: nothing wider than the screen", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    for (const tab of ["chat", "decisions", "models"]) {
      await page.getByTestId(`tab-${tab}`).click();
      const wider = await page.evaluate(WIDER_THAN_SCREEN);
      expect(wider, tab).toEqual([]);
      expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    }
  });

  it("made no request to another origin and raised no page error", () => {
    const origin = new URL(tessera.url).origin;
    expect(requested.length).toBeGreaterThan(5);
    expect(requested.filter((url) => new URL(url).origin !== origin)).toEqual([]);
    // The console's only errors are Chromium's notes of the 422 and 401 the tests provoked.
    expect(pageErrors.filter((e) => !failedLoad(401).test(e) && !failedLoad(422).test(e))).toEqual([]);
  });
});
