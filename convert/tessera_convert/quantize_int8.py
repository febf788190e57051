"""--weights int8, one weight at a time: every MatMul with a constant 2-D weight becomes ONNX
Runtime's dynamic-quantization pattern, written without holding the model in memory.

Per MatMul (A @ W, W [K, N] float32):
    A_q, a_scale, a_zp = DynamicQuantizeLinear(A)        (uint8, per tensor, at run time; one per A)
    Y = Cast(MatMulInteger(A_q, W_q, a_zp, W_zp)) * (a_scale * W_scale)
with W_q int8 [K, N], W_scale float32 [N] = max|W[:, n]| / 127 (symmetric, per output channel)
and W_zp int8 zeros [N]. This is the graph onnxruntime.quantization.quantize_dynamic writes
(per_channel=True, QInt8); ONNX Runtime fuses it into DynamicQuantizeMatMul, whose kernels use
the CPU's int8 dot-product units. quantize_dynamic itself loads the whole model and keeps
copies: 19 GB and an out-of-memory kill for SDAR-1.7B, whose fp32 weights are 8 GB.
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

ALIGN = 65536


class Weights:
    """Reads initializers from a model's file or its external data, and writes them to another."""

    def __init__(self, src_path: str, dst_path: str, external: bool) -> None:
        self.src_dir = os.path.dirname(src_path)
        self.dst_name = os.path.basename(dst_path) + ".data"
        self.out = open(os.path.join(os.path.dirname(dst_path), self.dst_name), "wb") if external else None
        self.files: dict = {}

    def read_bytes(self, t) -> bytes:
        import onnx

        if t.data_location != onnx.TensorProto.EXTERNAL:
            from onnx import numpy_helper

            return numpy_helper.to_array(t).tobytes()
        info = {e.key: e.value for e in t.external_data}
        f = self.files.get(info["location"])
        if f is None:
            f = self.files[info["location"]] = open(os.path.join(self.src_dir, info["location"]), "rb")
        f.seek(int(info.get("offset", 0)))
        return f.read(int(info["length"]))

    def read(self, t) -> np.ndarray:
        from onnx import helper

        dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
        return np.frombuffer(self.read_bytes(t), dtype=dtype).reshape(tuple(t.dims))

    def tensor(self, name: str, arr: np.ndarray):
        from onnx import helper, numpy_helper

        if self.out is None or arr.nbytes < 1024:
            return numpy_helper.from_array(np.ascontiguousarray(arr), name)
        import onnx

        t = onnx.TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(arr.dtype), dims=list(arr.shape))
        pos = self.out.tell()
        if pos % ALIGN:
            self.out.write(b"\0" * (ALIGN - pos % ALIGN))
        offset = self.out.tell()
        self.out.write(memoryview(np.ascontiguousarray(arr)).cast("B"))
        t.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.dst_name), ("offset", str(offset)), ("length", str(arr.nbytes))):
            e = t.external_data.add()
            e.key, e.value = key, value
        return t

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        if self.out is not None:
            self.out.close()


def rewrite_weight_matmuls(src: str, dst: str, external: bool, rewrite, skip: Iterable[str] = ()):
    """``src``'s graph (fp32) with every MatMul of a float 2-D initializer weight replaced by what
    ``rewrite(node, weight, io)`` returns (its nodes and new initializers, written through ``io``),
    one weight at a time; a weight nothing else reads is dropped, the other initializers pass
    through (external ones rewritten). Returns the model (not yet saved to ``dst``) and how many
    MatMuls were replaced."""
    import onnx

    m = onnx.load(src, load_external_data=False)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    readers: dict = {}
    for n in g.node:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    skip = set(skip)
    io = Weights(src, dst, external)
    nodes, new_inits, consumed = [], [], set()
    count = 0
    try:
        for n in g.node:
            b = n.input[1] if n.op_type == "MatMul" and len(n.input) == 2 else None
            if b is None or b not in inits or len(inits[b].dims) != 2 or n.name in skip or inits[b].data_type != onnx.TensorProto.FLOAT:
                nodes.append(n)
                continue
            count += 1
            made_nodes, made_inits = rewrite(n, inits[b], io)
            nodes += made_nodes
            new_inits += made_inits
            if readers[b] == 1:
                consumed.add(b)
        kept = []
        for t in g.initializer:
            if t.name in consumed:
                continue
            kept.append(io.tensor(t.name, io.read(t)) if t.data_location == onnx.TensorProto.EXTERNAL else t)
    finally:
        io.close()
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.value_info[:]
    return m, count


def quantize_weight(w: np.ndarray):
    """Symmetric int8 per output channel (column) of W [K, N]."""
    scale = (np.abs(w).max(axis=0) / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale


def to_int8_streamed(src: str, dst: str, external: bool, exclude: Iterable[str] = ()) -> int:
    """Writes ``dst`` from ``src`` (fp32); returns how many MatMuls were quantized."""
    import onnx
    from onnx import helper

    dql: dict = {}

    def rewrite(n, weight, io):
        b = weight.name
        q, scale = quantize_weight(io.read(weight))
        base = f"{b}_int8"
        made_inits = [io.tensor(base + "_quantized", q), io.tensor(base + "_scale", scale),
                      io.tensor(base + "_zero_point", np.zeros(scale.shape, np.int8))]
        del q
        made_nodes = []
        a = n.input[0]
        if a not in dql:
            dql[a] = (f"{a}_quantized", f"{a}_scale", f"{a}_zero_point")
            made_nodes.append(helper.make_node("DynamicQuantizeLinear", [a], list(dql[a]), name=f"{a}_QuantizeLinear"))
        aq, ascale, azp = dql[a]
        name = n.name or n.output[0]
        made_nodes += [
            helper.make_node("Mul", [ascale, base + "_scale"], [f"{name}_scales"], name=f"{name}_quant_scales_mul"),
            helper.make_node("MatMulInteger", [aq, base + "_quantized", azp, base + "_zero_point"], [f"{name}_int32"], name=f"{name}_quant"),
            helper.make_node("Cast", [f"{name}_int32"], [f"{name}_float"], name=f"{name}_cast", to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [f"{name}_float", f"{name}_scales"], [n.output[0]], name=f"{name}_quant_output_scale_mul"),
        ]
        return made_nodes, made_inits

    m, count = rewrite_weight_matmuls(src, dst, external, rewrite, exclude)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 10 for o in m.opset_import):
        raise RuntimeError(f"{src}: opset below 10 has no MatMulInteger")
    onnx.save_model(m, dst)
    return count
