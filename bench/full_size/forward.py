"""One block forward (64 tokens, or --tokens) at 0 / 1k / 4k tokens of context: Tessera's ONNX model directories
(ONNX Runtime, as the engine runs them) beside the checkpoint in PyTorch (transformers, fp32 and bf16).

    convert/.venv/bin/python bench/full_size/forward.py --ort DIR [--ort DIR ...] [--torch CKPT] \
        [--contexts 0,1024,4096] [--threads 2] [--repeat 3] [--rounds 1] [--tokens 64 (Fast-dLLM v2's block: 32)]

Each model is measured in a fresh process, one after another (memory: one model at a time),
Tessera's and PyTorch's alternating (--ort A --ort B --torch C runs A, C fp32, B, C bf16), the
whole sequence --rounds times; each cell is the median over the rounds (so that a shared
machine's load drifting during the run affects every model alike):
load time, RSS after load, and per context the median ms of a forward that fetches only the
logits (a denoising step) and of one that also fetches every present (a committing step: the
difference is the cost of fetching the KV). PyTorch runs transformers' Qwen3ForCausalLM /
Qwen2ForCausalLM (SDAR's and Fast-dLLM v2's layers) with a DynamicCache of the context and
the block's bidirectional-within-block mask, as the families' generation loops call it.
Prints one JSON line per model, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

COMMON = r"""
import json, os, statistics, sys, time
import numpy as np
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
def median_ms(fn, n):
    fn(); ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return 1000 * statistics.median(ts)
