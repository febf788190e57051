"""The peer's reply: SDAR's published generation loop (github.com/JetAstra/SDAR generate.py,
``block_diffusion_generate``) run with transformers and torch on this CPU, greedy.

    convert/.venv/bin/python bench/full_size/peer_reply.py <checkpoint> [--dtype float32|bfloat16]
        [--block 64] [--threshold 0.9] [--gen 64] [--threads 2] [--prompt TEXT]

The loop as published: the prompt's whole blocks prefilled into a DynamicCache; then block by
block, a denoising forward per step over the block against the cache (``store_kv=False``: here
the cache is cropped back after the forward, as transformers' Qwen3 has no store_kv flag),
``low_confidence_dynamic`` with denoising_steps = block length (commit every masked position
above the threshold, else the most confident one), and one storing forward once the block has
no mask left. Greedy (the argmax and its probability) in place of sampling, the mask token
never a guess, as Tessera decodes with temperature 0. transformers' Qwen3ForCausalLM (SDAR's
layers; sdpa attention) with the block-causal mask passed in.
Prints one JSON line: prompt tokens, reply tokens, forwards, ms.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "convert", "tests"))
from parity import reference_model  # noqa: E402


def additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    return torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype)[None, None]


@torch.no_grad()
def generate(model, prompt: list, mask_id: int, banned: list, block: int, gen: int, threshold: float):
    from transformers import DynamicCache

    dtype = model.dtype
    n = len(prompt)
    blocks = (n + gen + block - 1) // block
    total = blocks * block
    bm = torch.tril(torch.ones(blocks, blocks, dtype=torch.bool)).repeat_interleave(block, 0).repeat_interleave(block, 1)
    pos = torch.arange(total)[None]
    x = torch.full((1, total), mask_id, dtype=torch.long)
    x[0, :n] = torch.tensor(prompt)
    cache = DynamicCache()
    forwards = 0
    pre = n // block * block
    if pre > 0:
        model(x[:, :pre], attention_mask=additive(bm[:pre, :pre], dtype), position_ids=pos[:, :pre], past_key_values=cache, use_cache=True)
        forwards += 1
    for b in range(n // block, blocks):
        s, e = b * block, (b + 1) * block
        cur = x[:, s:e].clone()
        mask = additive(bm[s:e, :e], dtype)
        for _ in range(block + 1):
            masked = cur == mask_id
            if not masked.any():
                model(cur, attention_mask=mask, position_ids=pos[:, s:e], past_key_values=cache, use_cache=True)
                forwards += 1
                break
            logits = model(cur, attention_mask=mask, position_ids=pos[:, s:e], past_key_values=cache, use_cache=True).logits.float()
            cache.crop(s)
            forwards += 1
            logits[..., banned] = float("-inf")
            p, tok = torch.softmax(logits, -1).max(-1)
            conf = torch.where(masked, p, -torch.inf)[0]
            pick = conf > threshold
            if not pick.any():
                pick = torch.zeros_like(pick)
                pick[conf.argmax()] = True
            cur[0, pick] = tok[0, pick]
        x[:, s:e] = cur
    return x[0, n:n + gen].tolist(), forwards


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", default="Could you explain what the term giggle refers to?")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(a.checkpoint, "tokenizer.json"))
    jinja = os.path.join(a.checkpoint, "chat_template.jinja")
    template = open(jinja).read() if os.path.exists(jinja) else json.load(open(os.path.join(a.checkpoint, "tokenizer_config.json")))["chat_template"]
    ids = tok.apply_chat_template([{"role": "user", "content": a.prompt}], chat_template=template, add_generation_prompt=True,
                                  tokenize=True, enable_thinking=False)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    added = json.load(open(os.path.join(a.checkpoint, "added_tokens.json")))
    mask_id = added.get("<|MASK|>", added.get("|<MASK>|"))
    model, _ = reference_model(a.checkpoint, getattr(torch, a.dtype))
    model.config._attn_implementation = "sdpa"
    generate(model, ids, mask_id, [mask_id], a.block, 8, a.threshold)  # warm-up
    t = time.perf_counter()
    reply, forwards = generate(model, ids, mask_id, [mask_id], a.block, a.gen, a.threshold)
    ms = 1000 * (time.perf_counter() - t)
    print(json.dumps({"dtype": a.dtype, "prompt_tokens": len(ids), "reply_tokens": len(reply), "forwards": forwards, "ms": ms, "reply": reply[:16]}))


if __name__ == "__main__":
    main()
