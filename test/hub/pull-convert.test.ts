// tessera pull's conversion phase: a tiny SDAR checkpoint in its published layout (sharded
// safetensors, index, tokenizer files; convert/make_tiny_checkpoints.py) served by the Hub
// double, pulled, converted by the converter, cached by (repo, commit, weights), then served
// under its repo id with chat and decisions.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pullModel } from "../../bin/pull-command.js";
import type { HubEnv } from "../../lib/hub/env.js";
import { runConvertPython } from "../helpers/converted-models.js";
import { startTestTessera } from "../helpers/tessera.js";
import { filesOf, HubDouble } from "./hub-double.js";
import { HAVE_CONVERT_VENV } from "./python-client.js";

const REPO = "JetLM/SDAR-tiny-Chat";

describe.skipIf(!HAVE_CONVERT_VENV)("tessera pull of a checkpoint: converted once, cached, served under its repo id", () => {
  let hub: HubDouble;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-pull-convert-"));
  const dataDir = join(scratch, "data");
  let env: HubEnv;
  let commit = "";

  beforeAll(async () => {
    await runConvertPython(["convert/make_tiny_checkpoints.py", join(scratch, "ckpt")]);
    hub = await new HubDouble().start();
    commit = hub.addRepo(REPO, filesOf(join(scratch, "ckpt/sdar"))).commit;
    env = { endpoint: hub.hubUrl, token: undefined, cacheDir: join(scratch, "hf/hub"), offline: false };
  }, 300_000);
  afterAll(async () => {
    await hub?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("converts on the first pull, and a second pull of the revision is instant (two listings, no download, no conversion)", async () => {
    const first = await pullModel({ ref: { repo: REPO, revision: "main" }, dataDir, env, weights: "fp32", aliases: ["sdar-tiny"] });
    expect(first.cached).toBe(false);
    const dir = join(dataDir, "models/JetLM--SDAR-tiny-Chat", `${commit}-fp32`);
    expect(first.manifest).toMatchObject({
      repo: REPO,
      commit,
      family: "sdar",
      weights: "fp32",
      source: "converted",
      path: dir,
      aliases: ["sdar-tiny"],
    });
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
    expect(config).toMatchObject({ contract_version: 2, model_type: "sdar", block_size: 4 });
    expect(existsSync(join(dir, "model.onnx"))).toBe(true);

    hub.log.length = 0;
    const started = Date.now();
    const second = await pullModel({ ref: { repo: REPO, revision: "main" }, dataDir, env, weights: "fp32" });
    const ms = Date.now() - started;
    expect(second.cached).toBe(true);
    expect(second.manifest.path).toBe(dir);
    expect(second.manifest.aliases).toEqual(["sdar-tiny"]);
    expect(hub.log.map((r) => r.path.split("?")[0])).toEqual([`/api/models/${REPO}/revision/main`, `/api/models/${REPO}/tree/${commit}`]);
    expect(ms).toBeLessThan(3_000);
  }, 600_000);

  it("with --no-setup and no converter environment, refuses naming the setup command and writes no model", async () => {
    const noVenv = join(scratch, "convert-without-venv");
    await expect(
      pullModel({ ref: { repo: REPO, revision: "main" }, dataDir, env, weights: "int8", noSetup: true, python: "", convertRoot: noVenv }),
    ).rejects.toThrow(/convert-without-venv\/\.venv does not exist \(--no-setup\): create it with `npx tessera convert --setup`/);
    expect(existsSync(join(dataDir, "models/JetLM--SDAR-tiny-Chat", `${commit}-int8`))).toBe(false);
  });

  it("serves the converted model under its repo id and alias: chat and decisions", async () => {
    const tessera = await startTestTessera({ dataDir });
    try {
      const models = (await (await tessera.fetch("/v1/models")).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toContain(REPO);
      for (const model of [REPO, "sdar-tiny"]) {
        const res = await tessera.fetch("/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 8 }),
        });
        const text = await res.text();
        expect(res.status, text).toBe(200);
        expect((JSON.parse(text) as { choices: { finish_reason: string }[] }).choices[0]?.finish_reason).toMatch(/stop|length/);
      }
      const res = await tessera.fetch("/v1/systemone", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: REPO, state: "Is the weather in Paris sunny?", questions: { sunny: { type: "noul" } } }),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(JSON.parse(text)).toMatchObject({ answers: { sunny: expect.anything() } });
    } finally {
      await tessera.close();
    }
  }, 120_000);
});
