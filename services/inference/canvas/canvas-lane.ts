import type { Lane } from "../decoder/fair-runner.js";

/** The last model call queued in each lane (its failure already caught). */
const tails = new WeakMap<Lane, Promise<unknown>>();

/**
 * Runs a canvas decision's model call (an encoder pass, a readout forward) once every earlier
 * call of its lane has ended: a canvas model has no fair runner, so the decisions of one client
 * (decision-share.ts gives them one lane) take turns, one forward at a time, and together get
 * the model time one decision would, whatever their number.
 */
export function inLane<T>(lane: Lane, call: () => Promise<T>): Promise<T> {
  const turn = (tails.get(lane) ?? Promise.resolve()).then(call);
  tails.set(
    lane,
    turn.catch(() => undefined),
  );
  return turn;
}
