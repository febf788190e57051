// A canvas model's decisions are admitted as a mask model's are (issue 39, item 4, on
// DiffusionGemma): each takes one of TESSERA_SLOTS decision slots or a place in the wait queue,
// beyond it 529 overloaded_error with retry-after, and never a generation slot, so a chat is
// not refused for the decisions beside it. The tiny converted DiffusionGemma, real HTTP.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const decision = JSON.stringify({
  model: "decisionmodel-0.1",
  state: { order: "A-1092", note: "The parcel arrived two days late and the box was open." },
  questions: Object.fromEntries(
    Array.from({ length: 6 }, (_, q) => [
      `q${q}`,
      { type: "choice", instructions: `Question ${q}: what happened?`, criteria: { late: null, lost: null, fine: null } },
    ]),
  ),
});
const chat = JSON.stringify({ model: "textmodel-26b", max_tokens: 8, messages: [{ role: "user", content: "Hello!" }] });

describe.skipIf(!HAVE_CONVERT_VENV)("decisions on a canvas model: decision slots, not generation slots", () => {
  let tessera: TestTessera;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    tessera = await startTestTessera({
      modelDir: fx.model,
      env: { TESSERA_LOG_LEVEL: "warn", TESSERA_SLOTS: "1", TESSERA_QUEUE: "0", TESSERA_DEFAULT_RPM: "1000" },
    });
  }, 300_000);
  afterAll(async () => {
    await tessera?.close();
  });

  const post = async (path: string, body: string) => {
    const res = await tessera.fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body });
    return { status: res.status, retryAfter: res.headers.get("retry-after"), text: await res.text() };
  };

  it("beyond the decision slot and queue: 529 overloaded_error with retry-after; a chat beside them is answered", {
    timeout: 120_000,
  }, async () => {
    expect((await post("/v1/systemone", decision)).status).toBe(200); // warm
    const decisions = Array.from({ length: 6 }, () => post("/v1/systemone", decision));
    const chatted = await post("/v1/chat/completions", chat);
    const answers = await Promise.all(decisions);
    // Before: a canvas decision took the one generation slot, so the chat was refused 529.
    expect(chatted.status, chatted.text.slice(0, 300)).toBe(200);
    const refused = answers.filter((a) => a.status === 529);
    const served = answers.filter((a) => a.status === 200);
    expect(refused.length, JSON.stringify(answers.map((a) => a.status))).toBeGreaterThan(0);
    expect(served.length).toBeGreaterThan(0);
    expect(served.length + refused.length).toBe(6);
    expect(refused[0]!.retryAfter).toMatch(/^\d+$/);
    expect(refused[0]!.text).toMatch(/overloaded_error.*all 1 decision slots are busy/);
  });
});
