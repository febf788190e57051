// Unmasking policies (services/inference/decoder/policies/): for each policy and its main
// knob, on chat prompts of the bundled model (the model card's held-out "what does X mean"
// phrasings, and definitions, opposites, synonyms, sentences, kinds, JSON replies), the reply
// tokens per denoising forward, ms per reply (one request at a time), and the token-level F1
// of each reply against the `sequential` policy's reply to the same prompt (mean over
// prompts, and the lowest). Marks the Pareto front over (tokens per forward, F1). Also the
// confidence at which `sequential` commits reply tokens (what limits parallel commits), and
// the time of a 64-token reply under the model's default policy (its config.json's). Then the same on the tiny model.
//
//   npx tsx bench/decode.ts [model-dir …]       (default: models/tessera-bd-small, then the tiny model)
//   BENCH_POLICIES='spec;spec'                  policies to run (sequential is always run first)
//   BENCH_PROMPTS=N                             only the first N prompts
//   BENCH_THREADS=N                             ONNX Runtime intra-op threads (default: its own)
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { UnmaskPolicy } from "../services/inference/decoder/policies/policy.js";
import { buildPolicy } from "../services/inference/decoder/policies/registry.js";
import { selectPolicy } from "../services/inference/decoder/policies/select.js";
import { StopMatcher } from "../services/inference/decoder/reply-text.js";
import { createModelRuntime } from "../services/inference/engine/runtime.js";
import { loadModelDir, type ModelDir } from "../services/inference/engine/model-dir.js";
import { recordingRunner } from "../test/helpers/recording-runner.js";
import { TINY_MODEL_DIR } from "../test/helpers/tiny-model.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BUNDLED_DIR = path.join(ROOT, "models", "tessera-bd-small");
const THREADS = Number(process.env.BENCH_THREADS ?? 0);
const MAX_TOKENS = 160;
const AGREEMENT = 0.9;

const POLICIES = (
  process.env.BENCH_POLICIES ??
  [
    "threshold(0.9)",
    "threshold(0.8)",
    "threshold(0.7)",
    "threshold(0.6)",
    "threshold(0.5)",
    "fill(1.01)+threshold(0.9)",
    "fill(0.7)+threshold(0.9)",
    "fill(0.6)+threshold(0.9)",
    "fill(0.5)+threshold(0.9)",
    "fill(0.6)+threshold(0.8)",
    "fill(0.6)+threshold(0.7)",
    "fill(0.6)+threshold(0.6)",
    "credit(bound=2)+threshold(0.9)",
    "credit(bound=3)+threshold(0.9)",
    "credit(bound=9,steps=3)+threshold(0.9)",
    "subblocks(16)+threshold(0.9)",
    "subblocks(8)+threshold(0.9)",
    "fill(0.6)+credit(bound=3)+threshold(0.8)",
    "fill(0.6)+subblocks(16)+threshold(0.8)",
  ].join(";")
)
  .split(";")
  .map((s) => s.trim())
  .filter((s) => s !== "" && s !== "sequential");

/** Words from training/results/chat_samples.json (the model card's chat evaluation). */
const WORDS = ["giggle", "outgoing", "duelist", "shuddering", "harbor", "quiet", "generous", "garden"];
/** GLOSS_HELD_OUT of training/data-src/chat-tasks.mjs: never used in training. */
const HELD_OUT = [
  (w: string) => `Could you explain what the term ${w} refers to?`,
  (w: string) => `How would you define ${w}?`,
  (w: string) => `Tell me the sense of the word ${w}.`,
  (w: string) => `I came across "${w}" in a text. What is its meaning?`,
];

interface Prompt {
  content: string;
  json?: boolean;
}

const PROMPTS: Prompt[] = [
  ...WORDS.flatMap((w, i) => [HELD_OUT[i % 4]!(w), HELD_OUT[(i + 1) % 4]!(w)]).map((content) => ({ content })),
  ...["happy", "strong", "early", "ancient"].map((w) => ({ content: `What is the opposite of ${w}?` })),
  ...["big", "fast", "angry", "smart"].map((w) => ({ content: `What are synonyms of ${w}?` })),
  ...["river", "borrow", "bright", "window"].map((w) => ({ content: `Use ${w} in a sentence.` })),
  ...[
    ["dog", "animal"],
    ["oak", "tree"],
  ].map(([x, y]) => ({ content: `Is a ${x} a kind of ${y}?` })),
  ...["quickly", "mountain"].map((w) => ({ content: `What part of speech is "${w}"?` })),
  ...["apple", "teacher", "freedom", "storm"].map((w) => ({ content: `What does "${w}" mean? Answer in JSON.`, json: true })),
].slice(0, Number(process.env.BENCH_PROMPTS ?? 1e9));

