"""tessera convert <checkpoint-dir> <model-dir> [--block-size N] [--weights fp32|fp16|int4]

Reads a Hugging Face SDAR or Fast-dLLM v2 checkpoint directory as published and writes a model
directory of Tessera's contract (docs/model-contract.md, version 2); a DiffusionGemma one
(model_type "diffusion_gemma") gets contract version 3 (encoder.onnx + denoiser.onnx). The directory is written
beside the destination under a temporary name and renamed when complete, so a failed or
interrupted conversion never leaves a half-written model directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from .errors import ConvertError

TWO_GB = 2 * 1024**3


def progress(message: str) -> None:
    print(f"[convert {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def convert(ckpt_dir: str, out_dir: str, block_size, weights: str, external: str, force: bool) -> dict:
    from .checkpoint import weight_files
    from .families import read_checkpoint

    ckpt_dir = os.path.abspath(ckpt_dir)
    out_dir = os.path.abspath(out_dir)
    if not os.path.isdir(ckpt_dir):
        raise ConvertError(f"{ckpt_dir}: not a directory")
    if os.path.exists(out_dir) and not force:
        raise ConvertError(f"{out_dir}: already exists (remove it, or pass --force to replace it)")
    from .checkpoint import read_json

    if read_json(os.path.join(ckpt_dir, "config.json")).get("model_type") == "diffusion_gemma":
        from . import diffusion_gemma

        return diffusion_gemma.convert(ckpt_dir, out_dir, weights, force, progress)
    ck = read_checkpoint(ckpt_dir, block_size)
    for note in ck.notes:
        progress(f"note: {note}")
    a = ck.arch
    progress(f"{ck.family.label}: {a.num_hidden_layers} layers, hidden {a.hidden_size}, heads {a.num_attention_heads}/{a.num_key_value_heads}"
             f" x {a.head_dim}, vocab {a.vocab_size}, block {ck.block_size}, mask {ck.mask_token_id}, stops {ck.stop_token_ids}")
    files = weight_files(ckpt_dir)

    import torch

    from .checkpoint import load_state_dict
    from .export import compare, export_fp32, save, to_fp16_weights, to_int4
    from .model_dir import config_json, decision_json, model_card, tokenizer_files, write_json
    from .qwen import QwenContractLM

    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.converting-", dir=parent)
    work = tempfile.mkdtemp(prefix="tessera-convert-")
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            model = QwenContractLM(a)
        model = model.to_empty(device="cpu")
        model.inv_freq = 1.0 / (a.rope_theta ** (torch.arange(0, a.head_dim, 2, dtype=torch.float32) / a.head_dim))
        if a.tie_word_embeddings:
            model.lm_head.weight = model.model.embed_tokens.weight
        load_state_dict(model, files, progress)
        params = sum(p.numel() for p in model.parameters())
        progress(f"loaded {params / 1e6:.1f} M parameters; exporting to ONNX (opset 17, fp32)")
        t0 = time.time()
        proto = export_fp32(model, ck.block_size, work)
        progress(f"exported in {time.time() - t0:.1f} s")
        if weights == "fp16":
            to_fp16_weights(proto)
            progress("fp16: weights stored as float16, cast to float32 in the graph")
        elif weights == "int4":
            proto = to_int4(proto, progress)
        onnx_path = os.path.join(staging, "model.onnx")
        est_bytes = params * {"fp32": 4, "fp16": 2, "int4": 1}[weights]
        use_external = external == "always" or (external == "auto" and est_bytes > TWO_GB * 0.9)
        save(proto, onnx_path, use_external)
        del proto
        shutil.rmtree(work, ignore_errors=True)
        onnx_bytes = sum(os.path.getsize(os.path.join(staging, f)) for f in os.listdir(staging))
        progress(f"wrote model.onnx{' + model.onnx.data' if use_external else ''} ({onnx_bytes / 1e6:.1f} MB); checking with ONNX Runtime")
        check = compare(model, ck.block_size, onnx_path)
        progress(f"ONNX Runtime vs PyTorch (relative to 1 + |x|): logits {check['logits']:.2e}, presents {check['present']:.2e}")
        if weights == "fp32" and max(check.values()) > 1e-3:
            raise ConvertError(f"{onnx_path}: ONNX Runtime differs from PyTorch by {max(check.values()):.2e} (fp32 must agree within 1e-3)")

        source = ckpt_dir
        config = config_json(ck, weights, "model.onnx", source)
        write_json(os.path.join(staging, "config.json"), config)
        tokenizer_files(ck, staging)
        write_json(os.path.join(staging, "decision.json"), decision_json(ck))
        report = {"parameters": params, "onnx_bytes": onnx_bytes, "check": check, "weights": weights}
        with open(os.path.join(staging, "README.md"), "w", encoding="utf-8") as f:
            f.write(model_card(ck, config, weights, report, source))
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.rename(staging, out_dir)
        progress(f"done: {out_dir}")
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(staging):
            shutil.rmtree(staging, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tessera convert", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer files)")
    ap.add_argument("model_dir", help="model directory to write (must not exist unless --force)")
    ap.add_argument("--block-size", type=int, default=None, help="SDAR: the variant's block size (default 4); Fast-dLLM: bd_size of config.json")
    ap.add_argument("--weights", choices=["fp32", "fp16", "int4"], default="fp32",
                    help="fp32 exact; fp16 half the file; int4 MatMulNBits (4-bit, a scale per block of 32)")
    ap.add_argument("--external-data", choices=["auto", "always", "never"], default="auto",
                    help="weights in model.onnx.data: auto = past 2 GB (ONNX's protobuf limit)")
    ap.add_argument("--force", action="store_true", help="replace model_dir if it exists")
    a = ap.parse_args(argv)
    if a.block_size is not None and a.block_size < 1:
        ap.error("--block-size must be a positive integer")
    try:
        report = convert(a.checkpoint, a.model_dir, a.block_size, a.weights, a.external_data, a.force)
    except ConvertError as err:
        print(f"tessera convert: {err}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
