// A model pulled while `tessera serve` runs joins it with no restart (as `ollama pull` beside
// `ollama serve`): `tessera pull` in its own process against the Hub double, then requests to the
// running server by repo id and alias, a listing, a decision; a pulled model that cannot load is
// a 503 saying so while the others answer.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ServeProcess, spawnTesseraServe } from "../helpers/serve-process.js";
import { runTessera } from "../helpers/tessera-cli.js";
import { newApiKey, TINY_MODEL_DIR, writeModelsConfig } from "../helpers/tessera.js";
import { writeManifest } from "../../services/registry/pulled.js";
import { filesOf, HubDouble } from "./hub-double.js";
import { hubTestEnv } from "./hub-test-env.js";
import { askSpam } from "./spam-decision.js";

const REPO = "tessera-test/tiny-late";
const BROKEN = "tessera-test/broken-late";
const LISTED = "tessera-test/tiny-listed";
/** What the models config serves from the start. */
const AT_START = ["decisionmodel-0.1", "decisionmodel-latest", "textmodel-26b"];

describe("a model pulled while tessera serve runs", () => {
  let hub: HubDouble;
  let server: ServeProcess;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-pull-while-serving-"));
  const key = newApiKey();
  let env: Record<string, string>;
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const chat = async (model: string) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 8 }),
    });
    return { status: res.status, body: (await res.json()) as { model?: string; error?: { message: string; type: string; code: string } } };
  };
  const listed = async () =>
    ((await (await fetch(`${server.url}/v1/models`, { headers })).json()) as { data: { id: string }[] }).data.map((m) => m.id).sort();

  beforeAll(async () => {
    hub = await new HubDouble().start();
    for (const repo of [REPO, LISTED])
      hub.addRepo(repo, { ...filesOf(TINY_MODEL_DIR), ".gitattributes": "*.onnx filter=lfs diff=lfs merge=lfs -text\n" });
    env = {
      ...hubTestEnv(scratch, hub.hubUrl),
      TESSERA_MODELS_CONFIG: writeModelsConfig(scratch, TINY_MODEL_DIR),
      TESSERA_BOOTSTRAP_KEY: key,
      TESSERA_INTRA_OP_THREADS: "1",
      TESSERA_LOG_LEVEL: "info",
    };
    server = await spawnTesseraServe(env, 60_000);
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    await hub.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("is answered by repo id and alias right after the pull, listed and decided, with no restart", async () => {
    const before = await chat(REPO);
    expect(before.status).toBe(404);
    expect(before.body.error?.code).toBe("model_not_found");
    expect(await listed()).toEqual(AT_START);

    const pull = await runTessera(["pull", REPO, "--as", "tiny-late-alias"], env);
    expect(pull.status, pull.stderr).toBe(0);

    // The first request names the new model before the server's periodic look: it waits for the load.
    const byRepo = await chat(REPO);
    expect(byRepo.status, JSON.stringify(byRepo.body)).toBe(200);
    expect(byRepo.body.model).toBe(REPO);
    const byAlias = await chat("tiny-late-alias");
    expect(byAlias.status, JSON.stringify(byAlias.body)).toBe(200);
    expect(byAlias.body.model).toBe(REPO);
    expect(await listed()).toEqual([...AT_START, REPO].sort());
    const decision = await askSpam(server.url, headers, REPO);
    expect(decision.status, decision.text).toBe(200);
    expect(server.output.filter((l) => l.includes('"pulled model joined the running server"'))).toHaveLength(1);
    // The model served at start still answers.
    expect((await chat("textmodel-26b")).status).toBe(200);
  }, 120_000);

  it("is listed a few seconds after the pull with no request naming it", async () => {
    const pull = await runTessera(["pull", LISTED], env);
    expect(pull.status, pull.stderr).toBe(0);
    let ids: string[] = [];
    for (let i = 0; i < 75 && !ids.includes(LISTED); i++) {
      await new Promise((r) => setTimeout(r, 200));
      ids = await listed();
    }
    expect(ids).toEqual([...AT_START, REPO, LISTED].sort());
  }, 60_000);

  it("one that cannot load is a 503 saying so, logged once; a name nobody pulled stays a 404", async () => {
    const dir = join(scratch, "broken-model");
    cpSync(TINY_MODEL_DIR, dir, { recursive: true });
    writeFileSync(join(dir, "model.onnx"), "not an ONNX graph");
    writeManifest(env.TESSERA_DATA_DIR!, {
      version: 1,
      repo: BROKEN,
      revision: "main",
      commit: "0".repeat(40),
      family: "tessera-block-diffusion",
      weights: "published",
      blockSize: undefined,
      aliases: [],
      path: dir,
      sizeBytes: 0,
      checkpointBytes: 0,
      source: "tessera",
      files: [],
      pulledAt: new Date().toISOString(),
    });
    await new Promise((r) => setTimeout(r, 1_100)); // past the last look's one-second gap
    for (let i = 0; i < 2; i++) {
      const broken = await chat(BROKEN);
      expect(broken.status, JSON.stringify(broken.body)).toBe(503);
      expect(broken.body.error?.message).toBe(
        `model "${BROKEN}" was pulled but could not be loaded (the server's log says why; pull it again to retry)`,
      );
    }
    expect(server.output.filter((l) => l.includes('"pulled model could not be loaded; pull it again to retry"'))).toHaveLength(1);
    expect((await chat("tessera-test/never-pulled")).status).toBe(404);
    expect((await chat(REPO)).status).toBe(200);
    expect(await listed()).toEqual([...AT_START, REPO, LISTED].sort());
  }, 60_000);

  it("pulled again at a new revision, it serves new requests from it; removed, it is a 404", async () => {
    const logged = (text: string) => server.output.filter((l) => l.includes(text)).length;
    hub.addRepo(REPO, { ...filesOf(TINY_MODEL_DIR), "NOTES.md": "the second revision\n" });
    const again = await runTessera(["pull", REPO], env);
    expect(again.status, again.stderr).toBe(0);
    for (let i = 0; i < 75 && logged("pulled model's new revision serves new requests") === 0; i++) {
      await new Promise((r) => setTimeout(r, 200));
      await listed(); // a listing makes the server look again
    }
    expect(logged("pulled model's new revision serves new requests")).toBe(1);
    const line = JSON.parse(server.output.find((l) => l.includes("new revision serves new requests"))!) as { dir: string };
    expect(line.dir).toBe(again.stdout.trim().split(" ").at(-1)); // "<repo>@<commit> published <dir>"
    expect((await chat("tiny-late-alias")).status).toBe(200); // the alias kept

    const rm = await runTessera(["models", "rm", REPO], env);
    expect(rm.status, rm.stderr).toBe(0);
    let status = 200;
    for (let i = 0; i < 75 && status !== 404; i++) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await chat(REPO)).status;
    }
    expect(status).toBe(404);
    expect(logged("pulled model removed from the running server")).toBe(1);
    expect(await listed()).toEqual([...AT_START, LISTED].sort());
  }, 120_000);
});
