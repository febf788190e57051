// `npm run bench` runs every benchmark in this folder, one after the other, each in its own
// process; `npm run bench -- NAME …` runs only those named (models, engine, …). A benchmark
// is a file bench/NAME.ts that does its work when run as a script. Benchmarks are not tests:
// they print figures, which README.md records.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const known = readdirSync(here)
  .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts") && file !== "run.ts" && !/^[._]/.test(file))
  .map((file) => file.slice(0, -3))
  .sort();

const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !known.includes(name));
if (unknown.length > 0) {
  console.error(`unknown benchmark ${unknown.join(", ")}; known: ${known.join(", ")}`);
  process.exit(2);
}
let failed = 0;
for (const name of asked.length > 0 ? asked : known) {
  console.log(`\n== ${name}`);
  const result = spawnSync(process.execPath, ["--import", "tsx", join(here, `${name}.ts`)], { stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`${name}: exited with ${result.status ?? result.signal}`);
    failed++;
  }
}
process.exitCode = failed === 0 ? 0 : 1;
