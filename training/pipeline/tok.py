"""The bundled model's tokenizer: byte-level BPE in the Hugging Face tokenizer.json format.

Trained with the Rust ``tokenizers`` library when it is importable (the GPU machine);
otherwise (CPU smoke tests) with ``bpe_tokenizer.train_merges`` on a small sample. Both use
the split pattern of ``bpe_tokenizer.PRETOKENIZE_PATTERN`` (ASCII classes only), so the
Node loader (@huggingface/tokenizers) splits text exactly as training did.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Iterable, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from bpe_tokenizer import PRETOKENIZE_PATTERN, SPECIAL_TOKENS, ByteBPE, tokenizer_config_json, tokenizer_json, train_merges  # noqa: E402

try:
    import tokenizers as hf_tokenizers  # type: ignore
except ImportError:  # CPU smoke tests on the dev machine
    hf_tokenizers = None


def train_tokenizer(texts: Sequence[str], vocab_size: int, out_dir: str, chat_template: str, model_max_length: int) -> None:
    """Writes tokenizer.json and tokenizer_config.json into ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    if hf_tokenizers is not None:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
        tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer=trainer)
        tok.save(os.path.join(out_dir, "tokenizer.json"))
        with open(os.path.join(out_dir, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
    else:
        num_merges = max(0, vocab_size - 256 - len(SPECIAL_TOKENS))
        merges = train_merges(texts, num_merges)
        tj = tokenizer_json(merges)
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
    cfg = tokenizer_config_json([], chat_template, model_max_length)
    # tokenizer_config_json numbers specials as if they followed the merges; use the real ids.
    cfg["added_tokens_decoder"] = {
        str(ids[s]): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
        for s in SPECIAL_TOKENS
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")


class Tok:
    """Encodes with the Rust library when present (fast, batched), else with ByteBPE."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            self.json = json.load(f)
        self.ids = {t["content"]: t["id"] for t in self.json["added_tokens"]}
        self.vocab_size = max(max(self.json["model"]["vocab"].values()), max(self.ids.values())) + 1
        self.fast = hf_tokenizers.Tokenizer.from_file(path) if hf_tokenizers is not None else None
        self.slow = ByteBPE(self.json)

    def token_id(self, token: str) -> int:
        return self.ids[token]

    def encode_batch(self, texts: List[str]) -> List[List[int]]:
        if self.fast is not None:
            return [e.ids for e in self.fast.encode_batch(texts, add_special_tokens=False)]
        return [self.slow.encode(t) for t in texts]

    def encode(self, text: str) -> List[int]:
        return self.encode_batch([text])[0]

    def decode(self, ids: Iterable[int]) -> str:
        return self.slow.decode(list(ids))
