/** Defaults of a Score request's limits, the same for mask models (score/score.ts) and canvas models (canvas/canvas-score.ts). */

/** Default of the cap on a Score request's work (TESSERA_MAX_DECISION_WORK_TOKENS). */
export const DEFAULT_MAX_SCORE_WORK_TOKENS = 8192;
/**
 * Default of the cap on one forward of a Score request (TESSERA_MAX_DECISION_ROW_TOKENS): the
 * longest a generation step waits behind a decision is one forward of this many row tokens (a
 * ~1,800-token row of a 128-option question in one forward held the bundled model for 1.5–20 s
 * on 2 shared cores). Longer rows are prefilled in chunks of this (score/score.ts), so it bounds a
 * forward, not a question.
 */
export const DEFAULT_MAX_SCORE_ROW_TOKENS = 1024;
