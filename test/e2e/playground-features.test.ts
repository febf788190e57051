// The playground's chat features in headless Chromium against the tiny test model (fast; its
// text is noise, the shapes are what is checked): thinking shown apart, JSON mode with a
// schema, a tool call shown and answered with a tool result, model text never rendered as
// HTML, a 429 shown with its type and retry-after, and Send right after a key waiting for the
// model list.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPlayground } from "../../web/build.js";
import { failedLoad, openPage } from "../helpers/browser.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let browser: Browser;
let page: Page;
let errors: string[] = [];

beforeAll(async () => {
  await buildPlayground();
  tessera = await startTestTessera({ models: "tiny" });
  ({ browser, page, errors } = await openPage());
  await page.goto(`${tessera.url}/`);
  await page.getByTestId("api-key").fill(tessera.key);
  await page.waitForSelector('#chat-model option[value="textmodel-26b"]', { state: "attached" });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await tessera?.close();
});

const lastReply = () => page.locator(".message.assistant").last();

async function send(text: string): Promise<void> {
  const replies = await page.locator(".message.assistant").count();
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("chat-send").click();
  await expect.poll(() => page.locator(".message.assistant").count()).toBe(replies + 1);
  await page.waitForSelector('[data-testid="chat-reply"][data-done="true"]', { state: "attached", timeout: 30_000 });
}

describe("playground chat features (tiny model)", () => {
  it("shows thinking apart from the reply", async () => {
    await page.fill("#chat-max-tokens", "64");
    await page.check("#chat-thinking");
    await send("hi");
    const reasoning = lastReply().locator(".reasoning-text");
    expect((await reasoning.textContent())!.length).toBeGreaterThan(0);
    expect(await lastReply().getByTestId("chat-reply").textContent()).not.toContain("</think>");
    await page.uncheck("#chat-thinking");
  });

  it("JSON mode with a schema: the reply is JSON", async () => {
    await page.click("#chat-clear");
    await page.selectOption("#chat-json-mode", "json_schema");
    await page.fill(
      "#chat-schema",
      '{"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"], "additionalProperties": false}',
    );
    await page.fill("#chat-max-tokens", "96");
    await send("Which city? Answer in JSON.");
    const content = (await lastReply().getByTestId("chat-reply").textContent())!;
    expect(["Paris", "Rome"]).toContain((JSON.parse(content) as { city: unknown }).city);
    await page.selectOption("#chat-json-mode", "off");
  });

  it("a bad schema is refused on the page, naming it, before anything is sent", async () => {
    await page.selectOption("#chat-json-mode", "json_schema");
    await page.fill("#chat-schema", "{type: object}");
    await page.getByTestId("chat-input").fill("x");
    await page.getByTestId("chat-send").click();
    await expect.poll(() => page.locator("#chat-error").textContent()).toMatch(/JSON schema is not valid JSON/);
    await page.selectOption("#chat-json-mode", "off");
  });

  it("a required tool: the call is shown, and the next message is sent as its result", async () => {
    await page.click("#chat-clear");
    await page.click("#chat-add-tool");
    await page.selectOption("#chat-tool-choice", "required");
    await page.fill("#chat-max-tokens", "128");
    await send("What is the weather in Paris?");
    await expect.poll(() => lastReply().locator(".tool-call code").textContent()).toMatch(/^get_weather\(\{.*\}\)$/s);
    expect(await lastReply().locator(".meta").textContent()).toMatch(/^tool_calls · /);
    expect(await page.locator("#chat-input-label").textContent()).toBe("Result of get_weather");

    await page.selectOption("#chat-tool-choice", "none");
    const body = page.waitForRequest((r) => r.url().endsWith("/v1/chat/completions")).then((r) => r.postDataJSON());
    await send('{"temperature": 21}');
    const messages = ((await body) as { messages: { role: string; tool_call_id?: string }[] }).messages;
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(messages[2]!.tool_call_id).toMatch(/\S/);
    expect(await page.locator(".message.tool .role").textContent()).toBe("result of get_weather");
    expect(await page.locator("#chat-input-label").textContent()).toBe("Message");
  });

  it("text is text: markup in a message is shown, never made into elements", async () => {
    await page.click("#chat-clear");
    await page.fill("#chat-max-tokens", "16");
    await send('<img src="x" onerror="window.hacked = 1"><b>bold</b>');
    expect(await page.locator("#chat-log img, #chat-log b").count()).toBe(0);
    expect(await page.locator(".message.user .text").textContent()).toBe('<img src="x" onerror="window.hacked = 1"><b>bold</b>');
    expect(await page.evaluate("window.hacked")).toBeUndefined();
  });

  it("a 429 over the key's per-minute limit is shown with its type, code and retry-after", async () => {
    // The listing and the send must fall in one clock-minute window (rate windows are clock minutes).
    await roomInThisMinute(20_000);
    const limited = await tessera.createKey({ rpm: 1 });
    await page.getByTestId("api-key").fill(limited.apiKey);
    // The models listing (after the key settles) spends the one request of this minute.
    await page.waitForResponse((r) => r.url().endsWith("/v1/models"));
    await page.getByTestId("chat-input").fill("hello");
    await page.getByTestId("chat-send").click();
    const error = page.locator("#chat-error");
    await expect
      .poll(() => error.textContent())
      .toMatch(/^429 rate_limit_error \(rate_limit_exceeded\) .*retry after \d+ s · x-service-request-id req_\S+$/s);
    expect(await page.getByTestId("chat-reply").getAttribute("data-done")).toBe("true");
  });

  it("Send pressed right after pasting a key waits for the model list; an error shown before the key clears once it loads", async () => {
    const fresh = await browser.newPage();
    try {
      await fresh.goto(`${tessera.url}/`);
      await fresh.fill("#chat-max-tokens", "8");
      await fresh.getByTestId("chat-input").fill("Hello there");
      await fresh.getByTestId("chat-send").click();
      await expect.poll(() => fresh.locator("#chat-error").textContent()).toMatch(/No model to talk to/);

      await fresh.getByTestId("api-key").fill(tessera.key);
      await expect.poll(() => fresh.locator("#chat-error").isHidden()).toBe(true);

      // A second page: key and Send at once, before the debounced listing has even started.
      const second = await browser.newPage();
      try {
        await second.goto(`${tessera.url}/`);
        await second.fill("#chat-max-tokens", "8");
        await second.getByTestId("api-key").fill(tessera.key);
        await second.getByTestId("chat-input").fill("Hello there");
        await second.getByTestId("chat-send").click();
        await second.waitForSelector('[data-testid="chat-reply"][data-done="true"]', { state: "attached", timeout: 30_000 });
        expect(await second.locator("#chat-error").isHidden()).toBe(true);
        expect(await second.locator("#chat-model").inputValue()).toBe("textmodel-26b");
      } finally {
        await second.close();
      }
    } finally {
      await fresh.close();
    }
  });

  it("raised no page error (Chromium notes the 429 it was answered)", () => {
    expect(errors.filter((e) => !failedLoad(429).test(e))).toEqual([]);
  });
});
