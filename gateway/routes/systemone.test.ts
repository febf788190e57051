import { describe, expect, it } from "vitest";
import { parseDecisionRequest } from "../mappers/decision.js";
import { decisionHold, questionCount } from "../admission.js";

const body = {
  model: "decisionmodel-latest",
  state: "Win a prize now",
  questions: {
    spam: { type: "noul", criteria: { true: "unsolicited", false: "wanted" } },
    topic: { type: "choice", criteria: { money: "about money", work: null } },
    urgency: { type: "score", criteria: ["low", "mid", "high"] },
  },
};

describe("the decision quota hold", () => {
  it("counts the questions the gateway sends (in question_list), each with its template allowance", () => {
    const parsed = parseDecisionRequest(body);
    if (!parsed.ok) throw new Error("expected a valid body");
    expect(questionCount(parsed.request)).toBe(3);
    expect(decisionHold(1000, questionCount(parsed.request))).toBe(2 * 1000 + 512 * 4);
  });

  it("never holds more than the inference workers' work cap allows (plus a block)", () => {
    expect(decisionHold(1_000_000, 64, 4096)).toBe(4096 + 64);
  });
});
