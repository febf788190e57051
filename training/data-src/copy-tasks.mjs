// Copy tasks of model v2: the reply restates text of the message in the message's own form
// (repeat, quote, extract a span, fill a template, JSON values and tool arguments taken from
// the message), so the model learns to copy rather than to recall.
import { chatPromptAndReply, pyJson } from "./render.mjs";

const REPEAT_Q = [
  (t) => `Repeat after me: ${t}`,
  (t) => `Say "${t}".`,
  (t) => `Echo this back exactly: ${t}`,
  (t) => `Please repeat: ${t}`,
  (t) => `Copy the following text.\n${t}`,
];
const QUOTE_Q = [
  (w) => `Put the word ${w} in double quotes.`,
  (w) => `Quote this word: ${w}`,
  (w) => `Write ${w} between quotation marks.`,
];
const FILL_Q = [
  (w, tpl) => `Fill the blank with "${w}": ${tpl}`,
  (w, tpl) => `Complete the sentence using the word ${w}.\n${tpl}`,
  (w, tpl) => `Template: ${tpl}\nWord: ${w}\nWrite the filled-in sentence.`,
];
const TEMPLATES = [
  "My favourite word is ___.",
  "The ___ was on the table.",
  "She said ___ twice.",
  "Today we talk about ___.",
  "I looked up ___ in the dictionary.",
  "___ is the word of the day.",
];
const SPAN_Q = [
  { q: (s) => `What is the last word of this sentence?\n${s}`, pick: (ws) => ws.at(-1) },
  { q: (s) => `What is the first word of this sentence?\n${s}`, pick: (ws) => ws[0] },
  { q: (s) => `Which word of this sentence is in capital letters?\n${s}`, pick: null },
];
const JSON_Q = [
  (w, key) => `Return JSON with the key "${key}" set to the word ${w}.`,
  (w, key) => `Make a JSON object: ${key} = ${w}`,
  (w, key) => `Put "${w}" into a JSON object under ${key}.`,
];

const words = (s) =>
  s
    .replace(/[^A-Za-z' -]/g, " ")
    .split(/\s+/)
    .filter(Boolean);

/** One copy example of a random kind. `w`: a word; `sentence`: a sentence that holds words. */
export function copyChat(rng, w, sentence) {
  const kind = rng.pick(["repeat_word", "repeat_sentence", "quote", "fill", "span", "json", "json"]);
  let content;
  let reply;
  let vars = {};
  if (kind === "repeat_word") {
    content = rng.pick(REPEAT_Q)(w);
    reply = w;
  } else if (kind === "repeat_sentence") {
    content = rng.pick(REPEAT_Q)(sentence);
    reply = sentence;
  } else if (kind === "quote") {
    content = rng.pick(QUOTE_Q)(w);
    reply = `"${w}"`;
  } else if (kind === "fill") {
    const tpl = rng.pick(TEMPLATES);
    content = rng.pick(FILL_Q)(w, tpl);
    const filled = tpl.replace("___", w);
    reply = filled[0].toUpperCase() + filled.slice(1);
  } else if (kind === "span") {
    const ws = words(sentence);
    const spec = rng.pick(SPAN_Q);
    if (spec.pick) {
      content = spec.q(sentence);
      reply = spec.pick(ws);
    } else {
      const i = rng.int(ws.length);
      const upper = ws.map((x, j) => (j === i ? x.toUpperCase() : x)).join(" ");
      content = spec.q(upper);
      reply = ws[i].toUpperCase();
    }
  } else {
    const key = rng.pick(["word", "value", "term", "text", "answer", "name"]);
    content = rng.pick(JSON_Q)(w, key);
    reply = pyJson({ [key]: w });
    vars = rng.chance(0.5) ? { response_format: "json" } : {};
  }
  const { prompt, reply: r } = chatPromptAndReply(
    [
      { role: "user", content },
      { role: "assistant", content: reply },
    ],
    vars,
  );
  return { task: `copy_${kind}`, prompt, reply: r };
}

/** Phrasings of the copy evaluation (never in training): definition, opposite, synonym. */
export const COPY_EVAL = {
  definition: [
    (w) => `Could you explain what the term ${w} refers to?`,
    (w) => `How would you define ${w}?`,
    (w) => `Tell me the sense of the word ${w}.`,
  ],
  opposite: [(w) => `What word means the reverse of ${w}?`, (w) => `Tell me an antonym for ${w}.`, (w) => `Opposite of "${w}"?`],
  synonym: [(w) => `What's a word similar to ${w}?`, (w) => `Suggest a synonym of ${w}.`, (w) => `Name another word for ${w}.`],
};
