import type { CanvasDraws } from "../../services/inference/decoder/canvas/canvas-decoder.js";

/** The canvas sampler's random draws, passed through and logged in order (to replay them in a reference). */
export function recordingDraws(inner: CanvasDraws, log: [string, number[]][]): CanvasDraws {
  return {
    noise: (n, v) => {
      const x = inner.noise(n, v);
      log.push(["noise", Array.from(x)]);
      return x;
    },
    uniforms: (n) => {
      const x = inner.uniforms(n);
      log.push(["uniforms", Array.from(x)]);
      return x;
    },
  };
}
