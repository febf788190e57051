"""Unit checks of model v2's training pieces (issue 25); seconds on a CPU.

    convert/.venv/bin/python -m unittest training/v2/test_v2.py     (needs onnx + onnxruntime)

The whole pipeline at toy sizes: ``bash training/v2/smoke-v2.sh``.
"""

from __future__ import annotations

import os
import sys
import unittest

import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE] + [os.path.join(TRAINING, d) for d in ("pipeline", "model")]
from dataset import raw_continuations, tokenize_records  # noqa: E402
from decode_batch import _choose, Row, decode_batch, parse_policy, token_f1  # noqa: E402
from eval_targets import structured_ok, validates  # noqa: E402

TINY = os.path.join(TRAINING, "..", "test", "fixtures", "tiny-model")
BUNDLED = os.path.join(TRAINING, "..", "models", "tessera-bd-small")
try:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    HAS_ORT = True
except ImportError:
    HAS_ORT = False
needs_ort = unittest.skipUnless(HAS_ORT, "needs onnx and onnxruntime (convert/.venv)")


class RawContinuation(unittest.TestCase):
    def test_cuts_at_spaces_and_tokenizes_as_the_whole_text(self):
        from tok import Tok

        tok = Tok(os.path.join(TINY, "tokenizer.json"))
        text = "A harbor is a sheltered port where ships can take on or discharge cargo."
        pairs = raw_continuations([{"k": "raw", "task": "raw_definition", "text": text}], "<|im_end|>", cuts=3)
        self.assertEqual(len(pairs), 3)
        for p in pairs:
            self.assertTrue(p["r"].startswith(" ") and p["r"].endswith("<|im_end|>"))
            self.assertEqual(p["p"] + p["r"][: -len("<|im_end|>")], text)
            self.assertGreaterEqual(len(p["r"]) - len("<|im_end|>"), len(text) // 3)
            self.assertEqual(tok.encode(p["p"]) + tok.encode(p["r"]), tok.encode(text) + [tok.token_id("<|im_end|>")])
        exs, dropped = tokenize_records(pairs, tok, 64, 4096)
        self.assertEqual((len(exs), sum(dropped.values())), (3, 0))
        self.assertTrue(all(e.kind == 0 and len(e.ids) % 64 == 0 for e in exs))


class Policies(unittest.TestCase):
    def test_parse(self):
        self.assertIsNone(parse_policy("sequential").threshold)
        p = parse_policy("fill(0.6)+threshold(0.7)")
        self.assertEqual((p.fill, p.threshold), (0.6, 0.7))
        self.assertEqual(parse_policy("threshold").threshold, 0.9)
        with self.assertRaises(ValueError):
            parse_policy("credit(bound=3)+threshold(0.9)")

    def test_fill_commits_the_trailing_end_of_turn_run_and_what_follows_an_end(self):
        eos, mask = 3, 1
        r = Row(seq=[7, 8] + [mask] * 6, n_prompt=2, block_start=2, masked=list(range(2, 8)))
        tok = torch.tensor([20, 21, eos, 22, eos, eos])
        conf = torch.tensor([0.95, 0.3, 0.4, 0.2, 0.65, 0.7])
        got = _choose(r, conf, tok, parse_policy("fill(0.6)+threshold(0.9)"), eos)
        # 0.95 by threshold; the trailing run (positions 4, 5 at >= 0.6) by fill; nothing else
        self.assertEqual(got, {0: 20, 4: eos, 5: eos})
        conf2 = torch.tensor([0.95, 0.3, 0.92, 0.2, 0.1, 0.1])
        got2 = _choose(r, conf2, tok, parse_policy("fill(0.6)+threshold(0.9)"), eos)
        # an end of turn committed at index 2: indices 3-5 are fill in the same step
        self.assertEqual(got2, {0: 20, 2: eos, 3: eos, 4: eos, 5: eos})
        self.assertEqual(_choose(r, conf2, tok, parse_policy("sequential"), eos), {0: 20})

    @needs_ort
    def test_decode_batch_matches_one_prompt_at_a_time_and_sequential_agrees_with_itself(self):
        from onnx_weights import model_from_onnx
        from tok import Tok

        model = model_from_onnx(TINY)
        tok = Tok(os.path.join(TINY, "tokenizer.json"))
        prompts = [tok.encode(f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n") for q in ["hi", "What does harbor mean?", "x"]]
        together = decode_batch(model, prompts, "threshold(0.5)", max_new_tokens=64, batch_size=3)
        alone = [decode_batch(model, [p], "threshold(0.5)", max_new_tokens=64)[0] for p in prompts]
        self.assertEqual(together, alone)
        for o in together:
            self.assertIn(o["reason"], ("stop", "length"))
            self.assertLessEqual(len(o["tokens"]), 64)
        self.assertEqual(token_f1([1, 2, 3], [3, 2, 1]), 1.0)
        self.assertEqual(token_f1([], []), 1.0)
        self.assertAlmostEqual(token_f1([1, 2], [1, 3]), 0.5)


@needs_ort
class WarmStart(unittest.TestCase):
    def test_onnx_weights_reproduce_onnx_runtime(self):
        from onnx_weights import model_from_onnx, verify

        model = model_from_onnx(TINY, max_position_embeddings=4096)
        self.assertEqual(model.config.max_position_embeddings, 4096)
        self.assertLess(verify(model, os.path.join(TINY, "model.onnx")), 2e-3)
        with torch.no_grad():
            model.layers[0].mlp.up_proj.weight.mul_(-1)  # a scrambled mapping must be caught
        with self.assertRaises(ValueError):
            verify(model, os.path.join(TINY, "model.onnx"))

    def test_the_shipped_fp16_model_warm_starts(self):
        # Its initializers are `X_fp16`, cast back to `X` in the graph.
        from onnx_weights import model_from_onnx, verify

        model = model_from_onnx(BUNDLED, max_position_embeddings=4096)
        self.assertLess(verify(model, os.path.join(BUNDLED, "model.onnx")), 2e-3)


class StructuredCheck(unittest.TestCase):
    SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                                               "tags": {"type": "array", "items": {"type": "string"}},
                                               "nick": {"type": ["string", "null"]}},
              "required": ["name", "age"], "additionalProperties": False}

    def test_validates(self):
        self.assertTrue(validates({"name": "Lena", "age": 3, "tags": ["a"], "nick": None}, self.SCHEMA))
        self.assertFalse(validates({"name": "Lena"}, self.SCHEMA))
        self.assertFalse(validates({"name": "Lena", "age": True}, self.SCHEMA))
        self.assertFalse(validates({"name": "Lena", "age": -1}, self.SCHEMA))
        self.assertFalse(validates({"name": "Lena", "age": 3, "x": 1}, self.SCHEMA))
        self.assertFalse(validates({"name": "Lena", "age": 3, "tags": [1]}, self.SCHEMA))
        self.assertTrue(validates({"a": 1}, None))

    def test_tool_call_reply_in_the_forced_and_free_forms(self):
        item = {"task": "struct_tool", "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
        forced = '<|im_start|>assistant\n<tool_call>{"name": "lookup", "arguments": '
        self.assertTrue(structured_ok(forced, '{"city": "Oslo"}}</tool_call>', item))
        self.assertTrue(structured_ok("<|im_start|>assistant\n", '<tool_call>{"name": "lookup", "arguments": {"city": "Oslo"}}</tool_call>', item))
        self.assertFalse(structured_ok("<|im_start|>assistant\n", '<tool_call>{"name": "lookup", "arguments": {"city": 4}}</tool_call>', item))
        self.assertFalse(structured_ok("<|im_start|>assistant\n", '{"city": "Oslo"', {"task": "struct_json", "schema": None}))


if __name__ == "__main__":
    unittest.main()
