// The playground's denoising view on a canvas model, in headless Chromium (Debian's `chromium`
// through playwright-core, as playground.test.ts): the embedded server serves the tiny
// converted DiffusionGemma; a chat shows each canvas's positions as noise, then accepted
// draft tokens, then the canvas the reply takes, and a line per finished canvas.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPlayground } from "../../web/build.js";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { openPage, watchDenoiseView } from "../helpers/browser.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const SHOTS = mkdtempSync(join(tmpdir(), "tessera-shots-"));

interface Seen {
  block: string;
  noise: number;
  accepted: number;
  committed: number;
  done: boolean;
}

const WATCH_CANVAS = watchDenoiseView(["noise", "accepted", "committed"]);

describe.skipIf(!HAVE_CONVERT_VENV)("playground: the denoising view of a canvas model", () => {
  let tessera: TestTessera;
  let browser: Browser;
  let page: Page;
  let pageErrors: string[] = [];

  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    await buildPlayground();
    tessera = await startTestTessera({ modelDir: fx.model });
    ({ browser, page, errors: pageErrors } = await openPage());
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await tessera?.close();
  });

  it("shows each canvas's draft tokens accepted or still noise per step, then the canvas the reply takes", async () => {
    await page.goto(`${tessera.url}/`);
    await page.getByTestId("api-key").fill(tessera.key);
    await expect.poll(() => page.locator("#chat-model").inputValue()).toBe("textmodel-26b");
    await page.fill("#chat-max-tokens", "64");
    await page.evaluate(WATCH_CANVAS);
    await page.getByTestId("chat-input").fill("Hello! How are you today?");
    await page.getByTestId("chat-input").press("Enter");
    await page.waitForSelector('[data-testid="chat-reply"][data-done="true"]', { state: "attached", timeout: 60_000 });

    const seen = (await page.evaluate("window.seen")) as Seen[];
    const canvasLength = 16; // the tiny checkpoint's canvas_length
    const during = seen.filter((s) => s.block !== "");
    // Every position of the strip is in one of the canvas's states: no mask cells.
    for (const s of during) expect(s.noise + s.accepted + s.committed).toBe(canvasLength);
    // A step with accepted tokens and noise side by side, and the first canvas taken whole at its last step.
    expect(during.some((s) => s.accepted > 0 && s.noise > 0)).toBe(true);
    expect(during.some((s) => s.block === "0" && s.committed === canvasLength)).toBe(true);
    // A cell says what it is: its token, and whether the step accepted or renoised it.
    const title = await page.locator('[data-testid="denoise-view"] .cell').first().getAttribute("title");
    expect(title).toMatch(/token \d+ · step \d+: (the canvas's final draft, taken by the reply|accepted|renoised \(still noise\))/);
    // A line per finished canvas: its steps, its tokens (the canvas length) and tokens per step.
    const rows = page.locator(".denoise-history tbody tr");
    expect(await rows.count()).toBeGreaterThan(0);
    for (const row of await rows.all()) {
      const [, steps, tokens, rate] = (await row.locator("td").allTextContents()).map(Number);
      expect(tokens).toBe(canvasLength);
      expect(steps).toBeGreaterThan(0);
      expect(rate).toBeCloseTo(tokens! / steps!, 1);
    }
    // The legend names the canvas's states instead of the mask model's forward ramp.
    expect(await page.locator(".denoise-legend:visible").textContent()).toMatch(/renoised.*accepted this step.*the canvas the reply takes/);
    expect(await page.locator(".denoise-status").textContent()).toMatch(/^Done: \d+ reply tokens in \d+ denoising forwards\.$/);
    await page.screenshot({ path: join(SHOTS, "playground-canvas.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  }, 120_000);
});
