"""Checks of model.py, export_onnx.py and bpe_tokenizer.py (no GPU, a few seconds).

    /usr/bin/python3 -m unittest discover -s training/model -p 'test_*.py'
"""

from __future__ import annotations

import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe_tokenizer import SPECIAL_TOKENS, ByteBPE, tokenizer_json, train_merges  # noqa: E402
from export_onnx import check, export, input_names  # noqa: E402
from model import BlockDiffusionLM, ModelConfig, additive_mask, block_causal_allowed  # noqa: E402


def small_config(**kw) -> ModelConfig:
    base = dict(vocab_size=97, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=12, block_size=8)
    base.update(kw)
    return ModelConfig(**base)


def causal(positions: torch.Tensor, block: int, past: int = 0):
    k_pos = torch.arange(positions.shape[1] + past).unsqueeze(0).expand(positions.shape[0], -1)
    return block_causal_allowed(positions, k_pos, block)


class ModelTest(unittest.TestCase):
    def setUp(self) -> None:
        torch.manual_seed(0)

    def test_training_path_matches_contract_path(self) -> None:
        for kv in (1, 2, 4):
            cfg = small_config(num_key_value_heads=kv)
            model = BlockDiffusionLM(cfg).eval()
            ids = torch.randint(0, cfg.vocab_size, (2, 21))
            pos = torch.arange(21).unsqueeze(0).expand(2, -1)
            allowed = causal(pos, cfg.block_size)
            with torch.no_grad():
                model.use_sdpa = False
                contract, _ = model(ids, pos, additive_mask(allowed), [])
                boolean, _ = model(ids, pos, allowed)
                model.use_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
                training, _ = model(ids, pos, allowed)
            self.assertLess(float((contract - boolean).abs().max()), 1e-5)
            self.assertLess(float((contract - training).abs().max()), 1e-4)

    def test_kv_cache_of_complete_blocks_is_exact(self) -> None:
        cfg = small_config()
        model = BlockDiffusionLM(cfg).eval()
        model.use_sdpa = False
        n, cut = 29, 16  # two complete blocks of 8 in the prefix
        ids = torch.randint(0, cfg.vocab_size, (1, n))
        pos = torch.arange(n).unsqueeze(0)
        with torch.no_grad():
            full, full_kv = model(ids, pos, additive_mask(causal(pos, cfg.block_size)), [])
            _, pre_kv = model(ids[:, :cut], pos[:, :cut], additive_mask(causal(pos[:, :cut], cfg.block_size)), [])
            rest, rest_kv = model(ids[:, cut:], pos[:, cut:], additive_mask(causal(pos[:, cut:], cfg.block_size, cut)), pre_kv)
        self.assertLess(float((rest - full[:, cut:]).abs().max()), 1e-5)
        for (k1, v1), (k2, v2) in zip(rest_kv, full_kv):
            self.assertEqual(tuple(k1.shape), (1, cfg.num_key_value_heads, n, cfg.head_dim))
            self.assertLess(float((k1 - k2).abs().max()), 1e-5)
            self.assertLess(float((v1 - v2).abs().max()), 1e-5)

    def test_fully_blocked_rows_stay_finite(self) -> None:
        cfg = small_config()
        model = BlockDiffusionLM(cfg).eval()
        pos = torch.tensor([[0, 1, 2, -1]])
        allowed = causal(pos.clamp(min=0), cfg.block_size) & (pos >= 0).unsqueeze(1).unsqueeze(-1)
        for sdpa in (False, hasattr(torch.nn.functional, "scaled_dot_product_attention")):
            model.use_sdpa = sdpa
            with torch.no_grad():
                logits, _ = model(torch.tensor([[1, 2, 3, 0]]), pos.clamp(min=0), allowed)
            self.assertTrue(bool(torch.isfinite(logits).all()))

    def test_config_round_trips_through_json(self) -> None:
        cfg = small_config(lm_head_bias=True, rope_theta=500000.0)
        with tempfile.TemporaryDirectory() as d:
            cfg.save(os.path.join(d, "config.json"))
            self.assertEqual(ModelConfig.load(os.path.join(d, "config.json")), cfg)
        self.assertEqual(cfg.to_json_dict()["model_type"], "tessera-block-diffusion")


class ExportTest(unittest.TestCase):
    def test_export_has_contract_names_and_no_second_embedding(self) -> None:
        import onnx

        torch.manual_seed(0)
        for bias in (False, True):
            cfg = small_config(lm_head_bias=bias)
            model = BlockDiffusionLM(cfg)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "model.onnx")
                export(model, path)
                check(model, path)
                m = onnx.load(path)
                self.assertEqual([i.name for i in m.graph.input], input_names(cfg.num_hidden_layers))
                big = [i.name for i in m.graph.initializer if cfg.vocab_size in i.dims and len(i.dims) == 2]
                self.assertEqual(big, ["model.embed_tokens.weight"])


class TokenizerTest(unittest.TestCase):
    texts = ["the cat sat on the mat. the dog sat on the log.", "<|im_start|>user\nhello there<|im_end|>"]

    def test_merges_are_deterministic_and_skip_special_tokens(self) -> None:
        a = train_merges(self.texts, 40)
        self.assertEqual(a, train_merges(list(self.texts), 40))
        self.assertFalse(any("|" in x + y for x, y in a))

    def test_round_trip_and_special_tokens(self) -> None:
        bpe = ByteBPE(tokenizer_json(train_merges(self.texts, 40)))
        self.assertEqual(len(bpe), 256 + len(train_merges(self.texts, 40)) + len(SPECIAL_TOKENS))
        for text in ["the cat", "Zürich 🙂\n\n  x\t", "<|mask|><|opt_5|>a<think>b</think>", ""]:
            self.assertEqual(bpe.decode(bpe.encode(text)), text)
        self.assertEqual(bpe.encode("<|opt_127|>"), [bpe.token_id("<|opt_127|>")])
        self.assertLess(len(bpe.encode("the cat sat on the mat")), len("the cat sat on the mat"))


if __name__ == "__main__":
    unittest.main()
