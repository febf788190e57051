#!/usr/bin/env node
// Checks a model directory against docs/model-contract.md with onnxruntime-node (the runtime
// the engine uses), for machines whose Python has no onnxruntime.
//
//   node training/model/check_onnx.mjs <model-dir> [reference.json]
//
// reference.json is what `export_onnx.py --reference` (or make_test_model.py, inside
// "forward") writes. Exits 1 on the first failed check.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";

const [dir, refPath] = process.argv.slice(2);
if (!dir) {
  console.error("usage: node training/model/check_onnx.mjs <model-dir> [reference.json]");
  process.exit(2);
}
const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
let reference = refPath ? JSON.parse(readFileSync(refPath, "utf8")) : undefined;
if (reference?.forward) reference = reference.forward;

const { num_hidden_layers: L, num_key_value_heads: HKV, head_dim: D, vocab_size: V, block_size: BS } = config;
const NEG = -1e9;

function ok(cond, what) {
  console.log(`${cond ? "ok  " : "FAIL"} ${what}`);
  if (!cond) process.exit(1);
}

for (const key of [
  "model_type",
  "num_hidden_layers",
  "num_attention_heads",
  "num_key_value_heads",
  "head_dim",
  "hidden_size",
  "vocab_size",
  "block_size",
  "max_position_embeddings",
  "mask_token_id",
  "eos_token_id",
  "pad_token_id",
  "capabilities",
  "onnx_file",
]) {
  ok(config[key] !== undefined, `config.json has ${key}`);
}

const session = await ort.InferenceSession.create(join(dir, config.onnx_file ?? "model.onnx"));
const pastNames = [];
const presentNames = [];
for (let l = 0; l < L; l++) {
  pastNames.push(`past_key_values.${l}.key`, `past_key_values.${l}.value`);
  presentNames.push(`present.${l}.key`, `present.${l}.value`);
}
ok(JSON.stringify(session.inputNames) === JSON.stringify(["input_ids", "position_ids", "attention_mask", ...pastNames]), "input names");
ok(JSON.stringify(session.outputNames) === JSON.stringify(["logits", ...presentNames]), "output names");

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);
const int64 = (rows) => new ort.Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);

// One row: current ids at positions [from, from + ids.length) after a past of `from` slots.
async function forward(ids, from, past) {
  const S = ids.length;
  const T = from + S;
  const mask = new Float32Array(S * T).fill(NEG);
  for (let i = 0; i < S; i++) for (let j = 0; j < T; j++) if (Math.floor(j / BS) <= Math.floor((from + i) / BS)) mask[i * T + j] = 0;
  const feeds = {
    input_ids: int64([ids]),
    position_ids: int64([range(from, T)]),
    attention_mask: new ort.Tensor("float32", mask, [1, 1, S, T]),
  };
  pastNames.forEach((n, i) => {
    feeds[n] = past ? past[i] : new ort.Tensor("float32", new Float32Array(0), [1, HKV, 0, D]);
  });
  const out = await session.run(feeds);
  return { logits: out.logits, presents: presentNames.map((n) => out[n]) };
}

const relDiff = (a, b) => {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / (1 + Math.abs(b[i])));
  return worst;
};

const ids = reference?.input_ids ?? range(0, 150).map((i) => (i * 7919) % V);
const N = ids.length;
const full = await forward(ids, 0);
ok(JSON.stringify(full.logits.dims) === JSON.stringify([1, N, V]), `logits [1, ${N}, ${V}] with P = 0`);
ok(
  full.presents.every((t) => JSON.stringify(t.dims) === JSON.stringify([1, HKV, N, D])),
  `presents [1, ${HKV}, ${N}, ${D}]`,
);

if (reference) {
  let worst = 0;
  reference.rows.forEach((r, k) => {
    worst = Math.max(worst, relDiff(full.logits.data.subarray(r * V, (r + 1) * V), reference.logits_rows[k]));
  });
  ok(worst <= 1e-4, `logits match PyTorch (max diff ${worst.toExponential(2)} relative to 1 + |x|)`);
  let flips = 0;
  for (let p = 0; p < N; p++) {
    const row = Array.from(full.logits.data.subarray(p * V, (p + 1) * V));
    const sorted = [...row].sort((a, b) => b - a);
    if (row.indexOf(sorted[0]) !== reference.argmax[p] && sorted[0] - sorted[1] > 1e-3) flips++;
  }
  ok(flips === 0, "argmax matches PyTorch at every position");
  const layer = Number(reference.present.name.split(".")[1]);
  const value = full.presents[2 * layer + 1];
  const at = reference.present.position;
  let pw = 0;
  reference.present.heads.forEach((want, h) => {
    pw = Math.max(pw, relDiff(value.data.subarray((h * N + at) * D, (h * N + at + 1) * D), want));
  });
  ok(pw <= 1e-4, `${reference.present.name} matches PyTorch (max diff ${pw.toExponential(2)})`);
}

const cut = Math.floor((N - 1) / BS) * BS;
if (cut > 0) {
  const prefix = await forward(ids.slice(0, cut), 0);
  const rest = await forward(ids.slice(cut), cut, prefix.presents);
  const d = relDiff(rest.logits.data, full.logits.data.subarray(cut * V));
  ok(d <= 1e-4, `KV of ${cut} complete-block tokens + ${N - cut} more = one pass (max diff ${d.toExponential(2)})`);
}

async function timeIt(S, P) {
  const past =
    P > 0
      ? (
          await forward(
            range(0, P).map((i) => i % V),
            0,
          )
        ).presents
      : undefined;
  const times = [];
  for (let i = 0; i < 7; i++) {
    const t = performance.now();
    await forward(
      range(0, S).map((i) => (i * 31) % V),
      P,
      past,
    );
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[3].toFixed(1);
}
console.log(
  `time  B=1 S=${BS} P=0: ${await timeIt(BS, 0)} ms;  P=${4 * BS}: ${await timeIt(BS, 4 * BS)} ms (median of 7, default threads)`,
);
