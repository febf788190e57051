// `tessera calibrate` through the real command line (bin/tessera.ts) on a copy of the tiny test
// model. The labels are the model's own top answers (asked through the decision service, not
// through the command) on three lines of four, another answer on the fourth: so the command must
// report an accuracy of exactly 0.75 per type, which it can only do if every label reaches its row.
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionService, type Answer } from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { parseDecisionRequest } from "../../lib/decision-types/request-json.js";
import { argmax } from "../../lib/decision-types/probabilities.js";
import { silentLogger } from "../../lib/logger.js";
import { decisionRoutes } from "../../services/decision/server.js";
import { loadModelPool } from "../../services/inference/engine/model-pool.js";
import { createInferenceService } from "../../services/inference/service.js";
import { DEFAULT_CATALOG, fakeRegistry } from "../helpers/decision-doubles.js";
import { REPO_ROOT, TINY_MODEL_DIR } from "../helpers/tessera.js";

const LINES = 24;
const TEAMS = ["billing", "storage", "support", "sales"];
const MOODS = ["calm", "concerned", "upset", "furious"];
const QUESTIONS = {
  spam: { type: "noul", instructions: "Is it spam?" },
  team: { type: "choice", criteria: { billing: null, storage: "disks", support: null, sales: null } },
  mood: { type: "score", criteria: MOODS },
};

let dir: string;
let modelDir: string;
let labelled: string;
let originalDecision: string;

function calibrate(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--import", "tsx", "bin/tessera.ts", "calibrate", ...args], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The model's top answer to each question, at decision.json's temperatures (1 in the fixture). */
async function topAnswers(states: string[]): Promise<{ spam: boolean; team: number; mood: number }[]> {
  const pool = await loadModelPool({ models: [{ servingId: "bundled", dir: TINY_MODEL_DIR }], slots: 1, queue: 4, intraOpThreads: 1 });
  try {
    const logger = silentLogger();
    const inference = createClient(
      InferenceService,
      createRouterTransport(({ service }) => service(InferenceService, createInferenceService({ pool, workerId: "w" }))),
    );
    const registry = createClient(
      RegistryService,
      createRouterTransport(({ service }) => service(RegistryService, fakeRegistry(DEFAULT_CATALOG))),
    );
    const decision = createClient(
      DecisionService,
      createRouterTransport(decisionRoutes({ registry, inferenceFor: () => inference, logger })),
    );
    const tops = [];
    for (const state of states) {
      const parsed = parseDecisionRequest({ model: "decisionmodel-latest", state, questions: QUESTIONS });
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.violations));
      const answers = new Map((await decision.decide(parsed.request)).answerList.map((a) => [a.id, a.answer!.result] as const));
      const get = <C extends Answer["result"]["case"]>(id: string, c: C) => {
        const r = answers.get(id);
        if (r?.case !== c) throw new Error(`no ${c} answer for ${id}`);
        return r.value as Extract<Answer["result"], { case: C }>["value"];
      };
      tops.push({
        spam: get("spam", "noul").probability >= 0.5,
        team: argmax(get("team", "choice").probabilities.map((p) => p.probability)),
        mood: argmax(get("mood", "score").probabilities),
      });
    }
    return tops;
  } finally {
    await pool.close();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tessera-calibrate-"));
  modelDir = join(dir, "model");
  cpSync(TINY_MODEL_DIR, modelDir, { recursive: true });
  originalDecision = readFileSync(join(modelDir, "decision.json"), "utf8");
  const states = Array.from({ length: LINES }, (_, i) => `Ticket ${i}: the export failed ${i % 5} times; the customer is ${MOODS[i % 4]}.`);
  const tops = await topAnswers(states);
  const lines = tops.map((top, i) => {
    const right = i % 4 !== 3;
    const mood = right ? top.mood : (top.mood + 1) % MOODS.length;
    const answers = {
      spam: right ? top.spam : !top.spam,
      team: TEAMS[right ? top.team : (top.team + 1) % TEAMS.length],
      // Levels by number on even lines, by text on odd ones.
      mood: i % 2 === 0 ? mood : MOODS[mood],
    };
    return JSON.stringify({ state: states[i], questions: QUESTIONS, answers });
  });
  labelled = join(dir, "labelled.jsonl");
  writeFileSync(labelled, `${lines.join("\n")}\n`);
});

