"""The converter's PyTorch stage, in a process of its own, and its progress lines."""

from __future__ import annotations

import os
import pickle
import sys
import time

from .errors import ConvertError


def memory_gb() -> str:
    """Resident and peak memory of this process so far (Linux; empty elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            v = {k: int(rest.split()[0]) / 1024**2 for k, rest in (line.split(":", 1) for line in f) if k in ("VmRSS", "VmHWM")}
        return f" [rss {v['VmRSS']:.1f} GB, peak {v['VmHWM']:.1f} GB]"
    except (OSError, KeyError, ValueError):
        return ""


def progress(message: str) -> None:
    print(f"[convert {time.strftime('%H:%M:%S')}]{memory_gb()} {message}", file=sys.stderr, flush=True)


def load_contract_model(ck, on_progress=None):
    """The checkpoint's module (its family's, families.FAMILIES) with its weights, built on the
    meta device first so that no random weights are ever allocated (a 1.7B model would need them twice)."""
    import torch

    from .checkpoint import load_state_dict, weight_files

    arch = ck.arch
    with torch.device("meta"):
        model = ck.family.module_class()(arch)
    model = model.to_empty(device="cpu")
    model.inv_freq = 1.0 / (arch.rope_theta ** (torch.arange(0, arch.head_dim, 2, dtype=torch.float32) / arch.head_dim))
    if arch.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    load_state_dict(model, weight_files(ck.dir), on_progress or (lambda _m: None))
    return model


def torch_stage(ckpt_dir: str, block_size, fp32_path: str, external: bool, work: str) -> None:
    """Builds the module from the checkpoint, keeps its outputs on the check's inputs
    (work/reference.pkl), exports the graph and writes it with its fp32 weights to fp32_path.
    Runs in a child process; an error's message goes to work/error.txt (one line, no traceback)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops this process and cleans up
    try:
        import torch

        from .export import attach_weights, export_fp32, reference_outputs
        from .families import read_checkpoint
        from .new_kv import add_new_kv_outputs

        ck = read_checkpoint(ckpt_dir, block_size)
        torch.manual_seed(0)
        t0 = time.time()
        model = load_contract_model(ck, progress)
        params = sum(p.numel() for p in model.parameters())
        progress(f"loaded {params / 1e6:.1f} M parameters in {time.time() - t0:.1f} s; reference outputs for the check")
        with open(os.path.join(work, "reference.pkl"), "wb") as f:
            pickle.dump(reference_outputs(model, ck.block_size), f)
        progress("exporting the graph to ONNX (opset 17, fp32)")
        t0 = time.time()
        graph = export_fp32(model, ck.block_size, work)
        add_new_kv_outputs(graph, ck.arch.num_hidden_layers)
        progress(f"exported in {time.time() - t0:.1f} s; writing the weights one at a time")
        attach_weights(graph, model, fp32_path, external)
        progress(f"fp32 model written in {time.time() - t0:.1f} s")
    except ConvertError as err:
        _fail(work, str(err))
    except Exception as err:  # noqa: BLE001  one line for the parent to print, not a traceback
        from .bounds import out_of_memory

        if out_of_memory(err):
            _fail(work, "out of memory in the PyTorch stage (--memory-limit, or the machine's memory); stopped, nothing written")
            return
        if os.environ.get("TESSERA_CONVERT_TRACEBACK"):
            raise
        _fail(work, f"the PyTorch stage failed: {type(err).__name__}: {' '.join(str(err).split())[:500]}")


def _fail(work: str, message: str) -> None:
    with open(os.path.join(work, "error.txt"), "w", encoding="utf-8") as f:
        f.write(message)
