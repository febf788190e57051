// Crash-exact accounting (issue 11): `tessera serve` on the tiny model under chat, streamed chat
// and decision traffic of a key with finite quotas, killed with SIGKILL at a random moment
// (0-1.5 s after its third answer), restarted on the same data directory; the ledger's sums and
// the account's used and reserved tokens compared after each restart.
//
//   npx tsx bench/crash.ts [--trials 20]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { TINY_MODEL_DIR } from "../test/helpers/tiny-model.js";
import { crashTrials, createKey, writeCatalog } from "../test/helpers/hostile.js";

const { values } = parseArgs({ options: { trials: { type: "string", default: "20" } } });
const count = Number(values.trials);
const scratch = mkdtempSync(join(tmpdir(), "tessera-crash-bench-"));
try {
  const dataDir = join(scratch, "data");
  const catalog = writeCatalog(scratch, TINY_MODEL_DIR);
  const key = await createKey(dataDir, ["--text-quota", "100000000", "--decision-quota", "100000000"]);
  const delays = Array.from({ length: count }, () => Math.round(Math.random() * 1500));
  const trials = await crashTrials(dataDir, catalog, key, delays, (t) => console.log(JSON.stringify(t)));
  const agreed = trials.filter((t) => t.agree).length;
  console.log(JSON.stringify({ trials: trials.length, agreed, requestsSettled: trials.at(-1)?.ledger.requests }));
  if (agreed !== trials.length) process.exitCode = 1;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
