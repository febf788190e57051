import type { ModelEngine } from "../core/model-engine.js";
import { canvasScore } from "./canvas-score.js";
import { type CanvasEngine, canvasCountTokens, canvasGenerate } from "./canvas-service.js";

/** A canvas model (contract v3) as the service calls it (core/model-engine.ts): canvas-service.ts and canvas-score.ts behind the engine's calls. */
export function canvasModelEngine(canvas: CanvasEngine): ModelEngine {
  return {
    name: canvas.name,
    servingIds: canvas.servingIds,
    info: () => {
      const { config, decision } = canvas.model;
      return {
        maxPositions: config.maxPositions,
        blockSize: config.canvasLength,
        capabilities: { images: canvas.images !== undefined, tools: config.tools, thinking: config.thinking },
        ...(decision !== undefined ? { decision } : {}),
        slots: { total: canvas.slots.total, free: canvas.slots.free },
      };
    },
    countTokens: async (request) => (await canvasCountTokens(canvas, request)).tokens,
    generate: (request, signal) => canvasGenerate(canvas, request, signal),
    score: (request, signal) => canvasScore(canvas, request, canvas.scoreLimits, signal),
    close: () => canvas.close(),
  };
}
