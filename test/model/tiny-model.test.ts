// The tiny test model against docs/model-contract.md: ONNX names and shapes, exact KV reuse,
// masking, PyTorch reference logits, and the tokenizer under @huggingface/tokenizers.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";
import * as ort from "onnxruntime-node";
import { beforeAll, describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL("../fixtures/tiny-model/", import.meta.url));
const readJson = <T>(name: string): T => JSON.parse(readFileSync(dir + name, "utf8")) as T;

interface TinyConfig {
  model_type: string;
  num_hidden_layers: number;
  num_key_value_heads: number;
  head_dim: number;
  vocab_size: number;
  block_size: number;
  mask_token_id: number;
  eos_token_id: number;
  pad_token_id: number;
}
/** reference.json, written by make_test_model.py from PyTorch. */
interface Reference {
  forward: {
    input_ids: number[];
    rows: number[];
    logits_rows: number[][];
    argmax: number[];
    present: { name: string; position: number; heads: number[][] };
  };
  decode: unknown;
  tokenizer: unknown;
}

const config = readJson<TinyConfig>("config.json");
const reference = readJson<Reference>("reference.json");
const L: number = config.num_hidden_layers;
const HKV: number = config.num_key_value_heads;
const D: number = config.head_dim;
const V: number = config.vocab_size;
const BLOCK: number = config.block_size;
const NEG = -1e9;

type Past = ort.Tensor[]; // [k0, v0, k1, v1, ...], each [B, HKV, P, D]

interface Row {
  ids: number[]; // current tokens
  positions: number[]; // absolute positions; -1 = padding slot
  pastPositions?: number[]; // positions of the P past slots; -1 = blocked slot
}

let session: ort.InferenceSession;
beforeAll(async () => {
  session = await ort.InferenceSession.create(`${dir}model.onnx`);
});

function emptyPast(batch: number): Past {
  return Array.from({ length: 2 * L }, () => new ort.Tensor("float32", new Float32Array(0), [batch, HKV, 0, D]));
}

// Block-causal additive mask from absolute positions: the engine's rule, written out plainly.
function maskFor(rows: Row[]): ort.Tensor {
  const S = rows[0]!.ids.length;
  const P = rows[0]!.pastPositions?.length ?? 0;
  const T = P + S;
  const data = new Float32Array(rows.length * S * T).fill(NEG);
  rows.forEach((row, b) => {
    const keys = [...(row.pastPositions ?? []), ...row.positions];
    row.positions.forEach((q, i) => {
      keys.forEach((k, j) => {
        if (q >= 0 && k >= 0 && Math.floor(k / BLOCK) <= Math.floor(q / BLOCK)) data[(b * S + i) * T + j] = 0;
      });
    });
  });
  return new ort.Tensor("float32", data, [rows.length, 1, S, T]);
}

const int64 = (rows: number[][]): ort.Tensor =>
  new ort.Tensor("int64", BigInt64Array.from(rows.flat().map((x) => BigInt(x))), [rows.length, rows[0]!.length]);

async function forward(rows: Row[], past: Past = emptyPast(rows.length)) {
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(rows.map((r) => r.ids)),
    position_ids: int64(rows.map((r) => r.positions.map((p) => Math.max(p, 0)))),
    attention_mask: maskFor(rows),
  };
  past.forEach((t, i) => {
    feeds[`past_key_values.${i >> 1}.${i % 2 ? "value" : "key"}`] = t;
  });
  const out = await session.run(feeds);
  const presents: Past = [];
  for (let l = 0; l < L; l++) presents.push(out[`present.${l}.key`]!, out[`present.${l}.value`]!);
  return { logits: out.logits!, presents };
}

// Logits of row b, positions [from, to) as one flat array.
function logitRows(t: ort.Tensor, b: number, from: number, to: number): Float32Array {
  const S = t.dims[1]!;
  const data = t.data as Float32Array;
  return data.slice((b * S + from) * V, (b * S + to) * V);
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

// Slice a past [B, HKV, P, D] to batch row b and the first `len` slots, padded to `padTo` slots.
function sliceRow(t: ort.Tensor, b: number, len: number, padTo = len): ort.Tensor {
  const [, H, P] = t.dims as [number, number, number, number];
  const src = t.data as Float32Array;
  const out = new Float32Array(H * padTo * D);
  for (let h = 0; h < H; h++) {
    const from = (b * H + h) * P * D;
    out.set(src.subarray(from, from + len * D), h * padTo * D);
  }
  return new ort.Tensor("float32", out, [1, H, padTo, D]);
}

function concatBatch(ts: ort.Tensor[]): ort.Tensor {
  const dims = [...ts[0]!.dims];
  const out = new Float32Array(ts.reduce((n, t) => n + (t.data as Float32Array).length, 0));
  let at = 0;
  for (const t of ts) {
    out.set(t.data as Float32Array, at);
    at += (t.data as Float32Array).length;
  }
  dims[0] = ts.length;
  return new ort.Tensor("float32", out, dims);
}

const tokens = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => (i * 37 + seed * 101 + 11) % 540);
const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

