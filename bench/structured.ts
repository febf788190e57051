// Structured replies that finish (docs/constrained-decoding.md, "Finishing a value"): 44 prompt ×
// schema pairs (bench/_structured-cases.ts) through the official openai client against
// `tessera serve` on one model, with the default max_tokens, twice in one run: "before" with
// the number bounds, the loop guard and the length budgets switched off through their
// settings, "after" with the defaults. Per side: the share of replies that end with `stop` /
// `tool_calls` and validate (ajv), how many reach `length`, mean completion tokens, tokens per
// denoising forward (from the server's `generation finished` log lines, prefill forwards left
// out) and ms per reply (the replies run BENCH_CONCURRENCY at a time, default 2, so a looping
// "before" side stays bounded in time).
//
// On a canvas model (DiffusionGemma, BENCH_MODEL_DIR=<its directory>) a third side, "free", asks
// each case's prompt without its response format or tools, with max_tokens set to the length of
// that case's "after" reply, for the denoiser steps of unconstrained replies of the same length;
// the table adds grammar ms per step (docs/constrained-decoding.md, "On a canvas").
//
//   npx tsx bench/structured.ts [before,after]   (BENCH_MODELS=bundled by default)
//   BENCH_MODEL_DIR=/tmp/dg-model npx tsx bench/structured.ts after,free
import { readFileSync } from "node:fs";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { MODEL_DIRS, startBenchServer } from "./_server.js";
import { STRUCTURED_CASES, type StructuredCase } from "./_structured-cases.js";

const SIDES: Record<string, Record<string, string>> = {
  before: {
    TESSERA_GRAMMAR_NUMBER_BOUNDS: "off",
    TESSERA_GRAMMAR_LOOP_REPEATS: "0",
    TESSERA_GRAMMAR_STRING_BUDGET: "0",
    TESSERA_GRAMMAR_ITEM_BUDGET: "0",
    TESSERA_GRAMMAR_REPLY_BUDGET: "off",
  },
  after: {},
  free: {},
};
const sides = (process.argv[2] ?? "before,after").split(",");
const modelDir = process.env["BENCH_MODEL_DIR"];
const modelName = modelDir ?? process.env["BENCH_MODELS"] ?? "bundled";
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? 2);
const only = process.env["BENCH_CASES"] !== undefined ? new RegExp(process.env["BENCH_CASES"]) : undefined;
const cases = STRUCTURED_CASES.filter((c) => only === undefined || only.test(c.name));
const ajv = new Ajv({ strict: false });

interface Outcome {
  name: string;
  finish: string;
  valid: boolean;
  tokens: number;
  ms: number;
  text: string;
}

/** Whether a finished reply holds a complete value of the case's schema (or, under auto tools, plain text). */
function validates(c: StructuredCase, message: OpenAI.Chat.ChatCompletionMessage, finish: string): boolean {
  if (finish !== "stop" && finish !== "tool_calls") return false;
  const parse = (text: string | null | undefined): unknown => {
    try {
      return JSON.parse(text ?? "");
    } catch {
      return Symbol("invalid");
    }
  };
  if (c.kind !== "tools") return ajv.validate(c.schema, parse(message.content));
  const calls = message.tool_calls ?? [];
  if (calls.length === 0) return finish === "stop" && !/<\/?tool_call>/.test(message.content ?? "") && c.body.tool_choice === "auto";
  return calls.every((call) => {
    if (call.type !== "function") return false;
    const schema = (c.schema as Record<string, object>)[call.function.name];
    return schema !== undefined && ajv.validate(schema, parse(call.function.arguments));
  });
}

/** Each case's "after" reply length, for the "free" side's max_tokens. */
const afterTokens = new Map<string, number>();

/** A case's request as the side asks it: "free" drops the response format and the tools. */
function bodyOf(c: StructuredCase, side: string): StructuredCase["body"] {
  if (side !== "free") return c.body;
  const { response_format: _f, tools: _t, tool_choice: _c, ...rest } = c.body;
  return { ...rest, max_tokens: Math.max(1, afterTokens.get(c.name) ?? 256) };
}

