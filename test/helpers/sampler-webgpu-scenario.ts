// The canvas sampler graph on the WebGPU provider (SwiftShader), run in a child process by
// services/inference/decoder/canvas/graph-sampler-webgpu.test.ts (the Vulkan loader is found
// through LD_LIBRARY_PATH, read only when a process starts). The logits reach the sampler as a
// device tensor (an Identity graph's gpu-buffer output, as a denoiser on WebGPU would leave
// them); what comes back is compared with the JS reference in the parent. Prints one JSON line.
import * as ort from "onnxruntime-node";
import { GraphSampler } from "../../services/inference/decoder/canvas/graph-sampler.js";
import { processRow, seededRandom } from "../../services/inference/decoder/canvas/sampler.js";
import { downloadGraph } from "../../services/inference/onnx/onnx-kv-graphs.js";

const C = 16;
const V = 3000;
const random = seededRandom(3);
const logits = Float32Array.from({ length: C * V }, () => (random() - 0.5) * 12);
const uniforms = Float64Array.from({ length: C }, random);
const temperature = Math.fround(0.8);

const upload = await ort.InferenceSession.create(downloadGraph(), {
  executionProviders: ["webgpu"],
  preferredOutputLocation: { out: "gpu-buffer" },
});
const onDevice = (await upload.run({ x: new ort.Tensor("float32", logits, [1, C, V]) })).out!;
const sampler = await GraphSampler.create(V, { executionProviders: ["webgpu"] });
const got = await sampler.processRow(onDevice, C, temperature, uniforms);
const want = processRow(logits, C, V, temperature, uniforms);
const location = onDevice.location;
onDevice.dispose();
await sampler.release();
await upload.release();
console.log(
  JSON.stringify({
    location,
    argmax: [Array.from(got.argmax), Array.from(want.argmax)],
    sample: [Array.from(got.sample), Array.from(want.sample)],
    entropy: [Array.from(got.entropy), Array.from(want.entropy)],
  }),
);
