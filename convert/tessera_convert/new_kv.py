"""The `present_new.*` outputs (docs/model-contract.md, "New key/values"): each layer's key and
value of the forward's own S positions, `[B, H_kv, S, D]`, beside `present.*` = concat(past,
current). The engine fetches these instead of `present.*` when a model has them, so a forward that
writes the cache brings back S positions rather than the whole past again (an autoregressive
step at 1.7B and 512 positions: 0.23 MB instead of 117 MB)."""

from __future__ import annotations

from typing import List

NEW_PREFIX = "present_new"


def new_output_names(layers: int) -> List[str]:
    return [f"{NEW_PREFIX}.{l}.{kv}" for l in range(layers) for kv in ("key", "value")]


def add_new_kv_outputs(graph_path: str, layers: int, out_path: str = "") -> None:
    """Adds `present_new.{l}.key|value` to the graph at ``graph_path`` (the exported graph,
    before its weights are attached; or a converted model.onnx, its external data left where it
    is), written to ``out_path`` (default: in place): each is an Identity of the current
    positions' input of the Concat that makes `present.{l}.*` (its first input is
    `past_key_values.{l}.*`), so the values are those `present.*` holds at its last S slots, to
    the bit. Raises if the graph does not have that form."""
    import onnx
    from onnx import TensorProto, helper

    m = onnx.load(graph_path, load_external_data=False)
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    outputs = {o.name: o for o in g.output}
    for l in range(layers):
        for kv in ("key", "value"):
            full = f"present.{l}.{kv}"
            node = producer.get(full)
            if node is None or node.op_type != "Concat" or len(node.input) != 2 or node.input[0] != f"past_key_values.{l}.{kv}":
                raise RuntimeError(f"{full} is not Concat(past_key_values.{l}.{kv}, current) in the exported graph")
            new = f"{NEW_PREFIX}.{l}.{kv}"
            g.node.append(helper.make_node("Identity", [node.input[1]], [new], name=f"{new}_identity"))
            dims = outputs[full].type.tensor_type.shape.dim
            shape = [d.dim_param or d.dim_value for d in dims]
            if len(shape) == 4:
                shape[2] = "seq"
            g.output.append(helper.make_tensor_value_info(new, TensorProto.FLOAT, shape if len(shape) == 4 else None))
    onnx.save(m, out_path or graph_path)


def check_new_kv(outputs: dict, layers: int, seq: int) -> None:
    """A converted model's `present_new.*` (ONNX Runtime's outputs by name) must equal the last
    ``seq`` slots of `present.*` exactly: the engine's cache is built from them."""
    import numpy as np

    for name in new_output_names(layers):
        full = outputs[name.replace(f"{NEW_PREFIX}.", "present.", 1)]
        new = outputs.get(name)
        if new is None or new.shape != full[:, :, full.shape[2] - seq :].shape or not np.array_equal(new, full[:, :, full.shape[2] - seq :]):
            raise RuntimeError(f"{name} is not the last {seq} slots of its present")
