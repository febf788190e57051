"""Fixed logits and fixed random draws through transformers' own DiffusionGemma sampler pieces
(LinearTemperatureScheduleLogitsProcessor, EntropyBoundSampler.accept_canvas / renoise_canvas,
StableAndConfidentStoppingCriteria), printed as JSON for services/inference/decoder/canvas/sampler.test.ts.

The draws: the denoiser canvas is the inverse-CDF sample of softmax(processed logits) at given
uniforms (what the engine does in torch.multinomial's place); the renoise canvas is given
(``initialize_canvas`` returns it). Cases near the acceptance boundary are redrawn, so float32
(torch) and float64 (the engine) sums cannot land on opposite sides of it.
"""

from __future__ import annotations

import json

import torch
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    EntropyBoundSampler, EntropyBoundSamplerConfig, LinearTemperatureScheduleLogitsProcessor,
    StableAndConfidentStoppingCriteria)

B, C, V, N = 2, 12, 40, 6
SETTINGS = {"maxDenoisingSteps": N, "entropyBound": 1.0, "tMin": 0.4, "tMax": 0.8, "stabilityThreshold": 1,
            "confidenceThreshold": 0.05}


def margin_ok(processed: torch.Tensor, bound: float) -> bool:
    h = torch.distributions.Categorical(logits=processed).entropy()
    s, _ = torch.sort(h, dim=-1)  # row 1's near-zero entropies may tie: every one of them is accepted anyway
    x = torch.cumsum(s, -1) - s
    return bool(((x - bound).abs() > 1e-3).all()) and bool((s[0, 1:] - s[0, :-1] > 1e-6).all())


def main() -> None:
    g = torch.Generator().manual_seed(28)
    temp = LinearTemperatureScheduleLogitsProcessor(SETTINGS["tMin"], SETTINGS["tMax"], N)
    sampler = EntropyBoundSampler(EntropyBoundSamplerConfig(entropy_bound=SETTINGS["entropyBound"]), C, V, N)
    stop = StableAndConfidentStoppingCriteria(SETTINGS["stabilityThreshold"], SETTINGS["confidenceThreshold"])
    peaked = torch.full((C, V), -8.0)
    peaked[torch.arange(C), torch.randint(0, V, (C,), generator=g)] = 12.0
    current = torch.randint(0, V, (B, C), generator=g)
    steps = []
    for cur_step in reversed(range(1, N + 1)):
        while True:
            sharp = torch.rand(B, C, 1, generator=g) * 6
            logits = torch.randn(B, C, V, generator=g) * sharp
            logits[1] = peaked + torch.randn(C, V, generator=g) * 0.01
            processed = temp(None, logits, cur_step=cur_step)
            if margin_ok(processed, SETTINGS["entropyBound"]):
                break
        uniforms = torch.rand(B, C, generator=g, dtype=torch.float64)
        probs = torch.softmax(processed.double(), -1)
        cdf = torch.cumsum(probs, -1)
        sample = torch.searchsorted(cdf, (uniforms * cdf[..., -1]).unsqueeze(-1), right=True).squeeze(-1).clamp(max=V - 1)
        noise = torch.randint(0, V, (B, C), generator=g)
        entropy = torch.distributions.Categorical(logits=processed).entropy()
        accepted = sampler.accept_canvas(current, sample, processed, cur_step)
        sampler.initialize_canvas = lambda batch_size, device, noise=noise: noise.clone()
        renoised = sampler.renoise_canvas(accepted, cur_step)
        argmax = processed.argmax(-1)
        stopped = stop(argmax, processed)
        steps.append({
            "stepsLeft": cur_step,
            "temperature": float(temp.t_min + (temp.t_max - temp.t_min) * cur_step / N),
            "logits": logits.reshape(B, -1).tolist(),
            "current": current.tolist(),
            "uniforms": uniforms.tolist(),
            "noise": noise.tolist(),
            "entropy": entropy.tolist(),
            "sample": sample.tolist(),
            "argmax": argmax.tolist(),
            "acceptedMask": sampler.accepted_token_mask.tolist(),
            "accepted": accepted.tolist(),
            "renoised": renoised.tolist(),
            "stop": stopped.tolist(),
        })
        current = renoised
    print(json.dumps({"settings": SETTINGS, "batch": B, "canvas": C, "vocab": V, "steps": steps}))


if __name__ == "__main__":
    main()
