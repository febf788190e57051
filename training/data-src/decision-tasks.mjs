// Decision examples (noul / choice / score) in the API's question shape. Each maker returns
// {question, target} or {question, soft}; prepare-data renders them with the decision templates.

// ---------- spam ----------
const SPAM_YES = [
  "Is this email spam?",
  "Is this message spam?",
  "Is this e-mail junk mail?",
  "Is this unsolicited bulk email (spam)?",
  "Should a spam filter block this email?",
  "Is this an advertising, scam or bulk message rather than a normal email?",
  "Is it spam?",
  "Spam or not: is this email spam?",
  "Does this email look like spam?",
  "Is this email unwanted junk?",
];
const SPAM_NO = [
  "Is this a legitimate email (not spam)?",
  "Is this email ham, that is wanted mail?",
  "Is this message from a real correspondent rather than a spammer?",
  "Is this a normal, non-spam email?",
  "Should this email be delivered to the inbox (not spam)?",
];
export const SPAM_OPTION_NAMES = [
  ["spam", "ham"],
  ["spam", "not spam"],
  ["junk", "legitimate"],
  ["spam", "legitimate email"],
  ["unsolicited bulk email", "normal email"],
  ["junk mail", "real mail"],
  ["Spam", "Ham"],
  ["SPAM", "OK"],
];
const SPAM_OPTION_DESCRIPTIONS = [
  ["unsolicited advertising, scams or bulk mail", "mail the recipient wants: personal, work, lists they joined"],
  ["junk", "wanted mail"],
];
const SPAM_CHOICE_Q = [
  "Is this email spam?",
  "Classify this email.",
  "What kind of email is this?",
  "Which folder should this email go to?",
  "",
  "Spam filter: classify the message.",
  { task: "email classification", question: "spam or not?" },
];

export function spamNoul(rng, isSpam) {
  const inverted = rng.chance(0.25);
  let instructions = rng.pick(inverted ? SPAM_NO : SPAM_YES);
  let criteria;
  if (rng.chance(0.3)) {
    criteria = inverted
      ? { true: "the email is legitimate", false: "the email is spam" }
      : { true: "the email is spam", false: "the email is legitimate" };
    if (rng.chance(0.3)) criteria = rng.chance(0.5) ? { true: criteria.true } : { false: criteria.false };
    if (rng.chance(0.2)) instructions = "";
  }
  if (rng.chance(0.1)) instructions = { question: instructions || (inverted ? SPAM_NO[0] : SPAM_YES[0]) };
  const question = { type: "noul", instructions, criteria };
  return { question, target: isSpam !== inverted ? 0 : 1 };
}

export function spamChoice(rng, isSpam) {
  const [spamName, hamName] = rng.pick(SPAM_OPTION_NAMES);
  const desc = rng.chance(0.3) ? rng.pick(SPAM_OPTION_DESCRIPTIONS) : [null, null];
  const spamFirst = rng.chance(0.5);
  const criteria = spamFirst ? { [spamName]: desc[0], [hamName]: desc[1] } : { [hamName]: desc[1], [spamName]: desc[0] };
  const target = isSpam === spamFirst ? 0 : 1;
  return { question: { type: "choice", instructions: rng.pick(SPAM_CHOICE_Q), criteria }, target };
}

// ---------- sentiment ----------
const POS_Q = [
  "Is this review positive?",
  "Is the reviewer happy?",
  "Is the sentiment positive?",
  "Did the writer like it?",
  "Is this a positive opinion?",
  "Does this text express a positive sentiment?",
  "Is this review favourable?",
  "Would the author recommend it?",
];
const NEG_Q = [
  "Is this review negative?",
  "Is the reviewer unhappy?",
  "Is the sentiment negative?",
  "Did the writer dislike it?",
  "Is this a complaint?",
  "Does this text express a negative sentiment?",
];
export const SENT_NAMES = [
  ["positive", "negative"],
  ["good", "bad"],
  ["liked it", "disliked it"],
  ["happy", "unhappy"],
  ["favourable", "unfavourable"],
  ["pos", "neg"],
  ["thumbs up", "thumbs down"],
  ["Positive", "Negative"],
  ["praise", "complaint"],
  ["satisfied", "dissatisfied"],
];
const SENT_CHOICE_Q = [
  "What is the sentiment of this review?",
  "Is this review positive or negative?",
  "How does the writer feel?",
  "Classify the sentiment.",
  "",
  "Which label fits the opinion expressed?",
];
const SCALES = [
  ["negative", "positive"],
  ["bad", "good"],
  ["negative", "neutral", "positive"],
  ["bad", "okay", "good"],
  ["unhappy", "neutral", "happy"],
  ["very negative", "negative", "positive", "very positive"],
  ["terrible", "poor", "good", "excellent"],
  ["very negative", "negative", "neutral", "positive", "very positive"],
  ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"],
  ["awful", "bad", "mixed", "good", "great"],
];
const SCORE_Q = [
  "How positive is this review?",
  "Rate the sentiment.",
  "",
  "Rate how much the writer liked it.",
  "Sentiment score of the text?",
];

export function sentimentNoul(rng, positive) {
  const inverted = rng.chance(0.3);
  let instructions = rng.pick(inverted ? NEG_Q : POS_Q);
  let criteria;
  if (rng.chance(0.25)) {
    criteria = inverted
      ? { true: "the text is negative", false: "the text is positive" }
      : { true: "the text is positive", false: "the text is negative" };
    if (rng.chance(0.2)) instructions = "";
  }
  return { question: { type: "noul", instructions, criteria }, target: positive !== inverted ? 0 : 1 };
}

