"""--weights int4, one weight at a time: every MatMul with a constant 2-D float weight becomes
ONNX Runtime's MatMulNBits (com.microsoft), written without holding the model in memory.

Per MatMul (A @ W, W [K, N] float32): MatMulNBits(A, W_Q4, W_scales; K, N, bits=4, block_size=32),
W_Q4 uint8 [N, K/32, 16] (two weights a byte), W_scales float32 [N, K/32], symmetric (no zero
points). Each weight is quantized by the routine MatMulNBitsQuantizer itself calls
(DefaultWeightOnlyQuantizer.qbits_block_quant, ONNX Runtime's C++ block quantizer), so the bytes
are those of ONNX Runtime's quantizer. That quantizer loads the whole model and keeps copies:
an estimated 17 GB for SDAR-1.7B, whose fp32 weights are 8 GB. The embedding's Gather and a tied
head's Gemm stay float32, as they do there.
"""

from __future__ import annotations

import numpy as np

from .quantize_int8 import rewrite_weight_matmuls

INT4_BLOCK = 32


def block_quantizer(block_size: int = INT4_BLOCK):
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, DefaultWeightOnlyQuantizer

    return DefaultWeightOnlyQuantizer(DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=True, bits=4))


def to_int4_streamed(src: str, dst: str, external: bool, block_size: int = INT4_BLOCK) -> int:
    """Writes ``dst`` from ``src`` (fp32); returns how many MatMuls were quantized."""
    import onnx
    from onnx import helper

    quantizer = block_quantizer(block_size)

    def rewrite(n, weight, io):
        b = weight.name
        w = io.read(weight)
        k, cols = w.shape
        packed, scales, _zero_points = quantizer.qbits_block_quant(np.array(w, dtype=np.float32))  # a writable copy
        del w
        made_inits = [io.tensor(f"{b}_Q4", packed), io.tensor(f"{b}_scales", scales)]
        del packed
        node = helper.make_node(
            "MatMulNBits", [n.input[0], f"{b}_Q4", f"{b}_scales"], [n.output[0]],
            name=f"{n.name}_Q4" if n.name else "", domain="com.microsoft",
            K=k, N=cols, bits=4, block_size=block_size,
        )
        return [node], made_inits

    m, count = rewrite_weight_matmuls(src, dst, external, rewrite)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save_model(m, dst)
    return count
