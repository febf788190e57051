// Two `tessera pull` processes of one repository at once, against the Hub double: the second waits
// for the first (it says so), then finds the files and the model in place — each file fetched
// once, both pulls succeed with the same model directory. A lock a killed pull left is taken over.
import { mkdirSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pullModel } from "../../bin/pull-command.js";
import { hubEnv } from "../../lib/hub/env.js";
import { type CliRun, runTessera } from "../helpers/tessera-cli.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";
import { filesOf, HubDouble } from "./hub-double.js";
import { hubTestEnv } from "./hub-test-env.js";

const REPO = "tessera-test/tiny-locked";

async function until(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("one tessera pull of a repository at a time", () => {
  let hub: HubDouble;
  let commit = "";
  const scratch = mkdtempSync(join(tmpdir(), "tessera-pull-lock-"));
  let env: Record<string, string> = {};
  const lockDir = join(scratch, "hf/hub/.locks/models--tessera-test--tiny-locked/tessera-pull.lock");

  beforeAll(async () => {
    hub = await new HubDouble().start();
    env = hubTestEnv(scratch, hub.hubUrl);
    commit = hub.addRepo(REPO, { ...filesOf(TINY_MODEL_DIR), ".gitattributes": "*.onnx filter=lfs diff=lfs merge=lfs -text\n" }).commit;
  });
  afterAll(async () => {
    await hub.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("the second waits for the first, then finds everything in place: each file fetched once", async () => {
    let release: () => void = () => {};
    hub.holds.set("model.onnx", new Promise<void>((r) => (release = r)));
    let firstErr = "";
    let secondErr = "";
    const first = runTessera(["pull", REPO], env, (text) => (firstErr = text));
    await until(() => firstErr.includes("download"), "the first pull's download");
    const second = runTessera(["pull", REPO], env, (text) => (secondErr = text));
    await until(() => secondErr.includes("waiting for it to finish"), "the second pull to wait");
    expect(secondErr).toContain(`another tessera pull of ${REPO} is running (${lockDir}); waiting for it to finish`);
    release();
    const runs: CliRun[] = await Promise.all([first, second]);
    const dir = join(scratch, "data/models/tessera-test--tiny-locked", commit);
    for (const run of runs) {
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe(`${REPO}@${commit} published ${dir}`);
    }
    const fetched = hub.requests({ path: /\/resolve\// }).map((r) => r.path.split("/").pop());
    expect(fetched.filter((name) => name === "model.onnx")).toHaveLength(1);
    expect(new Set(fetched).size).toBe(fetched.length);
  }, 120_000);

  it("takes over a lock a killed pull left once it is stale", async () => {
    mkdirSync(lockDir, { recursive: true });
    const longAgo = new Date(Date.now() - 120_000);
    utimesSync(lockDir, longAgo, longAgo);
    const lines: string[] = [];
    const again = await pullModel({
      ref: { repo: REPO, revision: "main" },
      dataDir: env.TESSERA_DATA_DIR!,
      env: hubEnv(env),
      progress: { phase: () => {}, status: () => "", done: () => {}, log: (line) => lines.push(line), bytes: () => {}, start: () => {} },
    });
    expect(again.cached).toBe(true);
    expect(lines.filter((l) => l.includes("waiting"))).toEqual([]);
  });
});