/** Prompts whose replies may run long: the first one that reaches 64 tokens is the 64-token figure. */
const LONG = [
  "How would you define run?",
  "How would you define set?",
  "How would you define break?",
  "Tell me a long story about a river.",
];

function promptIds(model: ModelDir, p: Prompt): number[] {
  return model.tokenizer.encode(
    model.renderChat({
      messages: [{ role: "user", content: p.content }],
      tools: [],
      tool_choice: "auto",
      forced_tool: "",
      response_format: p.json === true ? "json" : "",
      json_schema: "",
      enable_thinking: false,
      add_generation_prompt: true,
    }),
  );
}

/** Token-level F1 of two replies (multisets of token ids); two empty replies agree. */
export function tokenF1(a: readonly number[], b: readonly number[]): number {
  if (a.length === 0 && b.length === 0) return 1;
  if (a.length === 0 || b.length === 0) return 0;
  const counts = new Map<number, number>();
  for (const t of b) counts.set(t, (counts.get(t) ?? 0) + 1);
  let common = 0;
  for (const t of a) {
    const n = counts.get(t) ?? 0;
    if (n > 0) {
      common++;
      counts.set(t, n - 1);
    }
  }
  if (common === 0) return 0;
  const precision = common / a.length;
  const recall = common / b.length;
  return (2 * precision * recall) / (precision + recall);
}

interface Reply {
  tokens: number[];
  reason: string;
  /** Denoising forwards (prefill excluded). */
  forwards: number;
  ms: number;
}

interface Row {
  policy: string;
  replyTokens: number;
  forwards: number;
  ms: number;
  meanF1: number;
  minF1: number;
  replies: Reply[];
}

async function runPolicy(model: ModelDir, policy: UnmaskPolicy, prompts: number[][], maxTokens = MAX_TOKENS): Promise<Reply[]> {
  let recorder: ReturnType<typeof recordingRunner> | undefined;
  const engine = createModelRuntime({
    name: "bench",
    servingIds: ["bench"],
    model,
    slots: 1,
    queue: 1,
    policy,
    wrapRunner: (inner) => {
      recorder = recordingRunner(inner);
      return recorder;
    },
  });
  const replies: Reply[] = [];
  try {
    for (const prompt of prompts) {
      const before = recorder!.forwards.length;
      const started = performance.now();
      const stream = await engine.scheduler.generate({
        prompt,
        maxTokens,
        policy,
        stops: new StopMatcher([]),
        decode: model.tokenizer.decode,
      });
      for await (const e of stream) {
        if (e.type !== "finished") continue;
        const ms = performance.now() - started;
        const forwards = recorder!.forwards.slice(before).filter((f) => f.fetch.output !== "none").length;
        replies.push({ tokens: e.finished.tokens, reason: e.finished.reason, forwards, ms });
      }
    }
  } finally {
    await engine.scheduler.close();
  }
  return replies;
}

function summarize(policy: string, replies: Reply[], reference: Reply[]): Row {
  const f1s = replies.map((r, i) => tokenF1(r.tokens, reference[i]!.tokens));
  const sum = (f: (r: Reply) => number) => replies.reduce((s, r) => s + f(r), 0);
  return {
    policy,
    replyTokens: sum((r) => r.tokens.length),
    forwards: sum((r) => r.forwards),
    ms: sum((r) => r.ms) / replies.length,
    meanF1: f1s.reduce((s, x) => s + x, 0) / f1s.length,
    minF1: Math.min(...f1s),
    replies,
  };
}

/** Rows not dominated in (tokens per forward, mean F1): nothing else is at least as good in both and better in one. */
function paretoFront(rows: readonly Row[]): Set<string> {
  const tpf = (r: Row) => r.replyTokens / r.forwards;
  const front = new Set<string>();
  for (const r of rows) {
    const dominated = rows.some((o) => o !== r && tpf(o) >= tpf(r) && o.meanF1 >= r.meanF1 && (tpf(o) > tpf(r) || o.meanF1 > r.meanF1));
    if (!dominated) front.add(r.policy);
  }
  return front;
}

