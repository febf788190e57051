// The outputs of a forward on a session that leaves its logits and key/values on the device
// (WebGPU): the step takes what it asked for and everything else is freed there at once.
import type * as ort from "onnxruntime-node";
import { READOUT_CONFIDENCE, READOUT_TOKEN } from "../onnx/onnx-readout.js";
import { type DeviceKVOps, DevicePresent } from "./device-kv.js";
import type { ForwardOutputs, ForwardTransfer } from "./forward.js";

/**
 * The forward's outputs as the engine reads them: the readout (on the host: `[B, S]`), the
 * logits brought to the host only when `wanted` names them, the present key/values left on
 * the device as a DevicePresent when wanted (`kv.names`: its slots start at forward slot `kv.first`), freed otherwise. Adds the bytes that came to the
 * host to `transfer`.
 */
export async function takeDeviceOutputs(
  out: ort.InferenceSession.ReturnType,
  wanted: readonly string[],
  kv: { names: readonly string[]; first: number; unused: readonly string[] },
  deviceKV: DeviceKVOps,
  transfer: ForwardTransfer,
): Promise<ForwardOutputs> {
  const result: ForwardOutputs = {};
  const presentNames = kv.names;
  // The set of key/value outputs the engine does not read (a model's `present.*` when it has
  // `present_new.*`): left on the device by a run that fetched every output, freed at once.
  for (const name of kv.unused) out[name]?.dispose();
  const logits = out.logits;
  try {
    if (logits !== undefined && wanted.includes("logits")) {
      const data = logits.location === "cpu" ? (logits.data as Float32Array) : await deviceKV.download(logits);
      transfer.toHost.other += data.byteLength;
      result.logits = data;
    }
  } catch (err) {
    for (const name of presentNames) out[name]?.dispose();
    throw err;
  } finally {
    if (logits !== undefined && logits.location !== "cpu") logits.dispose();
  }
  const confidence = out[READOUT_CONFIDENCE];
  const token = out[READOUT_TOKEN];
  if (confidence !== undefined && token !== undefined) {
    // On the host whether wanted or not (`[B, S]`, 12 bytes a position): the run fetched every output.
    transfer.toHost.other += (confidence.data as Float32Array).byteLength + (token.data as BigInt64Array).byteLength;
    if (wanted.includes(READOUT_CONFIDENCE))
      result.readout = { confidence: confidence.data as Float32Array, token: token.data as BigInt64Array };
  }
  const present = presentNames.map((name) => out[name]!);
  if (wanted.includes(presentNames[0]!)) {
    const kept = new DevicePresent(deviceKV, present, kv.first);
    result.present = kept;
    result.release = () => kept.release();
  } else {
    for (const t of present) t.dispose();
  }
  return result;
}