describe("tiny model: ONNX contract", () => {
  it("has the contract's input and output names", () => {
    const past = range(0, L).flatMap((l) => [`past_key_values.${l}.key`, `past_key_values.${l}.value`]);
    const present = range(0, L).flatMap((l) => [`present.${l}.key`, `present.${l}.value`]);
    expect(session.inputNames).toEqual(["input_ids", "position_ids", "attention_mask", ...past]);
    expect(session.outputNames).toEqual(["logits", ...present]);
    expect(config.model_type).toBe("tessera-block-diffusion");
    expect(config.block_size).toBe(64);
  });

  it("accepts a zero-length past and returns [B,S,V] logits and [B,Hkv,S,D] presents", async () => {
    const rows = [0, 1].map((s) => ({ ids: tokens(3, s), positions: range(0, 3) }));
    const { logits, presents } = await forward(rows);
    expect(logits.dims).toEqual([2, 3, V]);
    for (const t of presents) expect(t.dims).toEqual([2, HKV, 3, D]);
  });

  it("appends the current tokens to a non-empty past: presents are [B,Hkv,P+S,D] = concat(past, current)", async () => {
    const first = await forward([{ ids: tokens(5, 2), positions: range(0, 5) }]);
    const second = await forward([{ ids: tokens(4, 3), positions: range(5, 9), pastPositions: range(0, 5) }], first.presents);
    expect(second.logits.dims).toEqual([1, 4, V]);
    second.presents.forEach((t, i) => {
      expect(t.dims).toEqual([1, HKV, 9, D]);
      expect(maxAbsDiff(sliceRow(t, 0, 5).data as Float32Array, first.presents[i]!.data as Float32Array)).toBe(0);
    });
  });

  it("matches the PyTorch reference logits and presents", async () => {
    const ref = reference.forward;
    const S = ref.input_ids.length;
    const { logits, presents } = await forward([{ ids: ref.input_ids, positions: range(0, S) }]);
    ref.rows.forEach((r: number, i: number) => {
      const got = logitRows(logits, 0, r, r + 1);
      const want: number[] = ref.logits_rows[i]!;
      want.forEach((w, v) => {
        expect(Math.abs(got[v]! - w)).toBeLessThanOrEqual(1e-4 * (1 + Math.abs(w)));
      });
    });
    const data = logits.data as Float32Array;
    const argmax = range(0, S).map((p) => {
      let best = 0;
      for (let v = 1; v < V; v++) if (data[p * V + v]! > data[p * V + best]!) best = v;
      return best;
    });
    expect(argmax).toEqual(ref.argmax);
    const layer = Number(ref.present.name.split(".")[1]);
    const value = presents[2 * layer + 1]!;
    const T = value.dims[2]!;
    const at: number = ref.present.position;
    ref.present.heads.forEach((want: number[], h: number) => {
      const got = (value.data as Float32Array).subarray((h * T + at) * D, (h * T + at + 1) * D);
      expect(maxAbsDiff(got, want)).toBeLessThanOrEqual(1e-4);
    });
  });
});

