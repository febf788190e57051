import { readFileSync } from "node:fs";
import path from "node:path";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import ort from "onnxruntime-node";
const P = 640;
if (isMainThread) {
  const dir = process.argv[2];
  const cfg = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8"));
  const L = cfg.num_hidden_layers, H = cfg.num_key_value_heads, D = cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads;
  const w = new Worker(new URL(import.meta.url), { workerData: { dir, L, H, D }, execArgv: ["--import", "tsx"] });
  const per = H * P * D;
  let store = new ArrayBuffer(L * 2 * per * 4);
  new Float32Array(store).fill(0.01);
  const call = (msg, transfer) => new Promise((res) => { w.once("message", res); w.postMessage(msg, transfer); });
  await call({ kind: "ready" }, []);
  const res = { lent: [], parked: [] };
  for (let i = 0; i < 10; i++) {
    for (const mode of ["lent", "parked"]) {
      const s = performance.now();
      const slot = new Float32Array(L * 2 * H * D).fill(0.02);
      const r = await call({ kind: mode, buf: mode === "lent" ? store : undefined, slot }, mode === "lent" ? [store] : []);
      if (mode === "lent") store = r.buf;
      res[mode].push(Math.round(performance.now() - s));
    }
  }
  console.log(JSON.stringify(res));
  await w.terminate();
} else {
  const { dir, L, H, D } = workerData;
  const session = await ort.InferenceSession.create(path.join(dir, "model.onnx"), { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: "all" });
  const per = H * P * D;
  const kept = new ArrayBuffer(L * 2 * per * 4);
  new Float32Array(kept).fill(0.01);
  const outs = session.outputNames.filter((n) => n === "logits" || n.startsWith("present_new"));
  const run = async (buf) => {
    const f = {
      input_ids: new ort.Tensor("int64", BigInt64Array.from([100n]), [1, 1]),
      position_ids: new ort.Tensor("int64", BigInt64Array.from([BigInt(P)]), [1, 1]),
      attention_mask: new ort.Tensor("float32", new Float32Array(P + 1), [1, 1, 1, P + 1]),
    };
    for (let l = 0; l < L; l++) for (const [k, kind] of ["key", "value"].entries()) f[`past_key_values.${l}.${kind}`] = new ort.Tensor("float32", new Float32Array(buf, (l * 2 + k) * per * 4, per), [1, H, P, D]);
    return session.run(f, outs);
  };
  parentPort.on("message", async (m) => {
    if (m.kind === "ready") { await run(kept); parentPort.postMessage({}); return; }
    const buf = m.kind === "lent" ? m.buf : kept;
    const out = await run(buf);
    const t = [];
    const o = {};
    for (const [n, v] of Object.entries(out)) { o[n] = (v).data; t.push(((v).data).buffer); }
    if (m.kind === "lent") t.push(buf);
    parentPort.postMessage({ buf: m.kind === "lent" ? buf : undefined, o }, t);
  });
}
