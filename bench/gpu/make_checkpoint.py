"""A mid-size random checkpoint in SDAR's layout, converted to a Tessera model directory.

    python3 bench/gpu/make_checkpoint.py <work-dir> [--hidden 1024 --layers 12 --intermediate 3072]

Writes <work-dir>/ckpt (safetensors, the tiny tokenizer) and <work-dir>/model (the converted
ONNX model directory, fp32, the model contract) for bench/gpu/run.sh. Random weights: the
figures it gives are speeds, not answers. Defaults: ~170 M parameters, 12 layers, 8 KV heads of
64 (24 KiB of fp32 key/values per token), 4,096+ positions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "convert"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=3072)
    a = ap.parse_args()
    import make_tiny_checkpoints as mk
    from safetensors.torch import save_file
    from tessera_convert.__main__ import convert

    ckpt = os.path.join(a.work, "ckpt")
    mk.make_sdar(ckpt)
    cfg_path = os.path.join(ckpt, "config.json")
    cfg = json.load(open(cfg_path))
    cfg.update(
        hidden_size=a.hidden,
        num_hidden_layers=a.layers,
        intermediate_size=a.intermediate,
        num_attention_heads=a.hidden // 64,
        num_key_value_heads=max(1, a.hidden // 128),
        head_dim=64,
        max_position_embeddings=8192,
    )
    json.dump(cfg, open(cfg_path, "w"))
    for f in os.listdir(ckpt):
        if f.endswith(".safetensors") or f.endswith(".index.json"):
            os.remove(os.path.join(ckpt, f))
    save_file(mk.weights(cfg, qk_norm=True, bias=False, seed=3), os.path.join(ckpt, "model.safetensors"), metadata={"format": "pt"})
    report = convert(ckpt, os.path.join(a.work, "model"), 64, "fp32", "auto", True)
    print(json.dumps({"parameters": report["parameters"], "onnx_bytes": report["onnx_bytes"]}))


if __name__ == "__main__":
    main()
