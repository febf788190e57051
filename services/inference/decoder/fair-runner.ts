import type { ForwardFetch, ForwardInputs, ForwardOutputs, ForwardRunner } from "./forward.js";

/**
 * Whose work a forward is: the generation step loop has one lane, every Score request its own.
 * Any object will do; lanes are compared by identity.
 */
export type Lane = object;

/** A runner that takes the lane of each forward (fairRunner). */
export interface LaneRunner extends ForwardRunner {
  run(inputs: ForwardInputs, fetch: ForwardFetch, lane?: Lane): Promise<ForwardOutputs>;
}

/**
 * The work of a forward, in units of one token's own work (about that of attending to 1,024
 * keys for the models here; score-plan.ts uses the same model): every row token attends to the
 * past and to the row.
 */
export function forwardWork(inputs: Pick<ForwardInputs, "batch" | "seq" | "past">): number {
  return (inputs.batch * inputs.seq * (1024 + inputs.past + inputs.seq)) / 1024;
}

interface Waiting {
  lane: Lane;
  work: number;
  start: () => Promise<ForwardOutputs>;
  resolve: (out: ForwardOutputs) => void;
  reject: (err: unknown) => void;
}

/**
 * One forward at a time per model (ONNX Runtime already uses every core for one run), shared
 * fairly between lanes by start-time fair queueing on the forwards' work: each lane's virtual
 * time advances by the work of its forwards, and the next forward is the waiting one whose lane
 * is furthest behind. So a generation step (64 tokens a row) waits behind at most one readout
 * forward of a decision, however many that decision has, and the step loop gets as much model
 * time as a decision does. Before each pick the runner lets the lane that just finished queue
 * its next forward (one turn of the event loop), so a lane that always has work keeps its share.
 */
export function fairRunner(runner: ForwardRunner): LaneRunner {
  const waiting: Waiting[] = [];
  const finishOf = new WeakMap<Lane, number>();
  const defaultLane: Lane = {};
  let clock = 0;
  let busy = false;

  const next = () => {
    if (busy || waiting.length === 0) return;
    busy = true;
    setImmediate(() => {
      let best = 0;
      let bestTag = Number.POSITIVE_INFINITY;
      waiting.forEach((w, i) => {
        const tag = Math.max(finishOf.get(w.lane) ?? 0, clock);
        if (tag < bestTag) {
          bestTag = tag;
          best = i;
        }
      });
      const job = waiting.splice(best, 1)[0]!;
      clock = bestTag;
      finishOf.set(job.lane, bestTag + job.work);
      let running: Promise<ForwardOutputs>;
      try {
        running = job.start();
      } catch (err) {
        running = Promise.reject(err);
      }
      running.then(job.resolve, job.reject).finally(() => {
        busy = false;
        next();
      });
    });
  };

  return {
    run(inputs, fetch, lane = defaultLane) {
      return new Promise<ForwardOutputs>((resolve, reject) => {
        waiting.push({ lane, work: forwardWork(inputs), start: () => runner.run(inputs, fetch), resolve, reject });
        next();
      });
    },
  };
}
