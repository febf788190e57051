"""Checks that packed training rows compute exactly what inference computes.

    /usr/bin/python3 training/pipeline/test_packing.py

A random small model; several chat and decision examples packed into one row with the
BD3-style noisy/clean layout. For every noisy block of every example, the logits in the
packed row must equal those of a plain block-causal forward over (clean earlier blocks +
that noisy block), which is what the decoder runs; decision slots must equal
``infer.decision_logits``.
"""

from __future__ import annotations

import os
import sys
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from dataset import COPY_N, Example, attention_allowed, collate, pack_row  # noqa: E402
from infer import decision_logits, forward_logits  # noqa: E402
from model import BlockDiffusionLM, ModelConfig  # noqa: E402
from train import hidden_states  # noqa: E402

BS = 64


def check_packing() -> str:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=8, mask_token_id=1, eos_token_id=3, pad_token_id=0)
    model = BlockDiffusionLM(cfg).eval()
    rng = np.random.default_rng(0)

    def chat(n_prompt: int, n_reply: int) -> Example:
        ids = rng.integers(10, 300, n_prompt + n_reply).tolist() + [3]
        ids += [3] * ((-len(ids)) % BS)
        return Example(np.asarray(ids, np.int32), n_prompt, 0, "chat")

    def dec(n: int, k: int) -> Example:
        ids = rng.integers(10, 300, n - 1).tolist() + [1]
        labels = np.arange(200, 200 + k, dtype=np.int32)
        t = np.zeros(k, np.float32)
        t[0] = 1
        return Example(np.asarray(ids, np.int32), n - 1, 1, "dec", labels, t)

    exs = [chat(70, 100), dec(90, 3), chat(10, 20), dec(64, 2), chat(128, 64), dec(5, 4)]
    R = sum(e.packed_len(BS) for e in exs) + 17
    row = pack_row(exs, R, BS, 1, 0, rng)
    batch = collate([row])
    with torch.no_grad():
        allowed = attention_allowed(batch["doc"], batch["block"], batch["copy"])
        h = hidden_states(model, batch["input_ids"], batch["position_ids"], allowed)
        packed_logits = (h @ model.embed_tokens.weight.t())[0]
    worst = 0.0
    checked = 0
    for d, ex in enumerate(exs):
        sel_doc = batch["doc"][0] == d
        for b in range(ex.blocks(BS)):
            sel = sel_doc & (batch["block"][0] == b) & (batch["copy"][0] == COPY_N)
            if not sel.any():
                continue
            noisy = batch["input_ids"][0][sel].tolist()
            seq = list(ex.ids[: b * BS]) + noisy
            ref = forward_logits(model, torch.tensor([seq]), torch.tensor([len(seq)]))[0][b * BS:]
            worst = max(worst, float((ref - packed_logits[sel]).abs().max()))
            checked += 1
    decs = [(p, ex) for p, ex in row.slot_example]
    ref = decision_logits(model, [list(ex.ids) for _, ex in decs], [list(ex.labels) for _, ex in decs], torch.device("cpu"))
    for (p, ex), r in zip(decs, ref):
        worst = max(worst, float(np.abs(packed_logits[p, list(ex.labels)].numpy() - r).max()))
    assert checked >= 6, checked
    assert worst < 1e-4, f"packed logits differ from inference by {worst}"
    return f"ok: {checked} noisy blocks and {len(decs)} decision slots match inference (max diff {worst:.2e})"


class PackingTest(unittest.TestCase):
    def test_packed_rows_match_inference(self) -> None:
        check_packing()


if __name__ == "__main__":
    print(check_packing())
