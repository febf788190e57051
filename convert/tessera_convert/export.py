"""The torch module -> model.onnx of the contract, in one of three weight formats, checked with ONNX Runtime."""

from __future__ import annotations

import os
from typing import Callable, Tuple

import numpy as np
import torch

from .contract import dynamic_axes, input_names, output_names
from .new_kv import check_new_kv
from .quantize_int4 import INT4_BLOCK
from .qwen import QwenContractLM

OPSET = 17
TWO_GB = 2 * 1024**3
MASK_NEG = -1e9
WEIGHT_FORMATS = ("fp32", "fp16", "int8", "int4")


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


def export_fp32(model: QwenContractLM, block_size: int, work_dir: str) -> str:
    """Exports the graph alone into ``work_dir`` and returns its path: every weight is a graph
    input named as in the state dict (attach_weights turns them into initializers). Exporting
    the weights with the graph held them three times over (the module, the constant-folded
    transposes, the serialized protobuf): 17 GB at 1.7B parameters, against the module's 6.9."""
    out_path = os.path.join(work_dir, "graph.onnx")
    layers = model.a.num_hidden_layers
    ins, outs = input_names(layers), output_names(layers)
    dynamic = dynamic_axes(layers)
    # Distinct B, S, P so that no dimension is mistaken for another while tracing.
    args = example_inputs(model, block_size, batch=2, seq=5, past=3)
    with torch.no_grad():
        torch.onnx.export(
            model.eval(), args, out_path, input_names=ins, output_names=outs, dynamic_axes=dynamic,
            opset_version=OPSET, do_constant_folding=False, export_params=False, dynamo=False,
        )
    return out_path


def attach_weights(graph_path: str, model: QwenContractLM, out_path: str, external: bool) -> None:
    """Writes ``out_path``: the exported graph with the module's weights as initializers, one
    weight at a time (into model.onnx.data when ``external``). A weight read only through a
    2-D Transpose (every Linear) is stored transposed instead, as constant folding would have
    stored it, so that each MatMul has a constant B for ONNX Runtime's kernels and quantizers."""
    import onnx
    m = onnx.load(graph_path)
    g = m.graph
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    user = set(input_names(model.a.num_hidden_layers))
    weights = [i.name for i in g.input if i.name not in user]
    unknown = [w for w in weights if w not in tensors]
    if unknown:
        raise RuntimeError(f"the exported graph has inputs that are not weights of the module: {unknown[:3]}")
    consumers: dict = {}
    for n in g.node:
        for x in n.input:
            consumers.setdefault(x, []).append(n)
    folded = {}  # transpose output -> weight name
    for w in weights:
        for n in consumers.get(w, []):
            perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), [1, 0])
            if n.op_type == "Transpose" and tensors[w].dim() == 2 and perm == [1, 0]:
                folded[n.output[0]] = w
    drop = set(folded)
    keep_nodes = [n for n in g.node if not (n.op_type == "Transpose" and n.output[0] in drop)]
    still_read = {x for n in keep_nodes for x in n.input}
    del g.node[:]
    g.node.extend(keep_nodes)
    kept_inputs = [i for i in g.input if i.name in user]
    del g.input[:]
    g.input.extend(kept_inputs)

    data_name = os.path.basename(out_path) + ".data"
    out = open(os.path.join(os.path.dirname(out_path), data_name), "wb") if external else None
    try:
        def add(name: str, t: torch.Tensor) -> None:
            arr = t.detach().to(torch.float32).contiguous().numpy()  # a copy only for a transposed weight
            init = onnx.TensorProto(name=name, data_type=onnx.TensorProto.FLOAT, dims=list(arr.shape))
            if out is not None and arr.nbytes >= 1024:
                offset = pad_to(out, ALIGN)
                out.write(memoryview(arr).cast("B"))  # no bytes copy: an embedding is 1.2 GB at 1.7B
                init.data_location = onnx.TensorProto.EXTERNAL
                for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(arr.nbytes))):
                    entry = init.external_data.add()
                    entry.key, entry.value = key, value
            else:
                init.raw_data = arr.tobytes()
            g.initializer.append(init)

        for w in weights:
            if w in still_read:
                add(w, tensors[w])
        for name, w in folded.items():
            add(name, tensors[w].t())
    finally:
        if out is not None:
            out.close()
    onnx.save_model(m, out_path)


