"""Inference in PyTorch exactly as the service does it (docs/architecture.md §5, §6).

* ``decision_logits``: prompt = ids of prefix + suffix (one piece) + one <|mask|>; block-causal attention
  by absolute position; the logits of the offered labels at the slot.
* ``probabilities``: softmax(logits / T) over the offered labels only (float64).
* ``generate``: block diffusion decoding: the prompt's complete blocks are context, its tail
  shares the first generation block and is never masked; each step is one forward; every
  masked position whose top probability is >= threshold is committed, and always at least
  the most confident one; stop at the end of turn once nothing before it is masked.
  ``threshold=None`` is one-token-per-step decoding (the most confident position only).
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from model import BlockDiffusionLM, ModelConfig, block_causal_allowed, rotary_cos_sin  # noqa: E402


def load_checkpoint(path: str, device: torch.device) -> BlockDiffusionLM:
    ck = torch.load(path, map_location="cpu")
    model = BlockDiffusionLM(ModelConfig.from_json_dict(ck["config"]))
    model.load_state_dict({k: v.float() for k, v in ck["model"].items()})
    return model.to(device).eval()


def forward_hidden(model: BlockDiffusionLM, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Hidden states after the final norm: right-padded rows [B, S] of true ``lengths``,
    block-causal mask, pads blocked as keys."""
    b, s = ids.shape
    pos = torch.arange(s, device=ids.device).unsqueeze(0).expand(b, s)
    k_pos = torch.where(pos < lengths.unsqueeze(1), pos, torch.full_like(pos, -1))
    allowed = block_causal_allowed(pos, k_pos, model.config.block_size)
    allowed = allowed | torch.eye(s, dtype=torch.bool, device=ids.device).view(1, 1, s, s)
    x = model.embed_tokens(ids)
    cos, sin = rotary_cos_sin(pos, model.config.head_dim, model.config.rope_theta, x.dtype)
    for layer in model.layers:
        x, _ = layer(x, cos, sin, allowed, None, model.use_sdpa)
    return model.norm(x)


@torch.no_grad()
def forward_logits(model: BlockDiffusionLM, ids: torch.Tensor, lengths: torch.Tensor, positions: Optional[torch.Tensor] = None,
                   only: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Right-padded rows [B, S] of true ``lengths``; block-causal mask; pads blocked as keys.

    ``only`` [B] selects one position per row (returns [B, V]); otherwise [B, S, V]."""
    x = forward_hidden(model, ids, lengths)
    b = ids.shape[0]
    if only is not None:
        x = x[torch.arange(b, device=ids.device), only]
    return (x @ model.embed_tokens.weight.t()).float()


@torch.no_grad()
def decision_logits(model: BlockDiffusionLM, prompts: Sequence[Sequence[int]], labels: Sequence[Sequence[int]],
                    device: torch.device, batch_tokens: int = 65536) -> List[np.ndarray]:
    """Label logits at the slot (the last token of each prompt), in input order."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: List[Optional[np.ndarray]] = [None] * len(prompts)
    i = 0
    while i < len(order):
        s = len(prompts[order[i]])
        j = i
        while j < len(order) and (j - i + 1) * len(prompts[order[j]]) <= batch_tokens:
            j += 1
        j = max(j, i + 1)
        idx = order[i:j]
        s = max(len(prompts[k]) for k in idx)
        ids = torch.zeros(len(idx), s, dtype=torch.long)
        for r, k in enumerate(idx):
            ids[r, : len(prompts[k])] = torch.tensor(prompts[k])
        lengths = torch.tensor([len(prompts[k]) for k in idx])
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = forward_logits(model, ids.to(device), lengths.to(device), only=(lengths - 1).to(device))
        logits = logits.float().cpu().numpy()
        for r, k in enumerate(idx):
            out[k] = logits[r, list(labels[k])].astype(np.float64)
        i = j
    return out  # type: ignore[return-value]


def probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits.astype(np.float64) / temperature
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


@torch.no_grad()
def generate(model: BlockDiffusionLM, prompt: Sequence[int], device: torch.device, mask_id: int, eos_id: int,
             threshold: Optional[float] = 0.9, max_new_tokens: int = 256) -> Tuple[List[int], Dict[str, int]]:
    """Returns (reply ids before the end of turn, {"forwards", "tokens"})."""
    bs = model.config.block_size
    seq = list(prompt)
    n_prompt = len(seq)
    forwards = 0
    limit = n_prompt + max_new_tokens
    while True:
        block_end = (len(seq) // bs + 1) * bs
        free = block_end - len(seq)
        seq = seq + [mask_id] * free
        masked = list(range(block_end - free, block_end))
        while masked:
            ids = torch.tensor([seq], device=device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = forward_logits(model, ids, torch.tensor([len(seq)], device=device))[0]
            forwards += 1
            probs = torch.softmax(logits[masked].float(), dim=-1)
            conf, tok = probs.max(-1)
            if threshold is None:
                commit = [int(conf.argmax())]
            else:
                commit = [i for i in range(len(masked)) if conf[i] >= threshold] or [int(conf.argmax())]
            for i in commit:
                seq[masked[i]] = int(tok[i])
            masked = [p for j, p in enumerate(masked) if j not in set(commit)]
            reply = seq[n_prompt:]
            if eos_id in reply:
                e = reply.index(eos_id)
                if all(p >= n_prompt + e for p in masked):
                    return reply[:e], {"forwards": forwards, "tokens": e}
        if len(seq) >= limit:
            reply = seq[n_prompt:limit]
            return reply, {"forwards": forwards, "tokens": len(reply)}
