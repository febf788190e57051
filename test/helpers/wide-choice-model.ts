// The tiny test model with more choice labels than its 128 `<|opt_i|>` tokens: a copy of its
// directory whose decision.json reads `choices` options by the converter's letter labels (A..Z,
// AA, AB, …; several tokens each), as a converted model's does. For tests of the widest choice
// questions, not of answer quality (the model is random).
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TINY_MODEL_DIR } from "./tessera.js";

/** A..Z, then AA, AB, …: convert/tessera_convert/model_dir.py `letters`. */
export function letterLabels(count: number): string[] {
  const alphabet = Array.from({ length: 26 }, (_, i) => String.fromCharCode(65 + i));
  const labels = [...alphabet];
  for (const first of alphabet) for (const second of alphabet) labels.push(first + second);
  return labels.slice(0, count);
}

/** A fresh directory (the caller removes it) serving the tiny model with `choices` choice labels. */
export function wideChoiceModelDir(choices: number): string {
  const dir = mkdtempSync(join(tmpdir(), "tessera-wide-choice-"));
  for (const file of ["config.json", "model.onnx", "tokenizer.json", "tokenizer_config.json"]) {
    copyFileSync(join(TINY_MODEL_DIR, file), join(dir, file));
  }
  const decision = JSON.parse(readFileSync(join(TINY_MODEL_DIR, "decision.json"), "utf8")) as { labels: { choice: string[] } };
  decision.labels.choice = letterLabels(choices);
  writeFileSync(join(dir, "decision.json"), JSON.stringify(decision, null, 2));
  return dir;
}
