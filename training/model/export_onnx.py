"""Export a BlockDiffusionLM to the ONNX contract of docs/model-contract.md.

Usage:
    python3 training/model/export_onnx.py <checkpoint.pt | random> <out-dir> [--config config.json]
                                    [--opset 17] [--seed 0]

* ``checkpoint.pt`` is ``torch.save({"config": <config dict>, "model": state_dict})``
  (what training saves); ``random`` builds fresh weights from ``--config`` and ``--seed``.
* Writes ``<out-dir>/model.onnx`` and ``<out-dir>/config.json``; weights go to external data
  (``model.onnx.data``) only when the model is over 2 GB.
* Verifies: onnx.checker, the input/output names, and, when ``onnxruntime`` is importable,
  logits and presents against PyTorch for P = 0 and P > 0 (otherwise the Node test
  ``test/model/tiny-model.test.ts`` is the runtime check).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from typing import List, Tuple

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The contract's tensor names, shared with the converter (convert/tessera_convert/contract.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "convert"))
from model import BlockDiffusionLM, ModelConfig, additive_mask, block_causal_allowed  # noqa: E402
from tessera_convert.contract import dynamic_axes, input_names, output_names  # noqa: E402

DEFAULT_OPSET = 17
TWO_GB = 2 * 1024**3


class _OnnxForward(nn.Module):
    """Flat positional signature for the exporter: (ids, pos, mask, k0, v0, k1, v1, ...)."""

    def __init__(self, model: BlockDiffusionLM) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, position_ids, attention_mask, *past_flat):
        past = [(past_flat[2 * i], past_flat[2 * i + 1]) for i in range(len(past_flat) // 2)]
        logits, presents = self.model(input_ids, position_ids, attention_mask, past)
        flat: List[torch.Tensor] = [logits]
        for k, v in presents:
            flat += [k, v]
        return tuple(flat)


def example_inputs(cfg: ModelConfig, batch: int, seq: int, past: int, seed: int = 0) -> Tuple[torch.Tensor, ...]:
    """Block-causal inputs where rows continue a past of ``past`` tokens (random KV)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
    pos = torch.arange(past, past + seq).unsqueeze(0).repeat(batch, 1)
    k_pos = torch.arange(0, past + seq).unsqueeze(0).repeat(batch, 1)
    mask = additive_mask(block_causal_allowed(pos, k_pos, cfg.block_size))
    kv = []
    for _ in range(cfg.num_hidden_layers):
        for _ in range(2):
            kv.append(torch.randn(batch, cfg.num_key_value_heads, past, cfg.head_dim, generator=g))
    return (ids, pos, mask, *kv)


def export(model: BlockDiffusionLM, out_path: str, opset: int = DEFAULT_OPSET) -> None:
    cfg = model.config
    model = model.eval().float()
    use_sdpa = model.use_sdpa
    model.use_sdpa = False  # the explicit matmul/softmax path is the one the contract describes
    try:
        wrapper = _OnnxForward(model).eval()
        # Distinct B, S, P so no dimension is mistaken for another while tracing.
        args = example_inputs(cfg, batch=2, seq=5, past=3)
        ins, outs = input_names(cfg.num_hidden_layers), output_names(cfg.num_hidden_layers)
        dynamic = dynamic_axes(cfg.num_hidden_layers)
        kwargs = dict(
            input_names=ins,
            output_names=outs,
            dynamic_axes=dynamic,
            opset_version=opset,
            do_constant_folding=True,
        )
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False  # torch >= 2.9 defaults to the dynamo exporter
        too_big = sum(p.numel() * p.element_size() for p in model.parameters()) > TWO_GB
        with torch.no_grad():
            torch.onnx.export(wrapper, args, out_path, **kwargs)
        if too_big:
            import onnx

            m = onnx.load(out_path)
            onnx.save_model(m, out_path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=os.path.basename(out_path) + ".data")
    finally:
        model.use_sdpa = use_sdpa


