"""Parity of a converted model directory with transformers' own Qwen3 / Qwen2 models.

    python convert/tests/parity.py <checkpoint-dir> <model-dir> [--int4-model-dir DIR] [--fp16-model-dir DIR] [--int8-model-dir DIR]

The reference is independent of the converter: transformers' Qwen3ForCausalLM (SDAR's layers)
or Qwen2ForCausalLM (Fast-dLLM v2's), built from the checkpoint's config.json and loaded from
the same safetensors, run with eager attention and the block-causal additive mask passed in.
Checks, on ONNX Runtime sessions of model.onnx:
  * logits and presents within 1e-3 (|a - b| <= 1e-3 * (1 + |a|)) without a past, and with a
    past (the reference's own cache fed to the ONNX model);
  * block causality: changing the tokens of a later block leaves earlier logits bit-identical;
  * int4 (when given): the same comparison within the documented tolerance (relative RMS of the
    logits <= 0.35 on these random tiny weights, docs/model-contract.md "Weights");
  * fp16 (when given): within 1e-3, as fp32 (bf16 weights are exact in float16);
  * int8 (when given): relative RMS of the logits <= 0.1 (measured 0.02 on the tiny weights).
Prints one JSON line of measured differences; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np
import onnxruntime as ort
import torch
from safetensors.torch import load_file

REL_TOL = 1e-3
INT4_REL_RMS = 0.35
INT8_REL_RMS = 0.1


def reference_model(ckpt: str, dtype=torch.float32):
    import transformers

    with open(os.path.join(ckpt, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    common = dict(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"], rms_norm_eps=cfg["rms_norm_eps"],
        max_position_embeddings=cfg["max_position_embeddings"], tie_word_embeddings=cfg["tie_word_embeddings"],
        rope_theta=cfg["rope_theta"], hidden_act=cfg["hidden_act"], use_sliding_window=False,
    )
    if cfg["model_type"] == "sdar":
        config = transformers.Qwen3Config(head_dim=cfg["head_dim"], attention_bias=False, **common)
        cls = transformers.Qwen3ForCausalLM
    else:
        config = transformers.Qwen2Config(**common)
        cls = transformers.Qwen2ForCausalLM
    config._attn_implementation = "eager"
    # Built on the meta device and given the checkpoint's tensors (assign): one copy of the
    # weights, not a random init plus a loaded state dict (14 GB at 1.7B in float32).
    with torch.device("meta"):
        model = cls(config).eval()
    state = {}
    for path in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        for k, v in load_file(path).items():
            state[k] = v.to(dtype)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    del state
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg["tie_word_embeddings"])]
    if missing or unexpected:
        raise SystemExit(f"reference load: missing {missing}, unexpected {unexpected}")
    if cfg["tie_word_embeddings"]:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb = type(model.model.rotary_emb)(config=config)  # its buffers were on meta
    return model, cfg


def block_mask(past: int, seq: int, block: int) -> torch.Tensor:
    q = torch.arange(past, past + seq)
    k = torch.arange(0, past + seq)
    allowed = (k // block)[None, :] <= (q // block)[:, None]
    return torch.where(allowed, 0.0, -1e9)[None, None].to(torch.float32)


def hf_forward(model, ids, past_len, block, cache):
    from transformers import DynamicCache

    cache = cache if cache is not None else DynamicCache(config=model.config)
    seq = ids.shape[1]
    with torch.no_grad():
        out = model(
            input_ids=ids, position_ids=torch.arange(past_len, past_len + seq)[None],
            attention_mask=block_mask(past_len, seq, block), past_key_values=cache, use_cache=True,
        )
    layers = [(layer.keys.clone(), layer.values.clone()) for layer in out.past_key_values.layers]
    return out.logits.float(), layers, out.past_key_values


def ort_forward(sess, ids, past_len, block, past_layers, n_layers, kv_heads, head_dim):
    seq = ids.shape[1]
    feeds = {
        "input_ids": ids.numpy().astype(np.int64),
        "position_ids": np.arange(past_len, past_len + seq, dtype=np.int64)[None],
        "attention_mask": block_mask(past_len, seq, block).numpy(),
    }
    for l in range(n_layers):
        if past_layers is None:
            k = v = np.zeros((1, kv_heads, 0, head_dim), np.float32)
        else:
            k, v = past_layers[l][0].numpy(), past_layers[l][1].numpy()
        feeds[f"past_key_values.{l}.key"] = k
        feeds[f"past_key_values.{l}.value"] = v
    out = sess.run(None, feeds)
    return out[0], [(out[1 + 2 * l], out[2 + 2 * l]) for l in range(n_layers)]


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float((np.abs(a - b) / (1 + np.abs(a))).max())


def rel_rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("model_dir")
    ap.add_argument("--int4-model-dir")
    ap.add_argument("--fp16-model-dir")
    ap.add_argument("--int8-model-dir")
    a = ap.parse_args()
    model, cfg = reference_model(a.checkpoint)
    with open(os.path.join(a.model_dir, "config.json"), encoding="utf-8") as f:
        ours = json.load(f)
    block = ours["block_size"]
    layers, kv_heads, head_dim = ours["num_hidden_layers"], ours["num_key_value_heads"], ours["head_dim"]
    report, failures = {}, []

    def session(d):
        return ort.InferenceSession(os.path.join(d, ours["onnx_file"]), providers=["CPUExecutionProvider"])

    g = torch.Generator().manual_seed(7)
    # Three blocks and a partial fourth without a past; then the last 1.5 blocks on a past of the rest.
    total = 3 * block + block // 2 + 1
    ids = torch.randint(0, cfg["vocab_size"], (1, total), generator=g)
    split = 2 * block
    ref_full, ref_full_kv, _ = hf_forward(model, ids, 0, block, None)
    ref_head, ref_head_kv, cache = hf_forward(model, ids[:, :split], 0, block, None)
    ref_tail, ref_tail_kv, _ = hf_forward(model, ids[:, split:], split, block, cache)

    def compare(name, d, check):
        sess = session(d)
        got_full, got_full_kv = ort_forward(sess, ids, 0, block, None, layers, kv_heads, head_dim)
        got_tail, got_tail_kv = ort_forward(sess, ids[:, split:], split, block, ref_head_kv, layers, kv_heads, head_dim)
        r = {
            "logits": rel(ref_full.numpy(), got_full),
            "logits_past": rel(ref_tail.numpy(), got_tail),
            "present": max(rel(ref_full_kv[l][i].numpy(), got_full_kv[l][i]) for l in range(layers) for i in (0, 1)),
            "present_past": max(rel(ref_tail_kv[l][i].numpy(), got_tail_kv[l][i]) for l in range(layers) for i in (0, 1)),
            "logits_rel_rms": rel_rms(ref_full.numpy(), got_full),
            "argmax_agreement": float((ref_full.numpy().argmax(-1) == got_full.argmax(-1)).mean()),
        }
        report[name] = r
        check(name, r)
        return sess

    def exact(name, r):
        for key in ("logits", "logits_past", "present", "present_past"):
            if r[key] > REL_TOL:
                failures.append(f"{name}: {key} differs from transformers by {r[key]:.2e} (> {REL_TOL})")

    sess = compare("fp32", a.model_dir, exact)
    # The with-past run must equal the tail of the no-past run (the past is reused exactly).
    report["fp32"]["past_vs_full"] = rel(ref_full.numpy()[:, split:], ort_forward(sess, ids[:, split:], split, block, ref_head_kv, layers, kv_heads, head_dim)[0])

    # Block causality: new tokens in the last (partial) block leave every earlier row unchanged.
    changed = ids.clone()
    changed[:, 3 * block:] = torch.randint(0, cfg["vocab_size"], (1, total - 3 * block), generator=g)
    base, _ = ort_forward(sess, ids, 0, block, None, layers, kv_heads, head_dim)
    other, _ = ort_forward(sess, changed, 0, block, None, layers, kv_heads, head_dim)
    report["block_causal"] = bool(np.array_equal(base[:, : 3 * block], other[:, : 3 * block]))
    report["later_block_changed"] = bool(not np.array_equal(base[:, 3 * block:], other[:, 3 * block:]))
    if not report["block_causal"]:
        failures.append("block causality: changing the last block changed an earlier block's logits")
    if not report["later_block_changed"]:
        failures.append("block causality check is vacuous: the changed block's logits did not change")

    if a.fp16_model_dir:
        compare("fp16", a.fp16_model_dir, exact)
    if a.int4_model_dir:
        def int4_ok(name, r):
            if r["logits_rel_rms"] > INT4_REL_RMS:
                failures.append(f"int4: logits relative RMS {r['logits_rel_rms']:.3f} > {INT4_REL_RMS}")
        compare("int4", a.int4_model_dir, int4_ok)

    if a.int8_model_dir:
        def int8_ok(name, r):
            if r["logits_rel_rms"] > INT8_REL_RMS:
                failures.append(f"int8: logits relative RMS {r['logits_rel_rms']:.3f} > {INT8_REL_RMS}")
        compare("int8", a.int8_model_dir, int8_ok)

    print(json.dumps(report))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
