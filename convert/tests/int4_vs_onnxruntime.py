"""python convert/tests/int4_vs_onnxruntime.py <fp32 model.onnx> <scratch dir>

The converter's int4 (quantize_int4.py, one weight at a time) against ONNX Runtime's whole-model
MatMulNBitsQuantizer on the same fp32 file: prints JSON with both matmul counts, whether the
initializers (names and bytes) and the MatMulNBits nodes (inputs, outputs, attributes) are the
same, and the largest difference of their outputs on one input.
"""

import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from tessera_convert.export import load, to_int4
from tessera_convert.quantize_int4 import to_int4_streamed


def nbits_nodes(m):
    return sorted((tuple(n.input), tuple(n.output), tuple(sorted((a.name, helper.get_attribute_value(a)) for a in n.attribute)))
                  for n in m.graph.node if n.op_type == "MatMulNBits")


def feeds(sess):
    rng = np.random.default_rng(0)
    dims = {"batch": 1, "seq": 5, "past": 3, "total": 8}
    out = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else dims[d] for d in i.shape]
        out[i.name] = rng.integers(0, 100, shape) if "int" in i.type else rng.standard_normal(shape).astype(np.float32)
    out["position_ids"] = np.arange(3, 8)[None]
    out["attention_mask"] = np.zeros((1, 1, 5, 8), np.float32)
    return out


def main() -> None:
    src, scratch = sys.argv[1], sys.argv[2]
    ours_path, theirs_path = os.path.join(scratch, "streamed.onnx"), os.path.join(scratch, "onnxruntime.onnx")
    count = to_int4_streamed(src, ours_path, False)
    theirs = to_int4(load(src), lambda _m: None)
    onnx.save_model(theirs, theirs_path)
    ours = onnx.load(ours_path)
    a = {t.name: numpy_helper.to_array(t) for t in ours.graph.initializer}
    b = {t.name: numpy_helper.to_array(t) for t in theirs.graph.initializer}
    s1, s2 = ort.InferenceSession(ours_path), ort.InferenceSession(theirs_path)
    f = feeds(s1)
    diff = max(float(np.abs(x - y).max()) for x, y in zip(s1.run(None, f), s2.run(None, f)))
    print(json.dumps({
        "count": count,
        "onnxruntime_count": len(nbits_nodes(theirs)),
        "same_initializers": a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a),
        "same_nodes": nbits_nodes(ours) == nbits_nodes(theirs),
        "max_output_difference": diff,
    }))


if __name__ == "__main__":
    main()