"""

ORT = COMMON + r"""
import onnxruntime as ort
d, contexts, threads, n, S = sys.argv[1], [int(c) for c in sys.argv[2].split(",")], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cfg = json.load(open(os.path.join(d, "config.json")))
base = rss_mb()
so = ort.SessionOptions(); so.intra_op_num_threads = threads
t0 = time.perf_counter()
s = ort.InferenceSession(os.path.join(d, cfg.get("onnx_file", "model.onnx")), so, providers=["CPUExecutionProvider"])
load = time.perf_counter() - t0
rss = rss_mb()
L, H, D, bs = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["block_size"]
rng = np.random.default_rng(0)
out = {"model": d, "weights": cfg.get("source", {}).get("weights", "?"), "load_s": load, "rss_mb": rss - base, "ms": {}, "kv_fetch_ms": {}}
for P in contexts:
    q = np.arange(P, P + S); k = np.arange(P + S)
    m = np.where((k[None] // bs) <= (q[:, None] // bs), 0, -1e9).astype(np.float32)[None, None]
    f = {"input_ids": rng.integers(0, 300, (1, S)).astype(np.int64), "position_ids": q[None].astype(np.int64), "attention_mask": m}
    kv = rng.standard_normal((1, H, P, D), dtype=np.float32)
    for l in range(L):
        f[f"past_key_values.{l}.key"] = kv
        f[f"past_key_values.{l}.value"] = kv
    logits_only = median_ms(lambda: s.run(["logits"], f), n)
    everything = median_ms(lambda: s.run(None, f), n)
    out["ms"][P] = logits_only
    out["kv_fetch_ms"][P] = everything - logits_only
out["peak_mb"] = peak_mb()
print(json.dumps(out))
"""

TORCH = COMMON + r"""
import torch
sys.path.insert(0, os.path.join(sys.argv[6], "convert", "tests"))
from parity import reference_model
ckpt, contexts, threads, n, S, dtype = sys.argv[1], [int(c) for c in sys.argv[2].split(",")], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[7]
torch.set_num_threads(threads)
base = rss_mb()
t0 = time.perf_counter()
model, cfg = reference_model(ckpt, getattr(torch, dtype))
model.config._attn_implementation = "sdpa"
load = time.perf_counter() - t0
rss = rss_mb()
from transformers import DynamicCache
c = model.config
hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
out = {"model": ckpt, "weights": f"pytorch {dtype}", "load_s": load, "rss_mb": rss - base, "ms": {}, "kv_fetch_ms": {}}
for P in contexts:
    kv = torch.randn(1, c.num_key_value_heads, P, hd).to(model.dtype)
    def past():
        cache = DynamicCache()
        for l in range(c.num_hidden_layers):
            cache.update(kv, kv, l)
        return cache
    ids = torch.randint(0, 300, (1, S))
    pos = torch.arange(P, P + S)[None]
    mask = torch.zeros(1, 1, S, P + S, dtype=model.dtype)  # the block sees its past and itself, both ways
    def fwd():
        # A fresh cache of the context each time (rebuilding it costs references, not copies).
        with torch.no_grad():
            model(input_ids=ids, position_ids=pos, attention_mask=mask, past_key_values=past(), use_cache=True)
    out["ms"][P] = median_ms(fwd, n)
out["peak_mb"] = peak_mb()
print(json.dumps(out))
"""


def run(code: str, args: list, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{args[0]}: exited {r.returncode}\n{r.stderr[-3000:]}")
    line = r.stdout.strip().splitlines()[-1]
    print(line, flush=True)
    return json.loads(line)


def merge(key: str, rs: list) -> dict:
    """One model's runs over the rounds: the median of each figure (the largest peak)."""
    import statistics

    def med(get):
        return statistics.median([get(r) for r in rs])

    out = {"weights": key, "load_s": med(lambda r: r["load_s"]), "rss_mb": med(lambda r: r["rss_mb"]),
           "peak_mb": max(r["peak_mb"] for r in rs), "ms": {}, "kv_fetch_ms": {}}
    for c in rs[0]["ms"]:
        out["ms"][c] = med(lambda r: r["ms"][c])
        if c in rs[0]["kv_fetch_ms"]:
            out["kv_fetch_ms"][c] = med(lambda r: r["kv_fetch_ms"][c])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort", action="append", default=[], help="a Tessera model directory")
    ap.add_argument("--torch", help="the checkpoint, run in PyTorch fp32 and bf16")
    ap.add_argument("--torch-dtypes", default="float32,bfloat16")
    ap.add_argument("--contexts", default="0,1024,4096")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64, help="tokens per forward (the block; Fast-dLLM v2: 32)")
    ap.add_argument("--rounds", type=int, default=1, help="times the whole sequence of models runs; cells are medians over rounds")
    a = ap.parse_args()
    common = [a.contexts, str(a.threads), str(a.repeat), str(a.tokens)]
    ort_jobs = [(ORT, [d, *common]) for d in a.ort]
    torch_jobs = [(TORCH, [a.torch, *common, ROOT, dtype]) for dtype in a.torch_dtypes.split(",")] if a.torch else []
    jobs = []
    for i in range(max(len(ort_jobs), len(torch_jobs))):
        jobs += ort_jobs[i:i + 1] + torch_jobs[i:i + 1]
    runs: dict = {}
    for _ in range(a.rounds):
        for code, args in jobs:
            r = run(code, args, a.threads)
            key = f"{r['weights']} ({os.path.basename(os.path.normpath(r['model']))})"
            runs.setdefault(key, []).append(r)
    rows = [merge(key, rs) for key, rs in runs.items()]
    contexts = a.contexts.split(",")
    print(f"\n{a.threads} threads; median of {a.repeat} per run, median over {a.rounds} round(s); "
          f"ms per forward of a {a.tokens}-token block (KV fetch: extra ms when the presents are fetched too)\n")
    print("| weights | load | RSS after load | peak RSS | " + " | ".join(f"ctx {c}" for c in contexts) + " | KV fetch at " + contexts[-1] + " |")
    print("|---|---|---|---|" + "---|" * len(contexts) + "---|")
    fp32 = next((r for r in rows if r["weights"].startswith("pytorch float32")), None)
    for r in rows:
        cells = []
        for c in contexts:
            ms = r["ms"][c]
            ratio = f" ({fp32['ms'][c] / ms:.2f}x)" if fp32 else ""
            cells.append(f"{ms:.0f} ms{ratio}")
        kv = r["kv_fetch_ms"].get(contexts[-1])
        print(f"| {r['weights']} | {r['load_s']:.1f} s | {r['rss_mb'] / 1024:.2f} GiB | {r['peak_mb'] / 1024:.2f} GiB | " + " | ".join(cells)
              + f" | {'' if kv is None else f'{kv:.0f} ms'} |")


if __name__ == "__main__":
    main()
