"""Evaluates the bundled model on the held-out sets, reading probabilities as the service does.

    python3 training/pipeline/evaluate.py --ckpt training/out/ckpt.pt --tokenizer .../tokenizer.json \
        --decision models/tessera-bd-small/decision.json --data training/data --out training/out/eval \
        [--onnx model.onnx --onnx-limit 1000] [--chat-limit 300]

Decisions (held out: SpamAssassin easy-ham-2 + spam-2; sentiment's yelp fixture): softmax of
the label logits at the answer slot divided by the calibrated temperature of the question's
type, over the offered labels only. Reported: accuracy, expected calibration error (15 equal
bins of the top-label confidence), Brier score (noul: (P(yes) - y)^2; choice: sum over
options), NLL.

Chat (WordNet definitions asked with phrasings never used in training): token-overlap F1 of
the reply with the gloss, for block-diffusion decoding at threshold 0.9 and for
one-token-per-step decoding, and generated tokens per denoising forward for both.

With ``--onnx``, the decision sets are also read through ONNX Runtime (e.g. an int8 model).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from typing import Dict, List

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(TRAINING, "model")]
from dataset import read_jsonl, tokenize_records  # noqa: E402
from infer import decision_logits, generate, load_checkpoint, probabilities  # noqa: E402
from tok import Tok  # noqa: E402


def ece(conf: np.ndarray, correct: np.ndarray, bins: int = 15) -> float:
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for i in range(bins):
        lo, hi = edges[i], edges[i + 1]
        sel = (conf > lo) & (conf <= hi) if i > 0 else (conf >= lo) & (conf <= hi)
        if sel.any():
            total += sel.mean() * abs(conf[sel].mean() - correct[sel].mean())
    return float(total)


def decision_metrics(probs: List[np.ndarray], targets: List[int], qt: str) -> dict:
    P = probs
    y = np.array(targets)
    pred = np.array([int(np.argmax(p)) for p in P])
    conf = np.array([float(np.max(p)) for p in P])
    correct = (pred == y).astype(np.float64)
    if qt == "noul":
        p_yes = np.array([p[0] for p in P])
        brier = float(np.mean((p_yes - (y == 0)) ** 2))
    else:
        brier = float(np.mean([np.sum((p - np.eye(len(p))[t]) ** 2) for p, t in zip(P, y)]))
    nll = float(np.mean([-np.log(max(p[t], 1e-12)) for p, t in zip(P, y)]))
    return {"n": int(len(y)), "accuracy": float(correct.mean()), "ece": ece(conf, correct), "brier": brier, "nll": nll}


def words(s: str) -> List[str]:
    return re.findall(r"[a-z0-9]+", s.lower())


def f1(pred: str, ref: str) -> float:
    p, r = Counter(words(pred)), Counter(words(ref))
    common = sum((p & r).values())
    if common == 0:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(r.values())
    return 2 * prec * rec / (prec + rec)


class OrtDecisions:
    """Slot logits through ONNX Runtime with the contract's inputs (P = 0, additive mask)."""

    def __init__(self, path: str, cfg: dict) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.cfg = cfg

    def logits(self, prompts, labels, batch: int = 16) -> List[np.ndarray]:
        c = self.cfg
        out = []
        for i in range(0, len(prompts), batch):
            ps = prompts[i : i + batch]
            s = max(len(p) for p in ps)
            b = len(ps)
            ids = np.zeros((b, s), np.int64)
            mask = np.full((b, 1, s, s), -1e9, np.float32)
            for r, p in enumerate(ps):
                ids[r, : len(p)] = p
                n = len(p)
                q = np.arange(s)
                allowed = (q[None, :] // 64 <= q[:, None] // 64) & (q[None, :] < n)
                allowed |= np.eye(s, dtype=bool)
                mask[r, 0][allowed] = 0.0
            pos = np.tile(np.arange(s, dtype=np.int64), (b, 1))
            feeds = {"input_ids": ids, "position_ids": pos, "attention_mask": mask}
            for l in range(c["num_hidden_layers"]):
                for kv in ("key", "value"):
                    feeds[f"past_key_values.{l}.{kv}"] = np.zeros((b, c["num_key_value_heads"], 0, c["head_dim"]), np.float32)
            lg = self.sess.run(["logits"], feeds)[0]
            for r, p in enumerate(ps):
                out.append(lg[r, len(p) - 1, list(labels[i + r])].astype(np.float64))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--decision", required=True)
    ap.add_argument("--data", default=os.path.join(TRAINING, "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--chat-limit", type=int, default=300)
    ap.add_argument("--decision-limit", type=int, default=None)
    ap.add_argument("--onnx", default=None)
    ap.add_argument("--onnx-limit", type=int, default=1000)
    ap.add_argument("--threshold", type=float, default=0.9)
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_checkpoint(args.ckpt, device)
    tok = Tok(args.tokenizer)
    with open(args.decision) as f:
        temps = json.load(f)["temperatures"]
    results: Dict[str, dict] = {"decisions": {}, "temperatures": temps}

    def find(name):
        return next(p for p in [os.path.join(args.data, name + ".xz"), os.path.join(args.data, name)] if os.path.exists(p))

    dec_sets = {}
    for name in ["eval_spam.jsonl", "eval_yelp.jsonl"]:
        recs = read_jsonl(find(name))
        by_task: Dict[str, list] = {}
        for r in recs:
            by_task.setdefault(r["task"], []).append(r)
        for task, rs in by_task.items():
            if args.decision_limit:
                rs = rs[: args.decision_limit]
            exs, dropped = tokenize_records(rs, tok, 64, 1024)
            assert sum(dropped.values()) == 0, dropped
            dec_sets[task] = (rs[0]["qt"], exs)

    t0 = time.time()
    for task, (qt, exs) in dec_sets.items():
        logits = decision_logits(model, [list(e.ids) for e in exs], [list(e.labels) for e in exs], device)
        probs = [probabilities(z, temps[qt]) for z in logits]
        targets = [int(np.argmax(e.target)) for e in exs]
        m = decision_metrics(probs, targets, qt)
        m["uncalibrated"] = decision_metrics([probabilities(z, 1.0) for z in logits], targets, qt)
        m["mean_tokens"] = float(np.mean([len(e.ids) for e in exs]))
        results["decisions"][task] = m
        print(f"{task}: {json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if k != 'uncalibrated'})}", flush=True)
    results["decision_seconds"] = time.time() - t0

    if args.onnx:
        with open(os.path.join(os.path.dirname(args.ckpt), "config.json")) if os.path.exists(os.path.join(os.path.dirname(args.ckpt), "config.json")) else open(os.path.join(os.path.dirname(args.onnx), "config.json")) as f:
            cfg = json.load(f)
        ort_dec = OrtDecisions(args.onnx, cfg)
        results["onnx"] = {"file": os.path.basename(args.onnx), "bytes": os.path.getsize(args.onnx), "decisions": {}}
        for task in ["spam_noul", "yelp_noul", "yelp_choice"]:
            if task not in dec_sets:
                continue
            qt, exs = dec_sets[task]
            exs = exs[: args.onnx_limit] if task != "spam_noul" else exs[:: max(1, len(exs) // args.onnx_limit)]
            logits = ort_dec.logits([list(e.ids) for e in exs], [list(e.labels) for e in exs])
            probs = [probabilities(z, temps[qt]) for z in logits]
            targets = [int(np.argmax(e.target)) for e in exs]
            torch_logits = decision_logits(model, [list(e.ids) for e in exs], [list(e.labels) for e in exs], device)
            m = decision_metrics(probs, targets, qt)
            m["torch_same_subset"] = decision_metrics([probabilities(z, temps[qt]) for z in torch_logits], targets, qt)
            m["max_abs_label_logit_diff"] = float(max(np.abs(a - b).max() for a, b in zip(logits, torch_logits)))
            results["onnx"]["decisions"][task] = m
            print(f"onnx {task}: acc {m['accuracy']:.4f} ece {m['ece']:.4f} (torch same subset acc {m['torch_same_subset']['accuracy']:.4f}); max label-logit diff {m['max_abs_label_logit_diff']:.3f}", flush=True)

    # chat
    mask_id, eos_id = tok.token_id("<|mask|>"), tok.token_id("<|im_end|>")
    items = read_jsonl(find("eval_chat.jsonl"))[: args.chat_limit]
    rows = []
    t0 = time.time()
    for it in items:
        prompt = tok.encode(it["p"])
        row = {"word": it["word"]}
        for mode, thr in [("threshold", args.threshold), ("one_per_step", None)]:
            ids, st = generate(model, prompt, device, mask_id, eos_id, threshold=thr, max_new_tokens=256)
            text = tok.decode(ids)
            row[mode] = {"text": text, "f1": f1(text, it["ref"]), "forwards": st["forwards"], "tokens": st["tokens"]}
        row["agreement_f1"] = f1(row["threshold"]["text"], row["one_per_step"]["text"])
        rows.append(row)
    chat = {"n": len(rows), "seconds": time.time() - t0}
    for mode in ["threshold", "one_per_step"]:
        toks = sum(r[mode]["tokens"] for r in rows)
        fw = sum(r[mode]["forwards"] for r in rows)
        chat[mode] = {"gloss_f1": float(np.mean([r[mode]["f1"] for r in rows])), "tokens_per_forward": toks / max(1, fw),
                      "mean_tokens": toks / max(1, len(rows))}
    chat["threshold_value"] = args.threshold
    chat["quality_ratio"] = chat["threshold"]["gloss_f1"] / max(1e-9, chat["one_per_step"]["gloss_f1"])
    chat["threshold_vs_one_per_step_f1"] = float(np.mean([r["agreement_f1"] for r in rows]))
    results["chat"] = chat
    print(f"chat: {json.dumps(chat)}", flush=True)
    with open(os.path.join(args.out, "chat_samples.json"), "w") as f:
        json.dump(rows[:40], f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(markdown(results))
    print(markdown(results))


def markdown(res: dict) -> str:
    lines = ["| held-out set | question | n | accuracy | ECE (15 bins) | Brier | NLL | accuracy at T=1 | ECE at T=1 |", "|---|---|---|---|---|---|---|---|---|"]
    names = {"spam_noul": ("SpamAssassin easy-ham-2 + spam-2", "noul: is this email spam?"),
             "yelp_noul": ("sentiment yelp fixture", "noul: is this review positive?"),
             "yelp_choice": ("sentiment yelp fixture", "choice: positive / negative"),
             "yelp_choice_reversed": ("sentiment yelp fixture", "choice: negative / positive")}
    for task, m in res["decisions"].items():
        a, b = names.get(task, (task, ""))
        u = m["uncalibrated"]
        lines.append(f"| {a} | {b} | {m['n']} | {m['accuracy']:.4f} | {m['ece']:.4f} | {m['brier']:.4f} | {m['nll']:.4f} | {u['accuracy']:.4f} | {u['ece']:.4f} |")
    c = res.get("chat")
    if c:
        lines += ["", "| chat decoding | gloss token F1 | generated tokens per forward | mean reply tokens |", "|---|---|---|---|"]
        lines.append(f"| block diffusion, threshold {c['threshold_value']} | {c['threshold']['gloss_f1']:.4f} | {c['threshold']['tokens_per_forward']:.2f} | {c['threshold']['mean_tokens']:.1f} |")
        lines.append(f"| one token per step | {c['one_per_step']['gloss_f1']:.4f} | {c['one_per_step']['tokens_per_forward']:.2f} | {c['one_per_step']['mean_tokens']:.1f} |")
        lines.append("")
        lines.append(f"Quality ratio (threshold / one per step): {c['quality_ratio']:.4f}; F1 between the two decodes: {c['threshold_vs_one_per_step_f1']:.4f}; n = {c['n']}.")
    o = res.get("onnx")
    if o:
        lines += ["", f"ONNX Runtime ({o['file']}, {o['bytes'] / 1e6:.1f} MB):", "", "| set | n | accuracy | ECE | PyTorch accuracy (same items) | max label-logit diff |", "|---|---|---|---|---|---|"]
        for task, m in o["decisions"].items():
            lines.append(f"| {task} | {m['n']} | {m['accuracy']:.4f} | {m['ece']:.4f} | {m['torch_same_subset']['accuracy']:.4f} | {m['max_abs_label_logit_diff']:.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
