"""The converter's families: one table from config.json's ``model_type`` to how it is converted.

Each entry names the family's pipeline (the module whose ``convert()`` reads and checks the
checkpoint's files and writes the model directory) and the PyTorch module its weights load into;
a new family is a module and one line here. ``python -m tessera_convert --families`` prints the
table as JSON: lib/hub/families.ts (what ``tessera pull`` takes) is checked against it by
test/hub/families.test.ts.

The dense block-causal families (pipeline ``dense``: read_checkpoint below, one model.onnx of
contract v2):

SDAR (``model_type: "sdar"``): Qwen3 layers; no block size and no mask id in config.json (the
block size is the caller's, the mask token is found by name among the added tokens); stop on
every id of generation_config.json's ``eos_token_id``. No token shift.

Fast-dLLM v2 (``model_type: "Fast_dLLM_Qwen"``): Qwen2 layers; ``bd_size`` is the block size;
the mask token is ``|<MASK>|``; logits row i predicts token i + 1 (``logits_shift: 1``).

Qwen3 / Qwen2 (``model_type: "qwen3"`` / ``"qwen2"``, Qwen2.5 included): plain autoregressive
checkpoints, served as the block-causal contract's degenerate case: block size 1 with the logits
shift, so every token is the greedy (or sampled) guess of the row before it. They have no mask
token; ``mask_token_id`` is the pad token, a placeholder the engine never feeds to a row it reads.

DiffusionGemma (``model_type: "diffusion_gemma"``, pipeline ``diffusion_gemma``): transformers'
own module, exported as contract v3's two graphs (diffusion_gemma.py).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .checkpoint import read_json, read_text
from .errors import ConvertError
from .arch import Arch

SDAR = "sdar"
FAST_DLLM = "fast_dllm_v2"
QWEN3 = "qwen3"
QWEN2 = "qwen2"
DIFFUSION_GEMMA = "diffusion_gemma"
# The pipelines: a module of this package with convert(ckpt_dir, out_dir, family, *, block_size,
# weights, external, force, progress, experts) -> the report __main__ prints.
DENSE = "dense"
# The PyTorch modules, "module:Class" (imported when used: reading a checkpoint needs no torch).
QWEN_MODULE = "tessera_convert.qwen:QwenContractLM"
GEMMA_MODULE = "transformers:DiffusionGemmaForBlockDiffusion"


@dataclass
class Family:
    name: str  # the converted model's model_type / family
    label: str
    model_type: str  # config.json's spelling, for messages
    pipeline: str  # the module that converts it (DENSE or a module of its own)
    module: str  # the PyTorch module its weights load into
    # The dense families' settings (read_checkpoint, model_dir.config_json):
    mask_names: List[str] = field(default_factory=list)
    logits_shift: int = 0
    qk_norm: bool = False
    qkv_bias: bool = False
    default_threshold: float = 0.9
    default_policy: str = "threshold"
    sub_block_size: Optional[int] = None
    # Block size 1 and no mask token: a plain causal language model.
    autoregressive: bool = False

    def convert_function(self):
        """The pipeline's convert()."""
        return importlib.import_module(f"{__package__}.{self.pipeline}").convert

    def module_class(self):
        """The PyTorch module's class (imports torch, and transformers for DiffusionGemma)."""
        module, name = self.module.split(":")
        return getattr(importlib.import_module(module), name)


# Keyed by model_type lower-cased: config.json's spelling varies ("Fast_dLLM_Qwen").
FAMILIES: Dict[str, Family] = {
    "sdar": Family(SDAR, "SDAR (Qwen3 layers)", "sdar", DENSE, QWEN_MODULE, ["<|MASK|>", "<MASK>"], 0, True, False, 0.9, "threshold"),
    "fast_dllm_qwen": Family(FAST_DLLM, "Fast-dLLM v2 (Qwen2 layers)", "Fast_dLLM_Qwen", DENSE, QWEN_MODULE, ["|<MASK>|"], 1, False, True, 0.9, "subblocks", 8),
    "qwen3": Family(QWEN3, "Qwen3 (autoregressive)", "qwen3", DENSE, QWEN_MODULE, [], 1, True, False, 0.9, "threshold", autoregressive=True),
    "qwen2": Family(QWEN2, "Qwen2 / Qwen2.5 (autoregressive)", "qwen2", DENSE, QWEN_MODULE, [], 1, False, True, 0.9, "threshold", autoregressive=True),
    "diffusion_gemma": Family(DIFFUSION_GEMMA, "DiffusionGemma", "diffusion_gemma", DIFFUSION_GEMMA, GEMMA_MODULE),
}


