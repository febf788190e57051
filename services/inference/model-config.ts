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
  policy?: string;
  subBlockSize?: number;
}

export interface ModelConfig {
  modelType: string;
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  blockSize: number;
  /** Context size in tokens (prompt + reply). */
  maxPositions: number;
  maskTokenId: number;
  eosTokenId: number;
  padTokenId: number;
  decoding: DecodingDefaults;
  capabilities: ModelCapabilities;
  onnxFile: string;
}

export const MODEL_TYPE = "tessera-block-diffusion";

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
  const modelType = typeof obj.model_type === "string" ? obj.model_type : "";
  if (modelType !== MODEL_TYPE) {
    throw new Error(`${source}: "model_type" must be "${MODEL_TYPE}", got ${JSON.stringify(obj.model_type)}`);
  }
  const caps = (typeof obj.capabilities === "object" && obj.capabilities !== null ? obj.capabilities : {}) as Record<string, unknown>;
  const config: ModelConfig = {
    modelType,
    numLayers: int("num_hidden_layers", 1),
    numKvHeads: int("num_key_value_heads", 1),
    headDim: int("head_dim", 1),
    vocabSize: int("vocab_size", 1),
    blockSize: int("block_size", 1),
    maxPositions: int("max_position_embeddings", 1),
    maskTokenId: int("mask_token_id"),
    eosTokenId: int("eos_token_id"),
    padTokenId: int("pad_token_id"),
    decoding: decodingDefaults(obj.decoding, source),
    capabilities: { images: caps.images === true, tools: caps.tools === true, thinking: caps.thinking === true },
    onnxFile: typeof obj.onnx_file === "string" && obj.onnx_file !== "" ? obj.onnx_file : "model.onnx",
  };
  for (const key of ["maskTokenId", "eosTokenId", "padTokenId"] as const) {
    if (config[key] >= config.vocabSize) throw new Error(`${source}: ${key} ${config[key]} is outside the vocabulary`);
  }
  if (config.maxPositions < config.blockSize) {
    throw new Error(`${source}: max_position_embeddings is smaller than one block`);
  }
  return config;
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
