// A model directory served as users run it (`tessera serve`, one process per model, one after
// another): load time and resident memory, greedy chat replies of up to 64 tokens on the
// bench prompts, and a 4-question decision on a ~500-token state. With several directories,
// the first is the reference: each other's replies are compared token for token and its
// decision probabilities number for number (the bundled model's weight format is chosen so).
//   npx tsx bench/full_size/serve.ts <model-dir> [<model-dir> ...]
//     [BENCH_THREADS=2] [BENCH_PROMPTS=6] [BENCH_DECISIONS=3] [BENCH_STATE_TOKENS=500]
import path from "node:path";
import { performance } from "node:perf_hooks";
import { startBenchServer } from "../_server.js";

const THREADS = process.env["BENCH_THREADS"] ?? "2";
const PROMPT_COUNT = Number(process.env["BENCH_PROMPTS"] ?? 6);
const DECISIONS = Number(process.env["BENCH_DECISIONS"] ?? 3);
const STATE_TOKENS = Number(process.env["BENCH_STATE_TOKENS"] ?? 500);

/** bench/decode.ts's kinds of prompt (held-out definitions, opposites, synonyms, sentences). */
const PROMPTS = [
  "Could you explain what the term giggle refers to?",
  "How would you define outgoing?",
  "Tell me the sense of the word duelist.",
  'I came across "harbor" in a text. What is its meaning?',
  "What is the opposite of happy?",
  "What is the opposite of ancient?",
  "What are synonyms of fast?",
  "What are synonyms of smart?",
  "Use river in a sentence.",
  "Use window in a sentence.",
  "Is a dog a kind of animal?",
  'What part of speech is "quickly"?',
  "Tell me a long story about a river.",
].slice(0, PROMPT_COUNT);

const SENTENCE =
  "The nightly export to the data warehouse failed again with a timeout after forty minutes, and the customer says their finance team cannot close the month without it. ";
const QUESTIONS = {
  urgent: { type: "noul", instructions: "Is this ticket urgent?" },
  team: {
    type: "choice",
    instructions: "Which team owns this?",
    criteria: { billing: null, "data platform": "exports", storage: "uploads and disks", support: null },
  },
  mood: { type: "score", instructions: "How upset is the customer?", criteria: ["calm", "concerned", "upset", "furious"] },
  escalate: { type: "noul", instructions: "Should an engineer be paged?", criteria: { true: "page now", false: "next business day" } },
};

interface Answer {
  type: string;
  noul?: number;
  probabilities?: Record<string, number>;
}
interface Served {
  dir: string;
  loadMs: number;
  rssMiB: number;
  replies: { text: string; tokens: number; ms: number }[];
  decision: { ms: number[]; inputTokens: number; answers: Record<string, Answer> };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function numbers(a: Answer): number[] {
  return a.type === "noul" ? [a.noul!] : Object.values(a.probabilities ?? {});
}

async function measure(dir: string): Promise<Served> {
  const started = performance.now();
  const server = await startBenchServer(dir, { TESSERA_INTRA_OP_THREADS: THREADS });
  // Listening comes first; /readyz answers 200 once the model is loaded.
  while ((await fetch(`${server.url}/readyz`)).status !== 200) await new Promise((r) => setTimeout(r, 100));
  const loadMs = performance.now() - started;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${server.key}` },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  try {
    const rssMiB = (await server.rss()) / 2 ** 20;
    const replies: Served["replies"] = [];
    for (const content of PROMPTS) {
      const t = performance.now();
      const r = (await post("/v1/chat/completions", {
        model: "textmodel-26b",
        messages: [{ role: "user", content }],
        max_tokens: 64,
        temperature: 0,
      })) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
      replies.push({ text: r.choices[0]!.message.content, tokens: r.usage.completion_tokens, ms: performance.now() - t });
    }
    const state = SENTENCE.repeat(Math.ceil(STATE_TOKENS / 32));
    const ms: number[] = [];
    let last: { answers: Record<string, Answer>; usage?: { input_tokens?: number } } | undefined;
    for (let i = 0; i < DECISIONS; i++) {
      const t = performance.now();
      last = (await post("/v1/systemone", { model: "decisionmodel-latest", state, questions: QUESTIONS })) as typeof last;
      ms.push(performance.now() - t);
    }
    return { dir, loadMs, rssMiB, replies, decision: { ms, inputTokens: last?.usage?.input_tokens ?? 0, answers: last!.answers } };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const dirs = process.argv.slice(2).map((d) => path.resolve(d));
  if (dirs.length === 0) throw new Error("usage: npx tsx bench/full_size/serve.ts <model-dir> [<model-dir> ...]");
  const results: Served[] = [];
  for (const dir of dirs) {
    const r = await measure(dir);
    results.push(r);
    const long = r.replies.filter((x) => x.tokens >= 64);
    console.log(
      JSON.stringify({
        dir,
        loadMs: Math.round(r.loadMs),
        rssMiB: Math.round(r.rssMiB),
        replyMsMedian: Math.round(median(r.replies.map((x) => x.ms))),
        reply64Ms: long.length > 0 ? Math.round(median(long.map((x) => x.ms))) : null,
        replyTokens: r.replies.map((x) => x.tokens),
        decisionMsMedian: Math.round(median(r.decision.ms)),
        decisionInputTokens: r.decision.inputTokens,
        answers: r.decision.answers,
      }),
    );
  }
  const [ref, ...others] = results;
  for (const o of others) {
    const same = o.replies.filter((x, i) => x.text === ref!.replies[i]!.text).length;
    let worst = 0;
    for (const [name, a] of Object.entries(ref!.decision.answers)) {
      const b = numbers(o.decision.answers[name]!);
      for (const [i, x] of numbers(a).entries()) worst = Math.max(worst, Math.abs(x - b[i]!));
    }
    console.log(
      `${o.dir} against ${ref!.dir}: greedy replies identical ${same}/${ref!.replies.length}; ` +
        `largest decision probability difference ${worst.toFixed(4)} (keeps its answers: ${same === ref!.replies.length && worst <= 0.01 ? "yes" : "NO"})`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
