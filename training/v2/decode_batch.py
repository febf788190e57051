"""Batched block-diffusion decoding in PyTorch with the engine's unmasking policies.

    replies = decode_batch(model, prompts, policy="fill(0.6)+threshold(0.6)", max_new_tokens=128)

Mirrors services/inference/decoder/policies/ closely enough for training and evaluation
(bench/decode.ts on the exported model stays the reference): the prompt's tail shares the
first generation block; each step is one forward of every unfinished row (counted per row, as
the bench counts denoising forwards); a step commits, among the block's masked positions,
* ``sequential``: the single most confident guess;
* ``threshold(t)``: every guess of confidence >= t, at least the most confident one;
* ``fill(f)+threshold(t)``: also the block's trailing run of end-of-turn guesses each >= f
  confident, and every position after a committed end of turn (the end-of-turn fill).
A reply ends at the end of turn once nothing before it is masked, or at ``max_new_tokens``.
Rows are re-forwarded whole each step (no KV cache): simple, and exact for block diffusion.
"""

from __future__ import annotations

import re
import sys
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE] + [os.path.join(TRAINING, d) for d in ("pipeline", "model")]
from infer import forward_hidden  # noqa: E402


@dataclass
class Policy:
    name: str
    threshold: Optional[float]  # None: sequential
    fill: Optional[float] = None


def parse_policy(spec: str) -> Policy:
    if spec == "sequential":
        return Policy(spec, None)
    m = re.fullmatch(r"(?:fill\(([\d.]+)\)\+)?threshold(?:\(([\d.]+)\))?", spec)
    if not m:
        raise ValueError(f"unsupported policy {spec!r} (sequential, threshold(t), fill(f)+threshold(t))")
    return Policy(spec, float(m.group(2) or 0.9), float(m.group(1)) if m.group(1) else None)


@dataclass
class Row:
    seq: List[int]
    n_prompt: int
    block_start: int = 0
    masked: List[int] = field(default_factory=list)
    forwards: int = 0
    done: bool = False
    reply: List[int] = field(default_factory=list)
    reason: str = ""


def _open_block(r: Row, bs: int, mask_id: int) -> None:
    end = (len(r.seq) // bs + 1) * bs
    r.block_start = len(r.seq)
    r.masked = list(range(len(r.seq), end))
    r.seq.extend([mask_id] * (end - len(r.seq)))


def _choose(r: Row, conf: torch.Tensor, tok: torch.Tensor, pol: Policy, eos_id: int) -> dict:
    """Positions (index into r.masked) -> token to commit this step."""
    if pol.threshold is None:
        i = int(conf.argmax())
        return {i: int(tok[i])}
    chosen = {i: int(tok[i]) for i in range(len(r.masked)) if float(conf[i]) >= pol.threshold}
    if pol.fill is not None:
        pos_of = {p: i for i, p in enumerate(r.masked)}
        for p in range(len(r.seq) - 1, r.block_start - 1, -1):  # trailing end-of-turn run
            if p not in pos_of:
                if r.seq[p] != eos_id:
                    break
                continue
            i = pos_of[p]
            if int(tok[i]) != eos_id or (float(conf[i]) < pol.fill and chosen.get(i) != eos_id):
                break
            chosen[i] = eos_id
    if not chosen:
        i = int(conf.argmax())
        chosen = {i: int(tok[i])}
    if pol.fill is not None:  # after a committed end of turn, the rest of the block is fill
        ends = [r.masked[i] for i, t in chosen.items() if t == eos_id] + [p for p in range(r.block_start, len(r.seq)) if r.seq[p] == eos_id and p not in r.masked]
        if ends:
            first = min(ends)
            for i, p in enumerate(r.masked):
                if p > first and i not in chosen:
                    chosen[i] = eos_id
    return chosen


@torch.no_grad()
def decode_batch(model, prompts: Sequence[Sequence[int]], policy: str = "sequential", max_new_tokens: int = 128,
                 batch_size: int = 64, device: Optional[torch.device] = None) -> List[dict]:
    """Returns, per prompt, {"tokens": reply ids before the end of turn, "forwards", "reason": stop|length}."""
    device = device or next(model.parameters()).device
    cfg = model.config
    pol = parse_policy(policy)
    out: List[Optional[dict]] = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for lo in range(0, len(order), batch_size):
        idx = order[lo:lo + batch_size]
        rows = [Row(list(prompts[i]), len(prompts[i])) for i in idx]
        for r in rows:
            _open_block(r, cfg.block_size, cfg.mask_token_id)
        while True:
            live = [r for r in rows if not r.done]
            if not live:
                break
            s = max(len(r.seq) for r in live)
            ids = torch.full((len(live), s), cfg.pad_token_id, dtype=torch.long)
            for j, r in enumerate(live):
                ids[j, : len(r.seq)] = torch.tensor(r.seq)
            lengths = torch.tensor([len(r.seq) for r in live])
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                hidden = forward_hidden(model, ids.to(device), lengths.to(device))
            rows_at = torch.tensor([j for j, r in enumerate(live) for _ in r.masked], device=device)
            cols_at = torch.tensor([p for r in live for p in r.masked], device=device)
            logits = (hidden[rows_at, cols_at].float() @ model.embed_tokens.weight.float().t())  # masked positions only
            if getattr(model, "lm_bias", None) is not None:
                logits = logits + model.lm_bias.float()
            offset = 0
            for j, r in enumerate(live):
                r.forwards += 1
                probs = torch.softmax(logits[offset:offset + len(r.masked)], dim=-1)
                offset += len(r.masked)
                conf, tok = probs.max(-1)
                for i, t in sorted(_choose(r, conf.cpu(), tok.cpu(), pol, cfg.eos_token_id).items(), reverse=True):
                    r.seq[r.masked[i]] = t
                    del r.masked[i]
                reply = r.seq[r.n_prompt:]
                if cfg.eos_token_id in reply:
                    e = reply.index(cfg.eos_token_id)
                    if all(p >= r.n_prompt + e for p in r.masked):
                        r.done, r.reply, r.reason = True, reply[:e], "stop"
                        continue
                if not r.masked:
                    if len(r.seq) - r.n_prompt >= max_new_tokens:
                        r.done, r.reply, r.reason = True, reply[:max_new_tokens], "length"
                    else:
                        _open_block(r, cfg.block_size, cfg.mask_token_id)
        for i, r in zip(idx, rows):
            out[i] = {"tokens": r.reply, "forwards": r.forwards, "reason": r.reason}
    return out  # type: ignore[return-value]


def token_f1(a: Sequence[int], b: Sequence[int]) -> float:
    """bench/decode.ts's tokenF1: multiset overlap of token ids; two empty replies agree."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    from collections import Counter

    common = sum((Counter(a) & Counter(b)).values())
    if common == 0:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)
