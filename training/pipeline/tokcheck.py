"""Checks the trained tokenizer: the Rust library and ``bpe_tokenizer.ByteBPE`` (which mirrors
the Node loader @huggingface/tokenizers) must give the same ids; writes samples (text + ids)
for the Node-side check (training/pipeline/tokcheck.mjs).

    python3 training/pipeline/tokcheck.py <tokenizer.json> <data-dir> <samples-out.json> [n]
"""

from __future__ import annotations

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from bpe_tokenizer import SPECIAL_TOKENS, ByteBPE  # noqa: E402
from dataset import read_jsonl  # noqa: E402
from tok import Tok  # noqa: E402


def main() -> None:
    path, data, out = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 400
    tok = Tok(path)
    slow = ByteBPE(tok.json)
    val = next(p for p in [os.path.join(data, "val.jsonl.xz"), os.path.join(data, "val.jsonl")] if os.path.exists(p))
    recs = random.Random(0).sample(read_jsonl(val), n)
    texts = [r["p"] + r["r"] if r["k"] == "chat" else r["v"][0][0] + r["v"][0][1] + "<|mask|>" for r in recs]
    texts += ["héllo wörld — ünïcode ✓ 😀", "  leading spaces\n\n\ttabs  ", "".join(SPECIAL_TOKENS), "<|opt_12|> x<|yes|><|no|>"]
    fast = tok.encode_batch(texts)
    bad = [i for i, t in enumerate(texts) if slow.encode(t) != fast[i]]
    for t in SPECIAL_TOKENS:
        assert tok.encode(t) == [tok.token_id(t)], f"{t} is not a single token"
    assert all(slow.decode(fast[i]) == texts[i] for i in range(len(texts))), "decode does not round-trip"
    with open(out, "w", encoding="utf-8") as f:
        json.dump([{"text": t, "ids": ids} for t, ids in zip(texts, fast)], f, ensure_ascii=False)
    print(f"tokenizer check: {len(texts)} texts, {len(bad)} mismatches between the Rust library and ByteBPE; vocab {tok.vocab_size}")
    if bad:
        raise SystemExit(f"mismatch on texts {bad[:5]}")


if __name__ == "__main__":
    main()
