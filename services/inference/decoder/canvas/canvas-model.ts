/**
 * A contract v3 model directory (docs/model-contract.md, "Contract v3"): config.json's canvas
 * keys checked, the tokenizer and chat template, and ONNX Runtime sessions of encoder.onnx and
 * denoiser.onnx (which share weights.onnx.data, read by ONNX Runtime from beside them),
 * vision.onnx where config.json names one, and the sampler's weightless graphs built here.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { BoundedTemplate } from "../../../../lib/bounded-template.js";
import type * as ort from "onnxruntime-node";
import type { Logger } from "../../../../lib/logger.js";
import { type ChatSpecialTokens, parseSpecialTokens } from "../../core/model-config.js";
import { type ExecutionProvider, openSession, ortWorkerDefault } from "../../onnx/onnx-session.js";
import { maxTokenBytes } from "../../prompt/text-ops.js";
import { createTextTokenizer, type TextTokenizer } from "../../prompt/tokenizer.js";
import { downloadGraph } from "../../onnx/onnx-kv-graphs.js";
import { LOGITS_POSITIONS } from "./canvas-kv.js";
import { GraphSampler } from "./graph-sampler.js";
import type { VisionSettings } from "./image-preprocess.js";
import type { CanvasSamplerSettings } from "./sampler.js";

export interface CanvasLayer {
  type: "sliding_attention" | "full_attention";
  kvHeads: number;
  headDim: number;
}

export interface CanvasConfig {
  modelType: string;
  hiddenSize: number;
  vocabSize: number;
  layers: CanvasLayer[];
  slidingWindow: number;
  canvasLength: number;
  maxPositions: number;
  eosTokenId: number;
  stopTokenIds: number[];
  padTokenId: number;
  sampler: CanvasSamplerSettings;
  /** The image path (config.json `vision`, `vision_file`), when the model has one. */
  vision?: CanvasVisionConfig;
  /** The reply's delimiters and call syntax (`special_tokens`, e.g. Gemma 4's), as for a v2 model. */
  specialTokens: ChatSpecialTokens;
  /** `capabilities.tools` / `.thinking`: the chat template renders tools / has a thinking switch. */
  tools: boolean;
  thinking: boolean;
}

export interface CanvasVisionConfig extends VisionSettings {
  file: string;
  imageTokenId: number;
  boiTokenId: number;
  eoiTokenId: number;
}

export interface CanvasModel {
  dir: string;
  config: CanvasConfig;
  tokenizer: TextTokenizer;
  /** The most UTF-8 bytes one token stands for: a text of B bytes is at least B / this many tokens. */
  maxTokenBytes: number;
  /** decision.json, when the directory has one (its questions are read on the first canvas, canvas-readout.ts). */
  decision: JsonObject | undefined;
  renderChat(variables: Record<string, unknown>): string;
  encoder: ort.InferenceSession;
  denoiser: ort.InferenceSession;
  /**
   * Whether the denoiser takes LOGITS_POSITIONS (conversions since it was added; older v3
   * directories compute the head at every canvas position and are read that way).
   */
  narrowHead: boolean;
  /** The sampler's per-step work as weightless graphs on the denoiser's execution provider (graph-sampler.ts). */
  sampler: GraphSampler;
  /**
   * The providers the sessions opened on (after any fallback): on `webgpu` the denoiser leaves
   * `logits` and `next_self_conditioning_embeds` on the device (`gpu-buffer`) and `upload`
   * moves host tensors there (canvas-device.ts).
   */
  executionProviders: ExecutionProvider[];
  /** On WebGPU: a float32 host tensor copied into device memory, and back (Identity graphs). */
  device?: { upload(t: ort.Tensor): Promise<ort.Tensor>; download(t: ort.Tensor): Promise<Float32Array> };
  /** vision.onnx (patches -> image embeddings) and the image token's text, with `config.vision`. */
  vision?: { session: ort.InferenceSession; imageTokenText: string };
  close(): Promise<void>;
}

function cpuOptions(options: CanvasModelOptions): { intraOpThreads?: number } {
  return options.intraOpThreads ? { intraOpThreads: options.intraOpThreads } : {};
}

