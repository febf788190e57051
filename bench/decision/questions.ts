// The requests bench/decision.ts sends: 16 questions of every type about one support ticket,
// the state's sentences, and a request built through the JSON route's parser.
import type { DecideRequest } from "../../gen/tessera/decision/v1/decision_pb.js";
import { parseDecisionRequest } from "../../lib/decision-types/request-json.js";

export const SENTENCES = [
  "The customer reports that the nightly export has failed three times this week.",
  "Each failure happens after about thirty minutes, with a timeout from the storage layer.",
  "Their compliance team needs the export before the audit that starts on Monday morning.",
  "They already reduced the date range and retried manually, without success.",
  "The account has been with us since 2019 and is on the enterprise plan.",
  "Two other tickets from the same region mention slow uploads during the same hours.",
  "The customer asks for a call with an engineer and a written incident summary.",
  "Support suggested splitting the export into smaller batches as a workaround.",
];

export const QUESTIONS: Record<string, unknown> = {
  urgent: { type: "noul", instructions: "Is this ticket urgent?" },
  escalate: { type: "noul", instructions: "Should an engineer be paged?", criteria: { true: "page now", false: "next business day" } },
  team: {
    type: "choice",
    instructions: "Which team owns this?",
    criteria: { billing: null, "data platform": "exports", storage: "uploads and disks", support: null },
  },
  mood: { type: "score", instructions: "How upset is the customer?", criteria: ["calm", "concerned", "upset", "furious"] },
  churn: { type: "score", instructions: "Risk that the customer leaves?", criteria: ["low", "medium", "high"] },
  cause: { type: "choice", criteria: { network: null, storage: null, "query size": null, "client bug": null, unknown: null } },
  refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
  call: { type: "noul", instructions: "Does the customer ask for a call?" },
  region: { type: "choice", instructions: "Where is the customer?", criteria: { eu: null, us: null, apac: null } },
  severity: { type: "score", criteria: ["sev4", "sev3", "sev2", "sev1"] },
  known: { type: "noul", instructions: "Is this a known incident?" },
  plan: { type: "choice", criteria: { free: null, team: null, enterprise: null } },
  workaround: { type: "noul", instructions: "Was a workaround offered?" },
  effort: { type: "score", instructions: "Effort to resolve", criteria: ["minutes", "hours", "days", "weeks", "months"] },
  language: { type: "choice", criteria: { english: null, german: null, french: null, japanese: null } },
  followup: { type: "noul", instructions: "Is a follow-up needed?" },
};

export function requestOf(state: string, questions: Record<string, unknown>): DecideRequest {
  const parsed = parseDecisionRequest({ model: "decisionmodel-latest", state, questions });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.violations));
  return parsed.request;
}

export function pick(ids: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(ids.map((id) => [id, QUESTIONS[id]]));
}
