// Decision benchmark (issue 4): 16 questions on one ~1,000-token state against 1 question on the
// same state, in one run, through the real decision service and inference engine. The state is
// read once, so the goal is that the 16 take at most 2x the time of the 1.
//
//   npx tsx bench/decision.ts [--iterations N] [--model-dir DIR ...]
//
// Runs on the tiny test model, and on the bundled model when models/tessera-bd-small exists.
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { DecisionService } from "../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../gen/tessera/registry/v1/registry_pb.js";
import { parseDecisionRequest } from "../gateway/mappers/decision.js";
import { silentLogger } from "../lib/logger.js";
import { decisionRoutes } from "../services/decision/server.js";
import { DEFAULT_CATALOG, fakeRegistry } from "../services/decision/test-doubles.js";
import { loadModelPool } from "../services/inference/model-pool.js";
import { createInferenceService } from "../services/inference/service.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_MODEL_DIRS = [path.join(ROOT, "test/fixtures/tiny-model"), path.join(ROOT, "models/tessera-bd-small")];
const STATE_TOKENS = 1000;

export interface DecisionBenchResult {
  model: string;
  stateTokens: number;
  inputTokens: { one: number; sixteen: number };
  medianMs: { one: number; sixteen: number };
  ratio: number;
}

const SENTENCES = [
  "The customer reports that the nightly export has failed three times this week.",
  "Each failure happens after about thirty minutes, with a timeout from the storage layer.",
  "Their compliance team needs the export before the audit that starts on Monday morning.",
  "They already reduced the date range and retried manually, without success.",
  "The account has been with us since 2019 and is on the enterprise plan.",
  "Two other tickets from the same region mention slow uploads during the same hours.",
  "The customer asks for a call with an engineer and a written incident summary.",
  "Support suggested splitting the export into smaller batches as a workaround.",
];

const QUESTIONS: Record<string, unknown> = {
  urgent: { type: "noul", instructions: "Is this ticket urgent?" },
  escalate: { type: "noul", instructions: "Should an engineer be paged?", criteria: { true: "page now", false: "next business day" } },
  team: { type: "choice", instructions: "Which team owns this?", criteria: { billing: null, "data platform": "exports", storage: "uploads and disks", support: null } },
  mood: { type: "score", instructions: "How upset is the customer?", criteria: ["calm", "concerned", "upset", "furious"] },
  churn: { type: "score", instructions: "Risk that the customer leaves?", criteria: ["low", "medium", "high"] },
  cause: { type: "choice", criteria: { network: null, storage: null, "query size": null, "client bug": null, unknown: null } },
  refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
  call: { type: "noul", instructions: "Does the customer ask for a call?" },
  region: { type: "choice", instructions: "Where is the customer?", criteria: { eu: null, us: null, apac: null } },
  severity: { type: "score", criteria: ["sev4", "sev3", "sev2", "sev1"] },
  known: { type: "noul", instructions: "Is this a known incident?" },
  plan: { type: "choice", criteria: { free: null, team: null, enterprise: null } },
  workaround: { type: "noul", instructions: "Was a workaround offered?" },
  effort: { type: "score", instructions: "Effort to resolve", criteria: ["minutes", "hours", "days", "weeks", "months"] },
  language: { type: "choice", criteria: { english: null, german: null, french: null, japanese: null } },
  followup: { type: "noul", instructions: "Is a follow-up needed?" },
};

export async function benchDecision(modelDir: string, iterations: number): Promise<DecisionBenchResult> {
  const pool = await loadModelPool({ models: [{ servingId: "bundled", dir: modelDir }], slots: 4, queue: 16 });
  try {
    const logger = silentLogger();
    const inference = createClient(
      InferenceService,
      createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool, logger, workerId: "bench" }))),
    );
    const registry = createClient(RegistryService, createRouterTransport(({ service }) => service(RegistryService, fakeRegistry(DEFAULT_CATALOG))));
    const decision = createClient(DecisionService, createRouterTransport(decisionRoutes({ registry, inferenceFor: () => inference, logger })));

    // Grow the state sentence by sentence to about STATE_TOKENS tokens of the model's tokenizer.
    const sentences: string[] = [];
    let stateTokens = 0;
    for (let i = 0; stateTokens < STATE_TOKENS; i++) {
      sentences.push(`${i + 1}. ${SENTENCES[i % SENTENCES.length]}`);
      stateTokens = (await inference.countTokens({ model: "bundled", text: sentences.join("\n") })).tokens;
    }
    const state = sentences.join("\n");

    const requestOf = (questions: Record<string, unknown>) => {
      const parsed = parseDecisionRequest({ model: "decisionmodel-latest", state, questions });
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.violations));
      return parsed.request;
    };
    const one = requestOf({ urgent: QUESTIONS["urgent"] });
    const sixteen = requestOf(QUESTIONS);
    const time = async (req: typeof one) => {
      const started = performance.now();
      const res = await decision.decide(req);
      return { ms: performance.now() - started, inputTokens: res.usage?.inputTokens ?? 0 };
    };

    for (let i = 0; i < 3; i++) {
      await time(one);
      await time(sixteen);
    }
    const ones: number[] = [];
    const sixteens: number[] = [];
    let inputTokens = { one: 0, sixteen: 0 };
    // Interleaved, so drift on a shared machine affects both sides alike.
    for (let i = 0; i < iterations; i++) {
      const a = await time(one);
      const b = await time(sixteen);
      ones.push(a.ms);
      sixteens.push(b.ms);
      inputTokens = { one: a.inputTokens, sixteen: b.inputTokens };
    }
    const medianMs = { one: median(ones), sixteen: median(sixteens) };
    return { model: path.basename(modelDir), stateTokens, inputTokens, medianMs, ratio: medianMs.sixteen / medianMs.one };
  } finally {
    await pool.close();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function formatDecisionBench(r: DecisionBenchResult): string {
  return [
    `decision bench — ${r.model}: state ${r.stateTokens} tokens`,
    `  1 question:   ${r.medianMs.one.toFixed(1)} ms median (${r.inputTokens.one} input tokens)`,
    `  16 questions: ${r.medianMs.sixteen.toFixed(1)} ms median (${r.inputTokens.sixteen} input tokens)`,
    `  ratio 16/1:   ${r.ratio.toFixed(2)}x (goal <= 2x: ${r.ratio <= 2 ? "met" : "NOT met"})`,
  ].join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { iterations: { type: "string", default: "20" }, "model-dir": { type: "string", multiple: true } },
  });
  const iterations = Number(values.iterations);
  if (!Number.isInteger(iterations) || iterations < 1) throw new Error("--iterations must be a positive integer");
  const dirs = (values["model-dir"] ?? DEFAULT_MODEL_DIRS).filter((dir) => existsSync(path.join(dir, "config.json")));
  for (const dir of dirs) console.log(formatDecisionBench(await benchDecision(dir, iterations)));
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
