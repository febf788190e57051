#!/usr/bin/env node
// Node-side tokenizer check: @huggingface/tokenizers (what the engine uses) must encode the
// samples written by tokcheck.py to the same ids as training did.
//   node training/pipeline/tokcheck.mjs <model-dir> <samples.json>
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const [dir, samplesPath] = process.argv.slice(2);
const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
const tc = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tj, tc);
const samples = JSON.parse(readFileSync(samplesPath, "utf8"));
let bad = 0;
for (const { text, ids } of samples) {
  const got = tok.encode(text, { add_special_tokens: false }).ids;
  if (got.length !== ids.length || got.some((x, i) => x !== ids[i])) {
    bad++;
    if (bad <= 3) console.log("mismatch:", JSON.stringify(text.slice(0, 120)), got.slice(0, 20), ids.slice(0, 20));
  }
}
console.log(`${samples.length - bad} passed, ${bad} failed`);
process.exit(bad ? 1 : 0);
