"""Fits one temperature per question type on the validation split and writes decision.json.

    python3 training/pipeline/calibrate.py --ckpt training/out/ckpt.pt --tokenizer training/out/tokenizer/tokenizer.json \
        --data training/data --out models/tessera-bd-small/decision.json

Per type (noul, choice, score) it minimises the (weighted) negative log-likelihood of the
validation decisions' targets under softmax(logits / T) over the offered labels, by a
golden-section search on log T in [log 0.05, log 20]. decision.json = the templates of
training/templates/decision.json with the fitted temperatures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, List

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from dataset import read_jsonl, tokenize_records  # noqa: E402
from infer import decision_logits, load_checkpoint  # noqa: E402
from tok import Tok  # noqa: E402


def weighted_nll(logits, targets, weights, t):
    s = 0.0
    for z, y, w in zip(logits, targets, weights):
        z = z / t
        z = z - z.max()
        logp = z - math.log(np.exp(z).sum())
        s += -w * float((y * logp).sum())
    return s / float(np.sum(weights))


def fit_temperature(logits, targets, weights) -> float:
    lo, hi = math.log(0.05), math.log(20.0)
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = weighted_nll(logits, targets, weights, math.exp(a)), weighted_nll(logits, targets, weights, math.exp(b))
    for _ in range(60):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = weighted_nll(logits, targets, weights, math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = weighted_nll(logits, targets, weights, math.exp(b))
    return math.exp((lo + hi) / 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--data", default=os.path.join(TRAINING, "data"))
    ap.add_argument("--out", required=True, help="decision.json to write")
    ap.add_argument("--report", default=None, help="JSON with the fit per type")
    ap.add_argument("--max-len", type=int, default=1024, help="longest prompt (model v2: 4096)")
    ap.add_argument("--limit", type=int, default=None, help="read only this many validation records (smoke tests)")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_checkpoint(args.ckpt, device)
    tok = Tok(args.tokenizer)
    recs = []
    for name in ["val.jsonl", "val_v2.jsonl"]:  # val_v2: model v2's phrasings (prepare-v2.mjs), when present
        found = [p for p in [os.path.join(args.data, name + ".xz"), os.path.join(args.data, name)] if os.path.exists(p)]
        if found:
            recs += [r for r in read_jsonl(found[0], args.limit) if r["k"] == "dec"]
        elif name == "val.jsonl":
            raise SystemExit(f"{args.data}: no {name}")
    examples, dropped = tokenize_records(recs, tok, 64, args.max_len)
    by_type: Dict[str, list] = {}
    qt_of_task = {r["task"]: r["qt"] for r in recs}
    for ex in examples:
        by_type.setdefault(qt_of_task[ex.task], []).append(ex)
    with open(os.path.join(TRAINING, "templates", "decision.json"), encoding="utf-8") as f:
        decision = json.load(f)
    report = {}
    for qt, exs in sorted(by_type.items()):
        logits = decision_logits(model, [list(e.ids) for e in exs], [list(e.labels) for e in exs], device)
        targets = [e.target.astype(np.float64) for e in exs]
        weights = np.array([e.weight for e in exs])
        t = fit_temperature(logits, targets, weights)
        acc = float(np.average([float(np.argmax(z) == np.argmax(y)) for z, y in zip(logits, targets)], weights=weights))
        report[qt] = {"examples": len(exs), "temperature": round(t, 4), "nll_at_1": weighted_nll(logits, targets, weights, 1.0),
                      "nll_at_t": weighted_nll(logits, targets, weights, t), "accuracy": acc}
        decision["temperatures"][qt] = round(t, 4)
        print(f"{qt}: n={len(exs)} T={t:.3f} nll {report[qt]['nll_at_1']:.4f} -> {report[qt]['nll_at_t']:.4f} acc {acc:.4f}", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(decision, f, indent=2, ensure_ascii=False)
        f.write("\n")
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"dropped": dropped, "types": report}, f, indent=1)


if __name__ == "__main__":
    main()
