// Tessera against llama.cpp on the same CPU and the same weights (issue 36): a random checkpoint in
// Qwen3-1.7B's layout (or the CI size's) converted by tessera convert as a plain autoregressive
// model (int8) and written as GGUF (Q8_0, Q4_K_M) for llama.cpp through node-llama-cpp. Same
// threads, same token ids; the sides alternate within each round, each cell is the median of the
// rounds, and the ratios are Tessera over llama.cpp Q8_0 (> 1 = Tessera faster), except
// block4_forward_over_llama_token (a block-4 forward's ms over one llama.cpp decode token's).
//
//   npx tsx bench/cpu-peer.ts [--size ci|1.7b] [--rounds N] [--threads N] [--peers q8_0,q4_k_m] [--json]
//
// The checkpoint, the conversion and the GGUF files are made on first use under .cache/ (ci: a few
// minutes; 1.7b: about 10 minutes and 10 GB peak, in the converter).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { LlamaSide } from "./cpu_peer/llama-side.js";
import { type Question, TesseraSide } from "./cpu_peer/tessera-side.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    size: { type: "string", default: "ci" },
    rounds: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
    peers: { type: "string", default: "q8_0,q4_k_m" },
    json: { type: "boolean", default: false },
  },
});
const CHECKPOINTS: Record<string, string> = { ci: "qwen3-118m-ci", "1.7b": "qwen3-1.7b" };
const name = CHECKPOINTS[values.size];
if (name === undefined) throw new Error(`--size ${values.size}: one of ${Object.keys(CHECKPOINTS).join(", ")}`);
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const peers = values.peers.split(",");
const log = (line: string) => console.error(line);

const PYTHON = path.join(ROOT, "convert/.venv/bin/python");
const ckpt = path.join(ROOT, ".cache/full/ckpt", name);
// Converted with the `present_new.*` outputs (docs/model-contract.md, "New key/values"); a
// conversion made before them stays under its old name (`-int8`) for whoever reads it, and this
// one is derived from it where it exists (bench/cpu_peer/with_new_kv.py: the converter's graph pass).
const oldModelDir = path.join(ROOT, ".cache/cpu-peer", `${name}-int8`);
const modelDir = path.join(ROOT, ".cache/cpu-peer", `${name}-int8-newkv`);
const gguf = (type: string) => path.join(ROOT, ".cache/cpu-peer", `${name}-${type}.gguf`);

function python(args: string[]): void {
  log(`$ ${path.relative(ROOT, PYTHON)} ${args.join(" ")}`);
  const r = spawnSync(PYTHON, args, { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, PYTHONPATH: "convert" } });
  if (r.status !== 0) throw new Error(`${args.join(" ")} exited ${r.status}`);
}

if (!existsSync(path.join(ckpt, "config.json"))) python(["bench/full_size/make_checkpoints.py", name, ckpt]);
if (!existsSync(path.join(modelDir, "model.onnx"))) {
  if (existsSync(path.join(oldModelDir, "model.onnx"))) python(["bench/cpu_peer/with_new_kv.py", oldModelDir, modelDir]);
  else python(["-m", "tessera_convert", ckpt, modelDir, "--weights", "int8"]);
}
for (const type of peers) if (!existsSync(gguf(type))) python(["bench/cpu_peer/to_gguf.py", ckpt, gguf(type), "--type", type]);

