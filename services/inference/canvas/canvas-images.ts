/**
 * The `image_url` parts of a request to a canvas model with a vision graph: each part becomes
 * the model's image token in the chat text (where the part is, as Gemma 4's chat template puts
 * it), and each such token is expanded to boi, N × image_token_id, eoi after tokenization, as
 * Gemma 4's processor does, N from the image's size alone (so CountTokens and quotas see the
 * same count without decoding). For Generate, the images are then decoded (sharp), preprocessed
 * on a worker thread (image-preprocess.ts) and run through vision.onnx; the rows go to the
 * encoder at the image-token positions. Limits (images per request, bytes, pixels) are 400s.
 */
import * as ort from "onnxruntime-node";
import type { PromptImages } from "../decoder/canvas/canvas-decoder.js";
import type { CanvasModel, CanvasVisionConfig } from "../decoder/canvas/canvas-model.js";
import { ImageRefused, probeImageDataUrl } from "../decoder/canvas/image-decode.js";
import { checkPlacement, targetSize } from "../decoder/canvas/image-preprocess.js";
import { ImagePreprocessor } from "../decoder/canvas/image-preprocessor.js";
import { InvalidRequest } from "../core/engine-errors.js";

export interface CanvasImageLimits {
  maxImages: number;
  maxPixels: number;
  maxBytes: number;
}

export const DEFAULT_IMAGE_LIMITS: CanvasImageLimits = { maxImages: 8, maxPixels: 32 * 1024 * 1024, maxBytes: 10 * 1024 * 1024 };

/** A prompt's token ids with its images' runs expanded, and what Generate needs to embed them. */
export interface ImagePrompt {
  ids: number[];
  urls: string[];
  blocks: [number, number][];
}

function refused(err: unknown): never {
  if (err instanceof ImageRefused || err instanceof RangeError) throw new InvalidRequest(err.message);
  throw err;
}

export class CanvasImages {
  private readonly preprocessor = new ImagePreprocessor();

  constructor(
    private readonly model: CanvasModel & { vision: NonNullable<CanvasModel["vision"]> },
    private readonly vision: CanvasVisionConfig,
    readonly limits: CanvasImageLimits,
  ) {}

  /** The chat-prompt hook: records a part's URL and puts the image token in its place. */
  collector(): { urls: string[]; imageText: (url: string) => string } {
    const urls: string[] = [];
    return {
      urls,
      imageText: (url) => {
        if (urls.length >= this.limits.maxImages) {
          throw new InvalidRequest(`at most ${this.limits.maxImages} images per request (TESSERA_MAX_IMAGES)`);
        }
        urls.push(url);
        return this.model.vision.imageTokenText;
      },
    };
  }

  /** Expands each image token of `ids` (one per URL, in order) to its run. */
  async expand(ids: readonly number[], urls: readonly string[]): Promise<ImagePrompt> {
    const { imageTokenId, boiTokenId, eoiTokenId } = this.vision;
    const at = ids.flatMap((t, i) => (t === imageTokenId ? [i] : []));
    if (at.length !== urls.length) {
      throw new InvalidRequest(
        `the prompt has ${at.length} image tokens for ${urls.length} images: the text must not contain the image token`,
      );
    }
    const counts = await Promise.all(urls.map((url) => this.tokensOf(url)));
    const out: number[] = [];
    const blocks: [number, number][] = [];
    let from = 0;
    at.forEach((i, n) => {
      out.push(...ids.slice(from, i), boiTokenId);
      blocks.push([out.length, out.length + counts[n]!]);
      for (let k = 0; k < counts[n]!; k++) out.push(imageTokenId);
      out.push(eoiTokenId);
      from = i + 1;
    });
    out.push(...ids.slice(from));
    return { ids: out, urls: [...urls], blocks };
  }

  /** Image tokens of one image, from its size alone (every limit checked). */
  async tokensOf(url: string): Promise<number> {
    try {
      const { width, height } = await probeImageDataUrl(url, this.limits);
      const size = targetSize(height, width, this.vision);
      checkPlacement(size, { height, width }, this.vision);
      return (size.width * size.height) / (this.vision.patchSize * this.vision.poolingKernelSize) ** 2;
    } catch (err) {
      return refused(err);
    }
  }

  /** Decodes, preprocesses and embeds the prompt's images (vision.onnx), in prompt order. */
  async embed(prompt: ImagePrompt): Promise<PromptImages> {
    const H = this.model.config.hiddenSize;
    const rows: Float32Array[] = [];
    for (const [n, url] of prompt.urls.entries()) {
      let pre: Awaited<ReturnType<ImagePreprocessor["run"]>>;
      try {
        const { bytes } = await probeImageDataUrl(url, this.limits);
        pre = await this.preprocessor.run(bytes, this.limits, this.vision);
      } catch (err) {
        return refused(err);
      }
      const [start, end] = prompt.blocks[n]!;
      if (pre.tokens !== end - start) throw new Error(`image ${n}: ${pre.tokens} image tokens, the prompt has ${end - start}`);
      const out = await this.model.vision.session.run({
        pixel_values: new ort.Tensor("float32", pre.pixelValues, [1, pre.patches, pre.pixelValues.length / pre.patches]),
        pixel_position_ids: new ort.Tensor("int64", BigInt64Array.from(pre.positions, BigInt), [1, pre.patches, 2]),
      });
      rows.push(out.image_embeds!.data as Float32Array);
    }
    const embeds = new Float32Array(rows.reduce((sum, r) => sum + r.length, 0));
    let offset = 0;
    for (const r of rows) {
      embeds.set(r, offset);
      offset += r.length;
    }
    if (embeds.length !== prompt.blocks.reduce((sum, [a, b]) => sum + (b - a), 0) * H) {
      throw new Error("vision.onnx gave a different number of image embeddings than the prompt has image tokens");
    }
    return { embeds, blocks: prompt.blocks };
  }

  close(): Promise<void> {
    return this.preprocessor.close();
  }
}
