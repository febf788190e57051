"""Tiny random checkpoints in the exact Hugging Face layout of each family, for the converter's tests.

    python convert/make_tiny_checkpoints.py <out-dir>   ->  <out-dir>/sdar, fast_dllm_v2, qwen3, qwen2

* Key names, config.json keys, bf16 safetensors, generation_config.json, special_tokens_map.json,
  added_tokens.json and tokenizer_config.json as the published checkpoints have them; SDAR's
  weights are sharded (model-0000N-of-00002.safetensors + model.safetensors.index.json), and
  its chat template is a separate chat_template.jinja, Fast-dLLM's is in tokenizer_config.json.
* A real byte-level BPE tokenizer (small vocabulary) whose added tokens follow Qwen's order,
  then the family's mask token (SDAR ``<|MASK|>``, Fast-dLLM ``|<MASK>|``).
* SDAR: Qwen3 layers with head_dim != hidden/heads and an untied head; Fast-dLLM: Qwen2 layers
  with q/k/v biases and a tied head (as the 1.5B). Weights are seeded, with a sharper head than
  an untrained model's so that decoding sees confident positions as well as unsure ones.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))

QWEN25_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
]
QWEN3_SPECIALS = QWEN25_SPECIALS + ["<tool_response>", "</tool_response>", "<think>", "</think>"]
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
               "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"}

CORPUS = [
    "You are a helpful assistant. Answer the question, think step by step, then reply.",
    'The weather in Paris is sunny today. {"name": "get_weather", "arguments": {"city": "Paris"}}',
    "Hello! How can I help you today? Yes, no, maybe. Options: A, B, C, D. Score from 1 to 5.",
    "function call tools json object arguments user system assistant tool response result",
    "0123456789 the quick brown fox jumps over the lazy dog; THE QUICK BROWN FOX.",
]


def build_tokenizer(specials, mask: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=360, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer)
    from tokenizers import AddedToken

    masks = [] if mask is None else [AddedToken(mask, special=True, normalized=False)]
    tok.add_tokens([AddedToken(t, special=t not in NOT_SPECIAL, normalized=False) for t in specials] + masks)
    return tok


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).contiguous()


def weights(cfg: dict, qk_norm: bool, bias: bool, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    n = lambda *shape, std=0.02: torch.randn(*shape, generator=g) * std  # noqa: E731
    norm = lambda d: 1 + n(d, std=0.1)  # noqa: E731
    h, heads, kv, hd, inter = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["intermediate_size"]
    w = {"model.embed_tokens.weight": n(cfg["vocab_size"], h, std=0.5), "model.norm.weight": norm(h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = n(heads * hd, h, std=0.15)
        w[p + "self_attn.k_proj.weight"] = n(kv * hd, h, std=0.15)
        w[p + "self_attn.v_proj.weight"] = n(kv * hd, h, std=0.15)
        w[p + "self_attn.o_proj.weight"] = n(h, heads * hd, std=0.1)
        if bias:
            for x, d in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
                w[p + f"self_attn.{x}_proj.bias"] = n(d, std=0.1)
        if qk_norm:
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "mlp.gate_proj.weight"] = n(inter, h, std=0.1)
        w[p + "mlp.up_proj.weight"] = n(inter, h, std=0.1)
        w[p + "mlp.down_proj.weight"] = n(h, inter, std=0.1)
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "post_attention_layernorm.weight"] = norm(h)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = n(cfg["vocab_size"], h, std=0.5)
    return {k: bf16(v) for k, v in w.items()}


def write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def tokenizer_files(out: str, tok, specials, mask: str, template: str, template_file: bool) -> dict:
    tok.save(os.path.join(out, "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in specials + ([] if mask is None else [mask])}
    write_json(os.path.join(out, "added_tokens.json"), dict(sorted(ids.items(), key=lambda kv: kv[1])))
    write_json(os.path.join(out, "special_tokens_map.json"), {
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
                                      "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
                                      "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"],
        "eos_token": {"content": "<|im_end|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
        "pad_token": {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
    })
    decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": t not in NOT_SPECIAL} for t, i in ids.items()}
    tc = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 131072, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    if template_file:
        with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(template)
    else:
        tc["chat_template"] = template
    write_json(os.path.join(out, "tokenizer_config.json"), tc)
    return ids


def read_template(name: str) -> str:
    with open(os.path.join(HERE, "templates", name), encoding="utf-8") as f:
        return f.read()


def make_sdar(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    tok = build_tokenizer(QWEN3_SPECIALS, "<|MASK|>")
    ids = tokenizer_files(out, tok, QWEN3_SPECIALS, "<|MASK|>", read_template("qwen3.jinja"), template_file=True)
    vocab = tok.get_vocab_size()
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    cfg = {
        "architectures": ["SDARForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration_sdar.SDARConfig", "AutoModel": "modeling_sdar.SDARModel",
                     "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM"},
        "bos_token_id": eot, "eos_token_id": eot, "head_dim": 24, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 4096, "max_window_layers": 28,
        "model_type": "sdar", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.52.4", "use_cache": True,
        "use_sliding_window": False, "vocab_size": vocab,
    }
    write_json(os.path.join(out, "config.json"), cfg)
    write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
        "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.52.4"})
    w = weights(cfg, qk_norm=True, bias=False, seed=1)
    keys = list(w)
    shards = [keys[: len(keys) // 2], keys[len(keys) // 2:]]
    weight_map = {}
    for i, part in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: w[k] for k in part}, os.path.join(out, name), metadata={"format": "pt"})
        weight_map.update({k: name for k in part})
    total = sum(t.numel() * t.element_size() for t in w.values())
    write_json(os.path.join(out, "model.safetensors.index.json"), {"metadata": {"total_size": total}, "weight_map": weight_map})


def make_fast_dllm(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    tok = build_tokenizer(QWEN25_SPECIALS, "|<MASK>|")
    ids = tokenizer_files(out, tok, QWEN25_SPECIALS, "|<MASK>|", read_template("qwen2.5.jinja"), template_file=False)
    vocab = tok.get_vocab_size()
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    cfg = {
        "architectures": ["Fast_dLLM_QwenForCausalLM"], "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration.Fast_dLLM_QwenConfig", "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM"},
        "bd_size": 32, "bos_token_id": eot, "eos_token_id": im_end, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 160, "max_position_embeddings": 4096, "max_window_layers": 21,
        "model_type": "Fast_dLLM_Qwen", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 32768,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.53.1", "use_cache": True,
        "use_sliding_window": False, "vocab_size": vocab,
    }
    write_json(os.path.join(out, "config.json"), cfg)
    write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
        "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "transformers_version": "4.53.1"})
    save_file(weights({**cfg, "head_dim": 16}, qk_norm=False, bias=True, seed=2), os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def make_autoregressive(out: str, qwen3: bool) -> None:
    """A plain Qwen3ForCausalLM / Qwen2ForCausalLM checkpoint (no mask token), as transformers saves one."""
    os.makedirs(out, exist_ok=True)
    specials = QWEN3_SPECIALS if qwen3 else QWEN25_SPECIALS
    tok = build_tokenizer(specials, None)
    ids = tokenizer_files(out, tok, specials, None, read_template("qwen3.jinja" if qwen3 else "qwen2.5.jinja"), template_file=False)
    eot, im_end = ids["<|endoftext|>"], ids["<|im_end|>"]
    cfg = {
        "architectures": ["Qwen3ForCausalLM" if qwen3 else "Qwen2ForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": eot, "eos_token_id": im_end, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 4096, "max_window_layers": 2,
        "model_type": "qwen3" if qwen3 else "qwen2", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": None,
        "tie_word_embeddings": not qwen3, "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "vocab_size": tok.get_vocab_size(), **({"attention_bias": False, "head_dim": 24} if qwen3 else {}),
    }
    write_json(os.path.join(out, "config.json"), cfg)
    write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
        "temperature": 0.7, "top_k": 20, "top_p": 0.8})
    w = weights({**cfg, "head_dim": cfg.get("head_dim", 16)}, qk_norm=qwen3, bias=not qwen3, seed=3 if qwen3 else 4)
    save_file(w, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_tiny_checkpoints.py <out-dir>")
    make_sdar(os.path.join(sys.argv[1], "sdar"))
    make_fast_dllm(os.path.join(sys.argv[1], "fast_dllm_v2"))
    make_autoregressive(os.path.join(sys.argv[1], "qwen3"), qwen3=True)
    make_autoregressive(os.path.join(sys.argv[1], "qwen2"), qwen3=False)
    print(f"wrote {sys.argv[1]}/sdar, fast_dllm_v2, qwen3 and qwen2")


if __name__ == "__main__":
    main()
