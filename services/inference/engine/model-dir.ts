import { existsSync } from "node:fs";
import { copyFile, link, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import type * as ort from "onnxruntime-node";
import { BoundedTemplate } from "../../../lib/bounded-template.js";
import type { Logger } from "../../../lib/logger.js";
import type { ChatTemplateVariables } from "../prompt/chat-prompt.js";
import { parseModelConfig, type ModelConfig } from "../core/model-config.js";
import { CPU_ACCURACY_LEVEL, withMatMulNBitsAccuracy } from "../onnx/onnx-accuracy-level.js";
import { graphOutputNames, skippableHeadParts } from "../onnx/onnx-head.js";
import { concatBytes } from "../onnx/onnx-proto.js";
import { bannedTokenIds } from "../core/banned-tokens.js";
import { type DeviceKVOps, deviceKVOps } from "../decoder/device-kv.js";
import { newKVNames } from "../decoder/forward.js";
import { appendGraph, downloadGraph, gatherGraph } from "../onnx/onnx-kv-graphs.js";
import { readoutGraph, usesExternalData } from "../onnx/onnx-readout.js";
import { modelText, type ModelText } from "../prompt/model-text.js";
import { openSession, ortWorkerDefault, type ExecutionProvider, type OpenedSession } from "../onnx/onnx-session.js";
import { WorkerSession } from "../onnx/onnx-worker-session.js";
import { maxTokenBytes } from "../prompt/text-ops.js";
import { createTextTokenizer, type TextTokenizer } from "../prompt/tokenizer.js";

/** A model directory loaded into memory (docs/model-contract.md). */
export interface ModelDir {
  dir: string;
  config: ModelConfig;
  tokenizer: TextTokenizer;
  renderChat(variables: ChatTemplateVariables): string;
  /** Rendering and tokenizing for requests, on the text worker thread unless sessions run on this thread. */
  text: ModelText;
  /** The most UTF-8 bytes one token stands for: a text of B bytes is at least B / this many tokens. */
  maxTokenBytes: number;
  /** decision.json, when the directory has one. */
  decision: JsonObject | undefined;
  session: ort.InferenceSession;
  executionProviders: ExecutionProvider[];
  /** Set when the session keeps its key/values on the device (WebGPU): the graphs that move them there. */
  deviceKV: DeviceKVOps | undefined;
  /** Whether the session has the in-graph greedy readout (onnx-readout.ts). */
  readout: boolean;
  /** Whether a forward can skip the output head when it reads no logits (onnx-head.ts). */
  skippableHead: boolean;
  /** The MatMulNBits accuracy_level the load set (onnx-accuracy-level.ts); undefined: nodes as converted. */
  int4AccuracyLevel: number | undefined;
  /** Releases the session (and any staged copy of the model). */
  close(): Promise<void>;
}

export interface LoadModelDirOptions {
  executionProviders?: readonly ExecutionProvider[];
  /** Run the session on a worker thread (default: on unless TESSERA_ORT_WORKER says off). */
  worker?: boolean;
  intraOpThreads?: number;
  /** Where a GPU provider cannot start: `cpu` runs on the CPU instead (TESSERA_GPU_FALLBACK). */
  fallback?: "cpu" | "none";
  logger?: Logger;
}

async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export async function loadModelDir(dir: string, options: LoadModelDirOptions = {}): Promise<ModelDir> {
  const root = path.resolve(dir);
  const config = parseModelConfig(await readJson(path.join(root, "config.json")), path.join(root, "config.json"));
  const tokenizerJson = (await readJson(path.join(root, "tokenizer.json"))) as object;
  const tokenizerConfig = (await readJson(path.join(root, "tokenizer_config.json"))) as Record<string, unknown>;
  const tokenizer = createTextTokenizer(tokenizerJson, tokenizerConfig);

  const templateSource = tokenizerConfig.chat_template;
  if (typeof templateSource !== "string" || templateSource === "") {
    throw new Error(`${path.join(root, "tokenizer_config.json")}: "chat_template" is missing`);
  }
  const template = new BoundedTemplate(templateSource);
  for (const [name, id] of [
    ["<|mask|>", config.maskTokenId],
    ["<|im_end|>", config.eosTokenId],
  ] as const) {
    const found = tokenizer.tokenId(name);
    if (found !== undefined && found !== id) throw new Error(`${root}: config.json says ${name} is ${id}, the tokenizer says ${found}`);
  }

  const decisionFile = path.join(root, "decision.json");
  let decision: JsonObject | undefined;
  if (existsSync(decisionFile)) {
    const raw = await readJson(decisionFile);
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${decisionFile}: expected a JSON object`);
    decision = raw as JsonObject;
  }

  const text = modelText({ tokenizerJson, tokenizerConfig, chatTemplate: templateSource }, options.worker ?? ortWorkerDefault());
  const onnxPath = path.join(root, config.onnxFile);
  const staged = await editedSource(onnxPath, config, int4AccuracyLevel(config, options.executionProviders));
  let opened: OpenedSession;
  try {
    opened = await openSession(staged.source, {
      ...(options.executionProviders !== undefined ? { executionProviders: options.executionProviders } : {}),
      ...(options.intraOpThreads !== undefined ? { intraOpThreads: options.intraOpThreads } : {}),
      ...(options.worker !== undefined ? { worker: options.worker } : {}),
      ...(options.fallback !== undefined ? { fallback: options.fallback } : {}),
      label: onnxPath,
      // Only names the model has: ONNX Runtime refuses a location for an output that is not there.
      deviceOutputs: [
        "logits",
        ...Array.from({ length: config.numLayers }, (_, l) => [`present.${l}.key`, `present.${l}.value`]).flat(),
        ...(staged.newKV ? newKVNames(config.numLayers) : []),
      ],
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
  } finally {
    // ONNX Runtime has read the model (and mapped or read its external data) by now.
    await staged.cleanup();
  }
  const { session, executionProviders } = opened;
  checkSessionIO(session, config, root);
  const shape = { layers: config.numLayers, heads: config.numKvHeads, headDim: config.headDim };
  const open = opened.openDeviceGraph;
  const deviceKV =
    open !== undefined ? deviceKVOps(shape, open, { append: appendGraph, gather: gatherGraph, download: downloadGraph }) : undefined;
  if (!staged.readout) options.logger?.warn({ onnxPath }, "model opset < 13: the greedy readout runs in JS from the logits");
  if (!staged.skippableHead)
    options.logger?.warn({ onnxPath }, "the output head cannot be made conditional: prefills compute logits they do not read");
  if (session instanceof WorkerSession && executionProviders[0] === "cpu" && !session.flushesDenormals)
    options.logger?.warn(
      { onnxPath },
      "the session's worker computes with denormal floats (another ONNX Runtime session opened first in this process): long prefills are ~30% slower (services/inference/README.md, Denormals)",
    );

  return {
    dir: root,
    config,
    tokenizer,
    renderChat: (variables) => template.render(variables as unknown as Record<string, unknown>),
    text,
    maxTokenBytes: maxTokenBytes(tokenizerJson),
    decision,
    session,
    executionProviders,
    deviceKV,
    readout: staged.readout,
    skippableHead: staged.skippableHead,
    int4AccuracyLevel: staged.int4AccuracyLevel,
    close: async () => {
      await deviceKV?.close();
      await Promise.all([session.release(), text.close()]);
    },
  };
}

/**
 * The accuracy_level to give MatMulNBits nodes, decided by where the session is asked to
 * run: on the CPU provider, config.json's `cpu_int4_accuracy_level` or CPU_ACCURACY_LEVEL
 * (0: leave the nodes). Other providers keep the nodes as converted: ONNX Runtime's WebGPU
 * kernel already reads a missing level as 4 (its DP4A path), and its quantizer leaves the
 * level out for the GPU providers. A GPU request that falls back to the CPU keeps them too.
 */
export function int4AccuracyLevel(
  config: Pick<ModelConfig, "cpuInt4AccuracyLevel">,
  executionProviders: readonly ExecutionProvider[] = ["cpu"],
): { level: number; replace: boolean } | undefined {
  if ((executionProviders[0] ?? "cpu") !== "cpu") return undefined;
  const level = config.cpuInt4AccuracyLevel ?? CPU_ACCURACY_LEVEL;
  return level === 0 ? undefined : { level, replace: config.cpuInt4AccuracyLevel !== undefined };
}

/**
 * The model with the engine's load-time edits: MatMulNBits' accuracy level (on the CPU,
 * onnx-accuracy-level.ts), the output head made conditional
 * (onnx-head.ts), then the greedy readout added (onnx-readout.ts). In memory, or, when its
 * weights live in external files, as a file that ONNX Runtime accepts (it resolves external
 * data next to the model file and refuses paths that leave that directory, links included):
 * in a temporary directory beside hard links to the model's files; else beside the original
 * (a hidden file, removed once loaded); else beside copies. The original file when neither
 * edit applies.
 */
async function editedSource(
  onnxPath: string,
  config: ModelConfig,
  accuracy: { level: number; replace: boolean } | undefined,
): Promise<{
  source: string | Uint8Array;
  readout: boolean;
  skippableHead: boolean;
  int4AccuracyLevel: number | undefined;
  /** Whether the model outputs `present_new.*` (docs/model-contract.md, "New key/values"). */
  newKV: boolean;
  cleanup: () => Promise<void>;
}> {
  const none = async () => {};
  const original = await readFile(onnxPath);
  // First, so that the nodes the head edit moves into its If keep the attribute.
  const leveled = accuracy !== undefined ? withMatMulNBitsAccuracy(original, accuracy.level, accuracy.replace) : undefined;
  const bytes = leveled ?? original;
  const headed = skippableHeadParts(bytes, config.vocabSize);
  const readout = readoutGraph(bytes, config.vocabSize, bannedTokenIds(config));
  const edits = {
    readout: readout !== undefined,
    skippableHead: headed !== undefined,
    int4AccuracyLevel: leveled !== undefined ? accuracy?.level : undefined,
    newKV: graphOutputNames(bytes).includes(newKVNames(config.numLayers)[0]!),
  };
  if (leveled === undefined && headed === undefined && readout === undefined) return { source: onnxPath, ...edits, cleanup: none };
  // One copy of the model: its (rewritten) fields, then the readout's extra graph field.
  const augmented = concatBytes([...(headed ?? [bytes]), ...(readout !== undefined ? [readout] : [])]);
  if (!usesExternalData(bytes)) return { source: augmented, ...edits, cleanup: none };

  const dir = path.dirname(onnxPath);
  const name = path.basename(onnxPath);
  const files = (await readdir(dir, { withFileTypes: true })).filter((e) => e.isFile() && e.name !== name).map((e) => e.name);
  const staged = await mkdtemp(path.join(os.tmpdir(), "tessera-model-"));
  const removeStaged = () => rm(staged, { recursive: true, force: true });
  try {
    for (const file of files) await link(path.join(dir, file), path.join(staged, file));
  } catch {
    await removeStaged();
    const beside = path.join(dir, `.${name}.edited-${process.pid}-${Date.now()}.onnx`);
    try {
      await writeFile(beside, augmented, { flag: "wx" });
      return { source: beside, ...edits, cleanup: () => rm(beside, { force: true }) };
    } catch {
      await mkdir(staged, { recursive: true });
      for (const file of files) await copyFile(path.join(dir, file), path.join(staged, file));
    }
  }
  await writeFile(path.join(staged, name), augmented);
  return { source: path.join(staged, name), ...edits, cleanup: removeStaged };
}

/** The ONNX inputs and outputs the engine feeds and reads must all be there. */
function checkSessionIO(session: ort.InferenceSession, config: ModelConfig, root: string): void {
  const inputs = ["input_ids", "position_ids", "attention_mask"];
  const outputs = ["logits"];
  for (let l = 0; l < config.numLayers; l++) {
    inputs.push(`past_key_values.${l}.key`, `past_key_values.${l}.value`);
    outputs.push(`present.${l}.key`, `present.${l}.value`);
  }
  const missing = [...inputs.filter((n) => !session.inputNames.includes(n)), ...outputs.filter((n) => !session.outputNames.includes(n))];
  if (missing.length > 0) {
    throw new Error(`${path.join(root, config.onnxFile)} does not follow the model contract: missing ${missing.join(", ")}`);
  }
}
