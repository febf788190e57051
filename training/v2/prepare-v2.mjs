#!/usr/bin/env node
// Model v2's additions to the data of prepare-data.mjs (run that first, into the same dir):
// copy tasks, finishing values (JSON and tool calls), the raw-text pool for plain
// continuation (cut into examples on the device, dataset.py), decisions phrased many ways with
// open option vocabularies, long (up to ~4,000-token) decisions, and the held-out evaluation
// sets of the model card's targets, written here, before any training.
//
//   node --import tsx training/v2/prepare-v2.mjs [--out training/data] [--small]     (--small: smoke-test sizes)
//
// Output: train_v2.jsonl, val_v2.jsonl, raw_pool.jsonl ({k:"raw", task, text}),
// eval_v2_{spam,yelp}.jsonl (decision records), eval_v2_{copy,raw,struct,decode}.jsonl
// ({task, p, ...}), stats_v2.json.
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as CT from "../data-src/copy-tasks.mjs";
import { DECISION_RENDERER, decisionRecord } from "../data-src/decision-record.mjs";
import * as DP from "../data-src/decision-phrasings.mjs";
import { SENT_NAMES as OLD_SENT_NAMES, SPAM_OPTION_NAMES as OLD_SPAM_NAMES } from "../data-src/decision-tasks.mjs";
import * as P from "../data-src/phrasings.mjs";
import * as F from "../data-src/finish-tasks.mjs";
import { isHeldOutName, isHeldOutWord } from "../data-src/heldout.mjs";
import { renderChat } from "../data-src/render.mjs";
import { createRng, inSplit } from "../data-src/rng.mjs";
import { HELD_OUT_FOLDERS, TRAIN_FOLDERS, emailText, loadEmails } from "../data-src/spam.mjs";
import { antonymsOf, loadLemmas, loadWordNet } from "../data-src/wordnet.mjs";

