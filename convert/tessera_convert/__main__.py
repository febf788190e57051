"""tessera convert <checkpoint-dir> <model-dir> [--block-size N] [--weights int8|fp32|fp16|int4] [--experts auto|dense|sparse]

Reads a Hugging Face SDAR, Fast-dLLM v2 or Qwen3 / Qwen2 checkpoint directory as published and writes a model
directory of Tessera's contract (docs/model-contract.md, version 2); a DiffusionGemma one
(model_type "diffusion_gemma") gets contract version 3 (encoder.onnx + denoiser.onnx). The families are
one table (tessera_convert/families.py; `python -m tessera_convert --families` prints it as JSON). The directory is written
beside the destination under a temporary name and renamed when complete, so a failed or
interrupted conversion never leaves a half-written model directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import bounds
from .errors import ConvertError
from .stage import progress


def convert(ckpt_dir: str, out_dir: str, block_size, weights: str, external: str, force: bool, experts: str = "auto") -> dict:
    """config.json's model_type picks the family (families.FAMILIES); its pipeline converts it."""
    from .checkpoint import read_json
    from .families import family_of

    ckpt_dir = os.path.abspath(ckpt_dir)
    out_dir = os.path.abspath(out_dir)
    if not os.path.isdir(ckpt_dir):
        raise ConvertError(f"{ckpt_dir}: not a directory")
    if os.path.exists(out_dir) and not force:
        raise ConvertError(f"{out_dir}: already exists (remove it, or pass --force to replace it)")
    cfg_path = os.path.join(ckpt_dir, "config.json")
    family = family_of(read_json(cfg_path), cfg_path)
    return family.convert_function()(ckpt_dir, out_dir, family, block_size=block_size, weights=weights, external=external,
                                     force=force, progress=progress, experts=experts)


REQUIRED_MODULES = ("numpy", "torch", "safetensors", "tokenizers", "transformers", "onnx", "onnxruntime", "jinja2")
SETUP_COMMAND = "npx tessera convert --setup"


def missing_modules() -> list:
    """The converter's packages this Python lacks (found without importing them: fast, no traceback)."""
    import importlib.util

    return [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]


def one_line(text: str, most: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most] + "..."


def main(argv=None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--families"]:
        from .families import families_json

        print(json.dumps(families_json()))
        return 0
    ap = argparse.ArgumentParser(prog="tessera convert", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer files)")
    ap.add_argument("model_dir", help="model directory to write (must not exist unless --force)")
    ap.add_argument("--block-size", type=int, default=None, help="SDAR: the variant's block size (default 4); Fast-dLLM: bd_size of config.json")
    ap.add_argument("--weights", choices=["fp32", "fp16", "int8", "int4"], default="int8",
                    help="int8 (default: the fastest on CPUs, 3.2x fp32 per 64-token block at 1.7B) per-channel 8-bit "
                         "weights, activations quantized at run time; fp32 exact; fp16 half the file, fp32's compute; "
                         "int4 MatMulNBits (4-bit, a scale per block of 32): the smallest in memory (half of int8's at 1.7B), "
                         "1.8x int8's time per block or more on CPUs")
    ap.add_argument("--external-data", choices=["auto", "always", "never"], default="auto",
                    help="weights in model.onnx.data: auto = past 2 GB (ONNX's protobuf limit)")
    ap.add_argument("--experts", choices=["auto", "dense", "sparse"], default="auto",
                    help="DiffusionGemma's mixture of experts: sparse computes each token's top k experts only, dense every "
                         "expert weighted by the router; auto = sparse where experts / top k >= 4 (the 26B-A4B: 128 / 8)")
    ap.add_argument("--force", action="store_true", help="replace model_dir if it exists")
    ap.add_argument("--time-limit", type=float, default=bounds.DEFAULT_TIME_LIMIT_S, metavar="SECONDS",
                    help=f"stop a conversion that runs longer (default {bounds.DEFAULT_TIME_LIMIT_S} s; 0: none)")
    ap.add_argument("--memory-limit", type=float, default=None, metavar="GB",
                    help="address-space limit of the converter's processes (default: twice the machine's memory plus swap; 0: none)")
    a = ap.parse_args(argv)
    if a.block_size is not None and a.block_size < 1:
        ap.error("--block-size must be a positive integer")
    if a.time_limit < 0 or (a.memory_limit is not None and a.memory_limit < 0):
        ap.error("--time-limit and --memory-limit must not be negative")
    missing = missing_modules()
    if missing:
        print(f"tessera convert: {sys.executable} lacks the converter's packages ({', '.join(missing)}).\n"
              f"Create its environment once (convert/.venv from convert/requirements.txt) with:\n    {SETUP_COMMAND}\n"
              f"(or point TESSERA_CONVERT_PYTHON at a Python that has them)", file=sys.stderr)
        return 3
    memory = bounds.machine_memory_bytes() if a.memory_limit is None else int(a.memory_limit * 1e9)
    try:
        with bounds.private_tmpdir():
            bounds.install(a.time_limit, memory)
            report = convert(a.checkpoint, a.model_dir, a.block_size, a.weights, a.external_data, a.force, a.experts)
            bounds.disarm()
    except (ConvertError, bounds.Stopped) as err:
        print(f"tessera convert: {one_line(str(err))}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001  a checkpoint the checks above missed: one line, not a traceback
        if bounds.out_of_memory(err):
            print(f"tessera convert: {bounds.memory_error(memory)}", file=sys.stderr)
            return 1
        if os.environ.get("TESSERA_CONVERT_TRACEBACK"):
            raise
        print(f"tessera convert: failed: {type(err).__name__}: {one_line(str(err))} (TESSERA_CONVERT_TRACEBACK=1 shows where)", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
