// `tessera calibrate`: fits a model directory's decision temperatures on the operator's labelled
// decisions, reports what they change, and with --write puts them into its decision.json.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { Code } from "@connectrpc/connect";
import { loadConfig } from "../lib/config.js";
import { type DecisionConfig, DecisionConfigError, parseDecisionConfig } from "../lib/decision-types/model-config.js";
import { MAX_TEMPERATURE, MIN_TEMPERATURE } from "../services/decision/calibrate/fit.js";
import { calibratePerType, formatCalibrationTable, type TypeCalibration } from "../services/decision/calibrate/per-type.js";
import { writeTemperatures } from "./calibrate/decision-file.js";
import { type LabelledLine, parseLabelledJsonl } from "./calibrate/labelled-jsonl.js";
import { LineRefusedError, readLabelled } from "./calibrate/readout.js";

export const CALIBRATE_HELP = `Usage:
  tessera calibrate <model-dir> <labelled.jsonl> [--holdout F] [--write]
      Fit the decision temperatures of a model directory, one per question type (noul,
      choice, score), on labelled decisions: the T minimising the negative log-likelihood of
      the correct answers under softmax(logits / T). Reports, per type, NLL, ECE (15 bins)
      and accuracy at the current and the fitted temperature.
      Each line of the JSONL file is a /v1/systemone request body ("model" may be left out)
      plus "answers": {"<question id>": <the correct answer>}: true or false for noul, the
      option's name for choice, the level's number (0 = lowest) or its text for score.
      --holdout F  fit on the first 1 - F of the lines, report on the rest (default 0: fit
                   and report on every line)
      --write      write the fitted temperatures and "calibrated": true into
                   <model-dir>/decision.json (without it, only report)
`;

const MAX_PROBLEMS_SHOWN = 20;

type Write = (text: string) => void;

export async function runCalibrate(
  args: readonly string[],
  out: Write = (t) => process.stdout.write(t),
  err: Write = (t) => process.stderr.write(t),
): Promise<number> {
  let parsed: ReturnType<typeof parseCalibrateArgs>;
  try {
    parsed = parseCalibrateArgs(args);
  } catch (e) {
    err(`tessera calibrate: ${(e as Error).message}\n\n${CALIBRATE_HELP}`);
    return 2;
  }
  if (parsed === "help") {
    out(CALIBRATE_HELP);
    return 0;
  }
  const { modelDir, jsonl, holdout, write } = parsed;
  const refuse = (message: string) => {
    err(`tessera calibrate: ${message}\n`);
    return 2;
  };

  const decisionFile = path.join(modelDir, "decision.json");
  if (!existsSync(decisionFile))
    return refuse(`${decisionFile} does not exist: the model answers no decisions, so there is nothing to calibrate`);
  let current: DecisionConfig;
  try {
    current = parseDecisionConfig(JSON.parse(readFileSync(decisionFile, "utf8")));
  } catch (e) {
    return refuse(
      e instanceof DecisionConfigError ? `${modelDir}: ${e.message}` : `${decisionFile}: not valid JSON (${(e as Error).message})`,
    );
  }
  let text: string;
  try {
    text = readFileSync(jsonl, "utf8");
  } catch (e) {
    return refuse(`cannot read ${jsonl}: ${(e as Error).message}`);
  }
  const labelled = parseLabelledJsonl(text);
  if (labelled.problems.length > 0) {
    const shown = labelled.problems.slice(0, MAX_PROBLEMS_SHOWN).map((p) => `\n  ${jsonl}: ${p}`);
    const more = labelled.problems.length - shown.length;
    return refuse(
      `${jsonl} has ${labelled.problems.length} problem(s); nothing was run:${shown.join("")}${more > 0 ? `\n  … and ${more} more` : ""}`,
    );
  }
  if (labelled.lines.length === 0) return refuse(`${jsonl} holds no labelled decisions (it is empty)`);

  const { fit, evaluation, inSample } = splitLines(labelled.lines, holdout);
  const fitLines = new Set(fit.map((l) => l.line));
  const evalLines = new Set(evaluation.map((l) => l.line));
  let readouts: Awaited<ReturnType<typeof readLabelled>>;
  try {
    const total = labelled.lines.length;
    const step = Math.max(1, Math.ceil(total / 10));
    readouts = await readLabelled(modelDir, labelled.lines, loadConfig(), (done) => {
      if (done % step === 0 || done === total) err(`tessera calibrate: ${done}/${total} lines read\n`);
    });
  } catch (e) {
    if (e instanceof LineRefusedError) {
      err(`tessera calibrate: ${jsonl}: ${e.message}\n`);
      return e.code === Code.InvalidArgument ? 2 : 1;
    }
    // The model directory did not load (no model.onnx, a broken config.json, …).
    err(`tessera calibrate: ${modelDir}: ${(e as Error).message}\n`);
    return 1;
  }

  const rows = calibratePerType(
    readouts.filter((r) => fitLines.has(r.line)),
    readouts.filter((r) => evalLines.has(r.line)),
    current.temperatures,
  );
  out(
    report(
      modelDir,
      jsonl,
      labelled.lines.length,
      readouts.length,
      { fit: fit.length, evaluation: evaluation.length, inSample, holdout },
      rows,
    ),
  );
  const fitted = Object.fromEntries(rows.filter((r) => r.fitted).map((r) => [r.type, r.temperature.after]));
  if (write) {
    writeTemperatures(decisionFile, fitted);
    out(`wrote ${decisionFile}: temperatures ${JSON.stringify(fitted)}, "calibrated": true\n`);
  } else {
    out(`not written: run again with --write to put ${JSON.stringify(fitted)} into ${decisionFile}\n`);
  }
  return 0;
}