describe("tiny model: block-causal attention and KV cache", () => {
  const N = 150; // two complete blocks and a partial third
  const ids = tokens(N, 7);

  it("gives the same logits from complete-block KV plus the rest as from one pass", async () => {
    const full = await forward([{ ids, positions: range(0, N) }]);
    for (const cut of [64, 128]) {
      const prefix = await forward([{ ids: ids.slice(0, cut), positions: range(0, cut) }]);
      const rest = await forward([{ ids: ids.slice(cut), positions: range(cut, N), pastPositions: range(0, cut) }], prefix.presents);
      expect(maxAbsDiff(logitRows(rest.logits, 0, 0, N - cut), logitRows(full.logits, 0, cut, N))).toBeLessThan(1e-4);
      expect(maxAbsDiff(logitRows(prefix.logits, 0, 0, cut), logitRows(full.logits, 0, 0, cut))).toBeLessThan(1e-4);
      rest.presents.forEach((t, i) => {
        expect(maxAbsDiff(t.data as Float32Array, full.presents[i]!.data as Float32Array)).toBeLessThan(1e-4);
      });
    }
    // Block by block: 64, 64, 22.
    let past = emptyPast(1);
    const pieces: Float32Array[] = [];
    for (const [from, to] of [
      [0, 64],
      [64, 128],
      [128, N],
    ] as const) {
      const step = await forward([{ ids: ids.slice(from, to), positions: range(from, to), pastPositions: range(0, from) }], past);
      pieces.push(logitRows(step.logits, 0, 0, to - from));
      past = step.presents;
    }
    const stitched = new Float32Array(N * V);
    let at = 0;
    for (const p of pieces) {
      stitched.set(p, at);
      at += p.length;
    }
    expect(maxAbsDiff(stitched, logitRows(full.logits, 0, 0, N))).toBeLessThan(1e-4);
  });

  it("lets a position see its whole block and earlier blocks, never later blocks", async () => {
    const base = await forward([{ ids, positions: range(0, N) }]);
    const laterChanged = [...ids];
    laterChanged[140] = (laterChanged[140]! + 1) % 540; // block 2
    const a = await forward([{ ids: laterChanged, positions: range(0, N) }]);
    expect(maxAbsDiff(logitRows(a.logits, 0, 0, 128), logitRows(base.logits, 0, 0, 128))).toBe(0);
    // Earlier positions of the same block do see it (attention within a block is bidirectional).
    expect(maxAbsDiff(logitRows(a.logits, 0, 128, 140), logitRows(base.logits, 0, 128, 140))).toBeGreaterThan(1e-6);

    const sameBlockChanged = [...ids];
    sameBlockChanged[100] = (sameBlockChanged[100]! + 1) % 540; // block 1, after position 70
    const b = await forward([{ ids: sameBlockChanged, positions: range(0, N) }]);
    expect(maxAbsDiff(logitRows(b.logits, 0, 0, 64), logitRows(base.logits, 0, 0, 64))).toBe(0);
    expect(maxAbsDiff(logitRows(b.logits, 0, 64, 100), logitRows(base.logits, 0, 64, 100))).toBeGreaterThan(1e-6);
  });

  it("keeps padded slots and blocked past slots from changing other rows", async () => {
    // Row A: 128 past + 10 current. Row B: 64 real past (slots 64..127 blocked) + 6 current
    // tokens padded to 10. Each row must equal its own unbatched run.
    const aIds = tokens(138, 1);
    const bIds = tokens(70, 2);
    const aPre = await forward([{ ids: aIds.slice(0, 128), positions: range(0, 128) }]);
    const bPre = await forward([{ ids: bIds.slice(0, 64), positions: range(0, 64) }]);
    const aAlone = await forward([{ ids: aIds.slice(128), positions: range(128, 138), pastPositions: range(0, 128) }], aPre.presents);
    const bAlone = await forward([{ ids: bIds.slice(64), positions: range(64, 70), pastPositions: range(0, 64) }], bPre.presents);

    const pad = config.pad_token_id as number;
    const batchPast = aPre.presents.map((t, i) => concatBatch([t, sliceRow(bPre.presents[i]!, 0, 64, 128)]));
    const batched = await forward(
      [
        { ids: aIds.slice(128), positions: range(128, 138), pastPositions: range(0, 128) },
        {
          ids: [...bIds.slice(64), ...Array<number>(4).fill(pad)],
          positions: [...range(64, 70), -1, -1, -1, -1],
          pastPositions: [...range(0, 64), ...Array<number>(64).fill(-1)],
        },
      ],
      batchPast,
    );
    expect(maxAbsDiff(logitRows(batched.logits, 0, 0, 10), logitRows(aAlone.logits, 0, 0, 10))).toBeLessThan(1e-4);
    expect(maxAbsDiff(logitRows(batched.logits, 1, 0, 6), logitRows(bAlone.logits, 0, 0, 6))).toBeLessThan(1e-4);
    for (const v of logitRows(batched.logits, 1, 6, 10)) expect(Number.isFinite(v)).toBe(true);
  });
});

