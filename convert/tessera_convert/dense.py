"""The dense block-causal families' pipeline (families.FAMILIES entries with pipeline "dense":
SDAR, Fast-dLLM v2, Qwen3 / Qwen2): config.json read and checked (families.read_checkpoint), the
family's PyTorch module (stage.py, in a process of its own) exported to one model.onnx of contract
v2 in the chosen weight format, checked with ONNX Runtime, and the model directory written.
"""

from __future__ import annotations

import os
import pickle
import shutil
import time

from . import bounds
from .errors import ConvertError
from .stage import torch_stage

TWO_GB = 2 * 1024**3
# model.onnx bytes per parameter: int8/int4 keep the embedding in float32 (counted as ~1 byte/param on average).
BYTES_PER_PARAM = {"fp32": 4, "fp16": 2, "int8": 1.6, "int4": 1.2}


def param_count(a) -> int:
    attn = a.hidden_size * a.head_dim * (2 * a.num_attention_heads + 2 * a.num_key_value_heads)
    layer = attn + 3 * a.hidden_size * a.intermediate_size
    return a.num_hidden_layers * layer + a.vocab_size * a.hidden_size * (1 if a.tie_word_embeddings else 2)


def peak_gb(params: int, weights: str) -> float:
    """Measured (bench/full_size/README.md): the PyTorch stage peaks at 1.43x the fp32 weights
    at SDAR-1.7B and 1.58x at Fast-dLLM v2 1.5B (the module, the safetensors pages, the
    exporter's trace); int8 and int4 are quantized one weight at a time after it (3-4 GB at
    1.7B); fp16 goes through ONNX's whole-model code, which holds the fp32 model and its copies
    (about 2.5x)."""
    fp32 = params * 4 / 1e9
    return fp32 * (2.5 if weights == "fp16" else 1.6)


def not_loaded(ckpt_dir: str, progress) -> None:
    """Says which of the checkpoint's files are never loaded: code (auto_map's *.py) and pickles."""
    from .gate import unread_files

    skipped = unread_files(ckpt_dir)
    if skipped:
        progress(f"not loaded: {', '.join(skipped[:6])}{' ...' if len(skipped) > 6 else ''} (a checkpoint's code and pickles are "
                 "never run or unpickled; config.json's auto_map is ignored; weights are read from safetensors only)")


