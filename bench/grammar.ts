// Grammar-constrained decoding (docs/constrained-decoding.md) on one model, the same prompts
// decoded free and under grammars, one reply at a time, through the inference service:
// tokens per denoising forward (prefill forwards left out), ms per reply, the share of tokens
// committed by jump-forward and the grammar's time per constrained step against the step's
// time; then the compile time of a set of real-world schemas (p50, p99, max), each compiled
// afresh. The schemas bound their strings (a small model rambles inside an unbounded one
// until max_tokens); the grammars are compiled before the timed replies.
//
//   npx tsx bench/grammar.ts [model-dir]   (default: models/tessera-bd-small, else the tiny test model)
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { GenerateRequestSchema, InferenceService, ResponseFormatType, Role } from "../gen/tessera/inference/v1/inference_pb.js";
import { createLogger } from "../lib/logger.js";
import type { GrammarSpec } from "../services/inference/grammar/grammar-spec.js";
import { ModelGrammars } from "../services/inference/grammar/model-grammars.js";
import { loadModelPool } from "../services/inference/engine/model-pool.js";
import { createInferenceService } from "../services/inference/service.js";
import { TINY_MODEL_DIR } from "../test/helpers/tiny-model.js";
import { REAL_WORLD_SCHEMAS } from "./_grammar-schemas.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BUNDLED_DIR = path.join(ROOT, "models", "tessera-bd-small");
const dir = process.argv[2] ?? (existsSync(BUNDLED_DIR) ? BUNDLED_DIR : TINY_MODEL_DIR);

const PROMPTS = [
  "What does the word serendipity mean?",
  "Define the word garden.",
  "What are synonyms of happy?",
  "Is a dog a kind of animal?",
  "What does the word harbor mean?",
  "Describe the word quiet.",
  "What is the opposite of generous?",
  "Is an oak a kind of tree?",
];

const DEFINITION = {
  type: "object",
  properties: {
    word: { type: "string", maxLength: 24 },
    part_of_speech: { enum: ["noun", "verb", "adjective", "adverb"] },
    definition: { type: "string", maxLength: 120 },
    synonyms: { type: "array", items: { type: "string", maxLength: 16 }, maxItems: 3 },
  },
  required: ["word", "part_of_speech", "definition", "synonyms"],
  additionalProperties: false,
};
const LOOKUP = {
  type: "object",
  properties: { word: { type: "string", maxLength: 24 }, sense: { type: "integer", minimum: 1, maximum: 9 } },
  required: ["word", "sense"],
  additionalProperties: false,
};

type Mode = "free" | "json_schema" | "tool call (named)";
const MODES: Mode[] = ["free", "json_schema", "tool call (named)"];
const MAX_TOKENS = 256;

interface Finished {
  promptTokens: number;
  completionTokens: number;
  forwardPasses: number;
  ms: number;
  grammar?: { tokens: number; forced: number; steps: number; ms: number; deadEnd: boolean };
}

