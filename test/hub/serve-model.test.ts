// `tessera pull`, `tessera serve --model`, `tessera models list|rm` through the real command
// line against the Hub double, with a repository that holds a Tessera model directory (the
// tiny test model): pulled with no Python, served under its repo id, answering chat and
// decisions, listed and removed.
import { existsSync, lstatSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ServeProcess, spawnTesseraServe } from "../helpers/serve-process.js";
import { runTessera } from "../helpers/tessera-cli.js";
import { newApiKey, TINY_MODEL_DIR } from "../helpers/tessera.js";
import { runModels } from "../../bin/models-command.js";
import { parsePullArgs, pullModel } from "../../bin/pull-command.js";
import { splitServeArgs } from "../../bin/serve-model.js";
import { hubEnv } from "../../lib/hub/env.js";
import { PullError } from "../../lib/hub/errors.js";
import { formatBytes } from "../../lib/hub/progress.js";
import { filesOf, HubDouble } from "./hub-double.js";
import { hubTestEnv } from "./hub-test-env.js";
import { askSpam } from "./spam-decision.js";

const REPO = "tessera-test/tiny-bd";
const LATER = "tessera-test/tiny-bd-2";
/** The tiny model's files as `formatBytes` prints them: all of them, and all but config.json (fetched before the download phase). */
let SIZE = "";
let FETCHED = "";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe("tessera pull / serve --model / models, against the Hub double", () => {
  let hub: HubDouble;
  let server: ServeProcess | undefined;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-serve-model-"));
  const key = newApiKey();
  let env: Record<string, string>;
  let commit = "";

  beforeAll(async () => {
    hub = await new HubDouble().start();
    const files: Record<string, Buffer | string> = {
      ...filesOf(TINY_MODEL_DIR),
      ".gitattributes": "*.onnx filter=lfs diff=lfs merge=lfs -text\n",
    };
    commit = hub.addRepo(REPO, files).commit;
    const bytes = Object.entries(files)
      .filter(([p]) => p !== ".gitattributes")
      .map(([, b]) => b.length);
    SIZE = formatBytes(bytes.reduce((a, b) => a + b, 0));
    FETCHED = formatBytes(bytes.reduce((a, b) => a + b, 0) - files["config.json"]!.length);
    hub.addRepo(LATER, files);
    env = {
      ...hubTestEnv(scratch, hub.hubUrl),
      TESSERA_MODELS_CONFIG: join(scratch, "no-models.config.json"),
      TESSERA_BOOTSTRAP_KEY: key,
      TESSERA_INTRA_OP_THREADS: "1",
      TESSERA_LOG_LEVEL: "info",
    };
  });
  afterAll(async () => {
    await server?.stop();
    await hub.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("pulls a Tessera model repository with no Python, linking the cache's blobs (nothing stored twice)", async () => {
    const r = await runTessera(["pull", REPO, "--as", "tiny-alias"], env);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(`${REPO}@${commit} published ${join(scratch, "data/models/tessera-test--tiny-bd", commit)}`);
    expect(r.stderr).toMatch(/tessera-test\/tiny-bd: link: a Tessera model directory: no conversion, no Python/);
    expect(r.stderr).toContain(`tessera-test/tiny-bd: download: 6 files, ${FETCHED}\n`);
    expect(r.stderr).toMatch(/pulled in [\d.]+ s: 10 requests/); // info, tree, 6 resolve (1 redirected), 1 CDN GET... see below
    const onnx = join(scratch, "data/models/tessera-test--tiny-bd", commit, "model.onnx");
    const blob = join(scratch, "hf/hub/models--tessera-test--tiny-bd/blobs");
    expect(statSync(onnx).nlink).toBe(2); // a hard link to the cache's blob
    expect(readdirSync(blob).map((b) => statSync(join(blob, b)).ino)).toContain(statSync(onnx).ino);
    expect(hub.requests({ path: /\.gitattributes/ })).toEqual([]);
  });

  it("a second pull of the same revision is instant: two listings, no file", async () => {
    hub.log.length = 0;
    // In-process (the command line's own start-up is most of a CLI run's time here).
    const started = Date.now();
    const again = await pullModel({
      ref: { repo: REPO, revision: "main" },
      dataDir: env.TESSERA_DATA_DIR!,
      env: hubEnv({ ...env, HF_ENDPOINT: hub.hubUrl }),
    });
    expect(again.cached).toBe(true);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(hub.log.map((x) => x.path.split("?")[0])).toEqual([`/api/models/${REPO}/revision/main`, `/api/models/${REPO}/tree/${commit}`]);
    const offline = await runTessera(["pull", REPO], { ...env, HF_HUB_OFFLINE: "1" });
    expect(offline.status, offline.stderr).toBe(0);
    expect(hub.log).toHaveLength(2);
    expect(offline.stderr).toMatch(/0 requests, 0 B fetched/);
  });

  const models = (...args: string[]) => {
    const lines: string[] = [];
    const status = runModels(args, env.TESSERA_DATA_DIR!, hubEnv({ HF_HOME: env.HF_HOME! }), (l) => lines.push(l));
    return { status, out: lines.join("\n") };
  };

  it("models list shows id, alias, family, weights, disk use and repo@commit", () => {
    const r = models("list");
    expect(r.status).toBe(0);
    const [head, row] = r.out.split("\n");
    expect(head).toMatch(/^ID\s+ALIASES\s+FAMILY\s+WEIGHTS\s+MODEL\s+CHECKPOINT\s+REPO@COMMIT$/);
    expect(row).toMatch(
      new RegExp(
        `^${REPO}\\s+tiny-alias\\s+tessera-block-diffusion\\s+published\\s+${SIZE.replace(".", "\\.")}\\s+\\(linked\\)\\s+${REPO}@${commit.slice(0, 12)}$`,
      ),
    );
  });

  it("serve --model pulls a new repository (/readyz names the phase meanwhile), then serves it under its repo id: chat and decisions", async () => {
    let release: () => void = () => {};
    hub.holds.set("model.onnx", new Promise<void>((r) => (release = r)));
    const port = await freePort();
    const serving = spawnTesseraServe({ ...env, TESSERA_PORT: String(port) }, 120_000, ["--model", LATER, "--model", REPO]);
    let readyz: { status: number; body: { checks: { models: string } } } | undefined;
    for (let i = 0; i < 200 && readyz === undefined; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      if (res !== undefined) {
        const body = (await res.json()) as { checks: { models: string } };
        if (/download/.test(body.checks.models)) readyz = { status: res.status, body };
      }
    }
    expect(readyz?.status).toBe(503);
    expect(readyz?.body.checks.models).toMatch(/^tessera-test\/tiny-bd-2: download [\d.]+ (B|KiB) of [\d.]+ KiB \(\d+%\)/);
    expect(readyz?.body.checks.models).toContain(` of ${FETCHED} (`);
    release();
    server = await serving;
    expect(server.url).toBe(`http://127.0.0.1:${port}`);

    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    const models = (await (await fetch(`${server.url}/v1/models`, { headers })).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id).sort()).toEqual([REPO, LATER].sort());
    for (const model of [REPO, "tiny-alias", LATER]) {
      const chat = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 8 }),
      });
      const text = await chat.text();
      expect(chat.status, text).toBe(200);
      expect((JSON.parse(text) as { model: string }).model).toBe(model === "tiny-alias" ? REPO : model); // an alias answers as its model
    }
    const decision = await askSpam(server.url, headers, REPO);
    expect(decision.status, decision.text).toBe(200);
    expect(JSON.parse(decision.text)).toMatchObject({ answers: { spam: expect.anything() } });
    await server.stop();
    server = undefined;
  }, 180_000);

  it("models rm frees the model and its revision in the Hugging Face cache", () => {
    const cacheSnap = join(scratch, "hf/hub/models--tessera-test--tiny-bd/snapshots", commit);
    expect(existsSync(cacheSnap)).toBe(true);
    const r = models("rm", "tiny-alias");
    expect(r.status).toBe(0);
    expect(r.out).toMatch(
      /^removed tessera-test\/tiny-bd: [\d.]+ KiB from \S+tessera-test--tiny-bd, [\d.]+ KiB from the Hugging Face cache$/,
    );
    expect(r.out).toContain(`, ${SIZE} from the Hugging Face cache`);
    expect(existsSync(cacheSnap)).toBe(false);
    expect(existsSync(join(scratch, "data/models/tessera-test--tiny-bd"))).toBe(false);
    const list = models("list").out;
    expect(list).not.toMatch(new RegExp(`^${REPO}\\s`, "m"));
    expect(list).toMatch(new RegExp(`^${LATER}\\s`, "m"));
    expect(() => models("rm", "nope")).toThrow(/^no pulled model "nope" in .* \(tessera models list\)$/);
    expect(lstatSync(join(scratch, "hf/hub/models--tessera-test--tiny-bd-2/blobs")).isDirectory()).toBe(true);
  });

  it("bad input: one line each", async () => {
    const bad = await runTessera(["pull", "not-a-repo"], env);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toBe('tessera: "not-a-repo" is not a Hugging Face model id (org/name, e.g. JetLM/SDAR-1.7B-Chat)\n');
    // The others in-process: the same PullError messages main() prints after "tessera: ".
    expect(() => parsePullArgs([REPO, "--weights", "int3"])).toThrow(new PullError("--weights int3: one of int8, int4, fp16, fp32"));
    expect(() => parsePullArgs([REPO, "--block-size", "0"])).toThrow(new PullError("--block-size must be an integer from 1 to 4096"));
    expect(() => parsePullArgs(["org/name@bad..rev"])).toThrow(/"bad..rev" is not a revision/);
    expect(() => splitServeArgs(["--as", "x"])).toThrow(new PullError("--as goes with --model <org/name>"));
    await expect(
      pullModel({ ref: { repo: REPO, revision: "main" }, dataDir: scratch, env: hubEnv({}), aliases: ["bad alias"] }),
    ).rejects.toThrow(/^--as "bad alias": an alias is 1-128 letters/);
  });
});
