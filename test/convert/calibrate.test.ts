// `tessera calibrate` on the converted tiny models: their decision.json reads ordinary tokens
// (Yes/No, letters), says "calibrated": false, Fast-dLLM v2 reads shifted logits and
// DiffusionGemma its first canvas; the command fits them and --write turns them into
// calibrated ones, the rest of the file kept.
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/tessera.js";
import { convertedFixtures, HAVE_CONVERT_VENV, NO_VENV_MESSAGE } from "../helpers/converted-models.js";
import { diffusionGemmaFixture } from "./diffusion-gemma-fixture.js";

if (!HAVE_CONVERT_VENV) console.warn(NO_VENV_MESSAGE);

const QUESTIONS = {
  spam: { type: "noul", instructions: "Is it spam?" },
  team: { type: "choice", criteria: { billing: null, storage: "disks", support: null } },
  mood: { type: "score", criteria: ["calm", "upset", "furious"] },
};
const TEAMS = ["billing", "storage", "support"];

describe.skipIf(!HAVE_CONVERT_VENV)("tessera calibrate on converted models", () => {
  const scratch = mkdtempSync(join(tmpdir(), "tessera-calibrate-converted-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  // DiffusionGemma (a canvas model) answers through the same Score call, read on its first canvas.
  it.each(["sdar", "fastDllm", "diffusionGemma"] as const)(
    "fits and writes the temperatures of the converted %s model",
    async (family) => {
      const source = family === "diffusionGemma" ? (await diffusionGemmaFixture()).model : (await convertedFixtures()).models[family];
      const modelDir = join(scratch, family);
      cpSync(source, modelDir, { recursive: true });
      const before = JSON.parse(readFileSync(join(modelDir, "decision.json"), "utf8"));
      expect(before.calibrated).toBe(false);
      const labelled = join(scratch, `${family}.jsonl`);
      const lines = Array.from({ length: 12 }, (_, i) =>
        JSON.stringify({
          state: `Ticket ${i}: the nightly export failed ${i} times.`,
          questions: QUESTIONS,
          answers: { spam: i % 3 === 0, team: TEAMS[i % 3], mood: i % 3 },
        }),
      );
      writeFileSync(labelled, `${lines.join("\n")}\n`);

      const r = spawnSync(process.execPath, ["--import", "tsx", "bin/tessera.ts", "calibrate", modelDir, labelled, "--write"], {
        cwd: REPO_ROOT,
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(r.stderr).toContain("12/12 lines read");
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/^noul\s+12\s+12\s+1\.0000\s+\d/m);
      expect(r.stdout).toMatch(/^score\s+12\s+12\s+1\.0000\s+\d/m);

      const after = JSON.parse(readFileSync(join(modelDir, "decision.json"), "utf8"));
      expect(after.calibrated).toBe(true);
      for (const type of ["noul", "choice", "score"]) {
        expect(after.temperatures[type]).toBeGreaterThan(0);
        expect(after.temperatures[type]).not.toBe(1);
      }
      const { temperatures: _a, calibrated: _b, ...rest } = after;
      const { temperatures: _c, calibrated: _d, ...restBefore } = before;
      expect(rest).toEqual(restBefore);
      // The first test to ask builds the converted fixtures (minutes on a fresh clone); others wait for it.
    },
    900_000,
  );
});
