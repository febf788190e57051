"""Where one 64-token block forward of a Tessera model directory spends its time, by ONNX op
type (ONNX Runtime's profiler), after P tokens of context:

    convert/.venv/bin/python bench/full_size/profile_ops.py DIR [--context 4096] [--runs 3] [--threads 2]

Prints the median wall time of a forward that fetches the logits only (a denoising step),
then per op type the kernel time per forward and the node count, largest first.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.dir, "config.json")))
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "profile")
    s = ort.InferenceSession(os.path.join(a.dir, cfg.get("onnx_file", "model.onnx")), so, providers=["CPUExecutionProvider"])
    layers, heads, dim, bs = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["block_size"]
    p, seq = a.context, 64
    q, k = np.arange(p, p + seq), np.arange(p + seq)
    mask = np.where((k[None] // bs) <= (q[:, None] // bs), 0, -1e9).astype(np.float32)[None, None]
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 300, (1, seq)).astype(np.int64), "position_ids": q[None].astype(np.int64), "attention_mask": mask}
    kv = rng.standard_normal((1, heads, p, dim), dtype=np.float32)
    for layer in range(layers):
        feeds[f"past_key_values.{layer}.key"] = kv
        feeds[f"past_key_values.{layer}.value"] = kv
    s.run(["logits"], feeds)  # warm-up: allocations, prepacking
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        s.run(["logits"], feeds)
        times.append(1000 * (time.perf_counter() - t))
    path = s.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    runs = a.runs + 1  # the profile holds the warm-up too
    ms: dict = collections.defaultdict(float)
    nodes: collections.Counter = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"]["op_name"]
            ms[op] += e["dur"] / 1000 / runs
            nodes[op] += 1
    print(f"{a.dir}, context {p}: median forward {statistics.median(times):.0f} ms; kernels {sum(ms.values()):.0f} ms per forward (warm-up included)")
    for op, t in sorted(ms.items(), key=lambda x: -x[1]):
        if t >= 0.5:
            print(f"  {op:30s} {t:9.1f} ms  {nodes[op] // runs:5d} nodes")


if __name__ == "__main__":
    main()
