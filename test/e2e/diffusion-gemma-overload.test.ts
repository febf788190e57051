// A canvas model (DiffusionGemma, contract v3) under load: the same generation slots and
// bounded wait queue as a mask model (TESSERA_SLOTS / TESSERA_QUEUE), so a flood is refused
// with 529 overloaded_error and retry-after, a client that leaves frees its slot, and the
// worker's heartbeats count the canvas model's slots. Official openai client, real HTTP,
// the tiny converted model.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { chatBurst } from "../helpers/openai.js";
import { startTestTessera, TEST_SERVING_ID, type TestTessera } from "../helpers/tessera.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const ask = { model: "textmodel-26b", messages: [{ role: "user" as const, content: "Hello! How can I help you today?" }] };

describe.skipIf(!HAVE_CONVERT_VENV)("DiffusionGemma (canvas model): slots and wait queue", () => {
  let tessera: TestTessera;
  let client: OpenAI;
  beforeAll(async () => {
    const fx = await diffusionGemmaFixture();
    tessera = await startTestTessera({
      modelDir: fx.model,
      env: { TESSERA_SLOTS: "1", TESSERA_QUEUE: "0", TESSERA_DEFAULT_RPM: "1000" },
    });
    client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 60_000 });
  }, 300_000);
  afterAll(async () => {
    await tessera?.close();
  });

  const busySlots = async () =>
    Number(/tessera_generation_slots_busy\{[^}]*\} (\S+)/.exec(await (await tessera.fetch("/metrics", { key: null })).text())?.[1]);

  it("heartbeats count the canvas model's slots", () => {
    const [worker] = tessera.workers.live();
    expect(worker!.models).toContain(TEST_SERVING_ID);
    expect(worker!.slotsTotal).toBe(1);
    expect(worker!.slotsFree).toBe(1);
  });

  it("529 overloaded_error with retry-after when the slot is busy, streamed or not; then recovers", async () => {
    const outcomes = await chatBurst(client, { ...ask, max_tokens: 64 }, 6);
    expect(outcomes.filter((o) => o === 200).length).toBeGreaterThanOrEqual(1);
    const refused = outcomes.filter((o) => o !== 200) as InstanceType<typeof OpenAI.APIError>[];
    expect(refused.length).toBeGreaterThan(0);
    for (const error of refused) {
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error.status).toBe(529);
      expect(error.type).toBe("overloaded_error");
      expect(error.message).toMatch(/all 1 generation slots are busy/);
      expect(Number(error.headers?.get("retry-after"))).toBeGreaterThan(0);
    }
    const after = await client.chat.completions.create({ ...ask, max_tokens: 8 });
    expect(after.choices[0]!.message.role).toBe("assistant");
    await expect.poll(busySlots, { timeout: 10_000 }).toBe(0);
  }, 120_000);

  it("a client that leaves mid-stream frees its slot", async () => {
    // No max_tokens, so the reply usually runs far longer than this test; a reply that happens
    // to stop at once (random weights) is retried, so the slot is seen held before the abort.
    let held: { controller: AbortController } | undefined;
    for (let attempt = 0; attempt < 5 && held === undefined; attempt++) {
      const stream = await client.chat.completions.create({ ...ask, stream: true });
      await stream[Symbol.asyncIterator]().next();
      const busy = await busySlots();
      const meanwhile = await client.chat.completions.create({ ...ask, max_tokens: 4 }).then(
        () => 200,
        (e: InstanceType<typeof OpenAI.APIError>) => e.status,
      );
      if (busy === 1 && meanwhile === 529) held = stream;
      else stream.controller.abort();
    }
    expect(held, "a long reply held the slot").toBeDefined();
    held!.controller.abort();
    await expect.poll(busySlots, { timeout: 10_000 }).toBe(0);
    const after = await client.chat.completions.create({ ...ask, max_tokens: 4 });
    expect(after.choices[0]!.message.role).toBe("assistant");
    await expect.poll(() => tessera.workers.live()[0]!.slotsFree, { timeout: 10_000 }).toBe(1);
  }, 120_000);
});
