"""The peer's reply: the family's published generation loop run with transformers and torch on
this CPU, greedy: SDAR's (github.com/JetAstra/SDAR generate.py, ``block_diffusion_generate``) or
Fast-dLLM v2's (``Fast_dLLM_QwenForCausalLM.generate`` of its model repository, run by
github.com/NVlabs/Fast-dLLM ``v2/run_chatbot.py`` with block_size 32, small_block_size 8,
threshold 0.9), picked by the checkpoint's ``model_type``.

    convert/.venv/bin/python bench/full_size/peer_reply.py <checkpoint> [--dtype float32|bfloat16]
        [--block N (SDAR 64; Fast-dLLM its bd_size)] [--small-block 8] [--threshold 0.9] [--gen 64]
        [--threads 2] [--prompt TEXT]

SDAR's loop as published: the prompt's whole blocks prefilled into a DynamicCache; then block by
block, a denoising forward per step over the block against the cache (``store_kv=False``: here
the cache is cropped back after the forward, as transformers' Qwen3 has no store_kv flag),
``low_confidence_dynamic`` with denoising_steps = block length (commit every masked position
above the threshold, else the most confident one), and one storing forward once the block has
no mask left. Greedy (the argmax and its probability) in place of sampling, the mask token
never a guess, as Tessera decodes with temperature 0. transformers' Qwen3ForCausalLM (SDAR's
layers; sdpa attention) with the block-causal mask passed in.

Fast-dLLM v2's loop as published (``use_block_cache`` False, its default): the prompt's whole
blocks prefilled when the prompt is longer than a block (and, when it ends on a boundary, the
next token read greedily from the last row); then block by block, sub-block by sub-block (8), a
forward of the whole block against the cache per step (not stored: cropped back here), its
logits shifted by one (position j read from row j - 1), every masked position of the sub-block
above the threshold committed, else the most confident one; a block with no mask left gets one
storing forward, whose last row gives the next block's first token. It stops once the stop
token (``<|im_end|>``) has no mask before it. Published, it runs max_new_tokens // block_size
blocks, the first holding the prompt's tail; here it runs until ``--gen`` reply tokens (as
Tessera's max_tokens counts them) or the stop. transformers' Qwen2ForCausalLM (its layers).
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


def keep_first(cache, s: int) -> None:
    """Drops the cache's positions from s on (crop(0) would keep everything: a count to remove)."""
    extra = cache.get_seq_length() - s
    if extra > 0:
        cache.crop(-extra)


def additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    return torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype)[None, None]


@torch.no_grad()
def generate_sdar(model, prompt: list, mask_id: int, banned: list, block: int, gen: int, threshold: float):
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
            keep_first(cache, s)
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


@torch.no_grad()
def generate_fast_dllm(model, prompt: list, mask_id: int, stop: int, block: int, small: int, gen: int, threshold: float):
    from transformers import DynamicCache

    dtype = model.dtype
    n = len(prompt)
    x = torch.tensor(prompt)[None]
    cache = DynamicCache()
    forwards = 0

    def forward(s: int, store: bool):
        """Logits of x[s:] against the cache (which holds x[:s]); kept in the cache when store."""
        nonlocal forwards
        e = x.shape[1]
        k = torch.arange(e)
        allowed = (k[None] // block) <= (k[s:, None] // block)
        out = model(x[:, s:], attention_mask=additive(allowed, dtype), position_ids=k[None, s:], past_key_values=cache, use_cache=True)
        if not store:
            keep_first(cache, s)
        forwards += 1
        logits = out.logits.float()
        logits[..., mask_id] = float("-inf")
        return logits

    def done() -> bool:
        reply = x[0, n:]
        hits = (reply == stop).nonzero()
        return len(hits) > 0 and not (reply[: int(hits[0])] == mask_id).any()

    if n > block:
        whole, x = x, x[:, : n // block * block]
        logits = forward(0, True)
        x = whole
        if n % block == 0:
            x = torch.cat([x, logits[:, -1:].argmax(-1)], 1)
    while x.shape[1] - n < gen and not done():
        s = x.shape[1] // block * block if x.shape[1] % block else x.shape[1]
        x = torch.cat([x, torch.full((1, s + block - x.shape[1]), mask_id)], 1)
        while not done():
            if not (x[0, s:] == mask_id).any():
                logits = forward(s, True)
                x = torch.cat([x, logits[:, -1:].argmax(-1)], 1)
                break
            for sub in range(0, block, small):
                while not done():
                    masked = x[0, s + sub:s + sub + small] == mask_id
                    if not masked.any():
                        break
                    logits = forward(s, False)[0]
                    shifted = torch.cat([logits[:1], logits[:-1]])[sub:sub + small]
                    p, tok = torch.softmax(shifted, -1).max(-1)
                    conf = torch.where(masked, p, -torch.inf)
                    pick = conf > threshold
                    pick[conf.argmax()] = True
                    pick &= masked
                    x[0, s + sub:s + sub + small][pick] = tok[pick]
    reply = x[0, n:].tolist()
    if stop in reply:
        reply = reply[:reply.index(stop) + 1]
    return reply[:gen], forwards


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--block", type=int, default=None)
    ap.add_argument("--small-block", type=int, default=8)
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
    cfg = json.load(open(os.path.join(a.checkpoint, "config.json")))
    model, _ = reference_model(a.checkpoint, getattr(torch, a.dtype))
    model.config._attn_implementation = "sdpa"
    if cfg["model_type"] == "sdar":
        block = a.block or 64
        run = lambda gen: generate_sdar(model, ids, mask_id, [mask_id], block, gen, a.threshold)  # noqa: E731
    else:
        block = a.block or cfg["bd_size"]
        stop = added["<|im_end|>"]
        run = lambda gen: generate_fast_dllm(model, ids, mask_id, stop, block, a.small_block, gen, a.threshold)  # noqa: E731
    run(8)  # warm-up
    t = time.perf_counter()
    reply, forwards = run(a.gen)
    ms = 1000 * (time.perf_counter() - t)
    print(json.dumps({"family": cfg["model_type"], "dtype": a.dtype, "block": block, "threshold": a.threshold, "prompt_tokens": len(ids),
                      "reply_tokens": len(reply), "forwards": forwards, "ms": ms, "reply": reply[:16],
                      "text": tok.decode(reply, skip_special_tokens=True)}))


if __name__ == "__main__":
    main()