# Weights in model.onnx.data start on 64 KiB boundaries: ONNX Runtime then maps them from the
# file instead of reading them onto its heap (it maps only aligned offsets), so a session holds
# one copy of the weights (its prepacked kernels' own), not the file's bytes besides.
ALIGN = 65536


def pad_to(f, align: int) -> int:
    pos = f.tell()
    if pos % align:
        f.write(b"\0" * (align - pos % align))
    return f.tell()


def align_external_data(path: str) -> None:
    """Rewrites model.onnx.data (as a quantizer saved it) with every weight aligned (ALIGN),
    one weight at a time."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    base = os.path.dirname(path)
    tensors = [t for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if not tensors:
        return
    infos = [{e.key: e.value for e in t.external_data} for t in tensors]
    names = {i["location"] for i in infos}
    if len(names) != 1:
        raise RuntimeError(f"{path}: weights in {len(names)} files; expected one")
    location = names.pop()
    src = os.path.join(base, location)
    tmp = src + ".aligning"
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        for t, info in zip(tensors, infos):
            fin.seek(int(info.get("offset", 0)))
            data = fin.read(int(info["length"]))
            offset = pad_to(fout, ALIGN)
            fout.write(data)
            del data
            for e in t.external_data:
                if e.key == "offset":
                    e.value = str(offset)
            if "offset" not in info:
                entry = t.external_data.add()
                entry.key, entry.value = "offset", str(offset)
    os.replace(tmp, src)
    onnx.save_model(m, path)


def load(path: str):
    """The ModelProto with every weight in memory (external data read in)."""
    import onnx

    return onnx.load(path, load_external_data=True)


def save(model, out_path: str, external: bool) -> None:
    """model.onnx, with every weight in model.onnx.data when ``external`` (required past 2 GB)."""
    import onnx

    data = os.path.basename(out_path) + ".data"
    if external:
        onnx.save_model(model, out_path, save_as_external_data=True, all_tensors_to_one_file=True, location=data, size_threshold=1024)
        align_external_data(out_path)
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


def to_int8(src: str, dst: str, external: bool, exclude: tuple = ()) -> int:
    """8-bit weights per output channel (symmetric), activations quantized at run time: ONNX
    Runtime's dynamic quantization of every MatMul with a constant weight (the lm head too; the
    embedding's Gather stays float32), written one weight at a time (quantize_int8.py). Its
    kernels use the CPU's int8 dot-product units."""
    from .quantize_int8 import to_int8_streamed

    return to_int8_streamed(src, dst, external, exclude)


def reference_outputs(model: QwenContractLM, block_size: int) -> list:
    """The torch module's outputs on block-causal inputs with and without a past, computed
    before export so that the module can be freed before ONNX Runtime loads the model."""
    cases = []
    for b, s, p in [(1, 2 * block_size + 1, 0), (2, block_size + 3, block_size), (1, 1, 2 * block_size + 1)]:
        args = example_inputs(model, block_size, b, s, p, seed=b * 100 + s)
        with torch.no_grad():
            ref = model.eval()(*args)
        cases.append(([a.numpy() for a in args], [r.numpy() for r in ref]))
    return cases


def compare(cases: list, layers: int, onnx_path: str) -> dict:
    """ONNX Runtime against the reference outputs: the worst difference relative to 1 + |x| of
    logits and of presents, the relative RMS error of the logits, and the share of rows whose
    greedy token agrees."""
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = input_names(layers)
    worst = {"logits": 0.0, "present": 0.0}
    err2 = ref2 = 0.0
    agree = rows = 0
    out_names = [o.name for o in sess.get_outputs()]
    for args, ref in cases:
        got = sess.run(None, dict(zip(names, args)))
        check_new_kv(dict(zip(out_names, got)), layers, args[0].shape[1])
        for i, (r, o) in enumerate(zip(ref, got)):
            if r.shape != o.shape:
                raise RuntimeError(f"ONNX Runtime output {i} has shape {o.shape}, torch {r.shape}")
            diff = float((np.abs(r - o) / (1 + np.abs(r))).max())
            key = "logits" if i == 0 else "present"
            worst[key] = max(worst[key], diff)
            if i == 0:
                err2 += float(((r - o) ** 2).sum())
                ref2 += float((r**2).sum())
                agree += int((r.argmax(-1) == o.argmax(-1)).sum())
                rows += r.shape[0] * r.shape[1]
    return {**worst, "logits_rel_rms": (err2 / ref2) ** 0.5, "greedy_agreement": agree / rows}
