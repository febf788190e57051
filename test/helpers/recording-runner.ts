import type { ForwardFetch, ForwardInputs, ForwardRunner } from "../../services/inference/decoder/forward.js";

export interface RecordedForward {
  batch: number;
  seq: number;
  past: number;
  fetch: ForwardFetch;
  failed: boolean;
  ms: number;
}

/** Wraps a runner, recording the shape of every forward; `fail` decides which ones throw. */
export function recordingRunner(
  inner: ForwardRunner,
  fail: (inputs: ForwardInputs) => boolean = () => false,
): ForwardRunner & { forwards: RecordedForward[] } {
  const forwards: RecordedForward[] = [];
  return {
    forwards,
    async run(inputs, fetch) {
      const record: RecordedForward = {
        batch: inputs.batch,
        seq: inputs.seq,
        past: inputs.past,
        fetch,
        failed: false,
        ms: 0,
      };
      forwards.push(record);
      if (fail(inputs)) {
        record.failed = true;
        throw new Error("injected model failure");
      }
      const started = performance.now();
      const out = await inner.run(inputs, fetch);
      record.ms = performance.now() - started;
      return out;
    },
  };
}
