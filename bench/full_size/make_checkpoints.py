"""Random-weight checkpoints in the published layouts of the real-size block-diffusion models.

    convert/.venv/bin/python bench/full_size/make_checkpoints.py <name> <out-dir> [--paper]
    names: sdar-1.7b-chat, sdar-4b-chat, fast-dllm-v2-1.5b, sdar-118m-ci (the CI size),
           qwen3-1.7b, qwen3-118m-ci (plain autoregressive Qwen3: the same weights as the SDAR ones)

Shapes, config.json keys and values, generation_config.json, shard layout and index are those
of the published checkpoints; the tokenizer is convert/'s test tokenizer (a few hundred real
tokens; config.json's vocab_size rows of the embedding, as Qwen's own 151,936 rows exceed its
151,669 tokens). Weights are bf16 (as published), drawn with a fixed seed, std 1/sqrt(fan_in)
(a unit-variance residual stream, and a head sharp enough that decoding commits some positions
early and others late). Written one shard at a time: peak memory is about one shard (<= 2 GB
for these shards) plus the largest tensor in float32.

--paper writes config.json, generation_config.json, the tokenizer files and
model.safetensors.index.json (with every tensor's name, and total_size) but no weights: the
4B's 8 GB is the layout on paper, for sizing.

Where the values come from (cited in bench/full_size/README.md):
* SDAR-1.7B-Chat / SDAR-4B-Chat (JetLM on the Hugging Face Hub, listed by github.com/JetAstra/SDAR's
  README): SDAR continues Qwen3-1.7B / Qwen3-4B (Qwen3 layers with q/k RMSNorm, tied embeddings),
  model_type "sdar", architectures SDARForCausalLM, auto_map configuration_sdar / modeling_sdar
  (training/model/SDAR-4B-Chat/modeling_sdar.py in that repository); the mask token <|MASK|> is
  added after Qwen3's 26 specials (id 151669 in the real tokenizer).
* Fast_dLLM_v2_1.5B (Efficient-Large-Model on the Hub, github.com/NVlabs/Fast-dLLM v2/): Qwen2.5-1.5B-
  Instruct's layers (q/k/v bias, tied embeddings), model_type "Fast_dLLM_Qwen", bd_size 32, mask
  |<MASK>|, a single model.safetensors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "convert"))

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import make_tiny_checkpoints as tiny  # noqa: E402

QWEN_VOCAB = 151936

# config.json values of each published checkpoint (the keys SDAR's and Fast-dLLM's configs carry).
SDAR_COMMON = {
    "architectures": ["SDARForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_sdar.SDARConfig", "AutoModel": "modeling_sdar.SDARModel",
                 "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM"},
    "bos_token_id": 151643, "eos_token_id": 151643, "head_dim": 128, "hidden_act": "silu", "initializer_range": 0.02,
    "max_position_embeddings": 32768, "model_type": "sdar", "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.52.4", "use_cache": True, "use_sliding_window": False, "vocab_size": QWEN_VOCAB,
}
SPECS = {
    "sdar-1.7b-chat": {"family": "sdar", "shards": 2, "config": {
        **SDAR_COMMON, "hidden_size": 2048, "intermediate_size": 6144, "max_window_layers": 28,
        "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8}},
    "sdar-4b-chat": {"family": "sdar", "shards": 3, "config": {
        **SDAR_COMMON, "hidden_size": 2560, "intermediate_size": 9728, "max_window_layers": 36,
        "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8}},
    "fast-dllm-v2-1.5b": {"family": "fast_dllm", "shards": 1, "config": {
        "architectures": ["Fast_dLLM_QwenForCausalLM"], "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration.Fast_dLLM_QwenConfig", "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM"},
        "bd_size": 32, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 1536,
        "initializer_range": 0.02, "intermediate_size": 8960, "max_position_embeddings": 32768, "max_window_layers": 21,
        "model_type": "Fast_dLLM_Qwen", "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 32768,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.53.1", "use_cache": True,
        "use_sliding_window": False, "vocab_size": QWEN_VOCAB}},
    # The CI size: Qwen's full vocabulary (the embedding and the head are most of a small model's
    # bytes) on 2 narrow layers, an untied head: 118 M parameters that convert in seconds.
    "sdar-118m-ci": {"family": "sdar", "shards": 2, "config": {
        **SDAR_COMMON, "hidden_size": 384, "intermediate_size": 768, "max_window_layers": 2, "head_dim": 64,
        "num_attention_heads": 6, "num_hidden_layers": 2, "num_key_value_heads": 2, "tie_word_embeddings": False,
        "max_position_embeddings": 4096}},
}
# Plain Qwen3ForCausalLM checkpoints with the SDAR ones' shapes, seed and tensor order: the same
# weights, read by transformers, tessera convert (block size 1) and llama.cpp (bench/cpu-peer.ts).
QWEN3_AR = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "eos_token_id": 151645}
for _ar, _sdar in (("qwen3-1.7b", "sdar-1.7b-chat"), ("qwen3-118m-ci", "sdar-118m-ci")):
    SPECS[_ar] = {"family": "qwen3", "shards": SPECS[_sdar]["shards"], "config": {
        **{k: v for k, v in SPECS[_sdar]["config"].items() if k != "auto_map"}, **QWEN3_AR}}


def tensor_shapes(cfg: dict, qk_norm: bool, bias: bool) -> dict:
    """Every tensor of the checkpoint, in the published order: name -> (shape, fan_in or 0 for a norm)."""
    h, heads, kv, inter = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    hd = cfg.get("head_dim") or h // heads
    shapes = {"model.embed_tokens.weight": ((cfg["vocab_size"], h), 1)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = ((h,), 0)
        shapes[p + "mlp.down_proj.weight"] = ((h, inter), inter)
        shapes[p + "mlp.gate_proj.weight"] = ((inter, h), h)
        shapes[p + "mlp.up_proj.weight"] = ((inter, h), h)
        shapes[p + "post_attention_layernorm.weight"] = ((h,), 0)
        if bias:
            shapes[p + "self_attn.k_proj.bias"] = ((kv * hd,), 4)
        if qk_norm:
            shapes[p + "self_attn.k_norm.weight"] = ((hd,), 0)
        shapes[p + "self_attn.k_proj.weight"] = ((kv * hd, h), h)
        shapes[p + "self_attn.o_proj.weight"] = ((h, heads * hd), heads * hd)
        if bias:
            shapes[p + "self_attn.q_proj.bias"] = ((heads * hd,), 4)
        if qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = ((hd,), 0)
        shapes[p + "self_attn.q_proj.weight"] = ((heads * hd, h), h)
        if bias:
            shapes[p + "self_attn.v_proj.bias"] = ((kv * hd,), 4)
        shapes[p + "self_attn.v_proj.weight"] = ((kv * hd, h), h)
    shapes["model.norm.weight"] = ((h,), 0)
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = ((cfg["vocab_size"], h), h / 16)  # a sharper head: confident positions exist
    return shapes


def draw(g: torch.Generator, shape, fan_in: float) -> torch.Tensor:
    if fan_in == 0:
        return (1 + 0.1 * torch.randn(*shape, generator=g)).to(torch.bfloat16)
    return (torch.randn(*shape, generator=g) / math.sqrt(fan_in)).to(torch.bfloat16)


def shard_plan(names, shapes, shards: int):
    """Contiguous runs of tensors of about equal bytes, as save_pretrained's max_shard_size cuts them."""
    sizes = [math.prod(shapes[n][0]) * 2 for n in names]
    target = sum(sizes) / shards
    plan, cur, acc = [], [], 0
    for n, s in zip(names, sizes):
        if cur and acc + s > target * 1.02 and len(plan) < shards - 1:
            plan.append(cur)
            cur, acc = [], 0
        cur.append(n)
        acc += s
    plan.append(cur)
    return plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(SPECS))
    ap.add_argument("out")
    ap.add_argument("--paper", action="store_true", help="config, tokenizer and index only (no weights)")
    a = ap.parse_args()
    spec = SPECS[a.name]
    cfg = dict(spec["config"])
    ar = spec["family"] == "qwen3"
    sdar = spec["family"] == "sdar" or ar
    os.makedirs(a.out, exist_ok=True)
    specials, mask = (tiny.QWEN3_SPECIALS, None if ar else "<|MASK|>") if sdar else (tiny.QWEN25_SPECIALS, "|<MASK>|")
    tok = tiny.build_tokenizer(specials, mask)
    template = tiny.read_template("qwen3.jinja" if sdar else "qwen2.5.jinja")
    ids = tiny.tokenizer_files(a.out, tok, specials, mask, template, template_file=sdar)
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    # The test tokenizer's ids stand in for Qwen's (151643 <|endoftext|>, 151645 <|im_end|>).
    cfg["bos_token_id"] = eot
    cfg["eos_token_id"] = im_end if ar or not sdar else eot
    tiny.write_json(os.path.join(a.out, "config.json"), cfg)
    gen = ({"bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot, "temperature": 0.6,
            "top_k": 20, "top_p": 0.95, "transformers_version": cfg["transformers_version"]} if sdar else
           {"bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot, "repetition_penalty": 1.05,
            "temperature": 0.7, "top_k": 20, "top_p": 0.8, "transformers_version": cfg["transformers_version"]})
    tiny.write_json(os.path.join(a.out, "generation_config.json"), gen)

    shapes = tensor_shapes(cfg, qk_norm=sdar, bias=not sdar)
    names = list(shapes)
    params = sum(math.prod(s) for s, _ in shapes.values())
    total = params * 2
    plan = shard_plan(names, shapes, spec["shards"])
    files = (["model.safetensors"] if len(plan) == 1 else
             [f"model-{i + 1:05d}-of-{len(plan):05d}.safetensors" for i in range(len(plan))])
    if len(plan) > 1 or a.paper:
        weight_map = {n: f for f, part in zip(files, plan) for n in part}
        tiny.write_json(os.path.join(a.out, "model.safetensors.index.json"), {"metadata": {"total_size": total}, "weight_map": weight_map})
    print(f"{a.name}: {params / 1e9:.3f} B parameters, {total / 1e9:.2f} GB bf16 in {len(plan)} file(s)", file=sys.stderr, flush=True)
    if a.paper:
        return
    g = torch.Generator().manual_seed(23)
    for f, part in zip(files, plan):
        tensors = {n: draw(g, *shapes[n]) for n in part}
        save_file(tensors, os.path.join(a.out, f), metadata={"format": "pt"})
        print(f"  wrote {f} ({sum(t.numel() * 2 for t in tensors.values()) / 1e9:.2f} GB)", file=sys.stderr, flush=True)
        del tensors


if __name__ == "__main__":
    main()
