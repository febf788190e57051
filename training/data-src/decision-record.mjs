// A decision training/evaluation record: the question rendered over one or more states
// (longest first) with the service's own renderer, lib/decision-types/render.ts (so the
// scripts that import this run under tsx), and its target. Used by prepare-data.mjs and
// prepare-v2.mjs.
import { renderDecisionPrompt } from "../../lib/decision-types/render.ts";
import { decisionConfig } from "./render.mjs";

export const DECISION_RENDERER = "lib/decision-types/render.ts";

export function decisionRecord(task, states, made, extra = {}) {
  const variants = [];
  let labels;
  for (const state of states) {
    const r = renderDecisionPrompt(decisionConfig, state, made.question);
    // the suffix without the answer slot, which the engine appends
    variants.push([r.prefix, r.suffix]);
    labels = r.labels;
  }
  const expected = made.soft ? made.soft.length : null;
  if ((expected !== null && expected !== labels.length) || (made.target !== undefined && made.target >= labels.length)) {
    throw new Error(`${task}: target does not match the ${labels.length} offered labels`);
  }
  const rec = { k: "dec", task, qt: made.question.type, v: variants, labels };
  if (made.soft) rec.soft = made.soft;
  else rec.y = made.target;
  return { ...rec, ...extra };
}
