"""A tiny random DiffusionGemma checkpoint in the exact Hugging Face layout, made with transformers'
own classes (``DiffusionGemmaForBlockDiffusion.save_pretrained``), for the converter's tests.

    python convert/make_tiny_diffusion_gemma.py <out-dir> [pattern]  ->  <out-dir>/diffusion_gemma

``pattern`` (default ``alternating``) sets the text layers' ``layer_types``: ``alternating``
(sliding, full, sliding, full), ``default`` (left to transformers: sliding layers with only the
last one full, the published checkpoints' pattern in small) or ``full`` (every layer full).

Gemma 4 text layers as the 26B-A4B has them, scaled down: sliding (window 8) and full layers
(the full ones with a larger head and one shared k=v head), 4 experts top 2 beside the dense
MLP, self-conditioning, a 16-position canvas, a small Gemma 4 vision tower. A real byte-level
BPE tokenizer with Gemma 4's special tokens first (<pad> 0, <eos> 1, <bos> 2, then its turn, image,
tool and thinking markup), a chat template in Gemma 4's chat format (convert/templates/tiny-gemma4.jinja:
tools, calls, tool responses, the thinking switch), and generation_config.json with the sampler's settings. The embedding (tied to the
head) is scaled up so that the untrained model has confident positions as well as unsure ones.
"""

from __future__ import annotations

import json
import os
import sys

import torch

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|image>", "<image|>", "<|image|>", "<|tool>",
            "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>', "<|think|>",
            "<|channel>", "<channel|>"]
CORPUS = [
    "You are a helpful assistant. Answer the question, think step by step, then reply.",
    "The weather in Paris is sunny today. Hello! How can I help you today? Yes, no, maybe.",
    "0123456789 the quick brown fox jumps over the lazy dog; THE QUICK BROWN FOX. user model",
]
TEMPLATE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "tiny-gemma4.jinja")


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer)
    return tok


LAYER_PATTERNS = {
    "alternating": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "default": None,
    "full": ["full_attention"] * 4,
}


def make(out: str, pattern: str = "alternating") -> str:
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig, EntropyBoundSamplerConfig)

    path = os.path.join(out, "diffusion_gemma")
    os.makedirs(path, exist_ok=True)
    tok = build_tokenizer()
    ids = {t: tok.token_to_id(t) for t in SPECIALS}
    vocab = tok.get_vocab_size()
    text = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, sliding_window=8,
                **({} if LAYER_PATTERNS[pattern] is None else {"layer_types": LAYER_PATTERNS[pattern]}),
                num_experts=4, top_k_experts=2, moe_intermediate_size=32, max_position_embeddings=2048,
                use_bidirectional_attention="vision", pad_token_id=ids["<pad>"], eos_token_id=ids["<eos>"],
                bos_token_id=ids["<bos>"])
    vision = dict(model_type="gemma4_vision", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=16, patch_size=4, pooling_kernel_size=2, position_embedding_size=64)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=16, boi_token_id=ids["<|image>"],
                               eoi_token_id=ids["<image|>"], image_token_id=ids["<|image|>"])
    torch.manual_seed(28)
    model = DiffusionGemmaForBlockDiffusion(cfg).eval()
    with torch.no_grad():
        model.model.decoder.embed_tokens.weight.mul_(40.0)
    model.generation_config = DiffusionGemmaGenerationConfig(
        max_denoising_steps=8, sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.5), t_min=0.4, t_max=0.8,
        stability_threshold=1, confidence_threshold=0.005, eos_token_id=[ids["<eos>"], ids["<turn|>"]],
        pad_token_id=ids["<pad>"], bos_token_id=ids["<bos>"])
    model.save_pretrained(path)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(TEMPLATE_FILE, encoding="utf-8") as f:
        template = f.read()
    tc = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
          "model_max_length": 2048, "tokenizer_class": "GemmaTokenizer", "chat_template": template,
          "added_tokens_decoder": {str(i): {"content": t, "special": True} for t, i in ids.items()}}
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, indent=2)
    return path


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in LAYER_PATTERNS):
        sys.exit(f"usage: make_tiny_diffusion_gemma.py <out-dir> [{'|'.join(LAYER_PATTERNS)}]")
    print(make(*sys.argv[1:]))
