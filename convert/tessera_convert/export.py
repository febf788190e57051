"""The torch module -> model.onnx of the contract, in one of three weight formats, checked with ONNX Runtime."""

from __future__ import annotations

import os
from typing import Callable, List, Tuple

import numpy as np
import torch

from .qwen import QwenContractLM

OPSET = 17
TWO_GB = 2 * 1024**3
MASK_NEG = -1e9
WEIGHT_FORMATS = ("fp32", "fp16", "int4")
INT4_BLOCK = 32


def input_names(layers: int) -> List[str]:
    names = ["input_ids", "position_ids", "attention_mask"]
    for l in range(layers):
        names += [f"past_key_values.{l}.key", f"past_key_values.{l}.value"]
    return names


def output_names(layers: int) -> List[str]:
    names = ["logits"]
    for l in range(layers):
        names += [f"present.{l}.key", f"present.{l}.value"]
    return names


def block_causal_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, block_size: int) -> torch.Tensor:
    """Additive [B, 1, S, T]: 0 where key block <= query block, else -1e9."""
    allowed = (k_pos // block_size).unsqueeze(1) <= (q_pos // block_size).unsqueeze(2)
    return torch.where(allowed, 0.0, MASK_NEG).to(torch.float32).unsqueeze(1)


def example_inputs(model: QwenContractLM, block_size: int, batch: int, seq: int, past: int, seed: int = 0) -> Tuple[torch.Tensor, ...]:
    a = model.a
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, a.vocab_size, (batch, seq), generator=g)
    pos = torch.arange(past, past + seq).unsqueeze(0).repeat(batch, 1)
    k_pos = torch.arange(0, past + seq).unsqueeze(0).repeat(batch, 1)
    mask = block_causal_mask(pos, k_pos, block_size)
    kv = [torch.randn(batch, a.num_key_value_heads, past, a.head_dim, generator=g) for _ in range(2 * a.num_hidden_layers)]
    return (ids, pos, mask, *kv)


def export_fp32(model: QwenContractLM, block_size: int, work_dir: str):
    """Exports into ``work_dir`` (scratch: the exporter may write a file per tensor) and returns the ModelProto."""
    out_path = os.path.join(work_dir, "model.onnx")
    layers = model.a.num_hidden_layers
    ins, outs = input_names(layers), output_names(layers)
    dynamic = {
        "input_ids": {0: "batch", 1: "seq"},
        "position_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 2: "seq", 3: "total"},
        "logits": {0: "batch", 1: "seq"},
    }
    for name in ins[3:]:
        dynamic[name] = {0: "batch", 2: "past"}
    for name in outs[1:]:
        dynamic[name] = {0: "batch", 2: "total"}
    # Distinct B, S, P so that no dimension is mistaken for another while tracing.
    args = example_inputs(model, block_size, batch=2, seq=5, past=3)
    with torch.no_grad():
        torch.onnx.export(
            model.eval(), args, out_path, input_names=ins, output_names=outs, dynamic_axes=dynamic,
            opset_version=OPSET, do_constant_folding=True, dynamo=False,
        )
    import onnx

    return onnx.load(out_path)


def save(model, out_path: str, external: bool) -> None:
    """model.onnx, with every weight in model.onnx.data when ``external`` (required past 2 GB)."""
    import onnx

    data = os.path.basename(out_path) + ".data"
    if external:
        onnx.save_model(model, out_path, save_as_external_data=True, all_tensors_to_one_file=True, location=data, size_threshold=1024)
    else:
        onnx.save_model(model, out_path)


def to_fp16_weights(m) -> None:
    """Weight-only fp16: every large float initializer is stored as float16 and cast back to
    float32 by a Cast node (ONNX Runtime folds it at load), so the graph still computes in
    float32 on CPUs and the inputs/outputs keep the contract's types."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = m.graph
    casts = []
    for init in g.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) < 1024:
            continue
        arr = numpy_helper.to_array(init).astype(np.float16)
        name = init.name
        half = numpy_helper.from_array(arr, name + "_fp16")
        init.CopyFrom(half)
        casts.append(helper.make_node("Cast", [name + "_fp16"], [name], to=TensorProto.FLOAT, name=name + "_cast"))
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(casts + nodes)


def to_int4(m, progress: Callable[[str], None]):
    """Weight-only 4-bit matmuls: ONNX Runtime's MatMulNBits, symmetric, a scale per block of 32."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(m, bits=4, block_size=INT4_BLOCK, is_symmetric=True)
    q.process()
    count = sum(1 for n in q.model.model.graph.node if n.op_type == "MatMulNBits")
    progress(f"int4: {count} matmuls quantized (blocks of {INT4_BLOCK})")
    return q.model.model


def compare(model: QwenContractLM, block_size: int, onnx_path: str) -> dict:
    """ONNX Runtime against the torch module on block-causal inputs with and without a past.
    Returns the worst relative difference of logits and of presents (|a-b| / (1 + |a|))."""
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = input_names(model.a.num_hidden_layers)
    worst = {"logits": 0.0, "present": 0.0}
    for b, s, p in [(1, 2 * block_size + 1, 0), (2, block_size + 3, block_size), (1, 1, 2 * block_size + 1)]:
        args = example_inputs(model, block_size, b, s, p, seed=b * 100 + s)
        with torch.no_grad():
            ref = model.eval()(*args)
        got = sess.run(None, {n: a.numpy() for n, a in zip(names, args)})
        for i, (r, o) in enumerate(zip(ref, got)):
            if tuple(r.shape) != o.shape:
                raise RuntimeError(f"ONNX Runtime output {i} has shape {o.shape}, torch {tuple(r.shape)} (B={b} S={s} P={p})")
            diff = float(((r - torch.from_numpy(o)).abs() / (1 + r.abs())).max())
            key = "logits" if i == 0 else "present"
            worst[key] = max(worst[key], diff)
    return worst
