import { availableParallelism } from "node:os";
import { integer, onOff } from "../config-parsers.js";
import { section } from "./setting.js";

// What an inference worker serves with: its limits, images, ONNX Runtime and the unmasking policy.

export type ExecutionProvider = "cpu" | "cuda" | "webgpu";

export const limits = section("Limits", "What one inference worker takes on at once, and the most work one decision may ask.", {
  slots: {
    env: "TESSERA_SLOTS",
    fallback: "4",
    help: "Generation slots per inference worker (sequences denoised together).",
    parse: integer(1, 1024),
  },
  queue: {
    env: "TESSERA_QUEUE",
    fallback: "16",
    help: "Requests that may wait for a slot; beyond that the answer is 529 overloaded_error.",
    parse: integer(0, 100_000),
  },
  maxScoreWorkTokens: {
    env: "TESSERA_MAX_DECISION_WORK_TOKENS",
    fallback: "8192",
    help:
      "Most tokens of model work one decision may need (the state once, plus each question's row: its state tail, question and answer slot); " +
      "more is refused with 400 naming this limit before the model runs.",
    parse: integer(1, 100_000_000),
  },
  maxScoreRowTokens: {
    env: "TESSERA_MAX_DECISION_ROW_TOKENS",
    fallback: "1024",
    help:
      "Most tokens of one model forward of a decision: the state, and a question whose row (its state tail, question and options, answer slot) " +
      "is longer, are prefilled in chunks of at most this many tokens and rows are batched within it, so that a decision holds the model for " +
      "one short forward at a time. A question is refused only when it does not fit the model's context.",
    parse: integer(64, 100_000),
  },
});

export const images = section("Images", "Image inputs of models with vision.", {
  maxImages: {
    env: "TESSERA_MAX_IMAGES",
    fallback: "8",
    help: "Most image_url parts in one request to a model with vision; more is refused with 400.",
    parse: integer(0, 1024),
  },
  maxPixels: {
    env: "TESSERA_MAX_IMAGE_PIXELS",
    fallback: "33554432",
    help: "Most pixels (width x height) of one image, checked before it is decoded; larger is refused with 400.",
    parse: integer(1, 1_000_000_000),
  },
  maxBytes: {
    env: "TESSERA_MAX_IMAGE_BYTES",
    fallback: "10485760",
    help: "Most bytes of one image (decoded from its base64 data: URL); larger is refused with 400.",
    parse: integer(1, 1_000_000_000),
  },
});

export const engine = section("Engine", "ONNX Runtime: threads, execution providers, prefill.", {
  prefillChunk: {
    env: "TESSERA_PREFILL_CHUNK_TOKENS",
    fallback: "0",
    help:
      "Most prompt tokens per prefill forward (whole 64-token blocks) of a chat prompt or a decision's state; 0: 512 on the CPU, " +
      "where smaller chunks skip the attention a long forward computes and masks away (bench/prefill.ts), 2048 on a GPU.",
    parse: integer(0, 100_000),
  },
  ortWorker: {
    env: "TESSERA_ORT_WORKER",
    fallback: "on",
    help: "Run ONNX Runtime sessions on a worker thread (on), so forwards never block the event loop; off runs them on the main thread.",
    parse: onOff,
  },
  intraOpThreads: {
    env: "TESSERA_INTRA_OP_THREADS",
    fallback: String(availableParallelism()),
    documentedDefault: "CPU count",
    help: "ONNX Runtime intra-op threads per session (default: the CPU count).",
    parse: integer(1, 1024),
  },
  executionProviders: {
    env: "TESSERA_EXECUTION_PROVIDERS",
    fallback: "cpu",
    help: "ONNX Runtime execution providers in order of preference: cpu; webgpu (any GPU with a Vulkan driver; the key/values stay on the device); or cuda,cpu where the CUDA files are installed. A models config entry's execution_providers wins.",
    parse: (raw) => {
      const names = raw
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s !== "");
      if (names.length === 0) throw new Error("must name at least one provider");
      for (const name of names) {
        if (name !== "cpu" && name !== "cuda" && name !== "webgpu") throw new Error(`unknown provider "${name}" (cpu, webgpu or cuda)`);
      }
      if (new Set(names).size !== names.length) throw new Error("names a provider twice");
      return names as ExecutionProvider[];
    },
  },
  gpuFallback: {
    env: "TESSERA_GPU_FALLBACK",
    fallback: "none",
    help: "Where a GPU provider (webgpu, cuda) cannot start (no adapter, no driver, libraries missing): none fails the model's load naming the cause and the fix; cpu runs it on the CPU and logs why.",
    parse: (raw) => {
      const value = raw.trim().toLowerCase();
      if (value !== "none" && value !== "cpu") throw new Error(`must be none or cpu, got "${raw}"`);
      return value;
    },
  },
});

export const decoding = section("Decoding", "The unmasking policy of mask models (docs/decoding.md).", {
  threshold: {
    env: "TESSERA_UNMASK_THRESHOLD",
    fallback: undefined,
    help: "Confidence of the threshold rule where the unmasking policy names none (0 < t <= 1); unset: the model's config.json decoding.threshold, else 0.9.",
    parse: (raw) => {
      const t = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(t) || t <= 0 || t > 1) throw new Error(`must be a number in (0, 1], got "${raw}"`);
      return t;
    },
  },
  unmaskPolicy: {
    env: "TESSERA_UNMASK_POLICY",
    fallback: undefined,
    help: "Unmasking policy of every model (e.g. threshold(0.9), fill(0.7)+threshold(0.9); docs/decoding.md); unset: each model's config.json decoding.policy, else threshold. A models config entry's unmask_policy wins over both.",
    parse: (raw) => {
      const spec = raw.trim();
      if (!/^[a-z-]+(\([^()]*\))?(\s*\+\s*[a-z-]+(\([^()]*\))?)*$/.test(spec)) {
        throw new Error(`must be components joined by +, each name or name(knobs), got "${raw}"`);
      }
      return spec;
    },
  },
});
