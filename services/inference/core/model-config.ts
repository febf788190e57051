/**
 * config.json of a model directory (docs/model-contract.md), checked on load so that a
 * wrong directory fails at start with a message naming the key, not mid-request.
 */
export interface ModelCapabilities {
  images: boolean;
  tools: boolean;
  thinking: boolean;
}

/** A model's own decoding defaults (contract v2 `decoding`); each falls back to the server's. */
export interface DecodingDefaults {
  threshold?: number;
  /** An unmasking-policy spec (decoder/policies/registry.ts), e.g. `sub-blocks(8)`. */
  policy?: string;
  /** Size of `subblocks` where the policy spec gives none. */
  subBlockSize?: number;
}

/** The delimiters the reply parser needs, as the model's vocabulary spells them (contract v2). */
export interface ChatSpecialTokens {
  toolCall: [string, string];
  thinking: [string, string];
  /**
   * How a call is written between the tool-call tags (`special_tokens.tool_call_format`):
   * "json" (`{"name": …, "arguments": …}`, the default and the only one the grammar writes) or
   * "gemma4" (`call:NAME{key:<|"|>v<|"|>}`, reply/reply-gemma4.ts; canvas models only).
   */
  toolCallFormat?: "json" | "gemma4";
}

export interface ModelConfig {
  /** 1 (the bundled and tiny models) or 2 (open checkpoints converted by `tessera convert`). */
  contractVersion: 1 | 2;
  modelType: string;
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  blockSize: number;
  /** Context size in tokens (prompt + reply). */
  maxPositions: number;
  maskTokenId: number;
  /** The end of turn. */
  eosTokenId: number;
  padTokenId: number;
  /** Tokens that end the reply (the end of turn first); v1: the end of turn alone. */
  stopTokenIds: number[];
  /** 1: logits row i predicts the token at i + 1 (Fast-dLLM v2); 0: row i predicts token i. */
  logitsShift: 0 | 1;
  decoding: DecodingDefaults;
  specialTokens: ChatSpecialTokens;
  capabilities: ModelCapabilities;
  onnxFile: string;
  /**
   * `cpu_int4_accuracy_level`: MatMulNBits' accuracy_level on the CPU provider (0-4; 0 leaves
   * the nodes as converted). Undefined: the engine's default (onnx-accuracy-level.ts).
   */
  cpuInt4AccuracyLevel?: number;
}

export const MODEL_TYPE = "tessera-block-diffusion";
export const DEFAULT_SPECIAL_TOKENS: ChatSpecialTokens = { toolCall: ["<tool_call>", "</tool_call>"], thinking: ["<think>", "</think>"] };

export function parseModelConfig(raw: unknown, source = "config.json"): ModelConfig {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new Error(`${source}: expected a JSON object`);
  }
  const obj = raw as Record<string, unknown>;
  const int = (key: string, min = 0): number => {
    const value = obj[key];
    if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
      throw new Error(`${source}: "${key}" must be an integer >= ${min}`);
    }
    return value;
  };
  const version = obj.contract_version ?? 1;
  if (version === 3) {
    throw new Error(
      `${source}: "contract_version" 3 is a canvas model (DiffusionGemma): the model pool loads it through canvas-service.ts, not as a mask model`,
    );
  }
  if (version !== 1 && version !== 2) throw new Error(`${source}: "contract_version" must be 1 or 2, got ${JSON.stringify(version)}`);
  const modelType = typeof obj.model_type === "string" ? obj.model_type : "";
  if (version === 1 && modelType !== MODEL_TYPE) {
    throw new Error(
      `${source}: "model_type" must be "${MODEL_TYPE}" (or set "contract_version": 2), got ${JSON.stringify(obj.model_type)}`,
    );
  }
  if (modelType === "") throw new Error(`${source}: "model_type" must be a non-empty string`);
  const caps = (typeof obj.capabilities === "object" && obj.capabilities !== null ? obj.capabilities : {}) as Record<string, unknown>;
  const eosTokenId = int("eos_token_id");
  const config: ModelConfig = {
    contractVersion: version,
    modelType,
    numLayers: int("num_hidden_layers", 1),
    numKvHeads: int("num_key_value_heads", 1),
    headDim: int("head_dim", 1),
    vocabSize: int("vocab_size", 1),
    blockSize: int("block_size", 1),
    maxPositions: int("max_position_embeddings", 1),
    maskTokenId: int("mask_token_id"),
    eosTokenId,
    padTokenId: int("pad_token_id"),
    stopTokenIds: stopIds(obj.stop_token_ids, eosTokenId, source),
    logitsShift: logitsShift(obj.logits_shift, source),
    decoding: decodingDefaults(obj.decoding, source),
    specialTokens: specialTokens(obj.special_tokens, source),
    capabilities: { images: caps.images === true, tools: caps.tools === true, thinking: caps.thinking === true },
    onnxFile: typeof obj.onnx_file === "string" && obj.onnx_file !== "" ? obj.onnx_file : "model.onnx",
  };
  if (obj.cpu_int4_accuracy_level !== undefined) {
    const level = obj.cpu_int4_accuracy_level;
    if (typeof level !== "number" || !Number.isInteger(level) || level < 0 || level > 4)
      throw new Error(`${source}: "cpu_int4_accuracy_level" must be an integer 0-4, got ${JSON.stringify(level)}`);
    config.cpuInt4AccuracyLevel = level;
  }
  for (const [key, id] of [
    ["mask_token_id", config.maskTokenId],
    ["pad_token_id", config.padTokenId],
    ...config.stopTokenIds.map((id) => ["stop_token_ids", id] as const),
  ] as const) {
    if (id >= config.vocabSize) throw new Error(`${source}: ${key} ${id} is outside the vocabulary`);
  }
  if (config.maxPositions < config.blockSize) {
    throw new Error(`${source}: max_position_embeddings is smaller than one block`);
  }
  return config;
}