function report(
  modelDir: string,
  jsonl: string,
  lines: number,
  questions: number,
  split: { fit: number; evaluation: number; inSample: boolean; holdout: number },
  rows: readonly TypeCalibration[],
): string {
  const text = [
    `model: ${modelDir}`,
    `labelled: ${jsonl}, ${lines} lines, ${questions} questions`,
    split.inSample
      ? `fit and reported on every line (in-sample${split.holdout > 0 ? ": too few lines to hold any out" : ""})`
      : `fit on the first ${split.fit} lines, reported on the ${split.evaluation} held out after them`,
    "",
    formatCalibrationTable(rows),
    "",
    "T before: decision.json's temperatures; accuracy: of the top label, which no temperature changes.",
  ];
  for (const r of rows) {
    if (r.fitted && (r.temperature.after <= MIN_TEMPERATURE * 1.001 || r.temperature.after >= MAX_TEMPERATURE * 0.999)) {
      text.push(`${r.type}: the fit reached the edge of the searched range [${MIN_TEMPERATURE}, ${MAX_TEMPERATURE}]; check the labels.`);
    }
  }
  return `${text.join("\n")}\n`;
}

function parseCalibrateArgs(args: readonly string[]) {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { write: { type: "boolean" }, holdout: { type: "string" }, help: { type: "boolean", short: "h" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help === true) return "help" as const;
  if (positionals.length !== 2) throw new Error(`expected <model-dir> <labelled.jsonl>, got ${positionals.length} argument(s)`);
  const holdout = values.holdout === undefined ? 0 : Number(values.holdout);
  if (!Number.isFinite(holdout) || holdout < 0 || holdout >= 1 || values.holdout?.trim() === "") {
    throw new Error(`--holdout must be a fraction in [0, 1), got ${JSON.stringify(values.holdout)}`);
  }
  return { modelDir: positionals[0]!, jsonl: positionals[1]!, holdout, write: values.write === true };
}

/** The first 1 - holdout of the lines to fit, the rest to report on (the fit lines themselves when none are left). */
function splitLines(lines: readonly LabelledLine[], holdout: number) {
  const fitCount = Math.min(lines.length, Math.max(1, Math.round(lines.length * (1 - holdout))));
  const fit = lines.slice(0, fitCount);
  const inSample = fitCount === lines.length;
  return { fit, evaluation: inSample ? fit : lines.slice(fitCount), inSample };
}
