// tessera pull's download figures against the Hub double (test/hub/hub-double.ts):
//   npx tsx bench/pull.ts [--mb 200] [--cut-at 0.6]
// 1. a fresh pull of a repo with one <mb> MB LFS file (random bytes), its transfer cut at
//    <cut-at> of the file: requests made, bytes fetched, bytes fetched twice;
// 2. a pull of the cached revision (online: two listings; offline: none), timed;
// 3. the same file cut without resume (what a client that restarts from zero fetches).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { HubEnv } from "../lib/hub/env.js";
import { HubHttp } from "../lib/hub/http.js";
import { pullSnapshot, type Snapshot } from "../lib/hub/snapshot.js";
import { HubDouble } from "../test/hub/hub-double.js";

const { values } = parseArgs({
  options: {
    mb: { type: "string", default: "200" },
    "cut-at": { type: "string", default: "0.6" },
    cases: { type: "boolean", default: false },
  },
});
const size = Math.round(Number(values.mb) * 1_000_000);
const cutAt = Math.round(size * Number(values["cut-at"]));
const scratch = mkdtempSync(join(tmpdir(), "tessera-bench-pull-"));
const hub = await new HubDouble().start();
const weights = randomBytes(size);
const repo = "bench/big";
hub.addRepo(repo, { "config.json": JSON.stringify({ model_type: "sdar" }), "model.safetensors": weights, "tokenizer.json": "{}" });
const env = (offline = false): HubEnv => ({ endpoint: hub.hubUrl, token: undefined, cacheDir: join(scratch, "hub"), offline });
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

async function run(label: string, offline = false, verified?: { commit: string; files: Snapshot["files"] }) {
  hub.log.length = 0;
  const http = new HubHttp(env(offline));
  const t0 = performance.now();
  const snap = await pullSnapshot({
    ref: { repo, revision: "main" },
    env: env(offline),
    http,
    backoffMs: 50,
    ...(verified ? { verified } : {}),
  });
  const ms = performance.now() - t0;
  const sent = hub.bytesSent();
  const cdn = hub.requests({ host: "cdn" });
  console.log(
    `${label}: ${ms.toFixed(0)} ms, ${hub.log.length} requests (${hub.requests({ host: "hub" }).length} Hub, ${cdn.length} CDN: ${cdn.map((r) => `${r.status}${r.range ? ` ${r.range}` : ""} ${mb(r.bytes)}`).join("; ") || "-"}), ${mb(sent)} sent by the double, ${mb(http.bytes)} received`,
  );
  return { snap, sent };
}

/** --cases: the cases of test/hub/pull-snapshot.test.ts on its 4 MB checkpoint (two shards), each from an empty cache. */
async function cases() {
  const shards = { "model-00001-of-00002.safetensors": randomBytes(3_000_000), "model-00002-of-00002.safetensors": randomBytes(1_000_000) };
  const files = {
    "config.json": JSON.stringify({ model_type: "sdar" }),
    ...shards,
    "model.safetensors.index.json": JSON.stringify({ weight_map: {} }),
    "tokenizer.json": "{}",
  };
  hub.addRepo("bench/tiny", files);
  hub.addRepo("bench/gated", files, { gatedTokens: ["hf_ok"] });
  hub.addRepo("bench/llama", { "config.json": JSON.stringify({ model_type: "llama" }), "model.safetensors": randomBytes(500_000) });
  let n = 0;
  const one = async (label: string, name: string, arm: () => void, over: Partial<HubEnv> = {}, fresh = true) => {
    const e = { ...env(), ...(fresh ? { cacheDir: join(scratch, `case-${++n}`) } : {}), ...over };
    if (!fresh) e.cacheDir = join(scratch, "case-1"); // the fresh pull's cache
    arm();
    hub.log.length = 0;
    const http = new HubHttp(e);
    const outcome = await pullSnapshot({ ref: { repo: name, revision: "main" }, env: e, http, backoffMs: 20, stallMs: 1_000 }).then(
      () => "ok",
      (err: Error) => `refused: ${err.message.slice(0, 60)}…`,
    );
    const cdn = hub.requests({ host: "cdn" });
    console.log(
      `| ${label} | ${hub.log.length} (${hub.requests({ host: "hub" }).length} Hub + ${cdn.length} CDN) | ${hub.bytesSent().toLocaleString("en")} | ${outcome} |`,
    );
  };
  console.log("| case | requests | bytes sent | outcome |\n|---|---|---|---|");
  await one("fresh pull (5 files, 4.0 MB)", "bench/tiny", () => {});
  await one("cut at 1 MB, resumed with Range", "bench/tiny", () => hub.cuts.set("model-00001-of-00002.safetensors", 1_000_000));
  await one("stall after 16 bytes, resumed", "bench/tiny", () => hub.stalls.add("model-00002-of-00002.safetensors"));
  await one("one corrupted byte, refetched", "bench/tiny", () =>
    hub.corruptions.set("model-00002-of-00002.safetensors", { at: 5, times: 1 }),
  );
  await one("gated, no token (401)", "bench/gated", () => {});
  await one("gated, refused token (403)", "bench/gated", () => {}, { token: "hf_no" });
  await one("gated, accepted token", "bench/gated", () => {}, { token: "hf_ok" });
  await one("unsupported family (llama)", "bench/llama", () => {});
  await one("cached revision", "bench/tiny", () => {}, {}, false);
  await one("cached revision, HF_HUB_OFFLINE=1", "bench/tiny", () => {}, { offline: true }, false);
}

try {
  if (values.cases) {
    await cases();
    process.exit(0);
  }
  console.log(`file: ${mb(size)} of random bytes, transfer cut after ${mb(cutAt)}`);
  hub.cuts.set("model.safetensors", cutAt);
  const fresh = await run("fresh pull, cut once, resumed with Range");
  const cdnBytes = hub.requests({ host: "cdn" }).reduce((n, r) => n + r.bytes, 0);
  console.log(`  bytes of the file fetched twice: ${cdnBytes - size} (received before the cut but not yet written)`);
  const verified = { commit: fresh.snap.commit, files: fresh.snap.files };
  await run("pull of the cached revision, blobs hashed (first sight: another client's cache)");
  await run("pull of the cached revision, verified before (tessera pull's manifest)", false, verified);
  await run("pull of the cached revision (HF_HUB_OFFLINE=1)", true, verified);
  // Without resume: a client that starts over after the cut fetches cutAt + size.
  console.log(`  a client without resume would fetch ${mb(cutAt + size)} for the same cut (${mb(cutAt)} twice)`);
} finally {
  await hub.close();
  rmSync(scratch, { recursive: true, force: true });
}
