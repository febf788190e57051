import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** The inference engine's Prometheus metrics, registered on the registry passed in. */
export interface EngineMetrics {
  /** phase: `prefill` (prompt or Score prefix blocks), `denoise` (generation steps), `score` (Score readouts). */
  forwardPasses: Counter<"model" | "phase">;
  generatedTokens: Counter<"model">;
  slotsBusy: Gauge<"model">;
  requestDuration: Histogram<"model">;
  timeToFirstBlock: Histogram<"model">;
  /** Positions committed by each denoising forward, by model and unmasking policy. */
  committedPerForward: Histogram<"model" | "policy">;
  /** Denoising forwards each block took (a reply's last block: until it finished), by model and policy. */
  forwardsPerBlock: Histogram<"model" | "policy">;
  /** Grammar-constrained decoding (grammar/): requests by kind, forced tokens, compile and step time. */
  constrainedRequests: Counter<"model" | "kind">;
  constrainedReplies: Counter<"model" | "finish_reason">;
  loopGuardInterventions: Counter<"model" | "rule">;
  jumpForwardTokens: Counter<"model">;
  grammarCompileSeconds: Histogram<"model">;
  grammarStepSeconds: Histogram<"model">;
  /** Bytes between host and device memory (GPU providers only), by direction and kind (`kv`: past/present key/values). */
  hostDeviceBytes: Counter<"model" | "direction" | "kind">;
  /** Bytes one forward moved between host and device memory, by direction. */
  forwardTransferBytes: Histogram<"model" | "direction">;
  /** Device memory held by key/value caches, batched pasts and presents not yet stored (WebGPU). */
  deviceKVBytes: Gauge<"model">;
}

const BYTE_BUCKETS = [0, 1024, 16_384, 262_144, 1_048_576, 16_777_216, 67_108_864, 268_435_456, 1_073_741_824];

const GRAMMAR_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

