#!/usr/bin/env node
// Leak check of model v2's held-out decision phrasings and option names: no training or
// validation decision asks with a held-out instruction or description, or offers an option
// named from a held-out list (the evaluation sets of prepare-v2.mjs use only those).
//   node training/v2/check-heldout.mjs [training/data]        (exit 1 on a leak)
import { createReadStream, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import * as DP from "../data-src/decision-phrasings.mjs";

const DIR = process.argv[2] ?? join(import.meta.dirname, "..", "data");
const stats = JSON.parse(readFileSync(join(DIR, "stats_v2.json"), "utf8")).held_out;
const vocab = { pos: { held_out: stats.pos }, neg: { held_out: stats.neg }, codeWords: { held_out: stats.codeWords } };
const held = DP.heldOutStrings(vocab);
const phrasings = new Set(held.phrasings);
const names = new Set([
  ...held.phrasings,
  ...held.pos,
  ...held.neg,
  ...held.codeWords,
  ...held.codeWords.map((w) => w[0].toUpperCase() + w.slice(1)),
]);
const leaks = [];
let checked = 0;
for (const file of ["train.jsonl", "train_v2.jsonl", "val.jsonl", "val_v2.jsonl"]) {
  if (!existsSync(join(DIR, file))) continue;
  for await (const line of createInterface({ input: createReadStream(join(DIR, file)) })) {
    const rec = JSON.parse(line);
    // the held-out names are unseen as sentiment and spam options; other questions (which word
    // fills the blank, 2-128 WordNet words) may offer the same words in another role
    if (rec.k !== "dec" || !/spam|sentiment|afinn/.test(rec.task)) continue;
    checked++;
    const suffix = rec.v[0][1];
    const q = /\nQuestion: (.*)\n/.exec(suffix)?.[1];
    const found = [];
    if (q !== undefined && phrasings.has(q)) found.push(`instruction ${q}`);
    for (const m of suffix.matchAll(/^(?:Yes|No) means: (.*)$/gm)) if (phrasings.has(m[1])) found.push(`description ${m[1]}`);
    for (const m of suffix.matchAll(/^<\|opt_\d+\|> (.*?)(?:: .*)?$/gm)) if (names.has(m[1])) found.push(`option ${m[1]}`);
    if (found.length) leaks.push({ file, task: rec.task, found });
  }
}
const byString = {};
for (const l of leaks) for (const f of l.found) byString[f] = (byString[f] ?? 0) + 1;
console.log(
  JSON.stringify({ checked, held_out_phrasings: phrasings.size, held_out_names: names.size, leaks: leaks.length, by_string: byString }),
);
process.exit(leaks.length ? 1 : 0);