function stopIds(raw: unknown, eos: number, source: string): number[] {
  if (raw === undefined) return [eos];
  if (!Array.isArray(raw) || !raw.every((v) => typeof v === "number" && Number.isInteger(v) && v >= 0)) {
    throw new Error(`${source}: "stop_token_ids" must be an array of token ids`);
  }
  return [eos, ...(raw as number[]).filter((id) => id !== eos)];
}

function logitsShift(raw: unknown, source: string): 0 | 1 {
  if (raw === undefined || raw === 0) return 0;
  if (raw === 1) return 1;
  throw new Error(`${source}: "logits_shift" must be 0 or 1, got ${JSON.stringify(raw)}`);
}

function decodingDefaults(raw: unknown, source: string): DecodingDefaults {
  if (raw === undefined) return {};
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${source}: "decoding" must be an object`);
  const d = raw as Record<string, unknown>;
  const out: DecodingDefaults = {};
  if (d.threshold !== undefined) {
    if (typeof d.threshold !== "number" || !(d.threshold > 0 && d.threshold <= 1))
      throw new Error(`${source}: "decoding.threshold" must be in (0, 1]`);
    out.threshold = d.threshold;
  }
  if (d.policy !== undefined) {
    if (typeof d.policy !== "string" || d.policy === "") throw new Error(`${source}: "decoding.policy" must be a policy name`);
    out.policy = d.policy;
  }
  if (d.sub_block_size !== undefined) {
    if (typeof d.sub_block_size !== "number" || !Number.isInteger(d.sub_block_size) || d.sub_block_size < 1) {
      throw new Error(`${source}: "decoding.sub_block_size" must be a positive integer`);
    }
    out.subBlockSize = d.sub_block_size;
  }
  return out;
}

function specialTokens(raw: unknown, source: string): ChatSpecialTokens {
  const tokens = parseSpecialTokens(raw, source);
  if (tokens.toolCallFormat === "gemma4") {
    throw new Error(`${source}: "special_tokens.tool_call_format" "gemma4" is for canvas models: a mask model's grammar writes JSON calls`);
  }
  return tokens;
}

/** `special_tokens` of any contract version (a canvas model's too, decoder/canvas/canvas-model.ts). */
export function parseSpecialTokens(raw: unknown, source: string): ChatSpecialTokens {
  if (raw === undefined) return DEFAULT_SPECIAL_TOKENS;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${source}: "special_tokens" must be an object`);
  const s = raw as Record<string, unknown>;
  const pair = (key: string, fallback: [string, string]): [string, string] => {
    const v = s[key];
    if (v === undefined) return fallback;
    if (!Array.isArray(v) || v.length !== 2 || !v.every((t) => typeof t === "string" && t !== "")) {
      throw new Error(`${source}: "special_tokens.${key}" must be [open, close]`);
    }
    // The grammar keeps "<" out of JSON strings, so a delimiter that starts with it (and has no
    // other) can never occur inside a value, and the parser finds a partial one at the last "<".
    for (const t of v as string[]) {
      if (!t.startsWith("<") || t.indexOf("<", 1) >= 0) {
        throw new Error(`${source}: "special_tokens.${key}": ${JSON.stringify(t)} must start with "<" and hold no other "<"`);
      }
    }
    return [v[0] as string, v[1] as string];
  };
  const format = s.tool_call_format ?? "json";
  if (format !== "json" && format !== "gemma4") {
    throw new Error(`${source}: "special_tokens.tool_call_format" must be "json" or "gemma4", got ${JSON.stringify(format)}`);
  }
  return {
    toolCall: pair("tool_call", DEFAULT_SPECIAL_TOKENS.toolCall),
    thinking: pair("thinking", DEFAULT_SPECIAL_TOKENS.thinking),
    ...(format !== "json" ? { toolCallFormat: format } : {}),
  };
}
