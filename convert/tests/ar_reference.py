"""Transformers' own answers for a plain Qwen3 / Qwen2 checkpoint (AutoModelForCausalLM, float32).

    python convert/tests/ar_reference.py <checkpoint-dir> <requests.json>

requests.json: {"generate": {"prompts": [[ids...], ...], "max_tokens": N, "stops": [ids...]},
                "labels": {"rows": [[ids...], ...], "labels": [[[label ids...], ...], ...]}}
Prints {"generate": [[reply ids...]], "labels": [[{"logit": x, "logprob": y}, ...]]}: `generate`'s
greedy replies (do_sample off, stopped at the first stop token, which is left out, or at
max_tokens), and for each row's labels (a decision's readout) the logit of the label's first token
right after the row and the label's log-probability by the chain rule.
"""

from __future__ import annotations

import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main() -> None:
    ckpt, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        req = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    out: dict = {}
    if "generate" in req:
        g = req["generate"]
        stops = g["stops"]
        replies = []
        for prompt in g["prompts"]:
            with torch.no_grad():
                ids = model.generate(torch.tensor([prompt]), max_new_tokens=g["max_tokens"], do_sample=False,
                                     eos_token_id=stops, pad_token_id=stops[0], temperature=None, top_p=None, top_k=None)
            reply = ids[0, len(prompt):].tolist()
            end = next((i for i, t in enumerate(reply) if t in stops), len(reply))
            replies.append(reply[:end])
        out["generate"] = replies
    if "labels" in req:
        r = req["labels"]
        values = []
        for row, labels in zip(r["rows"], r["labels"]):
            entries = []
            for label in labels:
                with torch.no_grad():
                    logits = model(input_ids=torch.tensor([row + label])).logits[0].float()
                steps = torch.log_softmax(logits[len(row) - 1: len(row) - 1 + len(label)], dim=-1)
                logprob = sum(float(steps[k, t]) for k, t in enumerate(label))
                entries.append({"logit": float(logits[len(row) - 1, label[0]]), "logprob": logprob})
            values.append(entries)
        out["labels"] = values
    print(json.dumps(out))


if __name__ == "__main__":
    main()