def check(model: BlockDiffusionLM, onnx_path: str, atol: float = 1e-4) -> str:
    """onnx.checker + names; numeric comparison when onnxruntime is importable."""
    import onnx

    cfg = model.config
    onnx.checker.check_model(onnx_path)
    m = onnx.load(onnx_path, load_external_data=False)
    got_in = [i.name for i in m.graph.input]
    got_out = [o.name for o in m.graph.output]
    if got_in != input_names(cfg.num_hidden_layers) or got_out != output_names(cfg.num_hidden_layers):
        raise RuntimeError(f"unexpected io names: {got_in} -> {got_out}")
    try:
        import onnxruntime as ort  # type: ignore
    except ImportError:
        return "onnx.checker ok; onnxruntime not installed, numeric check left to the Node test"
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    model = model.eval().float()
    worst = 0.0
    for b, s, p in [(1, 7, 0), (2, 9, 64), (3, 1, 130)]:
        args = example_inputs(cfg, b, s, p, seed=b * 100 + s)
        with torch.no_grad():
            ref = _OnnxForward(model)(*args)
        feeds = {n: a.numpy() for n, a in zip(input_names(cfg.num_hidden_layers), args)}
        got = sess.run(None, feeds)
        for r, g in zip(ref, got):
            if tuple(r.shape) != g.shape:
                raise RuntimeError(f"shape {g.shape} != {tuple(r.shape)} for B={b} S={s} P={p}")
            # Relative to magnitude: float32 kernels differ by a few ulps of large logits.
            worst = max(worst, float(((r - torch.from_numpy(g)).abs() / (1 + r.abs())).max()))
    if worst > atol:
        raise RuntimeError(f"onnxruntime differs from torch by {worst} (relative)")
    return f"onnxruntime matches torch (max diff {worst:.2e}, relative to 1 + |x|)"


def reference_outputs(model: BlockDiffusionLM, ids: List[int]) -> dict:
    """PyTorch outputs for one block-causal pass over ``ids`` (P = 0), in the JSON shape
    ``training/model/check_onnx.mjs`` and ``test/model/tiny-model.test.ts`` compare against."""
    cfg = model.config
    s = len(ids)
    pos = torch.arange(s).unsqueeze(0)
    mask = additive_mask(block_causal_allowed(pos, pos, cfg.block_size))
    use_sdpa = model.use_sdpa
    model.use_sdpa = False
    try:
        with torch.no_grad():
            logits, presents = model.eval()(torch.tensor([ids]), pos, mask, [])
    finally:
        model.use_sdpa = use_sdpa
    bs = cfg.block_size
    rows = sorted({r for r in (0, 1, bs - 1, bs, bs + 1, s - 1) if 0 <= r < s})
    layer, at = cfg.num_hidden_layers - 1, min(bs + 6, s - 1)
    r6 = lambda t: [round(float(x), 6) for x in t]  # noqa: E731
    return {
        "input_ids": [int(i) for i in ids],
        "rows": rows,
        "logits_rows": [r6(logits[0, r]) for r in rows],
        "argmax": [int(x) for x in logits[0].argmax(-1)],
        "present": {
            "name": f"present.{layer}.value",
            "position": at,
            "heads": [r6(presents[layer][1][0, h, at]) for h in range(cfg.num_key_value_heads)],
        },
    }


def load_model(source: str, config_path: str | None, seed: int) -> BlockDiffusionLM:
    if source == "random":
        if not config_path:
            raise SystemExit("random weights need --config config.json")
        torch.manual_seed(seed)
        return BlockDiffusionLM(ModelConfig.load(config_path))
    ckpt = torch.load(source, map_location="cpu")
    cfg = ModelConfig.from_json_dict(ckpt["config"])
    model = BlockDiffusionLM(cfg)
    model.load_state_dict(ckpt["model"])
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="checkpoint .pt, or 'random'")
    ap.add_argument("out_dir")
    ap.add_argument("--config", help="config.json (required for 'random')")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", help="also write PyTorch reference outputs (JSON) for check_onnx.mjs")
    ap.add_argument("--reference-ids", help="comma-separated token ids for --reference (default: 150 seeded random ids)")
    a = ap.parse_args()
    model = load_model(a.source, a.config, a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    out = os.path.join(a.out_dir, model.config.onnx_file)
    export(model, out, a.opset)
    model.config.save(os.path.join(a.out_dir, "config.json"))
    print(f"wrote {out} ({os.path.getsize(out)} bytes, {model.num_parameters()} parameters)")
    print(check(model, out))
    if a.reference:
        if a.reference_ids:
            ids = [int(x) for x in a.reference_ids.split(",")]
        else:
            ids = torch.randint(0, model.config.vocab_size, (150,), generator=torch.Generator().manual_seed(a.seed)).tolist()
        with open(a.reference, "w", encoding="utf-8") as f:
            json.dump(reference_outputs(model, ids), f)
        print(f"wrote {a.reference}")


if __name__ == "__main__":
    main()
