import * as ort from "onnxruntime-node";
import { HEAD_SWITCH, LOGITS_AT } from "../onnx/onnx-head.js";
import { READOUT_CONFIDENCE, READOUT_TOKEN } from "../onnx/onnx-readout.js";
import { lend, type MirrorSource, mirror } from "../onnx/onnx-worker-session.js";
import { type DeviceKVOps, type DevicePast, type DevicePresent, isDevicePast } from "./device-kv.js";
import { takeDeviceOutputs } from "./device-outputs.js";

/** Per-layer key and value tensors, each `[B, H_kv, T, D]` flattened. */
export interface LayerKV {
  key: Float32Array;
  value: Float32Array;
}

/** The inputs of one denoiser forward (docs/model-contract.md), as flat typed arrays. */
export interface ForwardInputs {
  batch: number;
  /** Current tokens per row (S). */
  seq: number;
  /** Past slots per row (P). */
  past: number;
  inputIds: BigInt64Array;
  positionIds: BigInt64Array;
  /** Additive `[B, 1, S, P+S]`. */
  attentionMask: Float32Array;
  /** In host memory, or caches on the device (device-kv.ts) that the runner batches there. */
  pastKeyValues: LayerKV[] | DevicePast;
  /**
   * The host past's arrays are kept by the caller for its next forwards (BatchPast): a session on
   * a worker thread borrows them for the run (`lend`, onnx-worker-session.ts) instead of copying
   * them, and puts them back in `pastKeyValues`' entries when it returns.
   */
  pastKept?: boolean;
  /**
   * The host past is one cache's store, appended to between forwards (a lone row: BatchPast): a
   * session on a worker thread keeps a copy and is sent only the new slots (`mirror`,
   * onnx-worker-session.ts) instead of borrowing the whole store every forward.
   */
  pastMirror?: MirrorSource;
  /**
   * `[B, K]` indices into the `B * S` positions (`b * S + s`): the only positions whose logits
   * the forward computes, on a model whose head can be narrowed (onnx-head-at.ts); the logits
   * are then `[B, K, V]`. All positions when absent.
   */
  logitsAt?: { indices: BigInt64Array; perRow: number };
}

/**
 * Host key/values of the forward positions `[first, first + slots)` (of the past and current
 * slots, `P + S`), per layer `[B, H_kv, slots, D]`: a model's `present_new.*`, the current
 * positions alone (`first` = P; docs/model-contract.md, "New key/values").
 */
export interface PresentSlots {
  layers: readonly LayerKV[];
  first: number;
}

/**
 * A forward's present key/values: host arrays of every slot (`present.*`, `[B, H_kv, P+S, D]`),
 * the current slots alone, or tensors left on the device.
 */
export type PresentKV = readonly LayerKV[] | PresentSlots | DevicePresent;

/** Host key/values as slots from `first` (0 for a whole present). */
export function presentSlots(present: readonly LayerKV[] | PresentSlots): PresentSlots {
  return isPresentSlots(present) ? present : { layers: present, first: 0 };
}

function isPresentSlots(present: readonly LayerKV[] | PresentSlots): present is PresentSlots {
  return !Array.isArray(present);
}

/** The outputs holding the current positions' key/values alone (docs/model-contract.md, "New key/values"). */
export function newKVNames(layers: number): string[] {
  const names: string[] = [];
  for (let l = 0; l < layers; l++) names.push(`present_new.${l}.key`, `present_new.${l}.value`);
  return names;
}

/** The greedy readout of every position: see onnx-readout.ts. */
export interface Readout {
  /** `[B, S]`: probability of the best allowed token. */
  confidence: Float32Array;
  /** `[B, S]`: the best allowed token (mask and pad are never allowed). */
  token: BigInt64Array;
}

export interface ForwardOutputs {
  /** `[B, S, V]`; present when asked for, or when the model has no readout. */
  logits?: Float32Array;
  /** Present when asked for and the model has the readout outputs. */
  readout?: Readout;
  /** Only when asked for: `[B, H_kv, P+S, D]` per layer, or the S current slots alone where the model has them. */
  present?: PresentKV;
  /**
   * Frees what the forward left on the device that no cache took (call once the rows have been
   * applied; a cache that stores a slice keeps the present alive until it has copied it).
   */
  release?: () => void;
}

/** Bytes a forward moved between host and device memory, by direction and what they were. */
export interface ForwardTransfer {
  toDevice: { kv: number; other: number };
  toHost: { kv: number; other: number };
}

