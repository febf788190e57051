"""Reading a Hugging Face checkpoint directory as published (config, tokenizer files, safetensors)."""

from __future__ import annotations

import os
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from .errors import ConvertError
from .gate import MAX_JSON_BYTES, MAX_TEXT_BYTES, Shapes, checkpoint_path, parse_json, read_bytes, regular_file, safetensors_header, unread_files


def read_json(path: str, required: bool = True) -> Optional[dict]:
    """A JSON object from a checkpoint file, through the gate (gate.py): inside its folder, a regular file, bounded."""
    data = read_bytes(path, MAX_JSON_BYTES, "JSON file")
    if data is None:
        if required:
            raise ConvertError(f"{path}: missing (a Hugging Face checkpoint directory has it)")
        return None
    value = parse_json(path, data)
    if not isinstance(value, dict):
        raise ConvertError(f"{path}: expected a JSON object")
    return value


def read_text(path: str) -> Optional[str]:
    """A text file of the checkpoint (chat_template.jinja) through the gate; None if missing."""
    data = read_bytes(path, MAX_TEXT_BYTES, "text file")
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConvertError(f"{path}: not UTF-8 text ({err})") from None


def weight_files(ckpt: str) -> List[str]:
    """The safetensors files: the shards named by model.safetensors.index.json, or model.safetensors.
    Pickled weights (pytorch_model.bin, *.pt, *.pth) are never loaded."""
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    single = os.path.join(ckpt, "model.safetensors")
    index = read_json(index_path, required=False)
    if index is not None:
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConvertError(f"{index_path}: \"weight_map\" must be a non-empty object")
        names = set(weight_map.values())
        files = [checkpoint_path(ckpt, name, index_path) for name in sorted(names, key=str)]
        for path in files:
            if regular_file(path, ckpt) is None:
                raise ConvertError(f"{index_path}: weight_map names {os.path.relpath(path, ckpt)}, which is missing")
        return files
    if regular_file(single, ckpt) is not None:
        return [single]
    pickles = [n for n in unread_files(ckpt) if not n.endswith(".py")]
    also = f" (pickled weights such as {pickles[0]} are never loaded: they can run code; convert them to safetensors)" if pickles else ""
    raise ConvertError(f"{ckpt}: no model.safetensors and no model.safetensors.index.json{also}")


def tensor_shapes(files: List[str], ckpt: str) -> Shapes:
    """Every tensor's dtype and shape from the safetensors headers, before any tensor is read; a name in two files is refused."""
    shapes: Shapes = {}
    seen: Dict[str, str] = {}
    for path in files:
        for key, entry in safetensors_header(path, ckpt).items():
            if key in seen:
                raise ConvertError(f"{path}: tensor \"{key}\" also appears in {seen[key]}")
            seen[key] = path
            shapes[key] = entry
    return shapes


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
