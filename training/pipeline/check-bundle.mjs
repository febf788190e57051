#!/usr/bin/env node
// Loads a model directory the way the engine does (onnxruntime-node, @huggingface/tokenizers,
// the decision templates) and reads a few decisions at the answer slot: a sanity check of the
// shipped artifacts in the real runtime, with the forward time on this machine.
//   node --import tsx training/pipeline/check-bundle.mjs [models/tessera-bd-small]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import * as ort from "onnxruntime-node";
import { renderDecisionPrompt } from "../../lib/decision-types/render.ts";

const dir = process.argv[2] ?? "models/tessera-bd-small";
const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
const decision = JSON.parse(readFileSync(join(dir, "decision.json"), "utf8"));
const tok = new Tokenizer(
  JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
  JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
);
const session = await ort.InferenceSession.create(join(dir, cfg.onnx_file), { intraOpNumThreads: 2 });
const enc = (s) => tok.encode(s, { add_special_tokens: false }).ids;
const idOf = (t) => enc(t)[0];

async function slotLogits(ids) {
  const S = ids.length;
  const mask = new Float32Array(S * S).fill(-1e9);
  for (let q = 0; q < S; q++) for (let k = 0; k < S; k++) if (Math.floor(k / 64) <= Math.floor(q / 64)) mask[q * S + k] = 0;
  const feeds = {
    input_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, S]),
    position_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map((_, i) => BigInt(i))), [1, S]),
    attention_mask: new ort.Tensor("float32", mask, [1, 1, S, S]),
  };
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    for (const kv of ["key", "value"])
      feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [1, cfg.num_key_value_heads, 0, cfg.head_dim]);
  }
  const t0 = performance.now();
  const out = await session.run(feeds);
  const ms = performance.now() - t0;
  const V = cfg.vocab_size;
  return { row: out.logits.data.subarray((S - 1) * V, S * V), ms };
}

function softmax(xs, t) {
  const m = Math.max(...xs.map((x) => x / t));
  const e = xs.map((x) => Math.exp(x / t - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

const cases = [
  [
    "From: Deals Team <offers@cheap-meds.biz>\nSubject: LOWEST PRICES - order now!!!\n\nBuy cheap meds online, no prescription needed. Click here to claim your FREE bonus. Limited offer, act now! To be removed from our mailing list reply REMOVE.",
    { type: "noul", instructions: "Is this email spam?" },
  ],
  [
    "From: Alice Martin <alice@example.org>\nSubject: Re: notes from Tuesday's meeting\n\nHi Bob,\n\nthanks for sending the notes. I added two comments on the schedule section; can we go over them on Thursday after lunch?\n\nAlice",
    { type: "noul", instructions: "Is this email spam?" },
  ],
  ["The food was amazing and the staff were so friendly. I loved it!", { type: "noul", instructions: "Is this review positive?" }],
  ["Terrible service, cold food, and we waited an hour. Never again.", { type: "noul", instructions: "Is this review positive?" }],
  [
    "The food was amazing and the staff were so friendly. I loved it!",
    { type: "choice", instructions: "What is the sentiment of this review?", criteria: { negative: null, positive: null } },
  ],
  [
    "a domesticated carnivorous mammal that typically has a long snout and barks",
    {
      type: "choice",
      instructions: "Which word does this definition describe?",
      criteria: { cat: null, dog: null, table: null, river: null },
    },
  ],
];
for (const [state, q] of cases) {
  const { prefix, suffix, labels } = renderDecisionPrompt(decision, state, q);
  const ids = [...enc(prefix), ...enc(suffix), cfg.mask_token_id];
  const { row, ms } = await slotLogits(ids);
  const p = softmax(
    labels.map((l) => row[idOf(l)]),
    decision.temperatures[q.type],
  );
  console.log(
    `${q.type} ${JSON.stringify(q.instructions)} [${ids.length} tokens, ${ms.toFixed(0)} ms]: ${p.map((x) => x.toFixed(3)).join(" ")}  <- ${JSON.stringify(state.slice(0, 50))}`,
  );
}
