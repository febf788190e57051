// Chat conversations built from WordNet, rendered later with the chat template.
import { LEX_DESCRIPTIONS, POS_NAMES, antonymsOf, hypernymChain } from "./wordnet.mjs";
import { EOS, chatPromptAndReply, pyJson, renderChat } from "./render.mjs";

// Phrasings of "what does X mean". The HELD_OUT ones never appear in training; the chat
// evaluation asks with them.
export const GLOSS_TRAIN = [
  (w) => `What does "${w}" mean?`,
  (w) => `Define ${w}.`,
  (w) => `What is the meaning of the word ${w}?`,
  (w) => `Give me the definition of ${w}.`,
  (w) => `Explain the word "${w}".`,
  (w) => `${w}: what does it mean?`,
  (w) => `Meaning of ${w}?`,
  (w) => `What's the definition of ${w}?`,
  (w) => `Can you tell me what ${w} means?`,
  (w) => `define ${w}`,
  (w) => `What does the word ${w} mean?`,
  (w) => `I don't know the word "${w}". What does it mean?`,
];
export const GLOSS_HELD_OUT = [
  (w) => `Could you explain what the term ${w} refers to?`,
  (w) => `How would you define ${w}?`,
  (w) => `Tell me the sense of the word ${w}.`,
  (w) => `I came across "${w}" in a text. What is its meaning?`,
];
const EXAMPLE_Q = [
  (w) => `Use ${w} in a sentence.`,
  (w) => `Give an example sentence with "${w}".`,
  (w) => `How is the word ${w} used?`,
  (w) => `Show me ${w} in context.`,
  (w) => `Write a sentence that uses the word ${w}.`,
];
const SYN_Q = [
  (w) => `What are synonyms of ${w}?`,
  (w) => `Give me another word for ${w}.`,
  (w) => `Synonyms for "${w}"?`,
  (w) => `Which words mean the same as ${w}?`,
  (w) => `List words similar in meaning to ${w}.`,
];
const ANT_Q = [
  (w) => `What is the opposite of ${w}?`,
  (w) => `Antonym of ${w}?`,
  (w) => `Give me a word that means the opposite of "${w}".`,
  (w) => `What's the antonym of ${w}?`,
];
const KIND_Q = [
  (x, y) => `Is a ${x} a kind of ${y}?`,
  (x, y) => `Is ${x} a type of ${y}?`,
  (x, y) => `Is every ${x} a ${y}?`,
  (x, y) => `Would you call a ${x} a ${y}?`,
];
const CATEGORY_Q = [
  (w) => `What kind of word is ${w}?`,
  (w) => `What part of speech is "${w}"?`,
  (w) => `Which lexical category does ${w} belong to?`,
  (w) => `Is ${w} a noun, a verb, an adjective or an adverb?`,
];
const SYSTEMS = [
  "",
  "",
  "",
  "You are a helpful assistant.",
  "You are a concise dictionary assistant.",
  "Answer briefly and accurately.",
  "You are Tessera, a small language model. Answer questions about words.",
];

const cap = (s) => (s ? s[0].toUpperCase() + s.slice(1) : s);
const article = (w) => (/^[aeiou]/i.test(w) ? "an" : "a");

function withSystem(rng, messages) {
  const sys = rng.pick(SYSTEMS);
  return sys ? [{ role: "system", content: sys }, ...messages] : messages;
}

/**
 * The definition reply: up to three senses in frequency order. It restates the word as the
 * prompt spells it, lower case after a space (" harbor"), so the model copies the prompt's
 * token instead of recalling a capitalised form.
 */
export function glossReply(word, senses) {
  if (senses.length === 1) {
    const s = senses[0];
    return `The word ${word} (${POS_NAMES[s.pos]}): ${s.definition}.`;
  }
  return `The word ${word} has several meanings:\n${senses.map((s, i) => `${i + 1}. (${POS_NAMES[s.pos]}) ${s.definition}.`).join("\n")}`;
}

export function glossReference(senses) {
  return senses.map((s) => s.definition).join(" ");
}

export function glossChat(rng, word, senses, phrasing) {
  const msgs = withSystem(rng, [
    { role: "user", content: phrasing(word) },
    { role: "assistant", content: glossReply(word, senses) },
  ]);
  return chatPromptAndReply(msgs);
}

export function exampleChat(rng, word, synset) {
  const ex = synset.examples.find((e) => e.toLowerCase().includes(word.toLowerCase())) ?? synset.examples[0];
  const answer = rng.chance(0.5) ? `${cap(ex)}.` : `"${cap(ex)}." Here ${word} means ${synset.definition}.`;
  return chatPromptAndReply(
    withSystem(rng, [
      { role: "user", content: rng.pick(EXAMPLE_Q)(word) },
      { role: "assistant", content: answer },
    ]),
  );
}

