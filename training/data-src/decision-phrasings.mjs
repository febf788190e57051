// Decision questions of model v2 in the API's shape ({question, target}), phrased from the
// lists of phrasings.mjs: direct, inverted, indirect, instructions given as JSON, meaning
// given only by yes/no descriptions, and two-option choices whose option names come from
// open vocabularies (AFINN words, arbitrary words with a description, letters, codes).
// `split` is "train" or "held_out": the held-out lists feed only the evaluation sets.
import * as P from "./phrasings.mjs";

/** Open vocabularies split by a stable hash: {train: [...], held_out: [...]}. */
export function splitVocabulary(words, inHeldOut) {
  const out = { train: [], held_out: [] };
  for (const w of words) out[inHeldOut(w) ? "held_out" : "train"].push(w);
  return out;
}

function noul(rng, truth, lists, descriptions, split) {
  const L = lists[split];
  const style = rng.pick(["direct", "direct", "json", "described", "described_only"]);
  const inverted = rng.chance(0.4);
  let instructions = rng.pick(inverted ? L.no : L.yes);
  let criteria;
  if (style === "json") instructions = rng.pick(inverted ? L.json.no : L.json.yes);
  else if (style === "described" || style === "described_only") {
    const [yesSide, noSide] = rng.pick(descriptions[split]);
    criteria = inverted ? { true: noSide, false: yesSide } : { true: yesSide, false: noSide };
    if (rng.chance(0.3)) criteria = rng.chance(0.5) ? { true: criteria.true } : { false: criteria.false };
    if (style === "described_only") instructions = "";
  }
  return { question: { type: "noul", instructions, criteria }, target: truth !== inverted ? 0 : 1 };
}

export const spamNoul = (rng, isSpam, split) => noul(rng, isSpam, P.SPAM_NOUL, P.SPAM_DESCRIPTIONS, split);
export const sentimentNoul = (rng, positive, split) => noul(rng, positive, P.SENTIMENT_NOUL, P.SENTIMENT_DESCRIPTIONS, split);

function codeNames(rng, vocab, split) {
  const style = rng.pick(P.CODE_NAME_STYLES);
  if (style === "letter") {
    const i = rng.int(24);
    return [String.fromCharCode(65 + i), String.fromCharCode(66 + i)];
  }
  if (style === "code") return [`c${rng.int(90) + 10}`, `c${rng.int(90) + 100}`];
  const words = rng.sample(vocab.codeWords[split], 2);
  return style === "Word" ? words.map((w) => w[0].toUpperCase() + w.slice(1)) : words;
}

/**
 * Two options for a binary truth. Name sources: fixed pairs, open-vocabulary pairs
 * (`vocab.pos` / `vocab.neg`, e.g. AFINN words), or coded names with descriptions.
 */
function twoOptions(rng, truth, split, pairs, openPos, openNeg, descriptions, vocab) {
  const r = rng.next();
  let names;
  let desc = [null, null];
  if (r < 0.3) names = rng.pick(pairs[split]);
  else if (r < 0.65 && openPos[split].length && openNeg[split].length) names = [rng.pick(openPos[split]), rng.pick(openNeg[split])];
  else {
    names = codeNames(rng, vocab, split);
    desc = rng.pick(descriptions[split]);
  }
  const firstIsTrue = rng.chance(0.5);
  const order = firstIsTrue ? [0, 1] : [1, 0];
  const criteria = {};
  for (const i of order) criteria[names[i]] = desc[i];
  return { criteria, target: truth === firstIsTrue ? 0 : 1, coded: desc[0] !== null };
}

export function sentimentChoice(rng, positive, split, vocab) {
  const o = twoOptions(rng, positive, split, P.SENTIMENT_NAME_PAIRS, vocab.pos, vocab.neg, P.SENTIMENT_DESCRIPTIONS, vocab);
  const instructions = rng.chance(0.15) ? "" : rng.pick(P.SENTIMENT_CHOICE_Q[split]);
  return { question: { type: "choice", instructions, criteria: o.criteria }, target: o.target, coded: o.coded };
}

export function spamChoice(rng, isSpam, split, vocab) {
  const none = { train: [], held_out: [] };
  const o = twoOptions(rng, isSpam, split, P.SPAM_NAME_PAIRS, none, none, P.SPAM_DESCRIPTIONS, vocab);
  const instructions = rng.chance(0.15) ? "" : rng.pick(P.SPAM_CHOICE_Q[split]);
  return { question: { type: "choice", instructions, criteria: o.criteria }, target: o.target, coded: o.coded };
}

/**
 * Every held-out string as the renderer writes it (instructions as text or JSON, descriptions,
 * option names), for the leak check (check-heldout.mjs).
 */
export function heldOutStrings(vocab) {
  const out = [];
  const walk = (v) => {
    if (typeof v === "string") out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object" && Object.keys(v).every((k) => ["yes", "no", "json"].includes(k))) Object.values(v).forEach(walk);
    else if (v && typeof v === "object") out.push(JSON.stringify(v));
  };
  for (const list of Object.values(P)) if (list && typeof list === "object" && "held_out" in list) walk(list.held_out);
  return { phrasings: [...new Set(out)], pos: vocab.pos.held_out, neg: vocab.neg.held_out, codeWords: vocab.codeWords.held_out };
}
