// One temperature per question type, fitted on the fit readouts and measured on the evaluation
// readouts, and the report of it as a table.
import { QUESTION_TYPE_NAMES, type QuestionTypeName } from "../../../lib/decision-types/registry.js";
import { accuracy, expectedCalibrationError, fitTemperature, type LabelledReadout, meanNll } from "./fit.js";

export interface TypedLabelledReadout extends LabelledReadout {
  type: QuestionTypeName;
}

/** A calibration metric at the temperature before and after the fit. */
export interface BeforeAfter {
  before: number;
  after: number;
}

export interface TypeCalibration {
  type: QuestionTypeName;
  fitCount: number;
  evalCount: number;
  temperature: BeforeAfter;
  /** False when the fit set had no question of this type: the temperature is kept. */
  fitted: boolean;
  /** On the evaluation readouts; undefined when there are none of this type. */
  nll: BeforeAfter | undefined;
  ece: BeforeAfter | undefined;
  /** The top label's accuracy: a temperature never changes which label is on top. */
  accuracy: number | undefined;
}

/** Written temperatures keep 4 decimals (as training/pipeline/calibrate.py's); the report measures those. */
function rounded(t: number): number {
  return Math.round(t * 1e4) / 1e4;
}

export function calibratePerType(
  fit: readonly TypedLabelledReadout[],
  evaluation: readonly TypedLabelledReadout[],
  current: Readonly<Record<QuestionTypeName, number>>,
): TypeCalibration[] {
  return QUESTION_TYPE_NAMES.map((type) => {
    const fitSet = fit.filter((r) => r.type === type);
    const evalSet = evaluation.filter((r) => r.type === type);
    const before = current[type];
    const after = fitSet.length > 0 ? rounded(fitTemperature(fitSet)) : before;
    const measured = evalSet.length > 0;
    return {
      type,
      fitCount: fitSet.length,
      evalCount: evalSet.length,
      temperature: { before, after },
      fitted: fitSet.length > 0,
      nll: measured ? { before: meanNll(evalSet, before), after: meanNll(evalSet, after) } : undefined,
      ece: measured ? { before: expectedCalibrationError(evalSet, before), after: expectedCalibrationError(evalSet, after) } : undefined,
      accuracy: measured ? accuracy(evalSet) : undefined,
    };
  });
}

export function formatCalibrationTable(rows: readonly TypeCalibration[]): string {
  const header = ["type", "fit n", "eval n", "T before", "T after", "NLL before", "NLL after", "ECE before", "ECE after", "accuracy"];
  const n4 = (x: number | undefined) => (x === undefined ? "–" : x.toFixed(4));
  const body = rows.map((r) => [
    r.type,
    String(r.fitCount),
    String(r.evalCount),
    n4(r.temperature.before),
    r.fitted ? n4(r.temperature.after) : "kept",
    n4(r.nll?.before),
    n4(r.nll?.after),
    n4(r.ece?.before),
    n4(r.ece?.after),
    n4(r.accuracy),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), ...body.map(line)].join("\n");
}