def families_json() -> List[dict]:
    """The table for readers outside Python (``--families``): lib/hub/families.ts refuses another
    model_type before a pull downloads weights. ``label`` is the family's name without its layers note."""
    return [{"key": key, "model_type": f.model_type, "family": f.name, "label": f.label.split(" (")[0], "pipeline": f.pipeline}
            for key, f in FAMILIES.items()]


def family_of(cfg: dict, cfg_path: str) -> Family:
    """config.json's family, or the error naming the ones this converter knows."""
    model_type = cfg.get("model_type")
    family = FAMILIES.get(model_type.lower()) if isinstance(model_type, str) else None
    if family is None:
        known = ", ".join(f'"{f.model_type}"' for f in FAMILIES.values())
        raise ConvertError(f"{cfg_path}: \"model_type\" {model_type!r} is not a family this converter knows ({known})")
    return family


@dataclass
class Checkpoint:
    dir: str
    family: Family
    arch: Arch
    block_size: int
    max_positions: int
    mask_token_id: int
    eos_token_id: int
    pad_token_id: int
    stop_token_ids: List[int]
    chat_template: str
    tokens: Dict[str, int]
    tokenizer_config: dict
    notes: List[str] = field(default_factory=list)


def added_tokens(ckpt: str, tokenizer_json: dict, tokenizer_config: dict) -> Dict[str, int]:
    """Every added token by text: tokenizer.json, then added_tokens.json, then tokenizer_config.json."""
    tokens: Dict[str, int] = {}
    for entry in tokenizer_json.get("added_tokens") or []:
        if isinstance(entry, dict) and isinstance(entry.get("content"), str) and isinstance(entry.get("id"), int):
            tokens.setdefault(entry["content"], entry["id"])
    extra = read_json(os.path.join(ckpt, "added_tokens.json"), required=False) or {}
    for text, tid in extra.items():
        if isinstance(tid, int):
            tokens.setdefault(text, tid)
    for tid, entry in (tokenizer_config.get("added_tokens_decoder") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("content"), str) and str(tid).isdigit():
            tokens.setdefault(entry["content"], int(tid))
    return tokens


def _int(cfg: dict, key: str, source: str, minimum: int = 1) -> int:
    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ConvertError(f"{source}: \"{key}\" must be an integer >= {minimum}, got {v!r}")
    return v