const TRAINING = dirname(dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const OUT = resolve(args.includes("--out") ? args[args.indexOf("--out") + 1] : join(TRAINING, "data"));
const SMALL = args.includes("--small");
// --eval-only: rewrite the held-out sets alone (their generator, erng, is independent of the training data's)
const EVAL_ONLY = args.includes("--eval-only");
const scale = (n) => (SMALL ? Math.max(4, Math.round(n / 100)) : n);
const rng = createRng(20261126);

mkdirSync(OUT, { recursive: true });
const files = {};
const counts = {};
const write = (file, rec) => {
  if (!files[file]) {
    files[file] = createWriteStream(join(OUT, file));
    counts[file] = {};
  }
  files[file].write(`${JSON.stringify(rec)}\n`);
  counts[file][rec.task] = (counts[file][rec.task] ?? 0) + 1;
};
const dec = decisionRecord;
const chatPrompt = (content, vars = {}) => renderChat([{ role: "user", content }], { add_generation_prompt: true, ...vars });

// ---------------- sources ----------------
const synsets = loadWordNet();
const lemmas = loadLemmas();
const plain = (w) => /^[a-z][a-z-]*[a-z]$/.test(w) && w.length <= 16;
const allWords = [...lemmas.keys()].filter(plain);
const trainWords = allWords.filter((w) => !isHeldOutWord(w));
const heldWords = allWords.filter((w) => isHeldOutWord(w) && lemmas.get(w).some((e) => e.tagged > 0));
const firstSense = (w) => synsets.get(lemmas.get(w)[0].senses[0]);
const sentences = [];
for (const s of synsets.values()) for (const e of s.examples) if (e.length > 20 && e.length < 160) sentences.push(e);
const sentence = (s) => `${s[0].toUpperCase()}${s.slice(1)}${/[.!?]$/.test(s) ? "" : "."}`;

const afinn = JSON.parse(readFileSync(join(dirname(require.resolve("sentiment/package.json")), "languages", "en", "labels.json"), "utf8"));
const afinnWords = Object.entries(afinn).filter(([w]) => /^[a-z]+$/.test(w));
// a name some training question already uses (prepare-data.mjs's lists, the fixed train pairs) is never held out
const trainNames = new Set([...OLD_SENT_NAMES, ...OLD_SPAM_NAMES, ...P.SENTIMENT_NAME_PAIRS.train, ...P.SPAM_NAME_PAIRS.train].flat());
const heldOutName = (w) => isHeldOutName(w) && !trainNames.has(w);
const vocab = {
  pos: DP.splitVocabulary(
    afinnWords.filter(([, s]) => s >= 3).map(([w]) => w),
    heldOutName,
  ),
  neg: DP.splitVocabulary(
    afinnWords.filter(([, s]) => s <= -3).map(([w]) => w),
    heldOutName,
  ),
  codeWords: DP.splitVocabulary(
    rng.sample(
      trainWords.filter((w) => w.length <= 9),
      4000,
    ),
    heldOutName,
  ),
};

const fixtures = join(dirname(require.resolve("sentiment/package.json")), "test", "fixtures");
const loadFixture = (name) =>
  JSON.parse(readFileSync(join(fixtures, `${name}.json`), "utf8"))
    .map((r, i) => ({ id: `${name}/${i}`, text: r.text.trim(), positive: r.class === 1 }))
    .filter((s) => s.text);
const reviews = [...loadFixture("imdb"), ...loadFixture("amazon")];
const yelp = loadFixture("yelp");
const trainEmails = loadEmails(TRAIN_FOLDERS);
const heldEmails = loadEmails(HELD_OUT_FOLDERS);

// ---------------- decisions, phrased many ways ----------------
if (!EVAL_ONLY) writeTrainingSets();
function writeTrainingSets() {
  for (const e of trainEmails.slice(0, SMALL ? 40 : undefined)) {
    const val = inSplit(e.id, 0.1);
    const n = val ? 1 : e.spam ? 3 : 2;
    for (let i = 0; i < n; i++) {
      const long = !val && rng.chance(0.15);
      const chars = val ? 1500 : long ? 4000 + rng.int(9000) : 300 + rng.int(2300);
      const states = [emailText(e.email, chars), emailText(e.email, Math.round(chars * 0.5))];
      const file = val ? "val_v2.jsonl" : "train_v2.jsonl";
      write(file, dec("v2_spam_noul", states, DP.spamNoul(rng, e.spam, "train")));
      const ch = DP.spamChoice(rng, e.spam, "train", vocab);
      write(file, dec("v2_spam_choice", states, ch));
    }
  }
  for (const s of reviews.slice(0, SMALL ? 40 : undefined)) {
    const file = inSplit(s.id, 0.1) ? "val_v2.jsonl" : "train_v2.jsonl";
    for (let i = 0; i < (file === "val_v2.jsonl" ? 1 : 3); i++) {
      write(file, dec("v2_sentiment_noul", [s.text], DP.sentimentNoul(rng, s.positive, "train")));
      write(file, dec("v2_sentiment_choice", [s.text], DP.sentimentChoice(rng, s.positive, "train", vocab)));
    }
  }
  // AFINN sentences with open-vocabulary option names (more variety than the 2,000 reviews)
  for (const [w, score] of afinnWords.slice(0, SMALL ? 40 : undefined)) {
    if (score === 0 || isHeldOutName(w)) continue;
    const text = rng.pick([`It was ${w}.`, `Honestly, ${w}.`, `What a ${w} experience.`, `The service was ${w}.`]);
    write("train_v2.jsonl", dec("v2_afinn_choice", [text], DP.sentimentChoice(rng, score > 0, "train", vocab)));
  }

  // long decisions: which word fits the blank, 32-128 options each described by its definition
  for (let i = 0; i < scale(6000); i++) {
    const w = rng.pick(trainWords);
    const s = firstSense(w);
    const ex = s.examples.find((x) => x.includes(w));
    if (!ex) continue;
    const k = 32 + rng.int(97);
    const options = new Set([w]);
    while (options.size < k) options.add(rng.pick(trainWords));
    const order = rng.shuffle([...options]);
    const criteria = Object.fromEntries(order.map((o) => [o, firstSense(o).definition]));
    const made = { question: { type: "choice", instructions: "Which word fills the blank?", criteria }, target: order.indexOf(w) };
    write("train_v2.jsonl", dec("v2_long_fill_blank", [ex.replace(w, "___")], made));
  }

  // ---------------- copying and finishing values ----------------
  for (let i = 0; i < scale(80000); i++) {
    const t = CT.copyChat(rng, rng.pick(trainWords), sentence(rng.pick(sentences)));
    write("train_v2.jsonl", { k: "chat", task: t.task, p: t.prompt, r: t.reply });
  }
  const ctx = () => ({ word: rng.pick(trainWords), words: rng.sample(trainWords, 3) });
  for (let i = 0; i < scale(60000); i++) {
    const t = F.jsonFinishChat(rng, ctx());
    write("train_v2.jsonl", { k: "chat", task: t.task, p: t.prompt, r: t.reply });
  }
  for (let i = 0; i < scale(40000); i++) {
    const t = F.toolFinishChat(rng, ctx());
    write("train_v2.jsonl", { k: "chat", task: t.task, p: t.prompt, r: t.reply });
  }

  // ---------------- raw text pool (cut into prompt + continuation on the device) ----------------
  for (const w of trainWords.slice(0, SMALL ? 400 : undefined)) {
    const s = firstSense(w);
    if (s.pos === "n")
      write("raw_pool.jsonl", { k: "raw", task: "raw_definition", text: `${/^[aeiou]/.test(w) ? "An" : "A"} ${w} is ${s.definition}.` });
  }
  for (const x of sentences.slice(0, SMALL ? 400 : undefined))
    write("raw_pool.jsonl", { k: "raw", task: "raw_example", text: sentence(x) });
  for (const s of reviews.slice(0, SMALL ? 100 : undefined)) write("raw_pool.jsonl", { k: "raw", task: "raw_review", text: s.text });
  for (const e of trainEmails.slice(0, SMALL ? 40 : undefined)) {
    const body = e.email.body.slice(0, 1200).replace(/\s+\S*$/, "");
    if (body.length > 80) write("raw_pool.jsonl", { k: "raw", task: "raw_email", text: body });
  }
}

// ---------------- held-out evaluation sets (written before training) ----------------
const erng = createRng(77);
for (const e of heldEmails.slice(0, SMALL ? 30 : undefined)) {
  const states = [emailText(e.email, 1500), emailText(e.email, 900)];
  write("eval_v2_spam.jsonl", dec("spam_noul_heldout", states, DP.spamNoul(erng, e.spam, "held_out"), { id: e.id }));
  write("eval_v2_spam.jsonl", dec("spam_choice_heldout", states, DP.spamChoice(erng, e.spam, "held_out", vocab), { id: e.id }));
}
for (const s of yelp.slice(0, SMALL ? 30 : undefined)) {
  write("eval_v2_yelp.jsonl", dec("yelp_noul_heldout", [s.text], DP.sentimentNoul(erng, s.positive, "held_out"), { id: s.id }));
  let ch;
  do ch = DP.sentimentChoice(erng, s.positive, "held_out", vocab);
  while (ch.coded);
  write("eval_v2_yelp.jsonl", dec("yelp_choice_unseen_names", [s.text], ch, { id: s.id }));
  do ch = DP.sentimentChoice(erng, s.positive, "held_out", vocab);
  while (!ch.coded);
  write("eval_v2_yelp.jsonl", dec("yelp_choice_coded_names", [s.text], ch, { id: s.id }));
}
const withAntonym = heldWords.filter((w) => antonymsOf(synsets, firstSense(w), w).length);
const withSynonym = heldWords.filter((w) => firstSense(w).words.some((x) => x !== w));
for (const [kind, pool] of [
  ["definition", heldWords],
  ["opposite", withAntonym.length >= 20 ? withAntonym : heldWords],
  ["synonym", withSynonym],
]) {
  for (const w of erng.sample(pool, SMALL ? 6 : 150))
    write("eval_v2_copy.jsonl", { task: `copy_${kind}`, word: w, p: chatPrompt(erng.pick(CT.COPY_EVAL[kind])(w)) });
}
// nouns only ("A pretty is" is no sentence); filtering after the draw keeps erng's sequence
for (const w of erng.sample(heldWords, SMALL ? 6 : 100))
  if (firstSense(w).pos === "n") write("eval_v2_raw.jsonl", { task: "raw_word", p: `${/^[aeiou]/.test(w) ? "An" : "A"} ${w} is` });
for (const s of erng.sample(yelp, SMALL ? 6 : 100)) {
  const ws = s.text.split(" ");
  write("eval_v2_raw.jsonl", { task: "raw_sentence", p: ws.slice(0, Math.max(2, Math.floor(ws.length / 2))).join(" ") });
}
const ectx = () => ({ word: erng.pick(heldWords), words: erng.sample(heldWords, 3) });
for (let i = 0; i < (SMALL ? 6 : 60); i++) {
  const t = F.jsonFinishChat(erng, ectx());
  write("eval_v2_struct.jsonl", { task: "struct_json", p: t.prompt, schema: t.schema });
}
for (let i = 0; i < (SMALL ? 4 : 30); i++) {
  const t = F.toolFinishChat(erng, ectx());
  write("eval_v2_struct.jsonl", { task: "struct_tool", p: t.prompt, schema: t.schema, tool: t.tool });
}
for (const f of F.STRUCTURED_EVAL_FIXED)
  write("eval_v2_struct.jsonl", {
    task: "struct_fixed",
    p: chatPrompt(f.content, { response_format: "json", ...(f.schema ? { json_schema: f.schema } : {}) }),
    schema: f.schema,
  });
// decoding prompts: the policy is tuned on "tune" and reported on "held_out"
const decodePrompts = [
  ...erng.sample(heldWords, SMALL ? 4 : 40).map((w) => erng.pick(CT.COPY_EVAL.definition)(w)),
  ...erng.sample(withSynonym, SMALL ? 2 : 20).map((w) => erng.pick(CT.COPY_EVAL.synonym)(w)),
  ...erng.sample(sentences, SMALL ? 2 : 20).map((x) => `Repeat after me: ${sentence(x)}`),
];
for (const [i, content] of erng.shuffle(decodePrompts).entries()) {
  write("eval_v2_decode.jsonl", { task: i % 2 ? "held_out" : "tune", p: chatPrompt(content) });
}

await Promise.all(Object.values(files).map((f) => new Promise((r) => f.end(r))));
const heldOut = DP.heldOutStrings(vocab);
if (EVAL_ONLY && existsSync(join(OUT, "stats_v2.json"))) {
  const before = JSON.parse(readFileSync(join(OUT, "stats_v2.json"), "utf8")).counts;
  for (const [f, c] of Object.entries(before)) if (!f.startsWith("eval_")) counts[f] = c;
}
writeFileSync(
  join(OUT, "stats_v2.json"),
  `${JSON.stringify({ renderer: DECISION_RENDERER, small: SMALL, counts, held_out: { words: heldWords.length, ...heldOut } }, null, 1)}\n`,
);
console.log(JSON.stringify(counts, null, 1));
