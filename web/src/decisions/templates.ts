/** One-click question templates of the Decisions tab, one per question type. */
export const TEMPLATES = {
  noul: {
    id: "spam",
    question: {
      type: "noul",
      instructions: "Is this message unsolicited advertising?",
      criteria: { true: "spam: an offer nobody asked for", false: "a normal message" },
    },
  },
  choice: {
    id: "topic",
    question: {
      type: "choice",
      instructions: "What is the message mainly about?",
      criteria: { offer: "selling or giving something away", question: "asking for information", greeting: null },
    },
  },
  score: {
    id: "urgency",
    question: { type: "score", instructions: "How urgent does the message sound?", criteria: ["calm", "somewhat urgent", "very urgent"] },
  },
} as const;

export type TemplateName = keyof typeof TEMPLATES;

export const DEFAULT_STATE = "Win a free cruise now!!! Click the link below to claim your prize before midnight.";

/**
 * The questions text with the template added under a fresh id (`topic`, then `topic_2`, …).
 * Throws when the current text is not a JSON object.
 */
export function addTemplate(questionsText: string, name: TemplateName): string {
  const current: unknown = questionsText.trim() === "" ? {} : JSON.parse(questionsText);
  if (typeof current !== "object" || current === null || Array.isArray(current))
    throw new Error("The questions must be a JSON object of question id to question.");
  const questions = current as Record<string, unknown>;
  const { id, question } = TEMPLATES[name];
  let fresh: string = id;
  for (let n = 2; fresh in questions; n++) fresh = `${id}_${n}`;
  return JSON.stringify({ ...questions, [fresh]: question }, null, 2);
}