const COUNT_BUCKETS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64];
const LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** Creates the metrics, or returns the ones already registered under the same names. */
export function engineMetrics(registry: Registry): EngineMetrics {
  const reuse = <M>(name: string, make: () => M): M => (registry.getSingleMetric(name) as M | undefined) ?? make();
  return {
    forwardPasses: reuse(
      "tessera_forward_passes_total",
      () =>
        new Counter({
          name: "tessera_forward_passes_total",
          help: "Model forward passes, by model and phase (prefill, denoise, score).",
          labelNames: ["model", "phase"],
          registers: [registry],
        }),
    ),
    generatedTokens: reuse(
      "tessera_generated_tokens_total",
      () =>
        new Counter({
          name: "tessera_generated_tokens_total",
          help: "Reply tokens generated (after trimming), by model.",
          labelNames: ["model"],
          registers: [registry],
        }),
    ),
    slotsBusy: reuse(
      "tessera_generation_slots_busy",
      () =>
        new Gauge({
          name: "tessera_generation_slots_busy",
          help: "Generation slots in use, by model.",
          labelNames: ["model"],
          registers: [registry],
        }),
    ),
    requestDuration: reuse(
      "tessera_inference_request_duration_seconds",
      () =>
        new Histogram({
          name: "tessera_inference_request_duration_seconds",
          help: "Time from a Generate request's arrival (queue wait included) to its last event, by model.",
          labelNames: ["model"],
          buckets: LATENCY_BUCKETS,
          registers: [registry],
        }),
    ),
    timeToFirstBlock: reuse(
      "tessera_time_to_first_block_seconds",
      () =>
        new Histogram({
          name: "tessera_time_to_first_block_seconds",
          help: "Time from a Generate request's arrival to its first committed block, by model.",
          labelNames: ["model"],
          buckets: LATENCY_BUCKETS,
          registers: [registry],
        }),
    ),
    committedPerForward: reuse(
      "tessera_committed_tokens_per_forward",
      () =>
        new Histogram({
          name: "tessera_committed_tokens_per_forward",
          help: "Block positions committed by one denoising forward, by model and unmasking policy.",
          labelNames: ["model", "policy"],
          buckets: COUNT_BUCKETS,
          registers: [registry],
        }),
    ),
    forwardsPerBlock: reuse(
      "tessera_forwards_per_block",
      () =>
        new Histogram({
          name: "tessera_forwards_per_block",
          help: "Denoising forwards a generation block took (a reply's last block: until it finished), by model and unmasking policy.",
          labelNames: ["model", "policy"],
          buckets: COUNT_BUCKETS,
          registers: [registry],
        }),
    ),
    constrainedRequests: reuse(
      "tessera_constrained_requests_total",
      () =>
        new Counter({
          name: "tessera_constrained_requests_total",
          help: "Generations decoded under a grammar, by model and kind (json_schema, json_object, tool_arguments, tool_calls).",
          labelNames: ["model", "kind"],
          registers: [registry],
        }),
    ),
    constrainedReplies: reuse(
      "tessera_constrained_replies_total",
      () =>
        new Counter({
          name: "tessera_constrained_replies_total",
          help: "Generations decoded under a grammar that finished, by model and finish reason (stop, tool_calls, length).",
          labelNames: ["model", "finish_reason"],
          registers: [registry],
        }),
    ),
    loopGuardInterventions: reuse(
      "tessera_loop_guard_interventions_total",
      () =>
        new Counter({
          name: "tessera_loop_guard_interventions_total",
          help: "Guesses inside constrained values changed to make them end, by model and rule (loop: a repeat masked; budget: closing favoured past a length budget).",
          labelNames: ["model", "rule"],
          registers: [registry],
        }),
    ),
    jumpForwardTokens: reuse(
      "tessera_jump_forward_tokens_total",
      () =>
        new Counter({
          name: "tessera_jump_forward_tokens_total",
          help: "Reply tokens the grammar forced, committed without reading the model (jump-forward), by model.",
          labelNames: ["model"],
          registers: [registry],
        }),
    ),
    grammarCompileSeconds: reuse(
      "tessera_grammar_compile_seconds",
      () =>
        new Histogram({
          name: "tessera_grammar_compile_seconds",
          help: "Time to compile a grammar (a new schema or tool set; cached ones are not compiled again), by model.",
          labelNames: ["model"],
          buckets: GRAMMAR_BUCKETS,
          registers: [registry],
        }),
    ),
    grammarStepSeconds: reuse(
      "tessera_grammar_step_seconds",
      () =>
        new Histogram({
          name: "tessera_grammar_step_seconds",
          help: "Grammar time per constrained denoising step (masks, guesses, jump-forward), by model.",
          labelNames: ["model"],
          buckets: GRAMMAR_BUCKETS,
          registers: [registry],
        }),
    ),
    hostDeviceBytes: reuse(
      "tessera_host_device_bytes_total",
      () =>
        new Counter({
          name: "tessera_host_device_bytes_total",
          help: "Bytes moved between host and device memory by forwards on a GPU provider, by model, direction (to_device, to_host) and kind (kv: key/values; other).",
          labelNames: ["model", "direction", "kind"],
          registers: [registry],
        }),
    ),
    forwardTransferBytes: reuse(
      "tessera_forward_transfer_bytes",
      () =>
        new Histogram({
          name: "tessera_forward_transfer_bytes",
          help: "Bytes one forward on a GPU provider moved between host and device memory, by model and direction.",
          labelNames: ["model", "direction"],
          buckets: BYTE_BUCKETS,
          registers: [registry],
        }),
    ),
    deviceKVBytes: reuse(
      "tessera_device_kv_bytes",
      () =>
        new Gauge({
          name: "tessera_device_kv_bytes",
          help: "Device memory held by key/value caches (and batched pasts and presents not yet stored) of a model on WebGPU.",
          labelNames: ["model"],
          registers: [registry],
        }),
    ),
  };
}

/** Bytes one forward moved between host and device memory, by direction and kind (a decoder/forward.ts ForwardTransfer). */
export interface TransferBytes {
  toDevice: { kv: number; other: number };
  toHost: { kv: number; other: number };
}

/** One forward's host<->device bytes on the transfer counters (mask and canvas models alike). */
export function recordTransfer(metrics: EngineMetrics, model: string, t: TransferBytes): void {
  metrics.hostDeviceBytes.inc({ model, direction: "to_device", kind: "kv" }, t.toDevice.kv);
  metrics.hostDeviceBytes.inc({ model, direction: "to_device", kind: "other" }, t.toDevice.other);
  metrics.hostDeviceBytes.inc({ model, direction: "to_host", kind: "kv" }, t.toHost.kv);
  metrics.hostDeviceBytes.inc({ model, direction: "to_host", kind: "other" }, t.toHost.other);
  metrics.forwardTransferBytes.observe({ model, direction: "to_device" }, t.toDevice.kv + t.toDevice.other);
  metrics.forwardTransferBytes.observe({ model, direction: "to_host" }, t.toHost.kv + t.toHost.other);
}
