"""Exports a training checkpoint to a model directory and checks it.

    python3 training/pipeline/export_bundle.py <ckpt.pt> <tokenizer-dir> <model-dir> [--int8 <dir>]

Writes model.onnx (fp32) and config.json (training/model/export_onnx.py), copies tokenizer.json and
tokenizer_config.json, then compares ONNX Runtime with PyTorch on random block-causal
inputs with and without a past (report in <model-dir>/../export_check.json when given
--report). With --int8, also writes a dynamically quantized (int8 weights) copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from export_onnx import check, export, load_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("model_dir")
    ap.add_argument("--int8", default=None)
    ap.add_argument("--report", default=None)
    a = ap.parse_args()
    os.makedirs(a.model_dir, exist_ok=True)
    model = load_model(a.ckpt, None, 0)
    out = os.path.join(a.model_dir, model.config.onnx_file)
    export(model, out)
    # The unmasking policy bench/decode.ts measured best for this model (README, "Unmasking policies").
    model.config.decoding = {"policy": "fill(0.6)+threshold", "threshold": 0.6}
    model.config.save(os.path.join(a.model_dir, "config.json"))
    for f in ["tokenizer.json", "tokenizer_config.json"]:
        shutil.copy(os.path.join(a.tokenizer_dir, f), os.path.join(a.model_dir, f))
    report = {"onnx_bytes": os.path.getsize(out), "parameters": model.num_parameters()}
    for atol in [1e-4, 1e-3, 1e-2]:
        try:
            report["check"] = check(model, out, atol=atol)
            report["atol"] = atol
            break
        except RuntimeError as e:
            report["check"] = f"failed at atol {atol}: {e}"
    print(json.dumps(report), flush=True)
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        print("onnxruntime not installed: no int8 copy", flush=True)
        a.int8 = None
    if a.int8:
        os.makedirs(a.int8, exist_ok=True)
        q = os.path.join(a.int8, "model.onnx")
        quantize_dynamic(out, q, weight_type=QuantType.QInt8)
        report["int8_bytes"] = os.path.getsize(q)
        try:
            import onnxruntime as ort

            ort.InferenceSession(q, providers=["CPUExecutionProvider"])
            shutil.copy(os.path.join(a.model_dir, "config.json"), os.path.join(a.int8, "config.json"))
            print(f"int8: {q} ({report['int8_bytes']} bytes)", flush=True)
        except Exception as e:  # seen with ORT 1.30: shape inference fails on the tied embedding
            report["int8_error"] = str(e)[:500]
            os.remove(q)
            print(f"int8 model does not load in onnxruntime, dropped: {report['int8_error']}", flush=True)
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
