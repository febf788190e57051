// Decision phrasings of model v2 as data: the question maker (decision-phrasings.mjs) picks
// instructions and option names from these lists and the decision renderer renders them as
// any other question. Each list has a TRAIN part and a HELD_OUT part; the held-out parts
// were written before any v2 training and are only ever used by the evaluation sets
// (test_heldout.py checks that no held-out string reaches the training files).

/** Spam as noul. `yes`: "yes" means spam; `no`: "yes" means legitimate (inverted). */
export const SPAM_NOUL = {
  train: {
    yes: [
      "Would most people consider this email spam?",
      "Was this email sent in bulk to people who never asked for it?",
      "Is the sender trying to sell something or trick the reader?",
      "Should this go to the junk folder?",
      "Is this message unsolicited advertising?",
      "Does this look like a scam or a mass mailing?",
      "Flag as spam?",
      "Is this one of those junk emails?",
      "Is this email something a spam filter ought to catch?",
      "Would a careful reader delete this unread as junk?",
    ],
    no: [
      "Would the recipient want to receive this email?",
      "Is this a genuine message from someone the reader deals with?",
      "Should this email reach the inbox?",
      "Is this an ordinary personal or work email?",
      "Is this mail the reader signed up for or expects?",
      "Is the email legitimate?",
      "Keep this message?",
      "Is this a real email rather than junk?",
    ],
    json: {
      yes: [
        { task: "spam filter", question: "is it spam?" },
        { check: "junk mail", answer: "yes if junk" },
      ],
      no: [{ q: "legitimate email?", yes: "legitimate" }],
    },
  },
  held_out: {
    yes: ["Is this an unwanted bulk message?", "Does this email belong in the spam folder?", "Would you call this email junk?"],
    no: ["Is this email worth keeping in the inbox?", "Does this read like a normal message someone meant to send to the reader?"],
    json: { yes: [{ classify: "email", question: "is this spam?" }], no: [{ classify: "email", question: "is this a wanted message?" }] },
  },
};

/** Spam descriptions for noul questions (criteria.true / criteria.false), spam side first. */
export const SPAM_DESCRIPTIONS = {
  train: [
    ["the message is unsolicited bulk mail", "the message is wanted mail"],
    ["it advertises, scams or phishes", "it is a normal message"],
    ["junk", "not junk"],
    ["a spammer sent it", "a real correspondent sent it"],
  ],
  held_out: [["nobody asked for this message", "the reader wants this message"]],
};

/** Sentiment as noul. `yes`: "yes" means positive; `no`: "yes" means negative. */
export const SENTIMENT_NOUL = {
  train: {
    yes: [
      "Was the customer pleased?",
      "Does the writer speak well of it?",
      "Is the tone of this text approving?",
      "Would the author buy it again?",
      "Is this praise?",
      "Did it make the writer happy?",
      "Is the opinion here a good one?",
      "Does the reviewer recommend it?",
      "Is this text upbeat about its subject?",
      "Good experience?",
    ],
    no: [
      "Was the customer let down?",
      "Does the writer complain?",
      "Is the tone of this text critical?",
      "Would the author warn others away?",
      "Is this a bad review?",
      "Did it disappoint the writer?",
      "Bad experience?",
    ],
    json: {
      yes: [
        { task: "sentiment", question: "is it positive?" },
        { check: "opinion", yes: "favourable" },
      ],
      no: [{ q: "negative review?" }],
    },
  },
  held_out: {
    yes: ["Did the reviewer enjoy the experience?", "Would this reviewer come back?", "Is the writer satisfied?"],
    no: ["Is the reviewer dissatisfied?", "Does this review discourage others?"],
    json: { yes: [{ classify: "review", question: "positive?" }], no: [{ classify: "review", question: "negative?" }] },
  },
};

export const SENTIMENT_DESCRIPTIONS = {
  train: [
    ["the writer liked it", "the writer did not like it"],
    ["the text is favourable", "the text is unfavourable"],
    ["approval", "disapproval"],
  ],
  held_out: [["the reviewer came away pleased", "the reviewer came away unhappy"]],
};

/** Instructions of two-option choices. */
export const SENTIMENT_CHOICE_Q = {
  train: [
    "Which describes the review?",
    "Pick the label for this opinion.",
    "Which one matches how the writer felt?",
    "Label the review.",
    { task: "sentiment", pick: "one option" },
    "Choose the option that fits.",
  ],
  held_out: ["How did the reviewer feel about it?", "Which option best sums up this review?"],
};
export const SPAM_CHOICE_Q = {
  train: ["Where does this email belong?", "Label the email.", "Pick the right class for this message.", { task: "mail triage" }],
  held_out: ["How should this email be filed?"],
};

/**
 * Option names whose meaning is in the name (no description): pairs [positive, negative]
 * and [spam, legitimate]. Open vocabularies are added from AFINN in decision-phrasings.mjs.
 */
export const SENTIMENT_NAME_PAIRS = {
  train: [
    ["loved it", "hated it"],
    ["recommend", "avoid"],
    ["great", "awful"],
    ["pleased", "annoyed"],
    ["approve", "disapprove"],
    ["fan", "critic"],
    ["5 stars", "1 star"],
    ["yay", "nay"],
    ["good experience", "bad experience"],
    ["would return", "would not return"],
  ],
  held_out: [
    ["left smiling", "left frowning"],
    ["worth it", "not worth it"],
    ["glowing", "scathing"],
    ["keeper", "regret"],
  ],
};
export const SPAM_NAME_PAIRS = {
  train: [
    ["bulk mail", "personal mail"],
    ["junk", "keep"],
    ["block", "deliver"],
    ["advertising", "correspondence"],
    ["scam", "genuine"],
    ["trash", "inbox"],
  ],
  held_out: [
    ["unwanted", "wanted"],
    ["spam folder", "inbox folder"],
  ],
};

/** Coded option names: an arbitrary name with the meaning in its description. */
export const CODE_NAME_STYLES = ["word", "letter", "code", "Word"];
