// tessera pull's download half against the Hub double: what is requested, what is fetched,
// and what lands in the Hugging Face cache, case by case (figures in docs/serving-models.md).
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { blobPath, repoFolder, snapshotDir } from "../../lib/hub/cache.js";
import type { HubEnv } from "../../lib/hub/env.js";
import { PullError } from "../../lib/hub/errors.js";
import { HubHttp } from "../../lib/hub/http.js";
import { pullSnapshot } from "../../lib/hub/snapshot.js";
import { HubDouble } from "./hub-double.js";
import { HAVE_CONVERT_VENV, runPython } from "./python-client.js";

const SHARD = randomBytes(3_000_000);
const SHARD2 = randomBytes(1_000_000);
const CHECKPOINT = {
  "config.json": JSON.stringify({
    model_type: "sdar",
    architectures: ["SDARForCausalLM"],
    auto_map: { AutoModel: "modeling_sdar.SDARModel" },
  }),
  "model-00001-of-00002.safetensors": SHARD,
  "model-00002-of-00002.safetensors": SHARD2,
  "model.safetensors.index.json": JSON.stringify({
    weight_map: { a: "model-00001-of-00002.safetensors", b: "model-00002-of-00002.safetensors" },
  }),
  "tokenizer.json": JSON.stringify({ model: { vocab: { a: 0 } } }),
  "pytorch_model.bin": randomBytes(1000),
  "modeling_sdar.py": "import os; os.system('echo pwned')",
};
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("pulling a revision into the Hugging Face cache", () => {
  let hub: HubDouble;
  const scratch = mkdtempSync(join(tmpdir(), "tessera-pull-snapshot-"));
  let n = 0;
  let cacheDir = "";
  const env = (over: Partial<HubEnv> = {}): HubEnv => ({ endpoint: hub.hubUrl, token: undefined, cacheDir, offline: false, ...over });
  const pull = (repo: string, over: Partial<HubEnv> = {}, revision = "main", stallMs = 15_000) => {
    const e = env(over);
    const http = new HubHttp(e);
    const lines: string[] = [];
    return {
      http,
      lines,
      done: pullSnapshot({
        ref: { repo, revision },
        env: e,
        http,
        stallMs,
        backoffMs: 5,
        progress: { start: () => {}, bytes: () => {}, log: (l) => lines.push(l) },
      }),
    };
  };

  beforeAll(async () => {
    hub = await new HubDouble().start();
    hub.addRepo("org/sdar-tiny", CHECKPOINT);
    hub.addRepo("org/llama-tiny", { "config.json": JSON.stringify({ model_type: "llama" }), "model.safetensors": randomBytes(500_000) });
    hub.addRepo("org/gated", CHECKPOINT, { gatedTokens: ["hf_accepted_terms"] });
  });
  afterEach(() => {
    hub.log.length = 0;
    cacheDir = join(scratch, `cache-${++n}`);
  });
  afterAll(async () => {
    await hub.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  cacheDir = join(scratch, "cache-0");

  it("fetches every file once into blobs/ and snapshots/ as huggingface_hub lays them out; code and .bin weights are left out", async () => {
    const { done, lines } = pull("org/sdar-tiny");
    const snap = await done;
    const commit = hub.repos.get("org/sdar-tiny")!.commit;
    const folder = repoFolder(cacheDir, "org/sdar-tiny");
    expect(snap.commit).toBe(commit);
    expect(readFileSync(join(folder, "refs/main"), "utf8")).toBe(commit);
    expect(readdirSync(snapshotDir(folder, commit)).sort()).toEqual([
      "config.json",
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
      "tokenizer.json",
    ]);
    const pointer = join(snapshotDir(folder, commit), "model-00001-of-00002.safetensors");
    expect(lstatSync(pointer).isSymbolicLink()).toBe(true);
    expect(readlinkSync(pointer)).toBe(`../../blobs/${sha256(SHARD)}`);
    expect(readFileSync(pointer).equals(SHARD)).toBe(true);
    // 1 model info + 1 tree + 3 resolve of small files + 2 resolve redirected to 2 CDN GETs.
    expect(hub.log.map((r) => `${r.host} ${r.status}`).sort()).toEqual([
      "cdn 200",
      "cdn 200",
      "hub 200",
      "hub 200",
      "hub 200",
      "hub 200",
      "hub 200",
      "hub 302",
      "hub 302",
    ]);
    expect(
      hub
        .requests({ host: "cdn" })
        .map((r) => r.bytes)
        .sort((a, b) => a - b),
    ).toEqual([SHARD2.length, SHARD.length]);
    expect(hub.requests({ path: /modeling_sdar|pytorch_model/ })).toEqual([]);
    expect(lines.join("\n")).toMatch(/auto_map is ignored/);
  });

  it("resumes a cut transfer with a Range request: no byte fetched twice", async () => {
    hub.cuts.set("model-00001-of-00002.safetensors", 1_000_000);
    const { done, lines } = pull("org/sdar-tiny");
    const snap = await done;
    const cdn = hub.requests({ host: "cdn", path: new RegExp(sha256(SHARD)) });
    expect(cdn.map((r) => [r.range, r.status])).toEqual([
      [undefined, 200],
      [expect.stringMatching(/^bytes=\d+-$/), 206],
    ]);
    expect(cdn[0]!.bytes).toBe(1_000_000);
    // The resume asks from the first byte the client lacks: the 1,000,000 sent, or fewer where the
    // cut lost some in flight (the socket destroyed under a loaded machine: 982,776 once).
    const from = Number(/^bytes=(\d+)-$/.exec(cdn[1]!.range ?? "")![1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(1_000_000);
    expect(cdn[1]!.bytes).toBe(SHARD.length - from);
    expect(readFileSync(join(snap.dir, "model-00001-of-00002.safetensors")).equals(SHARD)).toBe(true);
    expect(lines.join("\n")).toMatch(/cut.*resuming/);
  });

  it("gives up on a stalled transfer after the stall timeout and resumes it", async () => {
    hub.stalls.add("model-00002-of-00002.safetensors");
    const snap = await pull("org/sdar-tiny", {}, "main", 1_500).done;
    const cdn = hub.requests({ host: "cdn", path: new RegExp(sha256(SHARD2)) });
    expect(cdn.map((r) => r.range)).toEqual([undefined, "bytes=16-"]);
    expect(readFileSync(join(snap.dir, "model-00002-of-00002.safetensors")).equals(SHARD2)).toBe(true);
  });

  it("refuses a corrupted byte (sha256 mismatch), fetches the file again, and fails after a second mismatch keeping nothing", async () => {
    hub.corruptions.set("model-00002-of-00002.safetensors", { at: 123_456, times: 1 });
    const { done, lines } = pull("org/sdar-tiny");
    const snap = await done;
    expect(hub.requests({ host: "cdn", path: new RegExp(sha256(SHARD2)) })).toHaveLength(2);
    expect(readFileSync(join(snap.dir, "model-00002-of-00002.safetensors")).equals(SHARD2)).toBe(true);
    expect(lines.join("\n")).toMatch(/sha256 mismatch.*fetching it again/);

    cacheDir = join(scratch, "cache-corrupt-twice");
    hub.corruptions.set("model-00002-of-00002.safetensors", { at: 5, times: 2 });
    await expect(pull("org/sdar-tiny").done).rejects.toThrow(/model-00002-of-00002.safetensors: sha256 mismatch twice/);
    const folder = repoFolder(cacheDir, "org/sdar-tiny");
    expect(existsSync(blobPath(folder, sha256(SHARD2)))).toBe(false);
    expect(existsSync(`${blobPath(folder, sha256(SHARD2))}.incomplete`)).toBe(false);
  });

  it("a small file is checked too (its git blob sha1)", async () => {
    hub.corruptions.set("tokenizer.json", { at: 2, times: 2 });
    await expect(pull("org/sdar-tiny").done).rejects.toThrow(/tokenizer.json: git-sha1 mismatch twice/);
  });

  it("a gated repository: 401 without a token says to set HF_TOKEN, 403 with a refused one says to accept the terms, the token never reaches the CDN", async () => {
    await expect(pull("org/gated").done).rejects.toThrow(
      new PullError(
        `org/gated is gated or private (HTTP 401): set HF_TOKEN to a token of an account that has accepted its terms on ${hub.hubUrl}/org/gated`,
      ),
    );
    await expect(pull("org/gated", { token: "hf_not_accepted" }).done).rejects.toThrow(
      /HF_TOKEN was refused \(HTTP 403\): accept the model's terms on/,
    );
    expect(hub.requests({ host: "cdn" })).toEqual([]);
    hub.log.length = 0;
    const snap = await pull("org/gated", { token: "hf_accepted_terms" }).done;
    expect(readFileSync(join(snap.dir, "model-00001-of-00002.safetensors")).equals(SHARD)).toBe(true);
    expect(hub.requests({ host: "hub", path: /resolve/ }).every((r) => r.auth === "Bearer hf_accepted_terms")).toBe(true);
    expect(hub.requests({ host: "cdn" }).map((r) => r.auth)).toEqual([undefined, undefined]);
  });

  it("refuses a family the converter does not take from config.json alone: zero weight requests", async () => {
    await expect(pull("org/llama-tiny").done).rejects.toThrow(
      /org\/llama-tiny: model_type "llama" is not a family Tessera converts \(it takes "sdar" \(SDAR\), "Fast_dLLM_Qwen" \(Fast-dLLM v2\), "qwen3" \(Qwen3\), "qwen2" \(Qwen2 \/ Qwen2\.5\), "diffusion_gemma" \(DiffusionGemma\), or a Tessera model directory\)/,
    );
    expect(hub.requests({ host: "cdn" })).toEqual([]);
    expect(hub.downloads().map((r) => r.path)).toEqual([expect.stringMatching(/\/resolve\/[0-9a-f]{40}\/config\.json$/)]);
  });

  it("a missing repository or revision: one line naming it", async () => {
    await expect(pull("org/nope").done).rejects.toThrow(
      /org\/nope@main: not found on http:\/\/127.0.0.1:\d+ \(no such model or revision; a private one needs HF_TOKEN\)/,
    );
    await expect(pull("org/sdar-tiny", {}, "v9").done).rejects.toThrow(/org\/sdar-tiny@v9: not found/);
  });

  it.skipIf(!HAVE_CONVERT_VENV)("reuses what huggingface_hub's snapshot_download put in HF_HOME: no file downloaded again", async () => {
    const hfHome = join(scratch, "hf-home");
    await runPython(`import huggingface_hub; print(huggingface_hub.snapshot_download("org/sdar-tiny"))`, {
      HF_ENDPOINT: hub.hubUrl,
      HF_HOME: hfHome,
    });
    expect(hub.downloads().length).toBeGreaterThan(0); // the Python client did download from the double
    hub.log.length = 0;
    cacheDir = join(hfHome, "hub");
    const { done, http } = pull("org/sdar-tiny");
    const snap = await done;
    expect(hub.downloads()).toEqual([]);
    expect(hub.log.map((r) => r.path.split("?")[0])).toEqual([
      "/api/models/org/sdar-tiny/revision/main",
      `/api/models/org/sdar-tiny/tree/${snap.commit}`,
    ]);
    expect(http.bytes).toBeLessThan(5_000); // the two listings only
    expect(readFileSync(join(snap.dir, "model-00001-of-00002.safetensors")).equals(SHARD)).toBe(true);
  });

  it("HF_HUB_OFFLINE=1: from the cache with zero requests, or a clear error naming what is missing", async () => {
    await pull("org/sdar-tiny").done;
    hub.log.length = 0;
    const { done, http } = pull("org/sdar-tiny", { offline: true });
    const snap = await done;
    expect(hub.log).toEqual([]);
    expect(http.requests).toEqual([]);
    expect(snap.commit).toBe(hub.repos.get("org/sdar-tiny")!.commit);
    await expect(pull("org/llama-tiny", { offline: true }).done).rejects.toThrow(
      /HF_HUB_OFFLINE is set and org\/llama-tiny@main is not in the cache \(.*refs\/main is missing\)/,
    );
    rmSync(join(snap.dir, "model-00002-of-00002.safetensors"));
    await expect(pull("org/sdar-tiny", { offline: true }).done).rejects.toThrow(
      /incomplete in the cache: missing model-00002-of-00002.safetensors/,
    );
    expect(hub.log).toEqual([]);
  });

  it("refuses a listing with absolute, climbing or colliding names, and a symlink planted in the cache; writes nothing outside it", async () => {
    const base = { "config.json": JSON.stringify({ model_type: "sdar" }) };
    hub.addRepo("org/climb", { ...base, "../../../escaped.txt": "x" });
    hub.addRepo("org/absolute", { ...base, "/tmp/escaped.txt": "x" });
    hub.addRepo("org/collide", { ...base, "Config.json": "{}" });
    hub.addRepo("org/file-and-folder", { ...base, tok: "a", "tok/x.json": "b" });
    await expect(pull("org/climb").done).rejects.toThrow(
      /org\/climb: refused, its file list is unsafe: "..\/..\/..\/escaped.txt" is absolute or climbs/,
    );
    await expect(pull("org/absolute").done).rejects.toThrow(/"\/tmp\/escaped.txt" is absolute or climbs/);
    await expect(pull("org/collide").done).rejects.toThrow(
      /"config.json" collides with "Config.json"|"Config.json" collides with "config.json"/,
    );
    await expect(pull("org/file-and-folder").done).rejects.toThrow(/"tok\/x.json" needs "tok" to be a folder/);
    expect(hub.downloads()).toEqual([]);

    // A snapshot folder planted as a symlink to elsewhere is not followed.
    const outside = join(scratch, "outside");
    mkdirSync(outside, { recursive: true });
    const folder = repoFolder(cacheDir, "org/sdar-tiny");
    mkdirSync(join(folder, "snapshots"), { recursive: true });
    symlinkSync(outside, join(folder, "snapshots", hub.repos.get("org/sdar-tiny")!.commit));
    await expect(pull("org/sdar-tiny").done).rejects.toThrow(/is a symlink where a folder belongs in the cache: refused/);
    expect(readdirSync(outside)).toEqual([]);
    writeFileSync(join(scratch, "marker"), "");
  });
});