afterAll(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** The table's row of one type: its cells. */
function row(stdout: string, type: string): string[] {
  const line = stdout.split("\n").find((l) => l.startsWith(`${type} `));
  if (line === undefined) throw new Error(`no row for ${type} in:\n${stdout}`);
  return line.trim().split(/\s+/);
}

describe("tessera calibrate", () => {
  it("fits on the first lines and reports on the held-out rest, writing nothing without --write", () => {
    const r = calibrate(modelDir, labelled, "--holdout", "0.25");
    expect(r.stderr).toContain(`${LINES}/${LINES} lines read`);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(`labelled: ${labelled}, ${LINES} lines, ${3 * LINES} questions`);
    expect(r.stdout).toContain("fit on the first 18 lines, reported on the 6 held out after them");
    for (const type of ["noul", "choice", "score"]) {
      const [, fitN, evalN, before, after, nllBefore, nllAfter, , , accuracy] = row(r.stdout, type);
      expect([fitN, evalN, before]).toEqual(["18", "6", "1.0000"]);
      expect(Number(after)).not.toBe(1);
      expect(Number(nllBefore)).toBeGreaterThan(0);
      expect(Number(nllAfter)).toBeGreaterThan(0);
      // Lines 19 to 24 are wrong on line 20 and line 24: 4 of 6.
      expect(accuracy).toBe("0.6667");
    }
    expect(r.stdout).toContain("not written: run again with --write");
    expect(readFileSync(join(modelDir, "decision.json"), "utf8")).toBe(originalDecision);
  });

  it("with --write, puts the fitted temperatures and calibrated: true into decision.json, the rest as it was", () => {
    const r = calibrate(modelDir, labelled, "--write");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("fit and reported on every line (in-sample)");
    const fitted: Record<string, number> = {};
    for (const type of ["noul", "choice", "score"]) {
      const [, fitN, evalN, , after, nllBefore, nllAfter, , , accuracy] = row(r.stdout, type);
      expect([fitN, evalN, accuracy]).toEqual([String(LINES), String(LINES), "0.7500"]);
      // In-sample, the fitted temperature can only lower the NLL.
      expect(Number(nllAfter)).toBeLessThanOrEqual(Number(nllBefore));
      fitted[type] = Number(after);
    }
    const before = JSON.parse(originalDecision);
    const after = JSON.parse(readFileSync(join(modelDir, "decision.json"), "utf8"));
    expect(after.temperatures).toEqual(fitted);
    expect(Object.values(fitted).every((t) => t !== 1)).toBe(true);
    expect(after.calibrated).toBe(true);
    const { temperatures: _a, calibrated: _b, ...rest } = after;
    const { temperatures: _c, ...restBefore } = before;
    expect(rest).toEqual(restBefore);
    expect(r.stdout).toContain(`wrote ${join(modelDir, "decision.json")}`);
  });

  it("refuses a bad line with exit code 2 and the line's number, before reading anything", () => {
    const bad = join(dir, "bad.jsonl");
    const good = readFileSync(labelled, "utf8").split("\n")[0];
    writeFileSync(bad, `${good}\n\n{"state": "s", "questions": \n${good!.replace('"team":"', '"team":"no such ')}\n`);
    const before = readFileSync(join(modelDir, "decision.json"), "utf8");
    const r = calibrate(modelDir, bad, "--write");
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("has 2 problem(s); nothing was run");
    expect(r.stderr).toMatch(/line 3: not valid JSON/);
    expect(r.stderr).toContain('line 4: answers."team": the answer to a choice question must be the name of one of its options');
    expect(r.stderr).not.toContain("lines read");
    expect(readFileSync(join(modelDir, "decision.json"), "utf8")).toBe(before);
  });

  it("names the line the model cannot answer (longer than its context)", () => {
    const long = join(dir, "long.jsonl");
    const good = readFileSync(labelled, "utf8").split("\n")[0];
    writeFileSync(
      long,
      `${good}\n${JSON.stringify({ state: "word ".repeat(4000), questions: { q: { type: "noul" } }, answers: { q: true } })}\n`,
    );
    const r = calibrate(modelDir, long);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/line 2: prompt too long: the state and question "q" need \d+ tokens .*context/);
  });

  it("refuses a model directory without decision.json, an empty file and bad arguments with exit code 2", () => {
    const empty = join(dir, "empty.jsonl");
    writeFileSync(empty, "\n\n");
    const noDecision = calibrate(dir, labelled);
    expect(noDecision.status).toBe(2);
    expect(noDecision.stderr).toContain(`${join(dir, "decision.json")} does not exist: the model answers no decisions`);
    const noLines = calibrate(modelDir, empty);
    expect(noLines.status).toBe(2);
    expect(noLines.stderr).toContain(`${empty} holds no labelled decisions (it is empty)`);
    const badHoldout = calibrate(modelDir, labelled, "--holdout", "1");
    expect(badHoldout.status).toBe(2);
    expect(badHoldout.stderr).toContain("--holdout must be a fraction in [0, 1)");
    expect(calibrate("--help").stdout).toContain("tessera calibrate <model-dir> <labelled.jsonl> [--holdout F] [--write]");
  });
});
