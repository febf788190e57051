"""Dense against sparse experts (gemma_graphs.py) in a whole DiffusionGemma denoiser forward, on
tiny-but-wide random checkpoints with the 26B-A4B's expert count and top k (128 experts, top 8)
and its 256-position canvas, in one run: ms per forward (median, one intra-op thread, batch 1,
a 64-token prompt's KV), each graph's worst difference from transformers (the converter's
self-check, fp32), and the ms each spends in its experts, from which the 26B-A4B's figures are
projected by FLOPs (the rate each formulation reached at the widest size measured here).

    convert/.venv/bin/python convert/bench_experts.py [--widths 64x32x4x2,64x32x8x2,256x64,512x128] [--layers 3] [--block-experts 16]

Peak memory about 2 GB at 512x128 (three layers of 128 experts, the exporter's copies).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tessera_convert.gemma_check import check, ort_driver  # noqa: E402
from tessera_convert.gemma_export import export_graphs  # noqa: E402
from tessera_convert.gemma_graphs import GemmaDenoiserGraph, GemmaEncoderGraph, layer_shapes  # noqa: E402

CANVAS, PROMPT, EXPERTS, TOP_K, VOCAB = 256, 64, 128, 8, 512
# google/diffusiongemma-26B-A4B-it's text config (hidden, layers, MLP, expert MLP, heads, vocabulary).
REAL = {"hidden": 2816, "layers": 30, "intermediate": 2112, "moe": 704, "heads": 16, "kv": 8, "head_dim": 256,
        "vocab": 262144}


def make_model(hidden: int, moe: int, layers: int, experts: int = EXPERTS, top_k: int = TOP_K):
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    text = dict(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=3 * moe, num_hidden_layers=layers,
                num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4, global_head_dim=hidden // 2,
                num_global_key_value_heads=1, sliding_window=1024,
                layer_types=["full_attention"] + ["sliding_attention"] * (layers - 2) + ["full_attention"], num_experts=experts,
                top_k_experts=top_k, moe_intermediate_size=moe, max_position_embeddings=4096, pad_token_id=0,
                eos_token_id=1, bos_token_id=2)
    vision = dict(model_type="gemma4_vision", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=16, patch_size=4, pooling_kernel_size=2, position_embedding_size=64)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=CANVAS, boi_token_id=3,
                               eoi_token_id=4, image_token_id=5)
    torch.manual_seed(0)
    return DiffusionGemmaForBlockDiffusion(cfg).eval()


def feeds(shapes, hidden: int, names):
    g = np.random.default_rng(0)
    f = {"canvas_ids": g.integers(0, VOCAB, (1, CANVAS), dtype=np.int64),
         "position_ids": np.arange(PROMPT, PROMPT + CANVAS, dtype=np.int64)[None],
         "self_conditioning_embeds": np.zeros((1, CANVAS, hidden), np.float32), "temperature": np.array([0.8], np.float32),
         "full_attention_mask": np.zeros((1, 1, CANVAS, PROMPT + CANVAS), np.float32),
         "sliding_attention_mask": np.zeros((1, 1, CANVAS, PROMPT + CANVAS), np.float32)}
    for l, (_, kv, d) in enumerate(shapes):
        for j in ("key", "value"):
            f[f"past_key_values.{l}.{j}"] = g.standard_normal((1, kv, PROMPT, d)).astype(np.float32)
    if "logits_positions" in names:
        f["logits_positions"] = np.arange(CANVAS, dtype=np.int64)[None]
    return f


def expert_flops(tokens: int, experts: int, hidden: int, moe: int, layers: int) -> float:
    return 2 * tokens * experts * 3 * hidden * moe * layers


def alternating(sessions: dict, f: dict, runs: int) -> dict:
    """ms per run of each session (median), the sessions taking turns so that load on the
    machine falls on all of them alike."""
    ts = {k: [] for k in sessions}
    for k, sess in sessions.items():
        sess.run(None, f[k])
    for _ in range(runs):
        for k, sess in sessions.items():
            t = time.perf_counter()
            sess.run(None, f[k])
            ts[k].append((time.perf_counter() - t) * 1000)
    return {k: statistics.median(v) for k, v in ts.items()}


def forward_row(hidden: int, moe: int, layers: int, runs: int, opts, experts: int = EXPERTS, top_k: int = TOP_K) -> None:
    """Whole denoiser forwards, dense and sparse, on a tiny-but-wide checkpoint."""
    import onnxruntime as ort

    model = make_model(hidden, moe, layers, experts, top_k)
    text = model.config.text_config
    shapes = layer_shapes(text, model.model.encoder.language_model.layers)
    sessions, errs, work = {}, {}, []
    try:
        for kind in ("dense", "sparse"):
            w = tempfile.mkdtemp()
            work.append(w)
            export_graphs(GemmaEncoderGraph(model, kind), GemmaDenoiserGraph(model, kind), shapes, hidden, w)
            errs[kind] = max(check(model, ort_driver(os.path.join(w, "encoder.onnx"), os.path.join(w, "denoiser.onnx"), shapes,
                                                     text.sliding_window, hidden), 70).values())
            sessions[kind] = ort.InferenceSession(os.path.join(w, "denoiser.onnx"), opts, providers=["CPUExecutionProvider"])
        f = {k: feeds(shapes, hidden, [i.name for i in s.get_inputs()]) for k, s in sessions.items()}
        ms = alternating(sessions, f, runs)
    finally:
        for w in work:
            shutil.rmtree(w, ignore_errors=True)
    print(f"denoiser forward, H {hidden}, expert I {moe}, {layers} layers, {experts} experts top {top_k}, canvas {CANVAS}: "
          f"dense {ms['dense']:.1f} ms (check {errs['dense']:.1e}), sparse {ms['sparse']:.1f} ms (check {errs['sparse']:.1e}), "
          f"dense / sparse {ms['dense'] / ms['sparse']:.2f}x", flush=True)


class _Router(torch.nn.Module):
    def __init__(self, e: int, k: int, h: int) -> None:
        super().__init__()
        self.eps, self.scalar_root_size = 1e-6, h**-0.5
        self.proj = torch.nn.Linear(h, e, bias=False)
        self.scale = torch.nn.Parameter(torch.ones(h))
        self.per_expert_scale = torch.nn.Parameter(1 + torch.rand(e))
        self.config = type("C", (), {"top_k_experts": k})()


class _Experts(torch.nn.Module):
    def __init__(self, e: int, h: int, i: int) -> None:
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(e, 2 * i, h) * h**-0.5)
        self.down_proj = torch.nn.Parameter(torch.randn(e, h, i) * i**-0.5)


def block_row(experts: int, top_k: int, runs: int, opts) -> dict:
    """One expert block alone at the 26B-A4B's width (H 2816, expert I 704) over a 256-token
    canvas, with `experts` of its experts and top `top_k`: ms per call of each formulation."""
    import onnxruntime as ort
    from transformers.activations import ACT2FN

    from tessera_convert.gemma_graphs import EXPERTS as FORMS

    torch.manual_seed(0)
    h, i = REAL["hidden"], REAL["moe"]
    router, weights = _Router(experts, top_k, h), _Experts(experts, h, i)
    x = torch.randn(CANVAS, h)
    sessions, work = {}, tempfile.mkdtemp()
    try:
        ref = None
        for kind, cls in FORMS.items():
            block = cls(router, weights, ACT2FN["gelu_pytorch_tanh"]).eval()
            path = os.path.join(work, f"{kind}.onnx")
            with torch.no_grad():
                out = block(x, x)
                torch.onnx.export(block, (x[:5], x[:5]), path, input_names=["x_route", "x_expert"], output_names=["y"],
                                  dynamic_axes={"x_route": {0: "n"}, "x_expert": {0: "n"}, "y": {0: "n"}}, opset_version=17,
                                  dynamo=False)
            ref = out if ref is None else ref
            sessions[kind] = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            got = sessions[kind].run(None, {"x_route": x.numpy(), "x_expert": x.numpy()})[0]
            err = float((np.abs(ref.numpy() - got) / (1 + np.abs(ref.numpy()))).max())
            print(f"  {kind}: worst difference from the dense torch block {err:.1e}", flush=True)
        f = {"x_route": x.numpy(), "x_expert": x.numpy()}
        ms = alternating(sessions, {k: f for k in sessions}, runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"expert block at the 26B's width (H {h}, I {i}), {experts} experts top {top_k} "
          f"({CANVAS * top_k / experts:.0f} tokens per expert on average), {CANVAS} tokens: dense {ms['dense']:.1f} ms, "
          f"sparse {ms['sparse']:.1f} ms, dense / sparse {ms['dense'] / ms['sparse']:.2f}x", flush=True)
    return ms


def main() -> None:
    import onnxruntime as ort

    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="64x32x4x2,64x32x8x2,256x64,512x128",
                    help="hidden x expert intermediate [x experts x top k] (default 128 x 8), comma separated")
    ap.add_argument("--layers", type=int, default=3, help="at least 3: full, sliding..., full")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--block-experts", type=int, default=16, help="experts of the 26B-width block (its top k keeps 16 tokens per expert)")
    a = ap.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    for width in a.widths.split(","):
        hidden, moe, *ek = (int(x) for x in width.split("x"))
        forward_row(hidden, moe, a.layers, a.runs, opts, *ek)
    # 26B-A4B: 128 experts top 8 over 256 positions is 16 tokens per expert; a block of E' of its
    # experts at top E' / 16 keeps that, and both formulations' cost grows linearly in E.
    e = a.block_experts
    ms = block_row(e, max(1, e * TOP_K // EXPERTS), a.runs, opts)
    scale = EXPERTS / e * REAL["layers"]
    print(f"26B-A4B, experts of one denoising step (canvas {CANVAS}, {REAL['layers']} layers, one thread here): "
          f"dense {ms['dense'] * scale / 1000:.1f} s, sparse {ms['sparse'] * scale / 1000:.1f} s "
          f"({expert_flops(CANVAS, EXPERTS, REAL['hidden'], REAL['moe'], REAL['layers']) / 1e12:.1f} and "
          f"{expert_flops(CANVAS, TOP_K, REAL['hidden'], REAL['moe'], REAL['layers']) / 1e12:.2f} TFLOP)")


if __name__ == "__main__":
    main()
