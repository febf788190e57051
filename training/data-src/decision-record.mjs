// A decision training/evaluation record: the question rendered over one or more states
// (longest first) with the decision renderer, and its target. prepare-data.mjs keeps its own
// copy of this; prepare-v2.mjs uses this one with the same renderer choice.
import { MASK, decisionConfig, renderDecisionPrompt as renderOurs } from "./render.mjs";

/** The decision service's renderer when it can be imported (run under tsx), else ours. */
export async function loadDecisionRenderer() {
  try {
    const mod = await import("../../services/decision/render.ts");
    if (typeof mod.renderDecisionPrompt === "function") return { render: mod.renderDecisionPrompt, source: "services/decision/render.ts" };
  } catch {
    // plain node cannot import .ts
  }
  return { render: renderOurs, source: "training/data-src/render.mjs" };
}

export function decisionRecord(render, task, states, made, extra = {}) {
  const variants = [];
  let labels;
  for (const state of states) {
    const r = render(decisionConfig, state, made.question);
    variants.push([r.prefix, r.suffix.endsWith(MASK) ? r.suffix.slice(0, -MASK.length) : r.suffix]);
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