function int(obj: Record<string, unknown>, key: string, source: string, min = 1): number {
  const v = obj[key];
  if (typeof v !== "number" || !Number.isInteger(v) || v < min)
    throw new Error(`${source}: "${key}" must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return v;
}

function num(obj: Record<string, unknown>, key: string, source: string): number {
  const v = obj[key];
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0)
    throw new Error(`${source}: "${key}" must be a number >= 0, got ${JSON.stringify(v)}`);
  return v;
}

/** config.json of a v3 directory; throws with the file and key on anything out of contract. */
export function parseCanvasConfig(raw: unknown, source: string): CanvasConfig {
  if (typeof raw !== "object" || raw === null) throw new Error(`${source}: expected a JSON object`);
  const obj = raw as Record<string, unknown>;
  if (obj.contract_version !== 3 || obj.decoding_family !== "canvas") {
    throw new Error(`${source}: not a canvas model (contract_version 3, decoding_family "canvas")`);
  }
  const layersRaw = obj.layers;
  if (!Array.isArray(layersRaw) || layersRaw.length === 0) throw new Error(`${source}: "layers" must be a non-empty array`);
  const layers = layersRaw.map((l, i): CanvasLayer => {
    const layer = (l ?? {}) as Record<string, unknown>;
    if (layer.type !== "sliding_attention" && layer.type !== "full_attention") {
      throw new Error(`${source}: layers[${i}].type must be "sliding_attention" or "full_attention"`);
    }
    return {
      type: layer.type,
      kvHeads: int(layer, "num_key_value_heads", `${source} layers[${i}]`),
      headDim: int(layer, "head_dim", `${source} layers[${i}]`),
    };
  });
  const s = (obj.sampler ?? {}) as Record<string, unknown>;
  const sampler: CanvasSamplerSettings = {
    maxDenoisingSteps: int(s, "max_denoising_steps", `${source} sampler`),
    entropyBound: num(s, "entropy_bound", `${source} sampler`),
    tMin: num(s, "t_min", `${source} sampler`),
    tMax: num(s, "t_max", `${source} sampler`),
    stabilityThreshold: int(s, "stability_threshold", `${source} sampler`, 0),
    confidenceThreshold: num(s, "confidence_threshold", `${source} sampler`),
  };
  const vocabSize = int(obj, "vocab_size", source);
  const stops = Array.isArray(obj.stop_token_ids)
    ? obj.stop_token_ids.filter((t): t is number => Number.isInteger(t) && t >= 0 && t < vocabSize)
    : [];
  const eosTokenId = int(obj, "eos_token_id", source, 0);
  let vision: CanvasVisionConfig | undefined;
  if (typeof obj.vision_file === "string" && typeof obj.vision === "object" && obj.vision !== null) {
    const v = obj.vision as Record<string, unknown>;
    vision = {
      file: obj.vision_file,
      imageTokenId: int(obj, "image_token_id", source, 0),
      boiTokenId: int(obj, "boi_token_id", source, 0),
      eoiTokenId: int(obj, "eoi_token_id", source, 0),
      patchSize: int(v, "patch_size", `${source} vision`),
      poolingKernelSize: int(v, "pooling_kernel_size", `${source} vision`),
      // Gemma 4's processor default; a converter that knows the checkpoint's writes its own.
      maxSoftTokens: v.max_soft_tokens === undefined ? 280 : int(v, "max_soft_tokens", `${source} vision`),
      ...(v.position_embedding_size === undefined ? {} : { positionEmbeddingSize: int(v, "position_embedding_size", `${source} vision`) }),
    };
  }
  const caps = (typeof obj.capabilities === "object" && obj.capabilities !== null ? obj.capabilities : {}) as Record<string, unknown>;
  return {
    modelType: String(obj.model_type),
    hiddenSize: int(obj, "hidden_size", source),
    vocabSize,
    layers,
    slidingWindow: int(obj, "sliding_window", source),
    canvasLength: int(obj, "canvas_length", source),
    maxPositions: int(obj, "max_position_embeddings", source),
    eosTokenId,
    stopTokenIds: stops.length > 0 ? stops : [eosTokenId],
    padTokenId: int(obj, "pad_token_id", source, 0),
    sampler,
    ...(vision !== undefined ? { vision } : {}),
    specialTokens: parseSpecialTokens(obj.special_tokens, source),
    tools: caps.tools === true,
    thinking: caps.thinking === true,
  };
}

/** The denoiser's outputs a WebGPU session leaves on the device. */
export const DENOISER_DEVICE_OUTPUTS = ["logits", "next_self_conditioning_embeds"] as const;

export interface CanvasModelOptions {
  intraOpThreads?: number;
  /** In order of preference (TESSERA_EXECUTION_PROVIDERS, the pool's `executionProviders`); default the CPU. */
  executionProviders?: readonly ExecutionProvider[];
  /** Where a GPU provider cannot start: `cpu` opens on the CPU instead (TESSERA_GPU_FALLBACK); default the load fails. */
  fallback?: "cpu" | "none";
  logger?: Logger;
}

export async function loadCanvasModel(dir: string, options: CanvasModelOptions = {}): Promise<CanvasModel> {
  const root = path.resolve(dir);
  const json = async (name: string) => JSON.parse(await readFile(path.join(root, name), "utf8"));
  const config = parseCanvasConfig(await json("config.json"), path.join(root, "config.json"));
  const tokenizerConfig = (await json("tokenizer_config.json")) as Record<string, unknown>;
  const tokenizerJson = (await json("tokenizer.json")) as object;
  const tokenizer = createTextTokenizer(tokenizerJson, tokenizerConfig);
  if (typeof tokenizerConfig.chat_template !== "string") throw new Error(`${root}/tokenizer_config.json: "chat_template" is missing`);
  const template = new BoundedTemplate(tokenizerConfig.chat_template);
  const special = (key: string) => {
    const v = tokenizerConfig[key];
    return typeof v === "string" ? v : typeof v === "object" && v !== null ? String((v as { content?: unknown }).content ?? "") : "";
  };
  // On the CPU each session runs on a worker thread, so a forward does not hold the event loop
  // (TESSERA_ORT_WORKER, as for mask models); WebGPU's stay on the engine's thread (a gpu-buffer
  // tensor lives in the thread that made it), which openSession sees to.
  const open = (file: string, deviceOutputs: readonly string[] = []) =>
    openSession(path.join(root, file), {
      deviceOutputs,
      ...(options.executionProviders !== undefined ? { executionProviders: options.executionProviders } : {}),
      ...(options.intraOpThreads ? { intraOpThreads: options.intraOpThreads } : {}),
      ...(options.fallback !== undefined ? { fallback: options.fallback } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
  const opened = await open("denoiser.onnx", DENOISER_DEVICE_OUTPUTS);
  const { session: denoiser, executionProviders, openDeviceGraph } = opened;
  // The encoder and vision graphs follow the denoiser (a fallback there is a fallback for all).
  const openOnSame = async (file: string) =>
    executionProviders[0] === "cpu" ? (await openSession(path.join(root, file), cpuOptions(options))).session : (await open(file)).session;
  const encoder = await openOnSame("encoder.onnx");
  // One intra-op thread on the CPU: its runs are ~1M logits, where more threads measured slower (bench/canvas-sampler.ts).
  const sampler =
    executionProviders[0] === "cpu"
      ? await GraphSampler.create(config.vocabSize, { executionProviders: ["cpu"], intraOpNumThreads: 1 }, ortWorkerDefault())
      : await GraphSampler.create(config.vocabSize, { executionProviders: [executionProviders[0]!] });
  let device: CanvasModel["device"];
  const toDevice = openDeviceGraph === undefined ? undefined : await openDeviceGraph(downloadGraph(), ["out"]);
  const toHost = openDeviceGraph === undefined ? undefined : await openDeviceGraph(downloadGraph(), []);
  if (toDevice !== undefined && toHost !== undefined) {
    device = {
      upload: async (t) => (await toDevice.run({ x: t })).out!,
      download: async (t) => (await toHost.run({ x: t })).out!.data as Float32Array,
    };
  }
  let vision: CanvasModel["vision"];
  if (config.vision !== undefined) {
    const id = config.vision.imageTokenId;
    const added = (tokenizerJson as { added_tokens?: { id: number; content: string }[] }).added_tokens ?? [];
    const imageTokenText = added.find((t) => t.id === id)?.content;
    if (imageTokenText === undefined) throw new Error(`${root}/tokenizer.json: image_token_id ${id} is not an added token`);
    vision = { session: await openOnSame(config.vision.file), imageTokenText };
  }
  let decision: JsonObject | undefined;
  if (existsSync(path.join(root, "decision.json"))) {
    const raw = (await json("decision.json")) as unknown;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${root}/decision.json: expected a JSON object`);
    decision = raw as JsonObject;
  }
  return {
    dir: root,
    config,
    tokenizer,
    maxTokenBytes: maxTokenBytes(tokenizerJson),
    decision,
    renderChat: (variables) => template.render({ bos_token: special("bos_token"), eos_token: special("eos_token"), ...variables }),
    encoder,
    denoiser,
    narrowHead: denoiser.inputNames.includes(LOGITS_POSITIONS),
    sampler,
    executionProviders,
    ...(device !== undefined ? { device } : {}),
    ...(vision !== undefined ? { vision } : {}),
    async close() {
      await encoder.release();
      await denoiser.release();
      await sampler.release();
      await vision?.session.release();
      await toDevice?.release();
      await toHost?.release();
    },
  };
}
