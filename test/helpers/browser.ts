// Headless Chromium for the playground's browser tests: Debian's `chromium` package driven by
// playwright-core (never a browser download), with the page's errors and every request it
// makes recorded.
import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

export const CHROMIUM = process.env["TESSERA_CHROMIUM"] ?? "/usr/bin/chromium";

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--headless",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export interface RecordedPage {
  browser: Browser;
  page: Page;
  /** Uncaught exceptions and console errors, as text. */
  errors: string[];
  /** The URL of every request the page made. */
  requested: string[];
}

export async function openPage(viewport = { width: 1280, height: 900 }): Promise<RecordedPage> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (see .ci/run)`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const page = await (await browser.newContext({ viewport })).newPage();
  const errors: string[] = [];
  const requested: string[] = [];
  page.on("pageerror", (err) => errors.push(`pageerror: ${err.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`);
  });
  page.on("request", (request) => requested.push(request.url()));
  return { browser, page, errors, requested };
}

/** Chromium's console note of a response with this status (the page shows the error itself). */
export const failedLoad = (status: number) =>
  new RegExp(`^console: Failed to load resource: the server responded with a status of ${status} `);

/**
 * Page code (given as text: the page's CSP refuses string evaluation, and the tests are compiled
 * without the DOM's types) that records in `window.seen`, after every change of the denoising
 * view, its block, how many cells are in each of `states` (a field per state) and whether the
 * reply finished.
 */
export function watchDenoiseView(states: readonly string[]): string {
  const counts = states
    .map((s) => `${JSON.stringify(s)}: view.querySelectorAll('[data-state=${JSON.stringify(s)}]').length,`)
    .join("\n      ");
  return `(() => {
  const view = document.querySelector('[data-testid="denoise-view"]');
  window.seen = [];
  new MutationObserver(() => {
    const reply = document.querySelector('[data-testid="chat-reply"]');
    window.seen.push({
      block: view.dataset.block ?? "",
      ${counts}
      done: reply?.getAttribute("data-done") === "true",
    });
  }).observe(view, { subtree: true, childList: true, attributes: true });
})()`;
}
