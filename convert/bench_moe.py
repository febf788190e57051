"""Dense experts (what gemma_graphs.py exports) against ONNX Runtime's com.microsoft.MoE, one
DiffusionGemma expert block in isolation: ms per call (median of 30, one intra-op thread) and the
worst difference from the exact block (transformers' formula: softmax router, top k, renormalised,
x per_expert_scale, gelu_tanh(gate) * up, down), and the MoE op's difference from that block with
its own sigmoid gate (which shows the routing and layout are right and the activation is the gap).

MoE has no gated gelu-tanh: its nearest activation is swiglu, G * sigmoid(alpha G) * (L + beta),
used here with alpha = 2 sqrt(2 / pi) (gelu_tanh(x) = x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)),
so only the cubic term is lost). per_expert_scale is folded into the down projections.

    convert/.venv/bin/python convert/bench_moe.py
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

SHAPES = [("tiny model (H 64, I 32, E 4, top 2)", 64, 32, 4, 2), ("wider (H 512, I 256, E 32, top 4)", 512, 256, 32, 4)]


def exact(x, logits, gate_up, down, scale, k, sigmoid_gate=False):
    probs = torch.softmax(logits, -1)
    w, idx = torch.topk(probs, k, -1)
    w = w / w.sum(-1, keepdim=True) * scale[idx]
    out = torch.zeros_like(x)
    for j in range(k):
        gu = torch.einsum("nh,noh->no", x, gate_up[idx[:, j]])
        i = gu.shape[-1] // 2
        g_ = gu[:, :i]
        gated = g_ * torch.sigmoid(2 * math.sqrt(2 / math.pi) * g_) if sigmoid_gate else torch.nn.functional.gelu(g_, approximate="tanh")
        act = gated * gu[:, i:]
        out += w[:, j : j + 1] * torch.einsum("ni,nhi->nh", act, down[idx[:, j]])
    return out


class Dense(torch.nn.Module):
    def __init__(self, gate_up, down, scale, k):
        super().__init__()
        e, two_i, h = gate_up.shape
        self.e, self.i, self.k = e, two_i // 2, k
        self.register_buffer("gu", gate_up.permute(2, 0, 1).reshape(h, e * two_i).clone())
        self.register_buffer("dn", down.permute(0, 2, 1).reshape(e * self.i, h).clone())
        self.register_buffer("scale", scale.clone())

    def forward(self, x, logits):
        probs = torch.softmax(logits, -1)
        w, idx = torch.topk(probs, self.k, -1)
        w = w / w.sum(-1, keepdim=True) * self.scale[idx]
        weights = torch.zeros_like(probs).scatter(-1, idx, w)
        gu = torch.matmul(x, self.gu).reshape(x.shape[0], self.e, 2 * self.i)
        act = torch.nn.functional.gelu(gu[..., : self.i], approximate="tanh") * gu[..., self.i :]
        return torch.matmul((act * weights.unsqueeze(-1)).reshape(x.shape[0], -1), self.dn)


def moe_model(gate_up, down, scale, k, path):
    e, two_i, h = gate_up.shape
    folded = (down * scale[:, None, None]).numpy()
    i = two_i // 2
    # ONNX Runtime's CPU MoE takes fused SwiGLU interleaved only: rows g0, l0, g1, l1, ...
    interleaved = torch.stack([gate_up[:, :i], gate_up[:, i:]], dim=2).reshape(e, two_i, h)
    node = helper.make_node("MoE", ["input", "router_probs", "fc1", "", "fc2"], ["output"], domain="com.microsoft", k=k,
                            activation_type="swiglu", swiglu_fusion=1, activation_alpha=2 * math.sqrt(2 / math.pi),
                            activation_beta=0.0, normalize_routing_weights=1)
    graph = helper.make_graph(
        [node], "moe",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", h]),
         helper.make_tensor_value_info("router_probs", TensorProto.FLOAT, ["n", e])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", h])],
        [numpy_helper.from_array(interleaved.numpy(), "fc1"), numpy_helper.from_array(folded, "fc2")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=9)
    onnx.save(m, path)


def timed(sess, feeds):
    for _ in range(3):
        sess.run(None, feeds)
    ts = []
    for _ in range(30):
        t = time.perf_counter()
        sess.run(None, feeds)
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts)


def main() -> None:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    work = tempfile.mkdtemp()
    g = torch.Generator().manual_seed(0)
    for label, h, i, e, k in SHAPES:
        gate_up = torch.randn(e, 2 * i, h, generator=g) * 0.1
        down = torch.randn(e, h, i, generator=g) * 0.1
        scale = 1 + torch.rand(e, generator=g)
        dense_path, moe_path = os.path.join(work, "dense.onnx"), os.path.join(work, "moe.onnx")
        dense = Dense(gate_up, down, scale, k).eval()
        x0, l0 = torch.randn(5, h), torch.randn(5, e)
        torch.onnx.export(dense, (x0, l0), dense_path, input_names=["input", "router_probs"], output_names=["output"],
                          dynamic_axes={"input": {0: "n"}, "router_probs": {0: "n"}, "output": {0: "n"}}, opset_version=17, dynamo=False)
        moe_model(gate_up, down, scale, k, moe_path)
        sd = ort.InferenceSession(dense_path, opts, providers=["CPUExecutionProvider"])
        sm = ort.InferenceSession(moe_path, opts, providers=["CPUExecutionProvider"])
        for n in (16, 256):
            x, logits = torch.randn(n, h, generator=g) * 2, torch.randn(n, e, generator=g)
            ref = exact(x, logits, gate_up, down, scale, k)
            feeds = {"input": x.numpy(), "router_probs": logits.numpy()}
            err = lambda out: float((np.abs(ref.numpy() - out) / (1 + np.abs(ref.numpy()))).max())  # noqa: E731
            ed, em = err(sd.run(None, feeds)[0]), err(sm.run(None, feeds)[0])
            approx = exact(x, logits, gate_up, down, scale, k, sigmoid_gate=True).numpy()
            routing = float((np.abs(approx - sm.run(None, feeds)[0]) / (1 + np.abs(approx))).max())
            td, tm = timed(sd, feeds), timed(sm, feeds)
            print(f"{label}, {n} tokens: dense {td:.3f} ms (error {ed:.1e}), MoE op {tm:.3f} ms (error {em:.1e}; "
                  f"{routing:.1e} against the same block with its sigmoid gate), dense/MoE {td / tm:.2f}x")


if __name__ == "__main__":
    main()