export interface OrtRunnerOptions {
  /** Where the session runs: `cpu` moves nothing; a device provider uploads host feeds and downloads host outputs. */
  provider?: "cpu" | "cuda" | "webgpu";
  /** Set when the session leaves `present.*` on the device (`preferredOutputLocation`). */
  deviceKV?: DeviceKVOps;
  /** Called after every forward on a device provider. */
  onTransfer?: (transfer: ForwardTransfer) => void;
}

export interface ForwardFetch {
  /** The present key/values (a prefill or a block commit). */
  present: boolean;
  /**
   * `logits` for Score; `readout` for denoising (falls back to logits without one);
   * `readout+logits` for a denoising step whose policy reads logits (both, so the other rows
   * of the batch still read the same readout); `none` for a prefill, which reads only the present key/values (so `present` must be true): the
   * output head is then not computed where the graph allows it (onnx-head.ts).
   */
  output: "logits" | "readout" | "readout+logits" | "none";
}

/**
 * Runs the denoiser. The engine talks to the model only through this, so a test can count
 * the rows of every forward or inject a failure.
 */
export interface ForwardRunner {
  run(inputs: ForwardInputs, fetch: ForwardFetch): Promise<ForwardOutputs>;
}

export interface KVShape {
  layers: number;
  heads: number;
  headDim: number;
}

/**
 * The ONNX Runtime runner. Tensors wrap the typed arrays (no copy). Only what the caller
 * needs is fetched: a denoising step takes the `[B, S]` readout instead of the `[B, S, V]`
 * logits when the session has it, and the present key/values only on a prefill or a commit.
 * ONNX Runtime runs the whole graph whatever is fetched, so a prefill also switches the
 * output head off when the session has the switch (onnx-head.ts).
 */