async function runSide(side: string) {
  const server = await startBenchServer(modelDir ?? MODEL_DIRS[modelName]!, { TESSERA_INTRA_OP_THREADS: "2", ...SIDES[side] });
  try {
    const client = new OpenAI({ apiKey: server.key, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 600_000 });
    const model = "textmodel-26b";
    // Untimed: one token of each case compiles its grammar (left out of the figures below).
    for (const c of cases) await client.chat.completions.create({ ...bodyOf(c, side), model, max_tokens: 1 });
    const logFrom = readFileSync(server.logFile, "utf8").length;
    const outcomes: Outcome[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < cases.length) {
          const c = cases[next++]!;
          const t0 = performance.now();
          // Streamed (and put back together by the client), so a long reply is not cut by the
          // HTTP client's 300 s response-headers timeout.
          const reply = await client.chat.completions
            .stream({ ...bodyOf(c, side), model, stream: true, stream_options: { include_usage: true } })
            .finalChatCompletion()
            .catch((err: unknown) => err as Error);
          if (reply instanceof Error) {
            outcomes.push({ name: c.name, finish: "error", valid: false, tokens: 0, ms: performance.now() - t0, text: reply.message });
            continue;
          }
          const choice = reply.choices[0]!;
          if (side === "after") afterTokens.set(c.name, reply.usage?.completion_tokens ?? 0);
          outcomes.push({
            name: c.name,
            finish: choice.finish_reason,
            valid: side === "free" || validates(c, choice.message, choice.finish_reason),
            tokens: reply.usage?.completion_tokens ?? 0,
            ms: performance.now() - t0,
            text: (choice.message.content ?? JSON.stringify(choice.message.tool_calls ?? [])).slice(0, 100),
          });
        }
      }),
    );
    const wall = performance.now() - started;
    const lines = readFileSync(server.logFile, "utf8")
      .slice(logFrom)
      .split("\n")
      .filter((l) => l.includes('"generation finished"'))
      .map(
        (l) =>
          JSON.parse(l) as {
            completionTokens: number;
            forwardPasses: number;
            promptTokens: number;
            decoding?: string;
            grammar?: { loopGuard?: number; budget?: number; ms?: number; steps?: number; tokens?: number; forced?: number };
          },
      );
    const tokens = lines.reduce((s, r) => s + r.completionTokens, 0);
    // A prompt's complete blocks are prefilled in forwards of at most 2048 tokens (a canvas model logs denoiser steps only).
    const forwards = lines.reduce(
      (s, r) => s + r.forwardPasses - (r.decoding === "canvas" ? 0 : Math.ceil(Math.floor(r.promptTokens / 64) / 32)),
      0,
    );
    const guarded = lines.reduce((s, r) => s + (r.grammar?.loopGuard ?? 0) + (r.grammar?.budget ?? 0), 0);
    const grammarMs = lines.reduce((s, r) => s + (r.grammar?.ms ?? 0), 0);
    const grammarSteps = lines.reduce((s, r) => s + (r.grammar?.steps ?? 0), 0);
    const grammarTokens = lines.reduce((s, r) => s + (r.grammar?.tokens ?? 0), 0);
    const forced = lines.reduce((s, r) => s + (r.grammar?.forced ?? 0), 0);
    return { side, outcomes, wall, tokens, forwards, guarded, grammarMs, grammarSteps, grammarTokens, forced };
  } finally {
    await server.stop();
  }
}

const results = [];
for (const side of sides) {
  const r = await runSide(side);
  results.push(r);
  for (const o of r.outcomes)
    console.log(
      `${side}\t${o.name}\t${o.finish}\t${o.valid ? "valid" : "INVALID"}\t${o.tokens} tok\t${(o.ms / 1000).toFixed(1)} s\t${o.text}`,
    );
}
console.log(`\nmodel: ${modelName}; ${cases.length} prompt × schema pairs, default max_tokens, ${concurrency} at a time\n`);
console.log(
  "| side | finish (stop / tool_calls) and validate | reach `length` | mean completion tokens | tokens / forward | forwards / reply | ms / reply | guard interventions (loop + budget) | grammar ms / step | forced share |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const r of results) {
  const n = r.outcomes.length;
  const ok = r.outcomes.filter((o) => o.valid).length;
  const length = r.outcomes.filter((o) => o.finish === "length").length;
  const ms = r.outcomes.reduce((s, o) => s + o.ms, 0) / n;
  console.log(
    `| ${r.side} | ${r.side === "free" ? "—" : `${ok}/${n} (${((100 * ok) / n).toFixed(0)}%)`} | ${length} | ${(r.tokens / n).toFixed(0)} | ${(r.tokens / r.forwards).toFixed(2)} | ${(r.forwards / n).toFixed(1)} | ${ms.toFixed(0)} | ${r.guarded} | ${r.grammarSteps > 0 ? (r.grammarMs / r.grammarSteps).toFixed(2) : "—"} | ${r.grammarTokens > 0 ? `${((100 * r.forced) / r.grammarTokens).toFixed(0)}%` : "—"} |`,
  );
}