function rssMiB(): { rss: number; peak: number } {
  const status = readFileSync("/proc/self/status", "utf8");
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const rss0 = rssMiB().rss;
const tessera = await TesseraSide.load(modelDir, threads);
const SENTENCE = "The weather in Paris is sunny today, and the quick brown fox jumps over the lazy dog. ";
const filler = tessera.encode(SENTENCE.repeat(400));
if (filler.length < 2560) throw new Error(`the filler text is ${filler.length} tokens; 2,560 needed`);
const prompt = (n: number) => filler.slice(0, n);
const STATE = (() => {
  let text = "";
  while (tessera.encode(text).length < 500) text += SENTENCE;
  return text;
})();
const QUESTIONS: Question[] = [
  { text: "\nQuestion: Is it sunny in Paris? Answer Yes or No.\n", labels: ["Yes", "No"] },
  { text: "\nQuestion: Which animal jumps? Options: A. fox, B. dog, C. cat, D. bird.\n", labels: ["A", "B", "C", "D"] },
  { text: "\nQuestion: How lazy is the dog, from 1 to 5?\n", labels: ["1", "2", "3", "4", "5"] },
  { text: "\nQuestion: Is the fox brown? Answer Yes or No.\n", labels: ["Yes", "No"] },
];
const decisionIds = await tessera.decisionTokens(STATE, QUESTIONS);
const DECODE_TOKENS = 33;
const BLOCKS = [1, 4, 8, 16, 64];
/** Timed forwards per block size and round (after one left out); a cell is the median of all of them. */
const BLOCK_SAMPLES = 3;
// Warm-up (first-run allocations, the kernels' packing), then the memory each side holds.
await tessera.decision(STATE, QUESTIONS);
await tessera.decode(prompt(512), 4);
const rssTessera = rssMiB().rss - rss0;

const llama: Record<string, LlamaSide> = {};
const rssLlama: Record<string, number> = {};
for (const type of peers) {
  llama[type] = await LlamaSide.load(gguf(type), threads, 4096, 512);
  await llama[type]!.decision(decisionIds.shared, decisionIds.rows);
  await llama[type]!.decode(prompt(512), 4);
  // The process's RSS moves with the JavaScript heap's collections by more than a small model's
  // size: llama.cpp's own account instead (the mapped model file and the context's buffers).
  rssLlama[type] = llama[type]!.residentBytes() / 2 ** 20;
}

type Cells = Record<string, number[]>;
const cells: Cells = {};
const record = (key: string, value: number) => {
  cells[key] ??= [];
  cells[key].push(value);
};

for (let round = 0; round < rounds; round++) {
  const sides: (["tessera", TesseraSide] | [string, LlamaSide])[] = [
    ["tessera", tessera],
    ...peers.map((t) => [t, llama[t]!] as [string, LlamaSide]),
  ];
  if (round % 2 === 1) sides.reverse();
  for (const [label, side] of sides) {
    for (const n of [512, 2048]) {
      let ms: number;
      if (side instanceof TesseraSide) {
        // The cache goes back to the engine's pool, as a served request's does (llama.cpp reuses its context's).
        const prefilled = await side.prefill(prompt(n));
        prefilled.kv.dispose();
        ms = prefilled.ms;
      } else {
        ms = await side.prefill(prompt(n));
      }
      record(`${label}.pp${n}`, (n / ms) * 1000);
    }
    if (side instanceof TesseraSide) {
      // A busy server's decode: the other side's turn outlasts the engine's idle release (30 s,
      // kv-pool.ts and worker-mirrors.ts), whose fresh memory costs 0.4 s per 117 MB on this VM;
      // a short reply first brings the memory back, as llama.cpp's context keeps its own.
      await side.decode(prompt(512), 4);
      const { msPerToken, steps } = await side.decode(prompt(512), DECODE_TOKENS);
      if (steps < DECODE_TOKENS) log(`note: Tessera's reply stopped after ${steps} tokens (a stop token)`);
      record("tessera.decode", msPerToken);
      const { kv } = await side.prefill(prompt(512));
      for (const size of BLOCKS) {
        // A denoising step runs at its block's size step after step: the first forward at a new
        // size (ONNX Runtime planning and growing its buffers for the shape) is left out.
        await side.blockForward(kv, size, filler[7]!);
        for (let i = 0; i < BLOCK_SAMPLES; i++) record(`tessera.block${size}`, await side.blockForward(kv, size, filler[7]!));
      }
      kv.dispose();
      record("tessera.decision", await side.decision(STATE, QUESTIONS));
    } else {
      await side.decode(prompt(512), 4);
      record(`${label}.decode`, await side.decode(prompt(512), DECODE_TOKENS));
      record(`${label}.decision`, await side.decision(decisionIds.shared, decisionIds.rows));
    }
    log(`round ${round + 1}/${rounds}: ${label} done`);
  }
}

const m = (key: string) => median(cells[key]!);
const fmt = (x: number, digits = 1) => x.toFixed(digits);
const ref = peers[0]!;
const columns = ["tessera int8", ...peers.map((p) => `llama.cpp ${p.toUpperCase()}`)];
const row = (label: string, key: string, digits = 1) =>
  `| ${label} | ${[m(`tessera.${key}`), ...peers.map((p) => m(`${p}.${key}`))].map((x) => fmt(x, digits)).join(" | ")} |`;
const lines = [
  `## ${name}: Tessera (int8, ONNX Runtime) against llama.cpp (node-llama-cpp), ${threads} threads, ${rounds} rounds, medians`,
  "",
  `| | ${columns.join(" | ")} |`,
  `|---|${columns.map(() => "---").join("|")}|`,
  row("prompt processing, 512 tokens (tokens/s)", "pp512"),
  row("prompt processing, 2,048 tokens (tokens/s)", "pp2048"),
  row(`decode after 512 tokens (ms per token; Tessera: its AR mode, block size 1, served)`, "decode", 2),
  row(`decision: 4 questions on a ${decisionIds.shared.length}-token state (ms)`, "decision"),
  `| memory of the loaded, warmed model (MiB; Tessera: process RSS added; llama.cpp: model + context state) | ${[rssTessera, ...peers.map((p) => rssLlama[p]!)].map((x) => fmt(x, 0)).join(" | ")} |`,
  "",
  `Tessera's forward over a 512-token past against one llama.cpp ${ref.toUpperCase()} decode token (${fmt(m(`${ref}.decode`), 2)} ms):`,
  "",
  "| block (tokens per forward) | ms per forward | break-even tokens per forward (forward / llama.cpp token) |",
  "|---|---|---|",
  ...BLOCKS.map((b) => `| ${b} | ${fmt(m(`tessera.block${b}`), 2)} | ${fmt(m(`tessera.block${b}`) / m(`${ref}.decode`), 2)} |`),
  "",
  `process peak resident memory (both sides loaded): ${fmt(rssMiB().peak, 0)} MiB`,
];
console.log(lines.join("\n"));

const ratio = (key: string, higherIsFaster: boolean) =>
  higherIsFaster ? m(`tessera.${key}`) / m(`${ref}.${key}`) : m(`${ref}.${key}`) / m(`tessera.${key}`);
const pp512 = ratio("pp512", true);
const pp2048 = ratio("pp2048", true);
const summary = {
  size: values.size,
  threads,
  rounds,
  peer: `llama.cpp ${ref}`,
  pp_ratio: Math.sqrt(pp512 * pp2048),
  pp512_ratio: pp512,
  pp2048_ratio: pp2048,
  ar_decode_ratio: ratio("decode", false),
  block4_forward_over_llama_token: m("tessera.block4") / m(`${ref}.decode`),
  decision_ratio: ratio("decision", false),
  break_even_tpf: Object.fromEntries(BLOCKS.map((b) => [b, m(`tessera.block${b}`) / m(`${ref}.decode`)])),
  rss_mib: { tessera: rssTessera, ...rssLlama },
};
if (values.json) console.log(JSON.stringify(summary));
await tessera.close();
for (const side of Object.values(llama)) await side.close();
