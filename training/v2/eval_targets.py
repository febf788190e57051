"""Issue 25's targets on the held-out v2 sets (prepare-v2.mjs), for a model directory or a
training checkpoint, on a GPU or on this CPU (the "before" figures of the model card).

    python3 training/v2/eval_targets.py --model-dir models/tessera-bd-small --data training/data --out /tmp/eval-before \
        [--ckpt ckpt.pt --tokenizer tok.json] [--decision decision.json] [--limit-decisions N] [--limit-gen N]

* decisions: held-out SpamAssassin emails and yelp sentences asked with held-out phrasings;
  yelp two-option choices with unseen option names (no description) and with coded names
  (arbitrary names described); accuracy and ECE at the model's calibrated temperatures;
* copy rate: the reply to a definition / opposite / synonym prompt names the asked word;
* raw completion: tokens written after a sentence prompt with no template (target >= 5);
* structured finish rate: JSON-mode and tool-call prompts (no grammar: the model alone)
  whose reply ends and validates against its schema (bench/'s grammar-constrained figure
  is measured in Node on the exported model);
* tokens per forward: the policy with the most reply tokens per forward at token F1 >= 0.9
  against ``sequential``, chosen on the "tune" prompts and reported on the "held_out" ones.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Dict, List

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE] + [os.path.join(TRAINING, d) for d in ("pipeline", "model")]
from dataset import read_jsonl, tokenize_records  # noqa: E402
from decode_batch import decode_batch, token_f1  # noqa: E402
from evaluate import decision_metrics  # noqa: E402
from infer import decision_logits, load_checkpoint, probabilities  # noqa: E402
from tok import Tok  # noqa: E402

POLICIES = ["threshold(0.9)", "threshold(0.7)", "threshold(0.5)", "fill(0.6)+threshold(0.9)", "fill(0.6)+threshold(0.7)",
            "fill(0.6)+threshold(0.6)", "fill(0.6)+threshold(0.5)", "fill(0.5)+threshold(0.4)"]
TARGETS = {"spam_noul_heldout": (0.95, 0.05), "yelp_noul_heldout": (0.75, 0.08), "yelp_choice_unseen_names": (0.75, 0.08),
           "yelp_choice_coded_names": (0.75, 0.08), "spam_choice_heldout": (None, None)}


def validates(value, schema) -> bool:
    """A minimal JSON-schema check: type, enum, properties/required/additionalProperties, items, bounds."""
    if schema is None:
        return isinstance(value, dict)
    if "enum" in schema and value not in schema["enum"]:
        return False
    types = schema.get("type")
    types = types if isinstance(types, list) else [types] if types else []
    py = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list, "null": type(None)}
    if types and not any(isinstance(value, py[t]) and not (t in ("integer", "number") and isinstance(value, bool)) for t in types):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"] or "maximum" in schema and value > schema["maximum"]:
            return False
    if isinstance(value, dict):
        props = schema.get("properties", {})
        if any(k not in value for k in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and any(k not in props for k in value):
            return False
        return all(validates(v, props[k]) for k, v in value.items() if k in props)
    if isinstance(value, list) and "items" in schema:
        return all(validates(v, schema["items"]) for v in value)
    return True


def structured_ok(prompt: str, reply: str, item: dict) -> bool:
    if item["task"] == "struct_tool":
        text = prompt[prompt.rfind("<|im_start|>assistant\n") + len("<|im_start|>assistant\n"):] + reply
        m = re.fullmatch(r'<tool_call>\{"name": "([^"]+)", "arguments": (.*)\}</tool_call>', text.strip(), re.S)
        if not m:
            return False
        body = m.group(2)
    else:
        body = reply.strip()
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return validates(value, item.get("schema"))


def load(args, device):
    if args.ckpt:
        return load_checkpoint(args.ckpt, device), Tok(args.tokenizer)
    from onnx_weights import model_from_onnx

    return model_from_onnx(args.model_dir).to(device), Tok(os.path.join(args.model_dir, "tokenizer.json"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", help="contract directory (weights read from its ONNX)")
    ap.add_argument("--ckpt")
    ap.add_argument("--tokenizer")
    ap.add_argument("--decision", help="decision.json with the temperatures (default: the model dir's)")
    ap.add_argument("--data", default=os.path.join(TRAINING, "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-decisions", type=int, default=None)
    ap.add_argument("--limit-gen", type=int, default=None)
    ap.add_argument("--default-policy", default=None, help="default: the model dir's config.json decoding, else fill(0.6)+threshold(0.6)")
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--sections", default="decisions,copy,raw,structured,decoding", help="which measures (a CPU run can take them one at a time)")
    ap.add_argument("--policies", default=None, help="';'-separated policies to compare (default: the list above; fewer on a CPU)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, tok = load(args, device)
    with open(args.decision or os.path.join(args.model_dir, "decision.json")) as f:
        temps = json.load(f)["temperatures"]
    default = args.default_policy
    if default is None and args.model_dir:
        d = json.load(open(os.path.join(args.model_dir, "config.json"))).get("decoding", {})
        default = d.get("policy", "threshold").replace("+threshold", f"+threshold({d.get('threshold', 0.9)})") if d else None
    default = default or "fill(0.6)+threshold(0.6)"
    res: Dict[str, dict] = {"decisions": {}, "default_policy": default, "temperatures": temps}
    path = lambda n: next(p for p in [os.path.join(args.data, n + ".xz"), os.path.join(args.data, n)] if os.path.exists(p))  # noqa: E731

    sections = set(args.sections.split(","))
    for name in ["eval_v2_spam.jsonl", "eval_v2_yelp.jsonl"] if "decisions" in sections else []:
        by_task: Dict[str, list] = {}
        for r in read_jsonl(path(name)):
            by_task.setdefault(r["task"], []).append(r)
        for task, rs in by_task.items():
            rs = rs[:: max(1, len(rs) // args.limit_decisions)][: args.limit_decisions] if args.limit_decisions else rs
            exs, _ = tokenize_records(rs, tok, 64, args.max_len)
            logits = decision_logits(model, [list(e.ids) for e in exs], [list(e.labels) for e in exs], device)
            targets = [int(np.argmax(e.target)) for e in exs]
            m = decision_metrics([probabilities(z, temps[rs[0]["qt"]]) for z in logits], targets, rs[0]["qt"])
            res["decisions"][task] = m
            print(f"{task}: n {m['n']} acc {m['accuracy']:.3f} ece {m['ece']:.3f}", flush=True)

    def gen(items, policy, raw=False, max_new=96):
        prompts = [tok.encode(it["p"]) for it in items]
        return decode_batch(model, prompts, policy, max_new_tokens=max_new, device=device)

    lim = lambda xs: xs[:: max(1, len(xs) // args.limit_gen)][: args.limit_gen] if args.limit_gen else xs  # noqa: E731 (spread over tasks)
    copy = lim(read_jsonl(path("eval_v2_copy.jsonl"))) if "copy" in sections else []
    outs = gen(copy, default)
    hits: Dict[str, list] = {}
    samples = []
    for it, o in zip(copy, outs):
        text = tok.decode(o["tokens"])
        hit = re.search(rf"(?<![a-z]){re.escape(it['word'])}(?![a-z])", text.lower()) is not None
        hits.setdefault(it["task"], []).append(hit)
        samples.append({"task": it["task"], "word": it["word"], "reply": text[:160], "copied": hit})
    res["copy"] = {k: float(np.mean(v)) for k, v in hits.items()}
    res["copy"]["all"] = float(np.mean([h for v in hits.values() for h in v])) if hits else float("nan")
    res["copy"]["n"] = len(copy)
    print(f"copy: {res['copy']}", flush=True)

    raw = lim(read_jsonl(path("eval_v2_raw.jsonl"))) if "raw" in sections else []
    outs = gen(raw, default, max_new=64)
    lens = [len(o["tokens"]) for o in outs]
    res["raw"] = {"n": len(lens), "share_ge_5": float(np.mean([n >= 5 for n in lens])) if lens else float("nan"), "mean_tokens": float(np.mean(lens)) if lens else float("nan")}
    samples += [{"task": it["task"], "prompt": it["p"], "reply": tok.decode(o["tokens"])[:160]} for it, o in zip(raw[:10], outs)]
    print(f"raw: {res['raw']}", flush=True)

    st = lim(read_jsonl(path("eval_v2_struct.jsonl"))) if "structured" in sections else []
    outs = gen(st, default, max_new=192)
    ok = [o["reason"] == "stop" and structured_ok(it["p"], tok.decode(o["tokens"]), it) for it, o in zip(st, outs)]
    res["structured"] = {"n": len(ok), "finish_and_validate": float(np.mean(ok)) if ok else float("nan"), "ended": float(np.mean([o["reason"] == "stop" for o in outs])) if ok else float("nan")}
    samples += [{"task": it["task"], "reply": tok.decode(o["tokens"])[:200], "ok": k} for it, o, k in list(zip(st, outs, ok))[:10]]
    print(f"structured: {res['structured']}", flush=True)

    dec = read_jsonl(path("eval_v2_decode.jsonl"))
    table = {}
    for split in ["tune", "held_out"] if "decoding" in sections else []:
        items = lim([d for d in dec if d["task"] == split])
        ref = gen(items, "sequential", max_new=128)
        table[split] = {}
        for pol in sorted(set((args.policies.split(";") if args.policies else POLICIES) + [default])):
            o = gen(items, pol, max_new=128)
            table[split][pol] = {"tokens_per_forward": sum(len(x["tokens"]) for x in o) / max(1, sum(x["forwards"] for x in o)),
                                 "f1_vs_sequential": float(np.mean([token_f1(a["tokens"], b["tokens"]) for a, b in zip(o, ref)]))}
    ok_tune = [p for p, v in table.get("tune", {}).items() if v["f1_vs_sequential"] >= 0.9]
    chosen = max(ok_tune, key=lambda p: table["tune"][p]["tokens_per_forward"]) if ok_tune else "sequential"
    res["decoding"] = {"table": table, "chosen_on_tune": chosen, "held_out_chosen": table.get("held_out", {}).get(chosen),
                       "held_out_default": table.get("held_out", {}).get(default)}
    print(f"decoding: chosen {chosen}: held out {res['decoding']['held_out_chosen']}; default {default}: {res['decoding']['held_out_default']}", flush=True)
    with open(os.path.join(args.out, "targets.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(args.out, "samples.json"), "w") as f:
        json.dump(samples, f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "targets.md"), "w") as f:
        f.write(markdown(res))
    print(markdown(res))


def markdown(res: dict) -> str:
    lines = ["| held-out set | n | accuracy | ECE | target |", "|---|---|---|---|---|"]
    for task, m in res["decisions"].items():
        acc, ece = TARGETS.get(task, (None, None))
        tgt = f"acc >= {acc}, ECE <= {ece}" if acc else ""
        lines.append(f"| {task} | {m['n']} | {m['accuracy']:.3f} | {m['ece']:.3f} | {tgt} |")
    c, r, s, d = res["copy"], res["raw"], res["structured"], res["decoding"]
    lines += ["", "| measure | n | value | target |", "|---|---|---|---|"]
    if c.get("n"):
        lines.append(f"| copy rate (definition / opposite / synonym) | {c['n']} | {c.get('copy_definition', 0):.2f} / {c.get('copy_opposite', 0):.2f} / {c.get('copy_synonym', 0):.2f} | >= 0.90 each |")
    if r["n"]:
        lines.append(f"| raw completion: share with >= 5 tokens (mean tokens) | {r['n']} | {r['share_ge_5']:.2f} ({r['mean_tokens']:.1f}) | >= 5 tokens |")
    if s["n"]:
        lines.append(f"| structured replies that end and validate, no grammar (ended) | {s['n']} | {s['finish_and_validate']:.2f} ({s['ended']:.2f}) | >= 0.90 (bench/, with grammar) |")
    if d.get("held_out_default"):
        lines.append(f"| tokens per forward, default `{res['default_policy']}`, held out (F1 vs sequential) | | {d['held_out_default']['tokens_per_forward']:.2f} ({d['held_out_default']['f1_vs_sequential']:.3f}) | >= 2 at F1 >= 0.9 |")
    if d.get("held_out_chosen"):
        lines.append(f"| tokens per forward, `{d['chosen_on_tune']}` (chosen on tune prompts), held out | | {d['held_out_chosen']['tokens_per_forward']:.2f} ({d['held_out_chosen']['f1_vs_sequential']:.3f}) | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
