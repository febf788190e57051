"""Reading a Hugging Face checkpoint directory as published (config, tokenizer files, safetensors)."""

from __future__ import annotations

import json
import os
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from .errors import ConvertError


def read_json(path: str, required: bool = True) -> Optional[dict]:
    if not os.path.exists(path):
        if required:
            raise ConvertError(f"{path}: missing (a Hugging Face checkpoint directory has it)")
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as err:
        raise ConvertError(f"{path}: not readable JSON ({err})") from err
    if not isinstance(value, dict):
        raise ConvertError(f"{path}: expected a JSON object")
    return value


def weight_files(ckpt: str) -> List[str]:
    """The safetensors files: the shards named by model.safetensors.index.json, or model.safetensors."""
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    single = os.path.join(ckpt, "model.safetensors")
    if os.path.exists(index_path):
        index = read_json(index_path)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConvertError(f"{index_path}: \"weight_map\" must be a non-empty object")
        files = sorted(set(weight_map.values()))
        for name in files:
            if not os.path.exists(os.path.join(ckpt, name)):
                raise ConvertError(f"{index_path}: weight_map names {name}, which is missing")
        return [os.path.join(ckpt, n) for n in files]
    if os.path.exists(single):
        return [single]
    raise ConvertError(f"{ckpt}: no model.safetensors and no model.safetensors.index.json")


def iter_tensors(files: List[str], progress: Callable[[str], None]) -> Iterator[Tuple[str, str, "object"]]:
    """(file, key, float32 tensor) for every tensor of every file, one at a time (bf16 upcast)."""
    import torch
    from safetensors import safe_open

    for i, path in enumerate(files):
        progress(f"reading {os.path.basename(path)} ({i + 1}/{len(files)}, {os.path.getsize(path) / 1e9:.2f} GB)")
        try:
            handle = safe_open(path, framework="pt")
        except Exception as err:  # safetensors raises its own error types
            raise ConvertError(f"{path}: not a safetensors file ({err})") from err
        with handle as f:
            for key in f.keys():
                t = f.get_tensor(key)
                if not t.is_floating_point():
                    raise ConvertError(f"{path}: tensor {key} has dtype {t.dtype}; expected floating-point weights")
                yield path, key, t.to(torch.float32)


def load_state_dict(module, files: List[str], progress: Callable[[str], None], ignore_suffixes=("rotary_emb.inv_freq",)) -> None:
    """Copies the checkpoint's tensors into ``module`` by name; every parameter must be found once, with its shape."""
    import torch

    params: Dict[str, torch.Tensor] = dict(module.named_parameters(remove_duplicate=True))
    tied = getattr(module.a, "tie_word_embeddings", False)
    seen: Dict[str, str] = {}
    with torch.no_grad():
        for path, key, tensor in iter_tensors(files, progress):
            if key.endswith(ignore_suffixes):
                continue
            if key == "lm_head.weight" and tied:
                continue  # some tied checkpoints still store the head; the embedding is used
            target = params.get(key)
            if target is None:
                raise ConvertError(f"{path}: tensor \"{key}\" is not a weight of this family's layers")
            if tuple(target.shape) != tuple(tensor.shape):
                raise ConvertError(f"{path}: tensor \"{key}\" has shape {tuple(tensor.shape)}, config.json implies {tuple(target.shape)}")
            if key in seen:
                raise ConvertError(f"{path}: tensor \"{key}\" also appears in {seen[key]}")
            target.copy_(tensor)
            seen[key] = path
    missing = [k for k in params if k not in seen]
    if missing:
        raise ConvertError(f"{os.path.dirname(files[0])}: the safetensors lack {len(missing)} weights, e.g. \"{missing[0]}\"")
