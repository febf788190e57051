"""transformers' own DiffusionGemma ``generate`` replaying the engine's random draws.

    python convert/tests/canvas_reference_decode.py <checkpoint-dir> <draws.json>

draws.json: {"prompt": [ids], "max_new_tokens": N, "draws": [["noise" | "uniforms", [values]], ...]}
in the order the engine made them. ``EntropyBoundSampler.initialize_canvas`` (the first canvas
and every renoise) returns the next "noise" draw; ``torch.multinomial`` (the denoiser sample)
becomes the inverse CDF of its probabilities at the next "uniforms" draw, which is how the
engine samples. Prints {"sequence": [new ids], "tokens_per_forward": x, "draws_used": n, "logprobs": [...]}.

"logprobs" (with "top_logprobs": k in draws.json): per new token, its log-softmax under the raw
logits (before the temperature schedule) of the last denoising step of its canvas, the step
whose argmax canvas became the reply, and the k most probable [id, logprob] there, best first.
"""

from __future__ import annotations

import json
import sys

import torch
from transformers import DiffusionGemmaForBlockDiffusion
from transformers.models.diffusion_gemma import generation_diffusion_gemma as gen


def main() -> None:
    ckpt, draws_path = sys.argv[1], sys.argv[2]
    with open(draws_path, encoding="utf-8") as f:
        spec = json.load(f)
    draws = list(spec["draws"])
    used = [0]

    def take(kind: str):
        k, values = draws[used[0]]
        if k != kind:
            raise SystemExit(f"draw {used[0]} is {k}, transformers asked for {kind}")
        used[0] += 1
        return values

    def initialize_canvas(self, batch_size, device):
        return torch.tensor(take("noise"), dtype=torch.long).view(batch_size, self.canvas_length)

    def multinomial(probs, num_samples):
        u = torch.tensor(take("uniforms"), dtype=torch.float64)
        cdf = probs.double().cumsum(-1)
        idx = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True)
        return idx.clamp(max=probs.shape[-1] - 1)

    steps: list[tuple[int, torch.Tensor]] = []
    schedule = gen.LinearTemperatureScheduleLogitsProcessor.__call__

    def recording_schedule(self, input_ids, scores, cur_step):
        steps.append((int(cur_step), scores.detach().clone()))
        return schedule(self, input_ids, scores, cur_step)

    gen.EntropyBoundSampler.initialize_canvas = initialize_canvas
    gen.LinearTemperatureScheduleLogitsProcessor.__call__ = recording_schedule
    torch.multinomial = multinomial
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(ckpt, dtype=torch.float32).eval()
    ids = torch.tensor([spec["prompt"]])
    out = model.generate(ids, max_new_tokens=spec["max_new_tokens"])
    sequence = out.sequences[0, ids.shape[1]:].tolist()
    # Each canvas's steps start at cur_step == max_denoising_steps; its last one accepted the canvas.
    first = model.generation_config.max_denoising_steps
    last_logits = [scores for i, (step, scores) in enumerate(steps) if i + 1 == len(steps) or steps[i + 1][0] == first]
    top = int(spec.get("top_logprobs", 0))
    logprobs = []
    for k, logits in enumerate(last_logits):
        table = torch.log_softmax(logits[0].double(), dim=-1)
        for i in range(table.shape[0]):
            if k * table.shape[0] + i >= len(sequence):
                break
            token = sequence[k * table.shape[0] + i]
            best = torch.topk(table[i], top) if top > 0 else None
            logprobs.append({"token": token, "logprob": float(table[i, token]),
                             "top": [] if best is None else [[int(t), float(v)] for v, t in zip(best.values, best.indices)]})
    print(json.dumps({"sequence": sequence, "tokens_per_forward": float(out.tokens_per_forward[0]),
                      "draws_used": used[0], "logprobs": logprobs}))


if __name__ == "__main__":
    main()
