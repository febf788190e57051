"""config.json against the tensors that exist, before the module is built or a tensor is read.

The Qwen contract layout (qwen.py: names and shapes as the Hugging Face checkpoints have them)
follows from the config's sizes; every tensor of the safetensors headers must be one of them,
floating-point and of that shape, and every one must be there. A config that claims more
layers, a wider hidden size or a larger vocabulary than the files hold is refused here, so the
memory the conversion allocates is bounded by the bytes of the checkpoint's own tensors.
"""

from __future__ import annotations

import re
from typing import Dict, Tuple

from .errors import ConvertError
from .gate import FLOAT_DTYPES, Shapes

LAYER = re.compile(r"^model\.layers\.(\d+)\.")
# Past every published block-diffusion variant (SDAR b4..b64, Fast-dLLM v2's 32); the check's inputs are a few blocks.
MAX_BLOCK_SIZE = 1024
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def expected_shapes(a) -> Dict[str, Tuple[int, ...]]:
    h, d, inter = a.hidden_size, a.head_dim, a.intermediate_size
    q, kv = a.num_attention_heads * d, a.num_key_value_heads * d
    out: Dict[str, Tuple[int, ...]] = {"model.embed_tokens.weight": (a.vocab_size, h), "model.norm.weight": (h,)}
    if not a.tie_word_embeddings:
        out["lm_head.weight"] = (a.vocab_size, h)
    for i in range(a.num_hidden_layers):
        p = f"model.layers.{i}."
        out.update({
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.v_proj.weight": (kv, h),
            p + "self_attn.o_proj.weight": (h, q), p + "mlp.gate_proj.weight": (inter, h), p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter), p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        })
        if a.qkv_bias:
            out.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,), p + "self_attn.v_proj.bias": (kv,)})
        if a.qk_norm:
            out.update({p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,)})
    return out


def check_tensors(ck, shapes: Shapes, cfg_path: str) -> None:
    """Refuses a checkpoint whose config.json does not describe exactly the tensors its safetensors hold."""
    a = ck.arch
    if ck.block_size > MAX_BLOCK_SIZE:
        raise ConvertError(f"{cfg_path}: block size {ck.block_size} is past {MAX_BLOCK_SIZE} (refused)")
    layers = {int(m.group(1)) for m in map(LAYER.match, shapes) if m}
    held = max(layers) + 1 if layers else 0
    if held != len(layers):
        raise ConvertError(f"{cfg_path}: the safetensors hold layers numbered up to {held - 1} but only {len(layers)} of them")
    if held != a.num_hidden_layers:
        raise ConvertError(f"{cfg_path}: \"num_hidden_layers\" is {a.num_hidden_layers}; the safetensors hold {held} layers")
    expected = expected_shapes(a)
    for key, (dtype, shape) in shapes.items():
        if key.endswith(IGNORED_SUFFIXES) or (key == "lm_head.weight" and a.tie_word_embeddings):
            continue
        want = expected.get(key)
        if want is None:
            raise ConvertError(f"{cfg_path}: the safetensors hold tensor \"{key}\", which is not a weight of this family's layers")
        if dtype not in FLOAT_DTYPES:
            raise ConvertError(f"{cfg_path}: tensor \"{key}\" has dtype {dtype}; expected floating-point weights")
        if shape != want:
            raise ConvertError(f"{cfg_path}: the sizes it gives (hidden_size, heads, head_dim, intermediate_size, vocab_size) imply "
                               f"tensor \"{key}\" of shape {want}; the safetensors hold {shape}")
    missing = [k for k in expected if k not in shapes]
    if missing:
        raise ConvertError(f"{cfg_path}: implies {len(missing)} weights the safetensors lack, e.g. \"{missing[0]}\"")


GROUP = re.compile(r"^(.*\.layers)\.(\d+)\.")
DIMENSION_KEYS = ("hidden_size", "vocab_size", "num_experts")


def _config_ints(value, key: str):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key and isinstance(v, int) and not isinstance(v, bool):
                yield v
            else:
                yield from _config_ints(v, key)
    elif isinstance(value, list):
        for v in value:
            yield from _config_ints(v, key)


def check_config_claims(cfg: dict, shapes: Shapes, cfg_path: str) -> None:
    """For a family whose layout transformers builds (DiffusionGemma): every num_hidden_layers of the
    config (text, vision) must be a run of layers the safetensors hold, and every hidden_size,
    vocab_size and num_experts a dimension of some tensor, before a module is built."""
    groups: Dict[str, set] = {}
    for key in shapes:
        m = GROUP.match(key)
        if m:
            groups.setdefault(m.group(1), set()).add(int(m.group(2)))
    runs = {len(ix) for ix in groups.values() if ix == set(range(len(ix)))}
    for n in _config_ints(cfg, "num_hidden_layers"):
        if n not in runs:
            raise ConvertError(f"{cfg_path}: \"num_hidden_layers\" {n} is not the layer count of any stack the safetensors hold ({sorted(runs)})")
    dims = {d for _dtype, shape in shapes.values() for d in shape}
    for key in DIMENSION_KEYS:
        for n in _config_ints(cfg, key):
            if n not in dims:
                raise ConvertError(f"{cfg_path}: \"{key}\" {n} is not a dimension of any tensor the safetensors hold")


def check_parameter_count(parameters: int, shapes: Shapes, cfg_path: str) -> None:
    """The module config.json describes (built on the meta device, nothing allocated) holds no more values than the tensors."""
    held = 0
    for _dtype, shape in shapes.values():
        n = 1
        for d in shape:
            n *= d
        held += n
    if parameters > held:
        raise ConvertError(f"{cfg_path}: describes a model of {parameters} parameters; the safetensors hold {held} values (refused)")