export function sentimentChoice(rng, positive) {
  const [p, n] = rng.pick(SENT_NAMES);
  const posFirst = rng.chance(0.5);
  const criteria = posFirst ? { [p]: null, [n]: null } : { [n]: null, [p]: null };
  return { question: { type: "choice", instructions: rng.pick(SENT_CHOICE_Q), criteria }, target: positive === posFirst ? 0 : 1 };
}

/** Binary truth on a k-level scale: all mass on the levels of the right half. */
export function sentimentScore(rng, positive) {
  const levels = rng.pick(SCALES);
  const k = levels.length;
  const soft = levels.map((_, i) => {
    const upper = i >= Math.ceil(k / 2) || (k % 2 === 0 && i >= k / 2);
    const lower = i < Math.floor(k / 2);
    return positive ? (upper ? 1 : 0) : lower ? 1 : 0;
  });
  const s = soft.reduce((a, b) => a + b, 0);
  return { question: { type: "score", instructions: rng.pick(SCORE_Q), criteria: levels }, soft: soft.map((x) => x / s) };
}

/** A graded truth in [-1, 1] on a k-level scale: mass on the nearest level. */
export function gradedScore(rng, value, instructionsPool) {
  const k = 2 + rng.int(9);
  const generic = Array.from({ length: k }, (_, i) => `${i}`);
  const named = SCALES.filter((s) => s.length === k);
  const levels = named.length && rng.chance(0.6) ? rng.pick(named) : generic.map((x) => `level ${x}`);
  const pos = ((value + 1) / 2) * (k - 1);
  const soft = levels.map((_, i) => Math.max(0, 1 - Math.abs(i - pos)));
  const s = soft.reduce((a, b) => a + b, 0);
  return { question: { type: "score", instructions: rng.pick(instructionsPool), criteria: levels }, soft: soft.map((x) => x / s) };
}

// ---------- WordNet ----------
const KIND_Q = [
  (x, y) => `Is a ${x} a kind of ${y}?`,
  (x, y) => `Is ${x} a type of ${y}?`,
  (x, y) => `Is every ${x} a ${y}?`,
  (x, y) => `Does "${x}" name a kind of ${y}?`,
  (_x, y) => `Is the word in the state a kind of ${y}?`,
];

export function kindOfNoul(rng, x, y, yes) {
  const f = rng.pick(KIND_Q);
  return {
    question: {
      type: "noul",
      instructions: f(x, y),
      criteria: rng.chance(0.2) ? { true: `it is a kind of ${y}`, false: `it is not` } : undefined,
    },
    target: yes ? 0 : 1,
  };
}

const WHICH_WORD_Q = [
  "Which word does this definition describe?",
  "Which word means this?",
  "Pick the word defined in the state.",
  "Which option is the word for this meaning?",
  "",
  "What word is being defined?",
];

export function whichWordChoice(rng, correct, distractors) {
  const words = rng.shuffle([correct, ...distractors]);
  const criteria = {};
  for (const w of words) criteria[w] = null;
  return { question: { type: "choice", instructions: rng.pick(WHICH_WORD_Q), criteria }, target: words.indexOf(correct) };
}

const WHICH_SENSE_Q = ["Which meaning fits this use of the word?", "Which definition matches?", "Which sense is meant?", ""];

export function whichSenseChoice(rng, allGlosses, correctIndexIn) {
  // identical definitions of different senses would collapse into one option
  const glosses = [...new Set(allGlosses)];
  const correctIndex = glosses.indexOf(allGlosses[correctIndexIn]);
  const order = rng.shuffle(glosses.map((_, i) => i));
  const useDescriptions = rng.chance(0.5);
  const criteria = {};
  order.forEach((gi, j) => {
    if (useDescriptions) criteria[`sense ${String.fromCharCode(65 + j)}`] = glosses[gi];
    else criteria[glosses[gi]] = null;
  });
  return { question: { type: "choice", instructions: rng.pick(WHICH_SENSE_Q), criteria }, target: order.indexOf(correctIndex) };
}

const CATEGORY_Q = [
  "What does this word name?",
  "Which category does the word belong to?",
  "What kind of thing is it?",
  "Semantic category?",
];

export function categoryChoice(rng, correct, others) {
  const cats = rng.shuffle([correct, ...others]);
  const criteria = {};
  for (const c of cats) criteria[c] = null;
  return { question: { type: "choice", instructions: rng.pick(CATEGORY_Q), criteria }, target: cats.indexOf(correct) };
}

const POLYSEMY_LEVELS = [
  ["one sense", "two or three senses", "four to six senses", "seven or more senses"],
  ["1", "2-3", "4-6", "7+"],
];
const POLYSEMY_Q = ["How many meanings does this word have?", "How ambiguous is this word (number of senses)?"];

export function polysemyScore(rng, senses) {
  const levels = rng.pick(POLYSEMY_LEVELS);
  const idx = senses <= 1 ? 0 : senses <= 3 ? 1 : senses <= 6 ? 2 : 3;
  return { question: { type: "score", instructions: rng.pick(POLYSEMY_Q), criteria: levels }, target: idx };
}

export const WORD_SENTIMENT_Q = [
  "How positive is this word?",
  "Rate the feeling this expresses.",
  "Sentiment of the phrase?",
  "",
  "How pleasant is this?",
];
