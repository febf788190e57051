// A decision's readout forward on a converted model, the head at every position against the head
// at the answer slots only (onnx-head-matmul-at.ts), in one session, alternated:
//   npx tsx bench/full_size/head-at.ts <converted-model-dir> [rows=4] [seq=64] [past=512] [rounds=10]
// "whole" feeds tessera_logits_at every position (what a forward computed before the head was
// narrowed: [B, S, V]); "slots" one position per row ([B, 1, V]). Medians of wall ms.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { HEAD_SWITCH, LOGITS_AT, withSkippableHead } from "../../services/inference/onnx/onnx-head.js";

const [dir, rowsArg, seqArg, pastArg, roundsArg] = process.argv.slice(2);
if (dir === undefined) throw new Error("usage: head-at.ts <converted-model-dir> [rows] [seq] [past] [rounds]");
const [B, S, past, rounds] = [Number(rowsArg ?? 4), Number(seqArg ?? 64), Number(pastArg ?? 512), Number(roundsArg ?? 10)];
const c = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, number>;
const edited = withSkippableHead(readFileSync(join(dir, "model.onnx")), c.vocab_size!);
if (edited === undefined) throw new Error("the head could not be made skippable");
const threads = Number(process.env.BENCH_THREADS ?? 2);
// The edited graph beside the original (ONNX Runtime resolves external data next to the model
// file and refuses links that leave its directory); removed at the end.
const staged = join(dir, `.model.head-at-${process.pid}.onnx`);
writeFileSync(staged, edited, { flag: "wx" });
process.on("exit", () => rmSync(staged, { force: true }));
const session = await ort.InferenceSession.create(staged, {
  intraOpNumThreads: threads,
  graphOptimizationLevel: "all",
});
if (!session.inputNames.includes(LOGITS_AT)) throw new Error("the head was not narrowed (no tessera_logits_at input)");

const total = past + S;
const feeds: Record<string, ort.Tensor> = {
  input_ids: new ort.Tensor(
    "int64",
    BigInt64Array.from({ length: B * S }, (_, i) => BigInt(10 + ((i * 37) % 1000))),
    [B, S],
  ),
  position_ids: new ort.Tensor(
    "int64",
    BigInt64Array.from({ length: B * S }, (_, i) => BigInt(past + (i % S))),
    [B, S],
  ),
  attention_mask: new ort.Tensor("float32", new Float32Array(B * S * total), [B, 1, S, total]),
  [HEAD_SWITCH]: new ort.Tensor("bool", [true], []),
};
for (let l = 0; l < c.num_hidden_layers!; l++) {
  for (const kind of ["key", "value"]) {
    const n = B * c.num_key_value_heads! * past * c.head_dim!;
    feeds[`past_key_values.${l}.${kind}`] = new ort.Tensor(
      "float32",
      Float32Array.from({ length: n }, (_, i) => Math.sin(i)),
      [B, c.num_key_value_heads!, past, c.head_dim!],
    );
  }
}
const at = (perRow: number) =>
  new ort.Tensor(
    "int64",
    BigInt64Array.from({ length: B * perRow }, (_, i) => BigInt(Math.floor(i / perRow) * S + (perRow === S ? i % S : S - 1))),
    [B, perRow],
  );
const variants = { whole: at(S), slots: at(1) };
const times: Record<keyof typeof variants, number[]> = { whole: [], slots: [] };
let same = true;
for (let r = -1; r < rounds; r++) {
  const logits: Record<string, Float32Array> = {};
  for (const name of Object.keys(variants) as (keyof typeof variants)[]) {
    const t = performance.now();
    const out = await session.run({ ...feeds, [LOGITS_AT]: variants[name] }, ["logits"]);
    if (r >= 0) times[name].push(performance.now() - t);
    logits[name] = out.logits!.data as Float32Array;
  }
  // The slot logits are the whole head's at those positions, to the bit.
  const V = c.vocab_size!;
  for (let b = 0; b < B; b++) {
    const whole = logits.whole!.subarray((b * S + S - 1) * V, (b * S + S) * V);
    const slot = logits.slots!.subarray(b * V, (b + 1) * V);
    if (!Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength).equals(Buffer.from(slot.buffer, slot.byteOffset, slot.byteLength)))
      same = false;
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  JSON.stringify({
    model: dir,
    rows: B,
    seq: S,
    past,
    threads,
    rounds,
    wholeMs: median(times.whole),
    slotsMs: median(times.slots),
    ratio: median(times.whole) / median(times.slots),
    sameBits: same,
  }),
);
await session.release();
