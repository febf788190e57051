// Writes fitted temperatures into a model directory's decision.json: every other field as it
// was, "calibrated": true, and never a half-written file (a temporary file renamed over it).
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { QuestionTypeName } from "../../lib/decision-types/registry.js";

export function writeTemperatures(decisionFile: string, temperatures: Partial<Record<QuestionTypeName, number>>): void {
  const decision = JSON.parse(readFileSync(decisionFile, "utf8")) as Record<string, unknown>;
  const kept = decision["temperatures"];
  const current = typeof kept === "object" && kept !== null && !Array.isArray(kept) ? kept : {};
  decision["temperatures"] = { ...current, ...temperatures };
  decision["calibrated"] = true;
  const temporary = path.join(path.dirname(decisionFile), `.${path.basename(decisionFile)}.${process.pid}.tmp`);
  try {
    writeFileSync(temporary, `${JSON.stringify(decision, null, 2)}\n`, { flush: true });
    renameSync(temporary, decisionFile);
  } catch (err) {
    rmSync(temporary, { force: true });
    throw err;
  }
}