/** Records, under `inner`, the confidence at which each non-end-of-turn token is committed. */
function confidenceProbe(inner: UnmaskPolicy): { policy: UnmaskPolicy; committed: number[] } {
  const committed: number[] = [];
  return {
    committed,
    policy: {
      ...inner,
      choose: (ctx) => {
        const chosen = inner.choose(ctx);
        for (const c of chosen) {
          const g = ctx.guesses.find((x) => x.index === c.index);
          if (g !== undefined && c.token !== ctx.eosTokenId) committed.push(g.confidence);
        }
        return chosen;
      },
    },
  };
}

async function benchModel(dir: string): Promise<void> {
  const model = await loadModelDir(dir, THREADS > 0 ? { intraOpThreads: THREADS } : {});
  try {
    const prompts = PROMPTS.map((p) => promptIds(model, p));
    console.log(`\n### ${path.basename(dir)}: ${prompts.length} chat prompts, max_tokens ${MAX_TOKENS}, one request at a time`);
    const probe = confidenceProbe(buildPolicy("sequential"));
    const reference = await runPolicy(model, probe.policy, prompts);
    const rows = [summarize("sequential", reference, reference)];
    for (const spec of POLICIES) {
      const policy = buildPolicy(spec);
      rows.push(summarize(policy.name, await runPolicy(model, policy, prompts), reference));
      const r = rows.at(-1)!;
      process.stderr.write(`  ${r.policy}: ${(r.replyTokens / r.forwards).toFixed(2)} tok/fwd, F1 ${r.meanF1.toFixed(3)}\n`);
    }
    const front = paretoFront(rows);
    console.log(
      "\n| policy | reply tokens / forward | forwards / reply | ms / reply | F1 vs sequential (mean) | lowest F1 | Pareto front |",
    );
    console.log("|---|---|---|---|---|---|---|");
    for (const r of rows) {
      console.log(
        `| \`${r.policy}\` | ${(r.replyTokens / r.forwards).toFixed(2)} | ${(r.forwards / prompts.length).toFixed(1)} | ${r.ms.toFixed(0)} | ${r.meanF1.toFixed(3)} | ${r.minF1.toFixed(3)} | ${front.has(r.policy) ? "yes" : ""} |`,
      );
    }
    const eligible = rows.filter((r) => r.meanF1 >= AGREEMENT).sort((a, b) => b.replyTokens / b.forwards - a.replyTokens / a.forwards);
    const best = eligible[0];
    if (best !== undefined) {
      console.log(
        `\nMost reply tokens per forward at F1 >= ${AGREEMENT}: \`${best.policy}\`, ${(best.replyTokens / best.forwards).toFixed(2)}.`,
      );
    }
    const c = probe.committed.sort((a, b) => a - b);
    const share = (t: number) => (c.filter((x) => x >= t).length / c.length).toFixed(2);
    console.log(
      `Confidence of the reply tokens as sequential commits them (${c.length} tokens): median ${c[Math.floor(c.length / 2)]!.toFixed(2)}; ` +
        `share at >= 0.9: ${share(0.9)}, >= 0.7: ${share(0.7)}, >= 0.5: ${share(0.5)}.`,
    );
    const replyTokens = reference.reduce((s, r) => s + r.tokens.length, 0);
    console.log(`Mean reply: ${(replyTokens / prompts.length).toFixed(1)} tokens.`);

    const own = selectPolicy({ model: model.config.decoding });
    const chosen = best === undefined || best.policy === own.name ? [] : [buildPolicy(best.policy)];
    const long = LONG.map((content) => promptIds(model, { content }));
    const probe64 = await runPolicy(model, own, long, 64);
    const longest = long[probe64.indexOf(probe64.reduce((a, b) => (b.tokens.length > a.tokens.length ? b : a)))]!;
    for (const policy of [own, ...chosen, buildPolicy("threshold(0.9)"), buildPolicy("sequential")]) {
      const runs = await runPolicy(model, policy, [longest, longest, longest], 64);
      const fastest = runs.reduce((a, b) => (b.ms < a.ms ? b : a));
      const n = fastest.tokens.length;
      const scaled = n < 64 ? `; ${((fastest.ms * 64) / n).toFixed(0)} ms scaled to 64 tokens` : "";
      console.log(
        `Longest reply at max_tokens 64 under \`${policy.name}\`${policy === own ? " (the model's default)" : ""}: ${n} tokens in ${fastest.ms.toFixed(0)} ms, best of 3 (${fastest.forwards} denoising forwards${scaled}).`,
      );
    }
  } finally {
    await model.close();
  }
}

const dirs = process.argv.slice(2);
for (const dir of dirs.length > 0 ? dirs : [BUNDLED_DIR, TINY_MODEL_DIR].filter((d) => existsSync(path.join(d, "model.onnx")))) {
  await benchModel(dir);
}