export function createOrtRunner(session: ort.InferenceSession, shape: KVShape, options: OrtRunnerOptions = {}): ForwardRunner {
  const { deviceKV, onTransfer } = options;
  const onDevice = options.provider !== undefined && options.provider !== "cpu";
  // WebGPU refuses the readout's Softmax over the skipped head's empty logits (a dispatch of
  // size 0), so a prefill there computes the head and does not fetch it.
  const canSkipHead = options.provider !== "webgpu";
  const fullNames: string[] = [];
  for (let l = 0; l < shape.layers; l++) fullNames.push(`present.${l}.key`, `present.${l}.value`);
  // A model with the current positions' key/values as outputs of their own is fetched those
  // (S slots) instead of `present.*` (P + S slots: the whole past back again, every commit).
  const newNames = newKVNames(shape.layers);
  const fetchesNew = newNames.every((name) => session.outputNames.includes(name));
  const presentNames = fetchesNew ? newNames : fullNames;
  const unusedNames = fetchesNew ? fullNames : [];
  const hasReadout = session.outputNames.includes(READOUT_CONFIDENCE) && session.outputNames.includes(READOUT_TOKEN);
  const hasHeadSwitch = session.inputNames.includes(HEAD_SWITCH);
  const hasLogitsAt = session.inputNames.includes(LOGITS_AT);
  const readoutNames = hasReadout ? [READOUT_CONFIDENCE, READOUT_TOKEN] : [];
  const outputNames = (fetch: ForwardFetch) => [
    ...(fetch.output === "none"
      ? []
      : fetch.output === "readout" && hasReadout
        ? readoutNames
        : fetch.output === "readout+logits"
          ? [...readoutNames, "logits"]
          : ["logits"]),
    ...(fetch.present ? presentNames : []),
  ];
  return {
    async run(inputs, fetch) {
      if (fetch.output === "none" && !fetch.present) throw new Error('a forward must fetch something: output "none" needs present');
      const { batch: B, seq: S, past: P } = inputs;
      const feeds: Record<string, ort.Tensor> = {
        input_ids: new ort.Tensor("int64", inputs.inputIds, [B, S]),
        position_ids: new ort.Tensor("int64", inputs.positionIds, [B, S]),
        attention_mask: new ort.Tensor("float32", inputs.attentionMask, [B, 1, S, P + S]),
      };
      if (hasHeadSwitch) feeds[HEAD_SWITCH] = new ort.Tensor("bool", Uint8Array.of(fetch.output === "none" && canSkipHead ? 0 : 1), []);
      if (hasLogitsAt) feeds[LOGITS_AT] = logitsAtFeed(inputs, fetch.output === "none", canSkipHead);
      const transfer: ForwardTransfer = { toDevice: { kv: 0, other: 0 }, toHost: { kv: 0, other: 0 } };
      for (const t of Object.values(feeds)) transfer.toDevice.other += bytesOf(t);
      const past = inputs.pastKeyValues;
      if (isDevicePast(past)) {
        if (deviceKV === undefined) throw new Error("key/values on the device fed to a session that keeps them on the host");
        const tensors = await past.resolve();
        for (let l = 0; l < shape.layers; l++) {
          feeds[`past_key_values.${l}.key`] = tensors[2 * l]!;
          feeds[`past_key_values.${l}.value`] = tensors[2 * l + 1]!;
        }
        for (const t of tensors) if (t.location === "cpu") transfer.toDevice.kv += bytesOf(t);
      } else {
        const kvDims = [B, shape.heads, P, shape.headDim];
        const kept = inputs.pastKept === true;
        const source = inputs.pastMirror;
        const feed = (layer: LayerKV, kind: "key" | "value") =>
          source !== undefined
            ? mirror(layer[kind], source, (back) => (layer[kind] = back))
            : kept
              ? lend(layer[kind], (back) => (layer[kind] = back))
              : layer[kind];
        past.forEach((layer, l) => {
          const key = feed(layer, "key");
          const value = feed(layer, "value");
          feeds[`past_key_values.${l}.key`] = new ort.Tensor("float32", key, kvDims);
          feeds[`past_key_values.${l}.value`] = new ort.Tensor("float32", value, kvDims);
          transfer.toDevice.kv += layer.key.byteLength + layer.value.byteLength;
        });
      }
      const wanted = outputNames(fetch);
      let out: ort.InferenceSession.ReturnType;
      try {
        // A session that leaves outputs in gpu-buffers runs with every output fetched: onnxruntime-node
        // 1.30 fails one that fetches a subset ("Output count mismatch", or outputs bound at a past shape).
        out = deviceKV !== undefined ? await session.run(feeds) : await session.run(feeds, wanted);
      } finally {
        if (isDevicePast(past)) past.done();
      }
      if (deviceKV !== undefined) {
        const result = await takeDeviceOutputs(
          out,
          wanted,
          { names: presentNames, first: fetchesNew ? P : 0, unused: unusedNames },
          deviceKV,
          transfer,
        );
        onTransfer?.(transfer);
        return result;
      }
      const result: ForwardOutputs = {};
      for (const [name, t] of Object.entries(out)) {
        if (t.location !== "cpu") continue;
        if (name.startsWith("present")) transfer.toHost.kv += bytesOf(t);
        else transfer.toHost.other += bytesOf(t);
      }
      if (onDevice) onTransfer?.(transfer);
      if (out.logits !== undefined) result.logits = out.logits.data as Float32Array;
      const confidence = out[READOUT_CONFIDENCE];
      const token = out[READOUT_TOKEN];
      if (confidence !== undefined && token !== undefined) {
        result.readout = { confidence: confidence.data as Float32Array, token: token.data as BigInt64Array };
      }
      if (fetch.present) {
        const present: LayerKV[] = [];
        for (let l = 0; l < shape.layers; l++) {
          present.push({
            key: out[presentNames[2 * l]!]!.data as Float32Array,
            value: out[presentNames[2 * l + 1]!]!.data as Float32Array,
          });
        }
        result.present = fetchesNew ? { layers: present, first: P } : present;
      }
      return result;
    },
  };
}

/**
 * The head's positions: none for a forward that skips the head (one a row where the head cannot
 * be skipped: WebGPU, see createOrtRunner), else the asked ones or all.
 */
function logitsAtFeed(inputs: ForwardInputs, skipped: boolean, canSkipHead: boolean): ort.Tensor {
  const { batch: B, seq: S, logitsAt } = inputs;
  if (skipped && canSkipHead) return new ort.Tensor("int64", new BigInt64Array(0), [B, 0]);
  if (skipped)
    return new ort.Tensor(
      "int64",
      BigInt64Array.from({ length: B }, (_, b) => BigInt(b * S)),
      [B, 1],
    );
  if (logitsAt !== undefined) return new ort.Tensor("int64", logitsAt.indices, [B, logitsAt.perRow]);
  const all = new BigInt64Array(B * S);
  for (let i = 0; i < all.length; i++) all[i] = BigInt(i);
  return new ort.Tensor("int64", all, [B, S]);
}

function bytesOf(t: ort.Tensor): number {
  const data = t.location === "cpu" ? (t.data as ArrayBufferView) : undefined;
  return data?.byteLength ?? t.dims.reduce((n, d) => n * d, 1) * (t.type === "int64" ? 8 : t.type === "bool" ? 1 : 4);
}
