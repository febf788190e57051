"""The tensor names and dynamic axes of the ONNX model contract (docs/model-contract.md), for
every exporter of a contract model: tessera_convert (export.py) and training/model/export_onnx.py,
which puts convert/ on its path to import this module. No torch here: names only."""

from __future__ import annotations

from typing import Dict, List


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


def dynamic_axes(layers: int) -> Dict[str, Dict[int, str]]:
    """torch.onnx.export's dynamic_axes: B, S and P (past) vary, total = P + S."""
    dynamic = {
        "input_ids": {0: "batch", 1: "seq"},
        "position_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 2: "seq", 3: "total"},
        "logits": {0: "batch", 1: "seq"},
    }
    for name in input_names(layers)[3:]:
        dynamic[name] = {0: "batch", 2: "past"}
    for name in output_names(layers)[1:]:
        dynamic[name] = {0: "batch", 2: "total"}
    return dynamic
