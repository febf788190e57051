"""Reads a contract model directory's ONNX weights back into a BlockDiffusionLM (warm start).

    model = model_from_onnx("models/tessera-bd-small", max_position_embeddings=4096)

The TorchScript exporter names the norms and the embedding after their parameters but stores
each linear layer as an anonymous transposed MatMul constant (``onnx::MatMul_1656``), in the
order the forward first uses them: per layer q, k, v, o, gate, up, down. Those are mapped by
that order and shape; float16 initializers (a weights-in-fp16 directory) are widened. The
mapping is then verified: ONNX Runtime's logits on a random block-causal input must match the
loaded PyTorch model's (``verify``), so a directory this reader does not understand (int8,
a different exporter) fails loudly instead of training from scrambled weights.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, List

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.dirname(HERE)
sys.path[:0] = [HERE] + [os.path.join(TRAINING, d) for d in ("pipeline", "model")]
from model import BlockDiffusionLM, ModelConfig  # noqa: E402

LINEAR_ORDER = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def _array(init) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(init).astype(np.float32)


def onnx_state_dict(onnx_path: str, cfg: ModelConfig) -> Dict[str, torch.Tensor]:
    import onnx

    m = onnx.load(onnx_path)
    named: Dict[str, np.ndarray] = {}
    anonymous: List[np.ndarray] = []
    for init in m.graph.initializer:
        if init.data_type not in (1, 10):  # float, float16
            continue
        a = _array(init)
        # A weights-in-fp16 directory stores `X_fp16` and casts it back to `X` at run time.
        full = init.name[: -len("_fp16")] if init.name.endswith("_fp16") else init.name
        name = full[len("model."):] if full.startswith("model.") else full
        if not name.startswith("onnx::") and (name.endswith(".weight") or name == "lm_bias"):
            named[name] = a
        elif a.ndim == 2:
            anonymous.append(a)
    want = cfg.num_hidden_layers * len(LINEAR_ORDER)
    if len(anonymous) != want:
        raise ValueError(f"{onnx_path}: {len(anonymous)} matrix constants, expected {want} (q, k, v, o, gate, up, down per layer)")
    sd: Dict[str, torch.Tensor] = {k: torch.from_numpy(v) for k, v in named.items()}
    # The exporter stores equal constants once (norms still at their initial ones): a norm
    # with no initializer of its own shares the one that is there (verify() checks it).
    norms = [k for k in sd if k.endswith("norm.weight")]
    norm_names = ["norm.weight"] + [f"layers.{i}.{n}_layernorm.weight" for i in range(cfg.num_hidden_layers) for n in ("input", "post_attention")]
    for k in norm_names:
        if k not in sd and norms:
            sd[k] = sd[norms[0]].clone()
    for i, a in enumerate(anonymous):
        layer, which = divmod(i, len(LINEAR_ORDER))
        sd[f"layers.{layer}.{LINEAR_ORDER[which]}.weight"] = torch.from_numpy(np.ascontiguousarray(a.T))
    return sd


@torch.no_grad()
def verify(model: BlockDiffusionLM, onnx_path: str, tol: float = 2e-3) -> float:
    """Max |ORT - PyTorch| / (1 + |PyTorch|) of the logits on a random 100-token input."""
    import onnxruntime as ort

    from model import block_causal_allowed

    cfg = model.config
    g = torch.Generator().manual_seed(0)
    s = 100
    ids = torch.randint(0, cfg.vocab_size, (1, s), generator=g)
    pos = torch.arange(s).unsqueeze(0)
    allowed = block_causal_allowed(pos, pos, cfg.block_size)
    mask = torch.where(allowed, 0.0, -1e9).float()
    feeds = {"input_ids": ids.numpy(), "position_ids": pos.numpy(), "attention_mask": mask.numpy()}
    for layer in range(cfg.num_hidden_layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{layer}.{kv}"] = np.zeros((1, cfg.num_key_value_heads, 0, cfg.head_dim), np.float32)
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    ref = sess.run(["logits"], feeds)[0]
    use = model.use_sdpa
    model.use_sdpa = False
    try:
        got = model(ids, pos, mask, None)[0].float().numpy()
    finally:
        model.use_sdpa = use
    err = float(np.max(np.abs(got - ref) / (1 + np.abs(ref))))
    if not err <= tol:
        raise ValueError(f"{onnx_path}: weights read back do not reproduce ONNX Runtime's logits (error {err:.3g})")
    return err


def model_from_onnx(model_dir: str, max_position_embeddings: int | None = None) -> BlockDiffusionLM:
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    cfg = ModelConfig.from_json_dict(raw)
    model = BlockDiffusionLM(cfg)
    sd = onnx_state_dict(os.path.join(model_dir, raw.get("onnx_file", "model.onnx")), cfg)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or [k for k in missing if k != "lm_bias"]:
        raise ValueError(f"{model_dir}: missing {missing}, unexpected {unexpected}")
    model.eval()
    verify(model, os.path.join(model_dir, raw.get("onnx_file", "model.onnx")))
    if max_position_embeddings:
        model.config.max_position_embeddings = max_position_embeddings
    return model


if __name__ == "__main__":
    m = model_from_onnx(sys.argv[1])
    print(f"{sys.argv[1]}: {m.num_parameters():,} parameters, ORT agreement checked")