async function main() {
  const lines: Finished[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) {
        if (line.includes('"generation finished"')) lines.push(JSON.parse(line) as Finished);
      }
      done();
    },
  });
  const logger = createLogger({ level: "info", destination: sink });
  const pool = await loadModelPool({
    models: [{ servingId: "m", dir }],
    slots: 1,
    queue: 16,
    logger,
    grammar: { compileBudgetMs: 600_000 },
  });
  const client = createClient(
    InferenceService,
    createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool, workerId: "bench" }))),
  );

  const request = (mode: Mode, content: string) =>
    create(GenerateRequestSchema, {
      model: "m",
      messages: [{ role: Role.USER, content: [{ part: { case: "text", value: content } }] }],
      tools: mode === "tool call (named)" ? [{ name: "lookup_word", description: "Dictionary entry", parameters: LOOKUP }] : [],
      options: {
        maxTokens: MAX_TOKENS,
        ...(mode === "json_schema"
          ? { responseFormat: { type: ResponseFormatType.JSON_SCHEMA, jsonSchema: { name: "definition", schema: DEFINITION } } }
          : {}),
        ...(mode === "tool call (named)" ? { toolChoice: { choice: { case: "functionName", value: "lookup_word" } } } : {}),
      },
    });

  // One untimed reply per mode first (session warm-up, grammar compile).
  for (const mode of MODES) for await (const _ of client.generate(request(mode, PROMPTS[0]!))) void _;
  lines.length = 0;

  console.log(`model: ${path.relative(ROOT, dir)}; ${PROMPTS.length} prompts, one reply at a time, max_tokens ${MAX_TOKENS}\n`);
  console.log(
    "| replies | tokens / denoising forward | ms / reply | tokens / reply | jump-forward share | grammar ms / constrained step | grammar share of a step |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  for (const mode of MODES) {
    const from = lines.length;
    for (const prompt of PROMPTS) for await (const _ of client.generate(request(mode, prompt))) void _;
    const runs = lines.slice(from);
    const sum = (f: (r: Finished) => number) => runs.reduce((s, r) => s + f(r), 0);
    const tokens = sum((r) => r.completionTokens);
    // A prompt's complete blocks are prefilled in forwards of at most 2048 tokens.
    const forwards = sum((r) => r.forwardPasses - Math.ceil(Math.floor(r.promptTokens / 64) / 32));
    const ms = sum((r) => r.ms);
    const g = runs.filter((r) => r.grammar !== undefined);
    const gSteps = g.reduce((s, r) => s + r.grammar!.steps, 0);
    const gMs = g.reduce((s, r) => s + r.grammar!.ms, 0);
    const forced = g.reduce((s, r) => s + r.grammar!.forced, 0);
    const gTokens = g.reduce((s, r) => s + r.grammar!.tokens, 0);
    const stepMs = ms / forwards;
    const perStep = gSteps > 0 ? gMs / gSteps : 0;
    console.log(
      `| ${mode} | ${(tokens / forwards).toFixed(2)} | ${(ms / runs.length).toFixed(0)} | ${(tokens / runs.length).toFixed(1)} | ${
        g.length > 0 ? `${((100 * forced) / gTokens).toFixed(0)}%` : "—"
      } | ${g.length > 0 ? perStep.toFixed(2) : "—"} | ${g.length > 0 ? `${((100 * perStep) / stepMs).toFixed(1)}%` : "—"} |`,
    );
    if (g.some((r) => r.grammar!.deadEnd)) console.log("  (a grammar dead end happened)");
  }
  await pool.close();

  // Compile times: every schema compiled afresh (cache of one, so each compile is new).
  const config = JSON.parse(await readFile(path.join(dir, "config.json"), "utf8"));
  const times: { name: string; ms: number }[] = [];
  let last = 0;
  const grammars = await ModelGrammars.create(
    JSON.parse(await readFile(path.join(dir, "tokenizer.json"), "utf8")),
    config.vocab_size,
    config.eos_token_id,
    { cacheSize: 1, compileBudgetMs: 60_000, onCompile: (s) => (last = s * 1000) },
  );
  const specs: [string, GrammarSpec][] = [];
  for (const [name, schema] of Object.entries(REAL_WORLD_SCHEMAS)) {
    specs.push([`${name} (json_schema)`, { kind: "json_schema", schema }]);
    specs.push([`${name} (tool, auto)`, { kind: "tool_calls", tools: [{ name, parameters: schema }] }]);
  }
  specs.push(["json_object", { kind: "json_object" }]);
  for (let round = 0; round < 3; round++) {
    for (const [name, spec] of specs) {
      // A distinct spec each round (a title annotation), so nothing is reused.
      const fresh = structuredClone(spec);
      if (fresh.kind === "json_schema") fresh.schema = { ...(fresh.schema as object), title: `r${round}` };
      if (fresh.kind === "tool_calls") fresh.tools[0]!.name += `_${round}`;
      if (fresh.kind === "json_object" && round > 0) continue;
      await grammars.compile(fresh);
      times.push({ name, ms: last });
    }
  }
  const sorted = times.map((t) => t.ms).sort((a, b) => a - b);
  const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  const slowest = times.reduce((a, b) => (b.ms > a.ms ? b : a));
  console.log(
    `\ncompile (${times.length} compiles of ${specs.length} grammars from ${Object.keys(REAL_WORLD_SCHEMAS).length} real-world schemas): p50 ${pct(50).toFixed(0)} ms, p99 ${pct(99).toFixed(0)} ms, max ${slowest.ms.toFixed(0)} ms (${slowest.name})`,
  );
}

await main();
