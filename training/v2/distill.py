"""Self-distillation data for parallel decoding (issue 25): the model's own decodes.

    python3 training/v2/distill.py --ckpt out/ckpt.pt --tokenizer out/tokenizer/tokenizer.json --data training/data \
        --out training/data/distill.jsonl [--seconds 60] [--prompts 8000] [--replay 0.5]

Decodes training chat prompts (and raw-text prompts) with ``sequential`` (one most-confident
token a step, the quality reference of bench/decode.ts) and writes them as chat records whose
reply is the model's own decode. Fine-tuning on them (train.py --init-ckpt ... --train-files
distill.jsonl) sharpens the model's confidence on what it would write anyway, so the
threshold and fill policies commit more tokens per forward while agreeing with
``sequential``. A ``--replay`` share of the original records (decisions included) goes into
the same file so the short fine-tune does not forget them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE] + [os.path.join(TRAINING, d) for d in ("pipeline", "model")]
from dataset import raw_continuations, read_jsonl  # noqa: E402
from decode_batch import decode_batch  # noqa: E402
from infer import load_checkpoint  # noqa: E402
from tok import Tok  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=8000)
    ap.add_argument("--seconds", type=float, default=60.0, help="stop decoding after this long")
    ap.add_argument("--replay", type=float, default=0.5, help="original records per distilled one")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--limit", type=int, default=None, help="read only this many records per file (smoke tests)")
    args = ap.parse_args()

    t0 = time.time()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_checkpoint(args.ckpt, device)
    tok = Tok(args.tokenizer)
    rng = random.Random(25)
    recs = []
    for name in ["train.jsonl", "train_v2.jsonl", "raw_pool.jsonl"]:
        for p in [os.path.join(args.data, name + ".xz"), os.path.join(args.data, name)]:
            if os.path.exists(p):
                recs += read_jsonl(p, args.limit)
                break
    chats = [r for r in recs if r["k"] == "chat"] + raw_continuations([r for r in recs if r["k"] == "raw"], "<|im_end|>", cuts=1, seed=7)
    chosen = rng.sample(chats, min(args.prompts, len(chats)))
    out = []
    for lo in range(0, len(chosen), args.batch):
        if time.time() - t0 > args.seconds:
            break
        part = chosen[lo:lo + args.batch]
        replies = decode_batch(model, [tok.encode(r["p"]) for r in part], "sequential", max_new_tokens=128, batch_size=args.batch, device=device)
        for r, o in zip(part, replies):
            if o["reason"] == "stop":
                out.append({"k": "chat", "task": f"distill_{r['task']}", "p": r["p"], "r": tok.decode(o["tokens"]) + "<|im_end|>"})
    replay = rng.sample(recs, min(len(recs), int(len(out) * args.replay)))
    with open(args.out, "w", encoding="utf-8") as f:
        for r in out + replay:
            f.write(json.dumps(r) + "\n")
    print(json.dumps({"distilled": len(out), "replay": len(replay), "prompts_tried": min(len(chosen), lo + args.batch), "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
