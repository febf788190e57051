"""Byte-level BPE tokenizer in the Hugging Face tokenizer.json format, without a library.

* ``train_merges(texts, num_merges)`` learns merges (deterministic: ties go to the
  lexicographically smallest pair);
* ``tokenizer_json(merges)`` / ``tokenizer_config_json(...)`` write the two files the engine
  loads with ``@huggingface/tokenizers``;
* ``ByteBPE`` encodes and decodes exactly like that loader, so Python training data and the
  Node engine agree token for token (test/model/tiny-model.test.ts checks it).

Ids: the 256 byte symbols (id = byte value), then one id per merge, then the special
tokens of docs/model-contract.md in the order of ``SPECIAL_TOKENS``.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

SPECIAL_TOKENS: List[str] = [
    "<|pad|>",
    "<|mask|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|yes|>",
    "<|no|>",
] + [f"<|opt_{i}|>" for i in range(128)]

# GPT-2 style split, spelled with ASCII classes only so Python's `re` and the JS loader
# (which translates Oniguruma syntax) split every string identically. Non-ASCII text is
# grouped with punctuation and left to the byte-level merges.
_WS = r"\t\n\v\f\r "
PRETOKENIZE_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d"
    r"| ?[A-Za-z]+"
    r"| ?[0-9]{1,3}"
    rf"| ?[^{_WS}A-Za-z0-9]+"
    rf"|[{_WS}]+(?![^{_WS}])"
    rf"|[{_WS}]+"
)
_PRETOKENIZE_RE = re.compile(PRETOKENIZE_PATTERN)


def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's reversible byte -> printable character table (used by ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pretokenize(text: str) -> List[str]:
    """Regex split then byte-level mapping: the chunks BPE works on."""
    return ["".join(BYTE_TO_CHAR[b] for b in m.group(0).encode("utf-8")) for m in _PRETOKENIZE_RE.finditer(text)]


def _split_specials(text: str, specials: Sequence[str]) -> List[Tuple[str, bool]]:
    if not specials:
        return [(text, False)]
    pattern = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
    out: List[Tuple[str, bool]] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(0), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def train_merges(texts: Iterable[str], num_merges: int, specials: Sequence[str] = SPECIAL_TOKENS) -> List[Tuple[str, str]]:
    """Learn up to ``num_merges`` merges from ``texts`` (special tokens are never merged)."""
    word_freq: Counter = Counter()
    for text in texts:
        for part, is_special in _split_specials(text, specials):
            if not is_special:
                word_freq.update(pretokenize(part))
    words: List[List[str]] = [list(w) for w in word_freq]
    freqs: List[int] = [word_freq[w] for w in word_freq]

    pair_counts: Counter = Counter()
    where: Dict[Tuple[str, str], set] = defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_counts[(a, b)] += freqs[i]
            where[(a, b)].add(i)

    merges: List[Tuple[str, str]] = []
    while len(merges) < num_merges and pair_counts:
        count = max(pair_counts.values())
        pair = min(p for p, c in pair_counts.items() if c == count)
        if count < 2:
            break
        merges.append(pair)
        merged = pair[0] + pair[1]
        for i in list(where.pop(pair, ())):
            w = words[i]
            f = freqs[i]
            for a, b in zip(w, w[1:]):
                pair_counts[(a, b)] -= f
                if pair_counts[(a, b)] <= 0:
                    del pair_counts[(a, b)]
            nw: List[str] = []
            j = 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == pair[0] and w[j + 1] == pair[1]:
                    nw.append(merged)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[i] = nw
            for a, b in zip(nw, nw[1:]):
                pair_counts[(a, b)] += f
                where[(a, b)].add(i)
        pair_counts.pop(pair, None)
    return merges


def build_vocab(merges: Sequence[Tuple[str, str]]) -> Dict[str, int]:
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    for a, b in merges:
        tok = a + b
        if tok in vocab:
            raise ValueError(f"merge {a!r}+{b!r} repeats token {tok!r}")
        vocab[tok] = len(vocab)
    return vocab


def special_token_ids(merges: Sequence[Tuple[str, str]], specials: Sequence[str] = SPECIAL_TOKENS) -> Dict[str, int]:
    base = 256 + len(merges)
    return {s: base + i for i, s in enumerate(specials)}


def tokenizer_json(merges: Sequence[Tuple[str, str]], specials: Sequence[str] = SPECIAL_TOKENS) -> dict:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    ids = special_token_ids(merges, specials)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": ids[s],
                "content": s,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for s in specials
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": PRETOKENIZE_PATTERN}, "behavior": "Isolated", "invert": False},
                byte_level,
            ],
        },
        "post_processor": dict(byte_level),
        "decoder": dict(byte_level),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": build_vocab(merges),
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }


def tokenizer_config_json(
    merges: Sequence[Tuple[str, str]],
    chat_template: str,
    model_max_length: int,
    specials: Sequence[str] = SPECIAL_TOKENS,
) -> dict:
    ids = special_token_ids(merges, specials)
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {
            str(ids[s]): {
                "content": s,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for s in specials
        },
        "additional_special_tokens": [s for s in specials if s not in ("<|pad|>", "<|mask|>", "<|im_end|>")],
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "mask_token": "<|mask|>",
        "unk_token": None,
        "chat_template": chat_template,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "model_max_length": model_max_length,
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


class ByteBPE:
    """Encoder/decoder for a tokenizer.json written by ``tokenizer_json``."""

    def __init__(self, tok_json: dict) -> None:
        model = tok_json["model"]
        self.vocab: Dict[str, int] = model["vocab"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks: Dict[Tuple[str, str], int] = {m: i for i, m in enumerate(merges)}
        self.special_ids: Dict[str, int] = {t["content"]: t["id"] for t in tok_json["added_tokens"]}
        self.id_to_token: Dict[int, str] = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.special_ids.items()})
        self._cache: Dict[str, List[int]] = {}

    @classmethod
    def load(cls, path: str) -> "ByteBPE":
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def __len__(self) -> int:
        return len(self.id_to_token)

    def token_id(self, token: str) -> int:
        return self.special_ids[token] if token in self.special_ids else self.vocab[token]

    def _bpe(self, chunk: str) -> List[int]:
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        parts = list(chunk)
        while len(parts) > 1:
            best: Optional[Tuple[int, int]] = None
            for j in range(len(parts) - 1):
                r = self.ranks.get((parts[j], parts[j + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, j)
            if best is None:
                break
            j = best[1]
            parts[j : j + 2] = [parts[j] + parts[j + 1]]
        ids = [self.vocab[p] for p in parts]
        if len(self._cache) < 100_000:
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> List[int]:
        ids: List[int] = []
        for part, is_special in _split_specials(text, list(self.special_ids)):
            if is_special:
                ids.append(self.special_ids[part])
            else:
                for chunk in pretokenize(part):
                    ids.extend(self._bpe(chunk))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        out: List[str] = []
        buf = bytearray()
        for i in ids:
            tok = self.id_to_token[int(i)]
            if tok in self.special_ids:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
                out.append(tok)
            else:
                buf.extend(CHAR_TO_BYTE[c] for c in tok)
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)