def convert(ckpt_dir: str, out_dir: str, family, *, block_size, weights: str, external: str, force: bool, progress,
            experts: str = "auto") -> dict:
    """The pipeline's convert() (families.Family.convert_function): read_checkpoint finds ``family``
    again with its checks; the caller has checked ``force``; ``experts`` is DiffusionGemma's option."""
    from .checkpoint import tensor_shapes, weight_files
    from .families import read_checkpoint
    from .model_dir import decision_json
    from .tensor_check import check_tensors

    ck = read_checkpoint(ckpt_dir, block_size)
    for note in ck.notes:
        progress(f"note: {note}")
    a = ck.arch
    progress(f"{ck.family.label}: {a.num_hidden_layers} layers, hidden {a.hidden_size}, heads {a.num_attention_heads}/{a.num_key_value_heads}"
             f" x {a.head_dim}, vocab {a.vocab_size}, block {ck.block_size}, mask {ck.mask_token_id}, stops {ck.stop_token_ids}")
    # config.json against the tensors the files hold, and the chat template in the sandbox, before any work.
    check_tensors(ck, tensor_shapes(weight_files(ckpt_dir), ckpt_dir), os.path.join(ckpt_dir, "config.json"))
    decision = decision_json(ck)
    not_loaded(ckpt_dir, progress)

    params = param_count(a)
    est_bytes = params * BYTES_PER_PARAM[weights]
    use_external = external == "always" or (external == "auto" and est_bytes > TWO_GB * 0.9)
    progress(f"{params / 1e9:.3f} B parameters; {weights} model.onnx of about {est_bytes / 1e9:.2f} GB"
             f"{' (+ model.onnx.data: past ONNX protobuf limit of 2 GB)' if use_external else ''}; "
             f"expected peak memory {peak_gb(params, weights):.1f} GB ("
             f"{'the whole fp32 model and its copies while converting the weights' if weights == 'fp16' else 'the fp32 model in PyTorch, then one weight at a time'})")
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = work = child = None
    try:
        staging = bounds.staging_dir(parent, f".{os.path.basename(out_dir)}.converting-")
        work = bounds.staging_dir(parent, ".tessera-export-")
        onnx_path = os.path.join(staging, "model.onnx")
        fp32_path = onnx_path if weights == "fp32" else os.path.join(work, "model.onnx")
        # PyTorch's part (the module, the reference outputs, the graph and its fp32 weights) runs in
        # a process of its own: its memory goes back to the system when it ends, before ONNX
        # Runtime or a quantizer needs as much again (freeing the module in-process left 7 GB).
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=torch_stage, args=(ckpt_dir, block_size, fp32_path, use_external if weights == "fp32" else True, work))
        child.start()
        child.join()
        failure = os.path.join(work, "error.txt")
        if os.path.exists(failure):
            with open(failure, encoding="utf-8") as f:
                raise ConvertError(f.read())
        if child.exitcode != 0:
            raise ConvertError(f"the PyTorch stage exited with {child.exitcode} (out of memory? it needs about {params * 4.6 / 1e9:.1f} GB)")
        with open(os.path.join(work, "reference.pkl"), "rb") as f:
            cases = pickle.load(f)
        import gc

        from .export import compare, load, save, to_fp16_weights, to_int8
        from .quantize_int4 import INT4_BLOCK, to_int4_streamed
        from .model_dir import config_json, model_card, tokenizer_files, write_json

        t0 = time.time()
        if weights == "int8":
            progress("int8: quantizing every MatMul's weights per output channel (activations at run time), one weight at a time")
            count = to_int8(fp32_path, onnx_path, use_external)
            progress(f"int8: {count} matmuls quantized")
        elif weights == "int4":
            progress(f"int4: quantizing every MatMul's weights to 4 bits (MatMulNBits, a scale per block of {INT4_BLOCK}), one weight at a time")
            count = to_int4_streamed(fp32_path, onnx_path, use_external)
            progress(f"int4: {count} matmuls quantized")
        elif weights == "fp16":
            proto = load(fp32_path)
            to_fp16_weights(proto)
            progress("fp16: weights stored as float16, cast to float32 in the graph")
            save(proto, onnx_path, use_external)
            del proto
        if weights != "fp32":
            progress(f"{weights} written in {time.time() - t0:.1f} s")
        shutil.rmtree(work, ignore_errors=True)
        gc.collect()
        onnx_bytes = sum(os.path.getsize(os.path.join(staging, f)) for f in os.listdir(staging))
        progress(f"wrote model.onnx{' + model.onnx.data' if use_external else ''} ({onnx_bytes / 1e6:.1f} MB); checking with ONNX Runtime")
        check = compare(cases, a.num_hidden_layers, onnx_path)
        progress(f"ONNX Runtime vs PyTorch fp32 (relative to 1 + |x|): logits {check['logits']:.2e}, presents {check['present']:.2e}; "
                 f"logits relative RMS {check['logits_rel_rms']:.2e}, greedy agreement {check['greedy_agreement']:.3f}")
        if weights == "fp32" and max(check["logits"], check["present"]) > 1e-3:
            raise ConvertError(f"{onnx_path}: ONNX Runtime differs from PyTorch by {max(check['logits'], check['present']):.2e} (fp32 must agree within 1e-3)")

        source = ckpt_dir
        config = config_json(ck, weights, "model.onnx", source)
        write_json(os.path.join(staging, "config.json"), config)
        tokenizer_files(ck, staging)
        write_json(os.path.join(staging, "decision.json"), decision)
        report = {"parameters": params, "onnx_bytes": onnx_bytes, "check": check, "weights": weights}
        with open(os.path.join(staging, "README.md"), "w", encoding="utf-8") as f:
            f.write(model_card(ck, config, weights, report, source))
        bounds.check()
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.rename(staging, out_dir)
        progress(f"done: {out_dir}")
        return report
    finally:
        if child is not None and child.is_alive():
            child.kill()
            child.join()
        for folder in (work, staging):
            if folder is not None and os.path.exists(folder):
                shutil.rmtree(folder, ignore_errors=True)


