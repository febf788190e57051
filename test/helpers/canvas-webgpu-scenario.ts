// The canvas decode loop on the WebGPU provider (SwiftShader) beside the CPU's, run in a child
// process by services/inference/decoder/canvas/canvas-webgpu.test.ts (the Vulkan loader is found
// through LD_LIBRARY_PATH, read only when a process starts). Two rows batched, two canvases
// each, logprobs on, the same seeded draws, and a decision's readout; on both providers. Prints one JSON line.
import { diffusionGemmaFixture } from "../convert/diffusion-gemma-fixture.js";
import { CanvasDecoder, type CanvasResult, seededDraws } from "../../services/inference/decoder/canvas/canvas-decoder.js";
import { type CanvasModel, loadCanvasModel } from "../../services/inference/decoder/canvas/canvas-model.js";
import { FirstTokenReadout } from "../../services/inference/decoder/canvas/canvas-readout.js";
import type { CommittedLogprob } from "../../services/inference/decoder/logprobs.js";

const fx = await diffusionGemmaFixture();
const prompts = ["Hello! How are you today?", "Name three colours."];

async function decode(executionProviders: ("cpu" | "webgpu")[], maxBatch = 8) {
  const model: CanvasModel = await loadCanvasModel(fx.model, { executionProviders, intraOpThreads: 1 });
  // A few steps a canvas keep the run short on SwiftShader (the schedule follows the same count on both).
  model.config.sampler.maxDenoisingSteps = 4;
  const decoder = new CanvasDecoder(model, maxBatch);
  const logprobs: CommittedLogprob[][] = prompts.map(() => []);
  const results: CanvasResult[] = await Promise.all(
    prompts.map((text, i) =>
      decoder.generate({
        promptIds: model.tokenizer.encode(model.renderChat({ messages: [{ role: "user", content: text }], add_generation_prompt: true })),
        maxTokens: model.config.canvasLength + 4,
        draws: seededDraws(11 + i),
        logprobs: { top: 2 },
        onCanvas: (c) => {
          logprobs[i]!.push(...(c.logprobs ?? []));
          return undefined;
        },
      }),
    ),
  );
  // A decision's readout (canvas-readout.ts): p(token) at canvas position 0 over the fixed noise canvases.
  let readout: number[] = [];
  const reader = new FirstTokenReadout(model, { maxForwardTokens: 4 * model.config.canvasLength });
  await reader.add({
    cache: await decoder.encodePrompt(model.tokenizer.encode("The answer is")),
    tokens: [5, 26, 324],
    done: (p) => {
      readout = p;
    },
  });
  await reader.flush();
  const out = {
    providers: model.executionProviders,
    tokens: results.map((r) => r.tokens),
    steps: results.map((r) => r.steps),
    logprobs: logprobs.map((l) => l.map((x) => [x.token, x.logprob, ...x.top.map((t) => t.token)])),
    forwards: decoder.stats.forwards,
    readout,
    transfer: decoder.stats.transfer,
  };
  await model.close();
  return out;
}

const cpu = await decode(["cpu"]);
const webgpu = await decode(["webgpu"]);
// One row a forward, round robin: each step's batch is not the last one's (the self-conditioning comes back to the host).
const alternating = await decode(["webgpu"], 1);
console.log(JSON.stringify({ cpu, webgpu, alternating }));
