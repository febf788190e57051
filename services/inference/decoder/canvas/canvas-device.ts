/**
 * What a canvas decoder keeps in device memory between denoising steps on a GPU provider
 * (CanvasModel.device), and the bytes each step moves between host and device.
 * - The batch's past key/values and attention masks: uploaded once, reused while the batch has
 *   the same rows at the same cache lengths (they change when a canvas is encoded onto a row's
 *   cache or the batch changes, not between the steps of a canvas).
 * - The self-conditioning embeddings: the denoiser's `next_self_conditioning_embeds` (left on
 *   the device) fed back as the next step's input while the batch is the same rows and none of
 *   them started a new canvas (whose embeddings are zeros); otherwise brought to the host once
 *   and split into rows.
 */
import type * as ort from "onnxruntime-node";
import type { ForwardTransfer } from "../forward.js";

export type DeviceOps = { upload(t: ort.Tensor): Promise<ort.Tensor>; download(t: ort.Tensor): Promise<Float32Array> };

export function emptyTransfer(): ForwardTransfer {
  return { toDevice: { kv: 0, other: 0 }, toHost: { kv: 0, other: 0 } };
}

export function addTransfer(total: ForwardTransfer, t: ForwardTransfer): void {
  total.toDevice.kv += t.toDevice.kv;
  total.toDevice.other += t.toDevice.other;
  total.toHost.kv += t.toHost.kv;
  total.toHost.other += t.toHost.other;
}

/** Bytes of a tensor held in host memory (a device tensor moves nothing). */
export function hostBytes(t: ort.Tensor | undefined): number {
  if (t === undefined || t.location !== "cpu") return 0;
  return (t.data as ArrayBufferView).byteLength;
}

function sameRows(a: readonly object[], b: readonly object[]): boolean {
  return a.length === b.length && a.every((r, i) => r === b[i]);
}

/** The float feeds that stay fixed over a canvas's steps: `past_key_values.*` and the masks. */
export function isKVFeed(name: string): boolean {
  return name.startsWith("past_key_values.");
}
function isFixedFeed(name: string): boolean {
  return isKVFeed(name) || name.endsWith("_attention_mask");
}

export class CanvasDeviceState {
  private fixed?: { rows: object[]; lengths: number[]; tensors: Record<string, ort.Tensor> };
  private sc?: { rows: object[]; tensor: ort.Tensor };

  constructor(private readonly ops: DeviceOps) {}

  /**
   * Replaces the host past/mask feeds of `feeds` with device copies: the ones uploaded for the
   * previous step when `rows` and their `lengths` are the same, else fresh uploads (counted).
   */
  async placeFixedFeeds(
    rows: readonly object[],
    lengths: readonly number[],
    feeds: Record<string, ort.Tensor>,
    transfer: ForwardTransfer,
  ): Promise<void> {
    const f = this.fixed;
    if (f === undefined || !sameRows(f.rows, rows) || f.lengths.some((l, i) => l !== lengths[i])) {
      this.dropFixed();
      const tensors: Record<string, ort.Tensor> = {};
      for (const [name, t] of Object.entries(feeds)) {
        if (!isFixedFeed(name)) continue;
        if (isKVFeed(name)) transfer.toDevice.kv += hostBytes(t);
        else transfer.toDevice.other += hostBytes(t);
        tensors[name] = await this.ops.upload(t);
      }
      this.fixed = { rows: [...rows], lengths: [...lengths], tensors };
    }
    Object.assign(feeds, this.fixed!.tensors);
  }

  /** The batch's self-conditioning feed on the device, when the previous step left exactly it there. */
  selfConditioning(rows: readonly object[]): ort.Tensor | undefined {
    return this.sc !== undefined && sameRows(this.sc.rows, rows) ? this.sc.tensor : undefined;
  }

  /**
   * Brings the kept self-conditioning tensor (`[B, C, H]`) to the host once, hands each of its
   * rows its part (`rowFloats` floats) and frees it: the next batch is not the one it was made for.
   */
  async spillSelfConditioning<R extends object>(
    rowFloats: number,
    transfer: ForwardTransfer,
    give: (row: R, sc: Float32Array) => void,
  ): Promise<void> {
    const sc = this.sc;
    if (sc === undefined) return;
    this.sc = undefined;
    try {
      const all = await this.ops.download(sc.tensor);
      transfer.toHost.other += all.byteLength;
      sc.rows.forEach((row, b) => {
        give(row as R, all.slice(b * rowFloats, (b + 1) * rowFloats));
      });
    } finally {
      sc.tensor.dispose();
    }
  }

  /** Keeps `tensor` (the step's `next_self_conditioning_embeds` on the device) for `rows`. */
  keepSelfConditioning(rows: readonly object[], tensor: ort.Tensor): void {
    if (this.sc !== undefined && this.sc.tensor !== tensor) this.sc.tensor.dispose();
    this.sc = { rows: [...rows], tensor };
  }

  private dropFixed(): void {
    for (const t of Object.values(this.fixed?.tensors ?? {})) t.dispose();
    this.fixed = undefined;
  }

  /** Frees what is held (the decoder has no rows left). */
  release(): void {
    this.dropFixed();
    this.sc?.tensor.dispose();
    this.sc = undefined;
  }
}