export function synonymChat(rng, word, synonyms) {
  const list = synonyms.slice(0, 6);
  const answer = list.length === 1 ? `Another word for ${word} is ${list[0]}.` : `Synonyms of ${word}: ${list.join(", ")}.`;
  return chatPromptAndReply(
    withSystem(rng, [
      { role: "user", content: rng.pick(SYN_Q)(word) },
      { role: "assistant", content: answer },
    ]),
  );
}

export function antonymChat(rng, word, antonyms) {
  const answer = `The opposite of ${word} is ${antonyms.join(" or ")}.`;
  return chatPromptAndReply(
    withSystem(rng, [
      { role: "user", content: rng.pick(ANT_Q)(word) },
      { role: "assistant", content: answer },
    ]),
  );
}

export function kindAnswer(x, chain, y, yes) {
  if (yes) {
    const path = [x, ...chain.slice(0, chain.findIndex((s) => s.words[0] === y) + 1).map((s) => s.words[0])];
    return `Yes. ${cap(article(x))} ${x} is a kind of ${y}: ${path.join(" > ")}.`;
  }
  const parent = chain[0] ? chain[0].words[0] : "thing";
  return `No. ${cap(article(x))} ${x} is a kind of ${parent}, not a kind of ${y}.`;
}

export function kindChat(rng, x, chain, y, yes) {
  return chatPromptAndReply(
    withSystem(rng, [
      { role: "user", content: rng.pick(KIND_Q)(x, y) },
      { role: "assistant", content: kindAnswer(x, chain, y, yes) },
    ]),
  );
}

export function categoryChat(rng, word, synset) {
  const answer = `The word ${word} is ${article(POS_NAMES[synset.pos])} ${POS_NAMES[synset.pos]}; in its main sense it names ${LEX_DESCRIPTIONS[synset.lexFile]} (WordNet category ${synset.lexFile}).`;
  return chatPromptAndReply(
    withSystem(rng, [
      { role: "user", content: rng.pick(CATEGORY_Q)(word) },
      { role: "assistant", content: answer },
    ]),
  );
}

// ---------- JSON mode ----------
const JSON_SCHEMAS = [
  null,
  { keys: ["word", "part_of_speech", "definition"] },
  { keys: ["term", "meaning"] },
  { keys: ["definition"] },
  { keys: ["word", "definition", "example"] },
];

export function jsonChat(rng, word, synset) {
  const shape = rng.pick(JSON_SCHEMAS);
  const values = {
    word,
    term: word,
    part_of_speech: POS_NAMES[synset.pos],
    definition: synset.definition,
    meaning: synset.definition,
    example: synset.examples[0] ?? "",
  };
  const keys = shape ? shape.keys : ["word", "part_of_speech", "definition"];
  const obj = Object.fromEntries(keys.map((k) => [k, values[k]]));
  const vars = { response_format: "json" };
  if (shape)
    vars.json_schema = { type: "object", properties: Object.fromEntries(keys.map((k) => [k, { type: "string" }])), required: keys };
  const q = rng.pick([...GLOSS_TRAIN.slice(0, 4), (w) => `Give the word, its part of speech and its definition for: ${w}`]);
  return chatPromptAndReply(
    withSystem(rng, [
      { role: "user", content: q(word) },
      { role: "assistant", content: pyJson(obj) },
    ]),
    vars,
  );
}

// ---------- tools ----------
const TOOL_SETS = {
  define: [
    { name: "lookup_definition", description: "Look up the definition of an English word.", param: "word" },
    { name: "dictionary", description: "Dictionary lookup: returns the meanings of a word.", param: "term" },
    { name: "get_meaning", description: "Get what a word means.", param: "word" },
  ],
  synonyms: [
    { name: "find_synonyms", description: "Find synonyms of a word.", param: "word" },
    { name: "thesaurus", description: "Thesaurus: words with the same meaning.", param: "query" },
  ],
  hypernyms: [
    { name: "get_hypernyms", description: "Return the chain of broader categories of a noun.", param: "noun" },
    { name: "taxonomy", description: "What a word is a kind of, from specific to general.", param: "word" },
  ],
};
const DISTRACTOR_TOOLS = [
  { name: "get_weather", description: "Current weather for a city.", param: "city" },
  { name: "send_email", description: "Send an email to an address.", param: "to" },
  { name: "search_web", description: "Search the web.", param: "query" },
  { name: "calculator", description: "Evaluate an arithmetic expression.", param: "expression" },
];

function toolObject(t) {
  return {
    type: "function",
    function: {
      name: t.name,
      description: t.description,
      parameters: { type: "object", properties: { [t.param]: { type: "string" } }, required: [t.param] },
    },
  };
}

function toolQuestion(kind, word) {
  if (kind === "define") return `${GLOSS_TRAIN[0](word)}`;
  if (kind === "synonyms") return SYN_Q[0](word);
  return `What is ${article(word)} ${word} a kind of?`;
}

/**
 * A tool round: returns up to three examples from one conversation: the call, the final
 * answer after the tool's result, and a forced call (prompt ends inside the call).
 */
