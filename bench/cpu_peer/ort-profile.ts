// ONNX Runtime's own profile of one forward of S tokens over a 512-slot past (bench/cpu-peer.md,
// "Where a forward's time goes"): the model file as converted (no engine edits), on this thread,
// 1 thread; 4 runs, the first (warm-up) left out; per run, kernel time by operator.
//
//   npx tsx bench/cpu_peer/ort-profile.ts MODEL_DIR [S]     # e.g. .cache/cpu-peer/qwen3-1.7b-int8-newkv 4
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as ort from "onnxruntime-node";

const [dir, seq = "4"] = process.argv.slice(2);
if (dir === undefined) throw new Error("usage: ort-profile.ts MODEL_DIR [S]");
const S = Number(seq);
const P = 512;
const cfg = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8"));
const L: number = cfg.num_hidden_layers;
const H: number = cfg.num_key_value_heads;
const D: number = cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads;
const out = mkdtempSync(path.join(tmpdir(), "tessera-ort-profile-"));
const session = await ort.InferenceSession.create(path.join(dir, "model.onnx"), {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: "all",
  enableProfiling: true,
  profileFilePrefix: path.join(out, "profile"),
});
const feeds: Record<string, ort.Tensor> = {
  input_ids: new ort.Tensor(
    "int64",
    BigInt64Array.from({ length: S }, (_, i) => BigInt(100 + i)),
    [1, S],
  ),
  position_ids: new ort.Tensor(
    "int64",
    BigInt64Array.from({ length: S }, (_, i) => BigInt(P + i)),
    [1, S],
  ),
  attention_mask: new ort.Tensor("float32", new Float32Array(S * (P + S)), [1, 1, S, P + S]),
};
for (let l = 0; l < L; l++) {
  for (const kind of ["key", "value"]) {
    feeds[`past_key_values.${l}.${kind}`] = new ort.Tensor("float32", new Float32Array(H * P * D).fill(0.01), [1, H, P, D]);
  }
}
for (let i = 0; i < 4; i++) await session.run(feeds, ["logits"]);
session.endProfiling();
await session.release();
const file = readdirSync(out).find((f) => f.endsWith(".json"));
if (file === undefined) throw new Error(`no profile written in ${out}`);
type Event = { cat: string; name: string; ts: number; dur: number; args?: { op_name?: string } };
const events = JSON.parse(readFileSync(path.join(out, file), "utf8")) as Event[];
rmSync(out, { recursive: true, force: true });
const runs = events.filter((e) => e.cat === "Session" && e.name === "model_run").slice(1);
for (const run of runs) {
  const byOp = new Map<string, number>();
  for (const e of events) {
    if (e.cat !== "Node" || !e.name.endsWith("_kernel_time") || e.ts < run.ts || e.ts > run.ts + run.dur) continue;
    const op = e.args?.op_name ?? "?";
    byOp.set(op, (byOp.get(op) ?? 0) + e.dur);
  }
  const kernels = [...byOp.values()].reduce((a, b) => a + b, 0);
  const top = [...byOp].sort((a, b) => b[1] - a[1]).slice(0, 6);
  console.log(
    `run ${(run.dur / 1000).toFixed(1)} ms, kernels ${(kernels / 1000).toFixed(1)} ms: ${top.map(([op, us]) => `${op} ${(us / 1000).toFixed(1)}`).join(", ")}`,
  );
}
