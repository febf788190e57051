import { describe, expect, it } from "vitest";
import { QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { CALIBRATION_MODEL, parseLabelledJsonl } from "./labelled-jsonl.js";

const QUESTIONS = {
  spam: { type: "noul", instructions: "Is it spam?" },
  // Parsed, so that "__proto__" is an option's name (an object literal would set the prototype).
  team: { type: "choice", criteria: JSON.parse('{"billing": null, "storage": "disks", "__proto__": null}') },
  mood: { type: "score", criteria: ["calm", "upset", "furious"] },
};

const line = (answers: unknown, extra: object = {}) => JSON.stringify({ state: "s", questions: QUESTIONS, answers, ...extra });

describe("parseLabelledJsonl", () => {
  it("reads each line as a /v1/systemone body and each answer as the index of its label", () => {
    const text = [
      line({ spam: true, team: "storage", mood: 2 }),
      "",
      line({ spam: false, team: "__proto__", mood: "upset" }, { model: "mine" }),
      "   ",
    ].join("\r\n");
    const { lines, problems } = parseLabelledJsonl(`\uFEFF${text}`);
    expect(problems).toEqual([]);
    expect(lines.map((l) => l.line)).toEqual([1, 3]);
    expect(lines[0]!.request.model).toBe(CALIBRATION_MODEL);
    expect(lines[1]!.request.model).toBe("mine");
    expect(lines[0]!.request.questionList.map((q) => q.question!.type)).toEqual([
      QuestionType.NOUL,
      QuestionType.CHOICE,
      QuestionType.SCORE,
    ]);
    expect(lines.map((l) => l.questions.map((q) => [q.id, q.type, q.target]))).toEqual([
      [
        ["spam", "noul", 0],
        ["team", "choice", 1],
        ["mood", "score", 2],
      ],
      [
        ["spam", "noul", 1],
        ["team", "choice", 2],
        ["mood", "score", 1],
      ],
    ]);
  });

  it("names the line and the problem, for every problem of every line", () => {
    const text = [
      line({ spam: true, team: "billing", mood: 0 }),
      "{not json",
      "[1, 2]",
      JSON.stringify({ state: "s", questions: QUESTIONS }),
      JSON.stringify({ state: "s", questions: { q: { type: "maybe" } }, answers: { q: true } }),
      line({ spam: "yes", team: "sales", mood: 3, extra: 1 }),
      line({ spam: true, team: "billing" }),
      line({ spam: true, team: "billing", mood: 1.5 }),
    ].join("\n");
    const { lines, problems } = parseLabelledJsonl(text);
    expect(lines.map((l) => l.line)).toEqual([1]);
    expect(problems[0]).toMatch(/^line 2: not valid JSON \(/);
    expect(problems.slice(1)).toEqual([
      "line 3: must be a JSON object: a /v1/systemone request body with its answers",
      'line 4: answers: must be an object {"<question id>": <the correct answer>}',
      "line 5: questions.q.type: type must be one of noul, choice, score",
      'line 6: answers."spam": the answer to a noul question must be true or false',
      'line 6: answers."team": the answer to a choice question must be the name of one of its options: "billing", "storage", "__proto__"',
      'line 6: answers."mood": the answer to a score question must be a level\'s number (0 to 2, lowest first) or its text: "calm", "upset", "furious"',
      'line 6: answers."extra": no question with this id on the line',
      'line 7: answers."mood": missing (every question needs its correct answer)',
      'line 8: answers."mood": the answer to a score question must be a level\'s number (0 to 2, lowest first) or its text: "calm", "upset", "furious"',
    ]);
  });

  it("finds nothing in an empty file", () => {
    expect(parseLabelledJsonl("")).toEqual({ lines: [], problems: [] });
    expect(parseLabelledJsonl("\n \n")).toEqual({ lines: [], problems: [] });
  });
});