def _ids(value) -> List[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def read_checkpoint(ckpt: str, block_size: Optional[int]) -> Checkpoint:
    cfg_path = os.path.join(ckpt, "config.json")
    cfg = read_json(cfg_path)
    family = family_of(cfg, cfg_path)
    if family.pipeline != DENSE:
        raise ConvertError(f"{cfg_path}: {family.label} is not a dense block-causal family (its pipeline is {family.pipeline}.py)")
    notes: List[str] = []

    hidden = _int(cfg, "hidden_size", cfg_path)
    heads = _int(cfg, "num_attention_heads", cfg_path)
    kv_heads = _int(cfg, "num_key_value_heads", cfg_path) if "num_key_value_heads" in cfg else heads
    if heads % kv_heads != 0:
        raise ConvertError(f"{cfg_path}: \"num_attention_heads\" {heads} is not a multiple of \"num_key_value_heads\" {kv_heads}")
    head_dim = cfg.get("head_dim") or hidden // heads
    if not isinstance(head_dim, int) or head_dim % 2 != 0:
        raise ConvertError(f"{cfg_path}: \"head_dim\" must be an even integer, got {head_dim!r}")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ConvertError(f"{cfg_path}: \"hidden_act\" {act!r} is not supported (SwiGLU with silu only)")
    rope = cfg.get("rope_scaling")
    rope_params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    if isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) not in (None, "default"):
        raise ConvertError(f"{cfg_path}: \"rope_scaling\" {rope!r} is not supported (plain rotary only)")
    theta = cfg.get("rope_theta", rope_params.get("rope_theta", 10000.0))
    if not isinstance(theta, (int, float)) or theta <= 0:
        raise ConvertError(f"{cfg_path}: \"rope_theta\" must be a positive number, got {theta!r}")
    if family.autoregressive and cfg.get("attention_bias"):
        raise ConvertError(f"{cfg_path}: \"attention_bias\" is true; Qwen3 layers with biases are not supported")
    if cfg.get("use_sliding_window"):
        raise ConvertError(f"{cfg_path}: \"use_sliding_window\" is true; sliding-window attention is not supported")
    arch = Arch(
        vocab_size=_int(cfg, "vocab_size", cfg_path),
        hidden_size=hidden,
        intermediate_size=_int(cfg, "intermediate_size", cfg_path),
        num_hidden_layers=_int(cfg, "num_hidden_layers", cfg_path),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rope_theta=float(theta),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        qk_norm=family.qk_norm,
        qkv_bias=family.qkv_bias,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )

    if family.name == FAST_DLLM:
        bd = _int(cfg, "bd_size", cfg_path)
        if block_size is not None and block_size != bd:
            notes.append(f"--block-size {block_size} overrides bd_size {bd} of config.json (the model was trained with {bd})")
        block_size = block_size or bd
    elif family.autoregressive:
        if block_size not in (None, 1):
            raise ConvertError(f"--block-size {block_size}: {family.label} is autoregressive and is served with block size 1")
        block_size = 1
    elif block_size is None:
        block_size = 4
        notes.append("SDAR's config.json has no block size; using 4 (pass --block-size for the -b8 ... -b64 variants)")
    max_positions = _int(cfg, "max_position_embeddings", cfg_path)
    if max_positions < block_size:
        raise ConvertError(f"{cfg_path}: \"max_position_embeddings\" {max_positions} is smaller than one block ({block_size})")

    tok_path = os.path.join(ckpt, "tokenizer.json")
    tokenizer_json = read_json(tok_path)
    tc_path = os.path.join(ckpt, "tokenizer_config.json")
    tokenizer_config = read_json(tc_path)
    tokens = added_tokens(ckpt, tokenizer_json, tokenizer_config)
    mask_id = next((tokens[n] for n in family.mask_names if n in tokens), None)
    if mask_id is None and not family.autoregressive:
        names = " or ".join(family.mask_names)
        raise ConvertError(f"{tok_path}: no added token {names} (the mask token {family.label} is trained with)")
    im_end = tokens.get("<|im_end|>")
    if im_end is None:
        raise ConvertError(f"{tok_path}: no added token <|im_end|> (the end of turn of the Qwen chat format)")

    gen = read_json(os.path.join(ckpt, "generation_config.json"), required=False) or {}
    stops = [im_end]
    for tid in _ids(gen.get("eos_token_id")) + _ids(cfg.get("eos_token_id")):
        if tid not in stops:
            stops.append(tid)
    pad_text = tokenizer_config.get("pad_token")
    if isinstance(pad_text, dict):
        pad_text = pad_text.get("content")
    pad_id = tokens.get(pad_text) if isinstance(pad_text, str) else None
    if pad_id is None:
        pad_id = next((t for t in _ids(cfg.get("pad_token_id")) + _ids(gen.get("pad_token_id"))), im_end)
    if mask_id is None:
        mask_id = pad_id
    for label, tid in (("mask", mask_id), ("pad", pad_id), *(("stop", s) for s in stops)):
        if tid >= arch.vocab_size:
            raise ConvertError(f"{cfg_path}: the {label} token id {tid} is outside \"vocab_size\" {arch.vocab_size}")

    template = tokenizer_config.get("chat_template")
    jinja_path = os.path.join(ckpt, "chat_template.jinja")
    if not isinstance(template, str) or not template:
        template = read_text(jinja_path) or template
    if isinstance(template, list):  # named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
    if not isinstance(template, str) or not template:
        raise ConvertError(f"{tc_path}: no \"chat_template\" (nor a chat_template.jinja beside it)")

    return Checkpoint(
        dir=ckpt,
        family=family,
        arch=arch,
        block_size=block_size,
        max_positions=max_positions,
        mask_token_id=mask_id,
        eos_token_id=im_end,
        pad_token_id=pad_id,
        stop_token_ids=stops,
        chat_template=template,
        tokens=tokens,
        tokenizer_config=tokenizer_config,
        notes=notes,
    )
