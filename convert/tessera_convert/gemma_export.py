"""DiffusionGemma's graphs -> encoder.onnx + denoiser.onnx sharing one weights.onnx.data.

Each graph is exported on its own; every large initializer is then written once, by content,
into the shared data file and both graphs point at it (external data with offsets), so a weight
the two graphs share (all the layers, the embedding) is stored and mapped once.
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable, List

import numpy as np
import torch

from .export import OPSET

DATA_FILE = "weights.onnx.data"
ALIGN = 64


def encoder_input_names(layers: int) -> List[str]:
    return ["input_ids", "position_ids", "image_embeds", "full_attention_mask", "sliding_attention_mask"] + past_names(layers)


def decoder_input_names(layers: int) -> List[str]:
    return ["canvas_ids", "position_ids", "self_conditioning_embeds", "temperature", "full_attention_mask",
            "sliding_attention_mask", "logits_positions"] + past_names(layers)


def past_names(layers: int) -> List[str]:
    return [f"past_key_values.{l}.{kv}" for l in range(layers) for kv in ("key", "value")]


def present_names(layers: int) -> List[str]:
    return [f"present.{l}.{kv}" for l in range(layers) for kv in ("key", "value")]


def _past_axes(shapes, names, total: str):
    axes = {}
    for l, (t, _, _) in enumerate(shapes):
        kind = "full" if t == "full_attention" else "sliding"
        for kv in ("key", "value"):
            axes[names[2 * l + (kv == "value")]] = {0: "batch", 2: f"{kind}_{total}"}
    return axes


def _example_past(shapes, batch: int, full: int, sliding: int, g):
    out = []
    for t, kv, d in shapes:
        p = full if t == "full_attention" else sliding
        out += [torch.randn(batch, kv, p, d, generator=g) for _ in range(2)]
    return out


def export_graphs(encoder, denoiser, shapes, hidden: int, work_dir: str):
    """Exports both graphs into ``work_dir``; returns (encoder ModelProto, denoiser ModelProto)."""
    import onnx

    layers = len(shapes)
    g = torch.Generator().manual_seed(0)
    b, s, pf, ps, c = 2, 5, 7, 3, 4  # distinct sizes, so no axis is mistaken for another while tracing
    pos = torch.arange(pf, pf + s).repeat(b, 1)
    ids = torch.randint(0, 10, (b, s), generator=g)
    ids[0, 1:3] = encoder.image_token_id  # two image rows, so the scatter is traced with a real N
    enc_args = (ids, pos, torch.randn(2, hidden, generator=g), torch.zeros(b, 1, s, pf + s), torch.zeros(b, 1, s, ps + s),
                *_example_past(shapes, b, pf, ps, g))
    enc_axes = {"input_ids": {0: "batch", 1: "seq"}, "position_ids": {0: "batch", 1: "seq"}, "image_embeds": {0: "images"},
                "full_attention_mask": {0: "batch", 2: "seq", 3: "full_total"},
                "sliding_attention_mask": {0: "batch", 2: "seq", 3: "sliding_total"}}
    enc_axes.update(_past_axes(shapes, past_names(layers), "past"))
    enc_axes.update(_past_axes(shapes, present_names(layers), "total"))
    cpos = torch.arange(pf, pf + c).repeat(b, 1)
    heads = torch.tensor([[0, 3, 1], [2, 0, 3]])  # K = 3 positions of the c = 4, so K is traced as its own axis
    dec_args = (torch.randint(0, 10, (b, c), generator=g), cpos, torch.randn(b, c, hidden, generator=g), torch.ones(b),
                torch.zeros(b, 1, c, pf + c), torch.zeros(b, 1, c, ps + c), heads, *_example_past(shapes, b, pf, ps, g))
    dec_axes = {"canvas_ids": {0: "batch", 1: "canvas"}, "position_ids": {0: "batch", 1: "canvas"},
                "self_conditioning_embeds": {0: "batch", 1: "canvas"}, "temperature": {0: "batch"},
                "full_attention_mask": {0: "batch", 2: "canvas", 3: "full_total"},
                "sliding_attention_mask": {0: "batch", 2: "canvas", 3: "sliding_total"},
                "logits_positions": {0: "batch", 1: "positions"},
                "logits": {0: "batch", 1: "positions"}, "next_self_conditioning_embeds": {0: "batch", 1: "positions"}}
    dec_axes.update(_past_axes(shapes, past_names(layers), "past"))
    out = []
    for name, module, args, ins, outs, axes in (
        ("encoder", encoder, enc_args, encoder_input_names(layers), present_names(layers), enc_axes),
        ("denoiser", denoiser, dec_args, decoder_input_names(layers), ["logits", "next_self_conditioning_embeds"], dec_axes),
    ):
        path = os.path.join(work_dir, f"{name}.onnx")
        with torch.no_grad():
            torch.onnx.export(module.eval(), args, path, input_names=ins, output_names=outs, dynamic_axes=axes,
                              opset_version=OPSET, do_constant_folding=True, dynamo=False)
        out.append(onnx.load(path))
    return out[0], out[1]


def save_shared(models: dict, out_dir: str, threshold: int = 1024) -> int:
    """Writes ``{file name: ModelProto}`` into ``out_dir`` with their large initializers in one
    shared data file, each distinct tensor once. Returns (the data file's size, the bytes the
    graphs' external weights would take unshared)."""
    import onnx
    from onnx import external_data_helper as edh

    data_path = os.path.join(out_dir, DATA_FILE)
    offsets = {}
    unshared = 0
    with open(data_path, "wb") as data:
        for name, model in models.items():
            for init in model.graph.initializer:
                if init.data_location == onnx.TensorProto.EXTERNAL:
                    raise RuntimeError(f"{name}: initializer {init.name} is already external")
                raw = onnx.numpy_helper.to_array(init).tobytes() if not init.raw_data else init.raw_data
                if len(raw) < threshold:
                    continue
                unshared += len(raw)
                key = (init.data_type, hashlib.sha256(raw).hexdigest())
                if key not in offsets:
                    pad = (-data.tell()) % ALIGN
                    data.write(b"\0" * pad)
                    offsets[key] = data.tell()
                    data.write(raw)
                for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
                    init.ClearField(field)
                init.raw_data = raw
                edh.set_external_data(init, DATA_FILE, offset=offsets[key], length=len(raw))
                init.ClearField("raw_data")
                init.data_location = onnx.TensorProto.EXTERNAL
            onnx.save_model(model, os.path.join(out_dir, name))
        size = data.tell()
    return size, unshared


def quantize(model, weights: str, progress: Callable[[str], None]):
    from .export import to_fp16_weights, to_int4

    if weights == "fp16":
        to_fp16_weights(model)
        return model
    if weights == "int4":
        return to_int4(model, progress)
    return model


def graph_bytes(out_dir: str) -> int:
    return sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".onnx") or f == DATA_FILE)


__all__ = ["export_graphs", "save_shared", "quantize", "encoder_input_names", "decoder_input_names", "np"]