describe("tiny model: reference decode", () => {
  // The plain block-diffusion decode of make_test_model.py's `reference_decode`, recomputing
  // every forward: ORT reproduces PyTorch's tokens, so engines can test against reference.json.
  async function plainDecode(promptIds: number[], maxTokens: number) {
    const mask = config.mask_token_id as number;
    const banned = new Set([mask, config.pad_token_id as number]);
    const x = [...promptIds];
    const start = x.length;
    let forwards = 0;
    let eosAt: number | null = null;
    while (eosAt === null && x.length - start < maxTokens) {
      const end = (Math.floor(x.length / BLOCK) + 1) * BLOCK;
      while (x.length < end) x.push(mask);
      while (x.includes(mask)) {
        const { logits } = await forward([{ ids: x, positions: range(0, x.length) }]);
        forwards++;
        const data = logits.data as Float32Array;
        const masked = range(0, x.length).filter((i) => x[i] === mask);
        const top = masked.map((i) => {
          let best = -1;
          let max = -Infinity;
          for (let v = 0; v < V; v++)
            if (!banned.has(v) && data[i * V + v]! > max) {
              max = data[i * V + v]!;
              best = v;
            }
          let z = 0;
          for (let v = 0; v < V; v++) if (!banned.has(v)) z += Math.exp(data[i * V + v]! - max);
          return { i, best, prob: 1 / z };
        });
        let commit = top.filter((t) => t.prob >= 0.9);
        if (commit.length === 0) commit = [top.reduce((a, b) => (b.prob > a.prob ? b : a))];
        for (const t of commit) x[t.i] = t.best;
      }
      const k = x.indexOf(config.eos_token_id, start);
      if (k >= 0) eosAt = k - start;
    }
    const reply = x.slice(start, eosAt === null ? start + maxTokens : start + eosAt + 1);
    return { reply, eosAt, forwards };
  }

  it("commits the same tokens as PyTorch for every reference prompt", async () => {
    const cases = reference.decode as { prompt_ids: number[]; reply_ids: number[]; eos_at: number | null; forwards: number }[];
    expect(cases.length).toBeGreaterThan(0);
    for (const c of cases) {
      const got = await plainDecode(c.prompt_ids, 192);
      expect(got.reply).toEqual(c.reply_ids);
      expect(got.eosAt).toBe(c.eos_at);
      expect(got.forwards).toBe(c.forwards);
    }
  });
});

describe("tiny model: tokenizer", () => {
  const tokenizerJson = readJson<Record<string, unknown> & { model: { vocab: unknown }; added_tokens: { id: number }[] }>("tokenizer.json");
  const tokenizerConfig = readJson<Record<string, unknown> & { added_tokens_decoder: object }>("tokenizer_config.json");
  const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
  const specials = [
    "<|pad|>",
    "<|mask|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|yes|>",
    "<|no|>",
    ...range(0, 128).map((i) => `<|opt_${i}|>`),
  ];

  it("encodes exactly like the Python encoder used for training data", () => {
    for (const { text, ids } of reference.tokenizer as { text: string; ids: number[] }[]) {
      expect(tokenizer.encode(text).ids).toEqual(ids);
    }
  });

  it("round-trips text with special tokens, unicode, newlines and odd spacing", () => {
    const texts = [
      ...(reference.tokenizer as { text: string }[]).map((s) => s.text).filter((t) => t.length > 0),
      "<|im_start|>system\nΓειά σου κόσμε\n\n  indented\ttab<|im_end|>\n",
      "trailing spaces   \n\n\n",
      'mixed<think>a</think>b<tool_response>{"ok": true}</tool_response>',
    ];
    for (const text of texts) expect(tokenizer.decode(tokenizer.encode(text).ids)).toBe(text);
  });

  it("keeps every special token whole, with the ids config.json names", () => {
    for (const s of specials) {
      const ids = tokenizer.encode(`a${s}b`).ids;
      expect(ids.length).toBe(3);
      expect(tokenizer.decode([ids[1]!])).toBe(s);
    }
    expect(tokenizer.encode("<|mask|>").ids).toEqual([config.mask_token_id]);
    expect(tokenizer.encode("<|im_end|>").ids).toEqual([config.eos_token_id]);
    expect(tokenizer.encode("<|pad|>").ids).toEqual([config.pad_token_id]);
    const maxId = Math.max(
      ...Object.values(tokenizerJson.model.vocab as Record<string, number>),
      ...tokenizerJson.added_tokens.map((t: { id: number }) => t.id),
    );
    expect(maxId + 1).toBe(V);
  });

  it("names the special tokens and ships the chat template and decision templates", () => {
    expect(tokenizerConfig.eos_token).toBe("<|im_end|>");
    expect(tokenizerConfig.pad_token).toBe("<|pad|>");
    expect(tokenizerConfig.mask_token).toBe("<|mask|>");
    expect(tokenizerConfig.chat_template).toBe(
      readFileSync(new URL("../../training/templates/chat_template.jinja", import.meta.url), "utf8"),
    );
    expect(readFileSync(`${dir}decision.json`, "utf8")).toBe(
      readFileSync(new URL("../../training/templates/decision.json", import.meta.url), "utf8"),
    );
    expect(Object.keys(tokenizerConfig.added_tokens_decoder)).toHaveLength(specials.length);
  });
});
