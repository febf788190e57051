"""The same denoiser in PyTorch on CUDA, for the GPU table (bench/gpu/README.md; not a test).

    python3 bench/gpu/torch_bench.py <checkpoint-dir> [--contexts 0,1024,4096]

Loads the random checkpoint that make_checkpoint.py wrote into tessera_convert's QwenContractLM
(the module the ONNX model is exported from), fp32 on the GPU, and times with CUDA events:
ms per forward of one 64-token block after P cached positions (batch 1; past tensors already on
the device, as the WebGPU engine keeps them), and of a batch of 8 such rows after 256 positions.
Prints one JSON line. With no GPU it runs on the CPU (to check the script, not to measure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "convert"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--contexts", default="0,1024,4096")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()

    import torch

    from tessera_convert.export import block_causal_mask
    from tessera_convert.families import read_checkpoint
    from tessera_convert.stage import load_contract_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    ck = read_checkpoint(args.ckpt, None)
    a = ck.arch
    model = load_contract_model(ck)
    model = model.to(device).eval()

    def inputs(batch: int, seq: int, past: int):
        g = torch.Generator(device="cpu").manual_seed(past + batch)
        ids = torch.randint(0, a.vocab_size, (batch, seq), generator=g).to(device)
        pos = torch.arange(past, past + seq).unsqueeze(0).repeat(batch, 1).to(device)
        k_pos = torch.arange(0, past + seq).unsqueeze(0).repeat(batch, 1).to(device)
        mask = block_causal_mask(pos, k_pos, ck.block_size).to(device)
        kv = [torch.randn(batch, a.num_key_value_heads, past, a.head_dim, device=device) for _ in range(2 * a.num_hidden_layers)]
        return (ids, pos, mask, *kv)

    def timed(feed) -> float:
        with torch.inference_mode():
            for _ in range(3):
                model(*feed)
            times = []
            for _ in range(args.repeats):
                if device == "cuda":
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    model(*feed)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end))
                else:
                    import time

                    t = time.perf_counter()
                    model(*feed)
                    times.append(1000 * (time.perf_counter() - t))
        return statistics.median(times)

    forward_ms = {}
    for p in (int(x) for x in args.contexts.split(",")):
        forward_ms[str(p)] = timed(inputs(1, 64, p))
    batch8 = timed(inputs(8, 64, 256))
    params = sum(t.numel() for t in model.parameters())
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(json.dumps({"device": name, "parameters": params, "forwardMs": forward_ms, "batch8_p256_ms": batch8, "batch1_p256_ms": timed(inputs(1, 64, 256))}))


if __name__ == "__main__":
    main()
