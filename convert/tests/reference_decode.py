"""Reference greedy decodes of a checkpoint by its family's own rule, with transformers' models.

    python convert/tests/reference_decode.py <checkpoint-dir> <model-dir> <prompts.json> <max-tokens>

prompts.json: a list of token-id lists. Prints a JSON list of reply token lists (trimmed at the
first stop token, which is excluded, or at max-tokens).

Independent of the engine: transformers' Qwen3ForCausalLM / Qwen2ForCausalLM (parity.py's
reference_model) recompute the whole sequence every step with the block-causal mask.
* SDAR: JetEngine's ``low_confidence_dynamic`` with denoising steps = block length: each step,
  every masked position of the block whose greedy probability is > threshold is committed, and
  at least the most confident one.
* Fast-dLLM v2: their ``generate``: logits shifted (position j is read from row j - 1); a prompt
  that ends on a block boundary gets its next token from the last row, greedily; each block is
  denoised sub-block by sub-block (> threshold within the sub-block, at least its most confident),
  and a completed block's last row gives the next block's first token, greedily.
As in the engine, the mask token (and the pad token unless it is a stop token) is never a guess:
its logit is -inf before the softmax. Decoding stops once a stop token has nothing masked before it.
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import block_mask, reference_model  # noqa: E402


class Decoder:
    def __init__(self, ckpt: str, model_dir: str) -> None:
        self.model, _ = reference_model(ckpt)
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            c = json.load(f)
        self.block = c["block_size"]
        self.mask = c["mask_token_id"]
        self.stops = set(c["stop_token_ids"])
        self.banned = [self.mask] + ([] if c["pad_token_id"] in self.stops else [c["pad_token_id"]])
        self.threshold = c["decoding"]["threshold"]
        self.shift = c["logits_shift"]
        self.sub = c["decoding"].get("sub_block_size")

    def probs(self, ids):
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([ids]), position_ids=torch.arange(len(ids))[None],
                                attention_mask=block_mask(0, len(ids), self.block)).logits[0].float()
        logits[:, self.banned] = float("-inf")
        return torch.softmax(logits, dim=-1)

    def finished(self, x, n, max_tokens):
        """The reply once decided: up to its first stop token with nothing masked before it, or max_tokens long."""
        reply = x[n:]
        for i, t in enumerate(reply):
            if i >= max_tokens:
                return reply[:max_tokens]
            if t == self.mask:
                return None
            if t in self.stops:
                return reply[:i]
        return reply if len(reply) >= max_tokens else None

    def sdar(self, prompt, max_tokens):
        x, n, bs = list(prompt), len(prompt), self.block
        while True:
            start = len(x) // bs * bs if len(x) % bs else len(x)
            x += [self.mask] * (start + bs - len(x))
            while self.mask in x[start:]:
                p = self.probs(x)[start:start + bs]
                conf, tok = p.max(-1)
                masked = [j for j in range(bs) if x[start + j] == self.mask]
                pick = [j for j in masked if conf[j] > self.threshold] or [max(masked, key=lambda j: (conf[j], -j))]
                for j in pick:
                    x[start + j] = int(tok[j])
                done = self.finished(x, n, max_tokens)
                if done is not None:
                    return done

    def fast_dllm(self, prompt, max_tokens):
        x, n, bs, sub = list(prompt), len(prompt), self.block, self.sub
        if n % bs == 0:
            x.append(int(self.probs(x)[-1].argmax()))
        while True:
            done = self.finished(x, n, max_tokens)
            if done is not None:
                return done
            start = (len(x) - 1) // bs * bs
            x += [self.mask] * (start + bs - len(x))
            for s in range(0, bs, sub):
                while any(x[start + j] == self.mask for j in range(s, s + sub)):
                    p = self.probs(x)
                    # Position j is predicted by row j - 1.
                    conf, tok = p[start + s - 1:start + s + sub - 1].max(-1)
                    masked = [j for j in range(sub) if x[start + s + j] == self.mask]
                    pick = [j for j in masked if conf[j] > self.threshold] or [max(masked, key=lambda j: (conf[j], -j))]
                    for j in pick:
                        x[start + s + j] = int(tok[j])
                    done = self.finished(x, n, max_tokens)
                    if done is not None:
                        return done
            x.append(int(self.probs(x)[-1].argmax()))


def main() -> None:
    ckpt, model_dir, prompts_path, max_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    d = Decoder(ckpt, model_dir)
    with open(prompts_path, encoding="utf-8") as f:
        prompts = json.load(f)
    run = d.fast_dllm if d.shift else d.sdar
    print(json.dumps([run(p, max_tokens) for p in prompts]))


if __name__ == "__main__":
    main()
