// Crash-exact accounting (issue 11, item 5): `tessera serve` under chat, stream and decision
// traffic of a key with finite quotas is killed with SIGKILL, restarted on the same data
// directory, and the ledger and the account's counters must agree with no hold left.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { crashTrials, createKey, writeCatalog } from "../helpers/hostile.js";
import { TINY_MODEL_DIR } from "../helpers/tessera.js";

const scratch = mkdtempSync(join(tmpdir(), "tessera-crash-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("accounting after kill -9", () => {
  it("ledger = quota counters and no hold survives, in 3 trials", { timeout: 120_000 }, async () => {
    const dataDir = join(scratch, "data");
    const catalog = writeCatalog(scratch, TINY_MODEL_DIR);
    const key = await createKey(dataDir, ["--text-quota", "100000000", "--decision-quota", "100000000"]);
    const trials = await crashTrials(dataDir, catalog, key, [100, 400, 900]);
    for (const trial of trials) {
      expect(trial.answered, JSON.stringify(trial)).toBeGreaterThan(0);
      expect(trial.account.textReserved).toBe(0);
      expect(trial.account.decisionReserved).toBe(0);
      expect(trial.account.textUsed).toBe(trial.ledger.text);
      expect(trial.account.decisionUsed).toBe(trial.ledger.decision);
    }
    // Something was charged: the trials did run traffic through accounting.
    expect(trials.at(-1)!.ledger.requests).toBeGreaterThan(0);
  });
});
