/**
 * Session options that make ONNX Runtime flush denormals on the threads it starts for a session
 * (its intra-op pool). The thread that runs `session.run` is set only through onnx-host.ts.
 */
export const FLUSH_DENORMALS = { session: { set_denormal_as_zero: "1" } } as const;

/**
 * Whether this thread flushes denormal floats to zero: with the modes set, a denormal read
 * from text is 0. The text is parsed at run time, so no compiler folds the test with its own
 * arithmetic.
 */
export function threadFlushesDenormals(): boolean {
  return !(Number(`1e-${310}`) > 0);
}
