"""Weights formats compared: file size, load time, RSS and forward time (bench, not a test).

    convert/.venv/bin/python convert/bench_weights.py [--hidden 768 --layers 6 --intermediate 2048]

Builds a random checkpoint in SDAR's layout (Qwen3 layers, the tiny tokenizer) large enough
for per-parameter figures to mean something, converts it with --weights fp32, fp16 and int4,
and measures each model directory in a fresh process (so RSS is that session's): bytes on
disk, session load time, RSS after load, and the median time of a 64-token forward (no past)
and of a 4-token step over a 512-token past, all on one intra-op thread. Prints a Markdown
table with bytes per parameter, the projection to one billion parameters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

MEASURE = r"""
import json, os, statistics, sys, time
import numpy as np
import onnxruntime as ort
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "config.json")))
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
base = rss_mb()
so = ort.SessionOptions(); so.intra_op_num_threads = 1
t0 = time.perf_counter()
s = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
load = time.perf_counter() - t0
rss = rss_mb()
L, H, D, bs = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["block_size"]
def feeds(S, P):
    q = np.arange(P, P + S); k = np.arange(P + S)
    m = np.where((k[None] // bs) <= (q[:, None] // bs), 0, -1e9).astype(np.float32)[None, None]
    f = {"input_ids": np.random.randint(0, cfg["vocab_size"], (1, S)).astype(np.int64), "position_ids": q[None].astype(np.int64), "attention_mask": m}
    for l in range(L):
        f[f"past_key_values.{l}.key"] = np.random.randn(1, H, P, D).astype(np.float32)
        f[f"past_key_values.{l}.value"] = np.random.randn(1, H, P, D).astype(np.float32)
    return f
def timed(f, n=7):
    s.run(None, f); ts = []
    for _ in range(n):
        t = time.perf_counter(); s.run(None, f); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
print(json.dumps({"load_s": load, "rss_mb": rss, "base_rss_mb": base,
                  "fwd64_ms": 1000 * timed(feeds(64, 0)), "step4_p512_ms": 1000 * timed(feeds(4, 512))}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--intermediate", type=int, default=2048)
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    import make_tiny_checkpoints as mk
    from tessera_convert.__main__ import convert

    work = tempfile.mkdtemp(prefix="tessera-bench-weights-")
    ckpt = os.path.join(work, "ckpt")
    mk.make_sdar(ckpt)
    cfg_path = os.path.join(ckpt, "config.json")
    cfg = json.load(open(cfg_path))
    cfg.update(hidden_size=a.hidden, num_hidden_layers=a.layers, intermediate_size=a.intermediate,
               num_attention_heads=a.hidden // 64, num_key_value_heads=a.hidden // 128, head_dim=64)
    json.dump(cfg, open(cfg_path, "w"))
    for f in os.listdir(ckpt):
        if f.endswith(".safetensors") or f.endswith(".index.json"):
            os.remove(os.path.join(ckpt, f))
    from safetensors.torch import save_file

    save_file(mk.weights(cfg, qk_norm=True, bias=False, seed=3), os.path.join(ckpt, "model.safetensors"), metadata={"format": "pt"})
    rows = []
    for w in ("fp32", "fp16", "int4"):
        out = os.path.join(work, w)
        report = convert(ckpt, out, 32, w, "auto", False)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        m = json.loads(subprocess.run([sys.executable, "-c", MEASURE, out], capture_output=True, text=True, env=env, check=True).stdout)
        rows.append((w, report, m))
    params = rows[0][1]["parameters"]
    print(f"\n{params / 1e6:.1f} M parameters (hidden {a.hidden}, {a.layers} layers, intermediate {a.intermediate}); one intra-op thread\n")
    print("| weights | file | bytes/param (= GB per 1B params) | load | RSS after load (session) | forward 64 tokens | step 4 tokens over 512 |")
    print("|---|---|---|---|---|---|---|")
    for w, report, m in rows:
        size = report["onnx_bytes"]
        print(f"| {w} | {size / 1e6:.1f} MB | {size / params:.2f} | {m['load_s'] * 1000:.0f} ms | {m['rss_mb'] - m['base_rss_mb']:.0f} MB "
              f"({(m['rss_mb'] - m['base_rss_mb']) * 1048576 / params:.2f} B/param) | {m['fwd64_ms']:.1f} ms | {m['step4_p512_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
