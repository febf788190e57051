// Host<->device bytes per denoising step of a canvas model, from the decoder's transfer
// counters: one row, one canvas, by pass. On the CPU provider the counters give what a GPU
// provider would move with every tensor on the host (logits and self-conditioning downloaded,
// past key/values and masks uploaded each step: the path before canvas-device.ts); on WebGPU
// what it moves now. Run the WebGPU half where a Vulkan adapter is, e.g. SwiftShader:
//   npx tsx bench/canvas-transfer.ts MODEL_DIR cpu
//   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json LD_LIBRARY_PATH=/usr/lib/chromium \
//     npx tsx bench/canvas-transfer.ts MODEL_DIR webgpu
import { CanvasDecoder, seededDraws } from "../services/inference/decoder/canvas/canvas-decoder.js";
import { loadCanvasModel } from "../services/inference/decoder/canvas/canvas-model.js";
import type { ForwardTransfer } from "../services/inference/decoder/forward.js";

const [dir, provider = "cpu"] = process.argv.slice(2);
if (dir === undefined || (provider !== "cpu" && provider !== "webgpu")) {
  console.error("usage: npx tsx bench/canvas-transfer.ts MODEL_DIR [cpu|webgpu]");
  process.exit(2);
}
const model = await loadCanvasModel(dir, { executionProviders: [provider], intraOpThreads: 1 });
const passes: { pass: string; t: ForwardTransfer }[] = [];
const decoder = new CanvasDecoder(model, 8, (t, pass) => passes.push({ pass, t: structuredClone(t) }));
const promptIds = model.tokenizer.encode(
  model.renderChat({ messages: [{ role: "user", content: "Hello! How are you today?" }], add_generation_prompt: true }),
);
await decoder.generate({ promptIds, maxTokens: model.config.canvasLength, draws: seededDraws(7) });
const total = (t: ForwardTransfer) => ({ up: t.toDevice.kv + t.toDevice.other, down: t.toHost.kv + t.toHost.other });
const steps = passes.filter((p) => p.pass === "denoiser");
const { config } = model;
console.log(
  JSON.stringify({
    provider: model.executionProviders[0],
    shape: { canvas: config.canvasLength, vocab: config.vocabSize, hidden: config.hiddenSize, prompt: promptIds.length },
    encoder: total(passes.find((p) => p.pass === "encoder")!.t),
    firstStep: { ...total(steps[0]!.t), detail: steps[0]!.t },
    laterStep: steps.length > 1 ? { ...total(steps[1]!.t), detail: steps[1]!.t } : null,
    steps: steps.length,
  }),
);
await model.close();