export function toolChats(rng, kind, word, data) {
  const tool = rng.pick(TOOL_SETS[kind]);
  const tools = rng.shuffle([tool, ...rng.sample(DISTRACTOR_TOOLS, rng.int(3))]).map(toolObject);
  const args = pyJson({ [tool.param]: word });
  let result;
  let final;
  if (kind === "define") {
    result = pyJson({ word, definitions: data.senses.map((s) => ({ part_of_speech: POS_NAMES[s.pos], definition: s.definition })) });
    final = glossReply(word, data.senses);
  } else if (kind === "synonyms") {
    result = pyJson({ word, synonyms: data.synonyms });
    final = `Synonyms of ${word}: ${data.synonyms.slice(0, 6).join(", ")}.`;
  } else {
    result = pyJson({ word, hypernyms: data.chain.map((s) => s.words[0]) });
    final =
      `${cap(article(word))} ${word} is a kind of ${data.chain[0].words[0]}` +
      (data.chain.length > 1
        ? `, which is a kind of ${data.chain
            .slice(1, 4)
            .map((s) => s.words[0])
            .join(", then ")}.`
        : ".");
  }
  const user = withSystem(rng, [{ role: "user", content: toolQuestion(kind, word) }]);
  const call = { role: "assistant", content: "", tool_calls: [{ name: tool.function?.name ?? tool.name, arguments: args }] };
  const vars = { tools, tool_choice: "auto" };
  const out = [];
  out.push({ task: "tool_call", ...chatPromptAndReply([...user, call], vars) });
  out.push({
    task: "tool_answer",
    ...chatPromptAndReply([...user, call, { role: "tool", content: result }, { role: "assistant", content: final }], vars),
  });
  // Forced: the prompt already holds `<tool_call>{"name": ..., "arguments": `.
  const forced = chatPromptAndReply([...user, call], { ...vars, forced_tool: tool.name });
  const head = `<tool_call>{"name": ${JSON.stringify(tool.name)}, "arguments": `;
  if (!forced.prompt.endsWith(head)) throw new Error("forced prompt must end inside the call");
  out.push({ task: "tool_forced", prompt: forced.prompt, reply: forced.reply });
  return out;
}

/** Tools offered but not needed: answer directly. */
export function toolNotNeededChat(rng, word, senses) {
  const tools = rng.sample(DISTRACTOR_TOOLS, 1 + rng.int(2)).map(toolObject);
  const msgs = withSystem(rng, [
    { role: "user", content: rng.pick(GLOSS_TRAIN)(word) },
    { role: "assistant", content: glossReply(word, senses) },
  ]);
  return chatPromptAndReply(msgs, { tools, tool_choice: rng.chance(0.5) ? "auto" : "none" });
}

// ---------- thinking ----------
export function thinkChat(rng, x, chain, y, yes, xSynset) {
  const user = withSystem(rng, [{ role: "user", content: rng.pick(KIND_Q)(x, y) }]);
  const prompt = renderChat(user, { enable_thinking: true, add_generation_prompt: true });
  if (!prompt.endsWith("<think>\n")) throw new Error("thinking prompt must end in <think>");
  const ancestry = chain
    .slice(0, 6)
    .map((s) => s.words[0])
    .join(", then ");
  const thought =
    `${cap(article(x))} ${x} is ${xSynset.definition}. Going up the categories: ${ancestry}. ` +
    (yes ? `${cap(y)} is on that path.` : `${cap(y)} is not on that path.`);
  return { prompt, reply: `${thought}\n</think>\n\n${kindAnswer(x, chain, y, yes)}${EOS}` };
}

export function thinkGlossChat(rng, word, senses) {
  const user = withSystem(rng, [{ role: "user", content: rng.pick(GLOSS_TRAIN)(word) }]);
  const prompt = renderChat(user, { enable_thinking: true, add_generation_prompt: true });
  if (!prompt.endsWith("<think>\n")) throw new Error("thinking prompt must end in <think>");
  const thought = `The user asks about the word "${word}". It has ${senses.length === 1 ? "one main sense" : `${senses.length} common senses`}; the first is a ${POS_NAMES[senses[0].pos]} sense.`;
  return { prompt, reply: `${thought}\n</think>\n\n${glossReply(word, senses)}${EOS}` };
}

// ---------- two turns ----------
export function twoTurnChat(rng, w1, senses1, w2, senses2) {
  const msgs = withSystem(rng, [
    { role: "user", content: rng.pick(GLOSS_TRAIN)(w1) },
    { role: "assistant", content: glossReply(w1, senses1) },
    { role: "user", content: rng.pick([(w) => `And ${w}?`, (w) => `What about ${w}?`, ...GLOSS_TRAIN])(w2) },
    { role: "assistant", content: glossReply(w2, senses2) },
  ]);
  return chatPromptAndReply(msgs);
}

export { antonymsOf, hypernymChain };
