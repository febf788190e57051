"""Llama-style block-diffusion transformer (the denoiser of docs/model-contract.md).

One set of weights, two ways in:

* ``forward(input_ids, position_ids, attention_mask, past_key_values)`` is the ONNX contract:
  an additive float mask ``[B, 1, S, P+S]``, past key/values ``[B, H_kv, P, D]`` (keys stored
  after rotary), returns ``(logits [B, S, V], presents)`` with presents ``[B, H_kv, P+S, D]``.
* the same call with ``past_key_values=None`` and a boolean mask (True = may attend) is the
  training path; it uses ``F.scaled_dot_product_attention`` when torch has it and
  ``use_sdpa`` is set.

Only torch 1.13 APIs are used on the export path (Debian's torch exports the test model);
newer torch (2.x) also runs it unchanged.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

MODEL_TYPE = "tessera-block-diffusion"
MASK_NEG = -1e9

KV = Tuple[torch.Tensor, torch.Tensor]


@dataclass
class ModelConfig:
    vocab_size: int
    hidden_size: int = 256
    intermediate_size: int = 704
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: int = 32
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048
    block_size: int = 64
    mask_token_id: int = 0
    eos_token_id: int = 0
    pad_token_id: int = 0
    tie_word_embeddings: bool = True
    # A per-token logit bias after the tied LM head. Off for trained models; the random
    # test model uses it to make end-of-turn reachable.
    lm_head_bias: bool = False
    initializer_range: float = 0.02
    capabilities: dict = field(
        default_factory=lambda: {"images": False, "tools": True, "thinking": True}
    )
    onnx_file: str = "model.onnx"
    # Decoding defaults of the model contract (docs/model-contract.md#decoding-defaults);
    # left out of config.json when empty.
    decoding: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even (rotary pairs)")
        if not self.tie_word_embeddings:
            raise ValueError("only tied LM heads are implemented")

    def to_json_dict(self) -> dict:
        d = asdict(self)
        if not d["decoding"]:
            del d["decoding"]
        return {"model_type": MODEL_TYPE, "architectures": ["TesseraBlockDiffusion"], **d}

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json_dict(), f, indent=2, ensure_ascii=False)
            f.write("\n")

    @classmethod
    def from_json_dict(cls, d: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def load(cls, path: str) -> "ModelConfig":
        with open(path, encoding="utf-8") as f:
            return cls.from_json_dict(json.load(f))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotary_cos_sin(
    position_ids: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``[B, 1, S, D]`` for absolute positions (HF Llama layout: halves, not pairs)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32, device=position_ids.device) / head_dim
    inv_freq = torch.exp(exponents * -math.log(theta))  # theta ** -exponents
    freqs = position_ids.to(torch.float32).unsqueeze(-1) * inv_freq  # [B, S, D/2]
    emb = torch.cat([freqs, freqs], dim=-1).unsqueeze(1)  # [B, 1, S, D]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads
        self.n_rep = self.n_heads // self.n_kv
        self.head_dim = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: Optional[torch.Tensor],
        past: Optional[KV],
        use_sdpa: bool,
    ) -> Tuple[torch.Tensor, KV]:
        b, s, _ = x.shape
        d = self.head_dim
        q = self.q_proj(x).view(b, s, self.n_heads, d).transpose(1, 2)  # [B, H, S, D]
        k = self.k_proj(x).view(b, s, self.n_kv, d).transpose(1, 2)  # [B, Hkv, S, D]
        v = self.v_proj(x).view(b, s, self.n_kv, d).transpose(1, 2)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        present = (k, v)

        if use_sdpa:
            # Training path: expand kv heads so every torch 2.x version takes it. A boolean
            # mask becomes additive so a fully blocked (padding) row gives zeros, not NaN.
            if mask is not None and mask.dtype == torch.bool:
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=mask.device).masked_fill(~mask, MASK_NEG)
            t = k.shape[2]
            kk = k[:, :, None].expand(b, self.n_kv, self.n_rep, t, d).reshape(b, self.n_heads, t, d)
            vv = v[:, :, None].expand(b, self.n_kv, self.n_rep, t, d).reshape(b, self.n_heads, t, d)
            out = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        else:
            # Grouped heads without copying kv: q as [B, Hkv, rep, S, D] broadcasts against
            # k as [B, Hkv, 1, T, D]. Keeps the exported graph free of Expand/Tile.
            qg = q.reshape(b, self.n_kv, self.n_rep, s, d)
            scores = torch.matmul(qg, k.unsqueeze(2).transpose(-1, -2)) * (1.0 / math.sqrt(d))
            if mask is not None:
                if mask.dtype == torch.bool:
                    mask = torch.zeros(mask.shape, dtype=scores.dtype, device=mask.device).masked_fill(
                        ~mask, MASK_NEG
                    )
                scores = scores + mask.unsqueeze(2)  # [B, 1, 1, S, T]
            probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
            out = torch.matmul(probs, v.unsqueeze(2)).reshape(b, self.n_heads, s, d)
        out = out.transpose(1, 2).reshape(b, s, self.n_heads * d)
        return self.o_proj(out), present


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, mask, past, use_sdpa):
        h, present = self.self_attn(self.input_layernorm(x), cos, sin, mask, past, use_sdpa)
        x = x + h
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, present


class BlockDiffusionLM(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if cfg.lm_head_bias:
            self.lm_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        else:
            self.register_parameter("lm_bias", None)
        # Plain attribute, not a constructor argument: the ONNX export sets it False.
        self.use_sdpa = hasattr(F, "scaled_dot_product_attention")
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = self.config.initializer_range
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                nn.init.ones_(p)
            elif name == "lm_bias":
                nn.init.zeros_(p)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                # GPT-2 style scaling of the residual writers.
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.config.num_hidden_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        past_key_values: Optional[Sequence[KV]] = None,
    ) -> Tuple[torch.Tensor, List[KV]]:
        b, s = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(s, device=input_ids.device).unsqueeze(0).expand(b, s)
        x = self.embed_tokens(input_ids)
        cos, sin = rotary_cos_sin(position_ids, self.config.head_dim, self.config.rope_theta, x.dtype)
        if past_key_values is not None and len(past_key_values) == 0:
            past_key_values = None
        use_sdpa = self.use_sdpa and past_key_values is None
        presents: List[KV] = []
        for i, layer in enumerate(self.layers):
            past = past_key_values[i] if past_key_values is not None else None
            x, present = layer(x, cos, sin, attention_mask, past, use_sdpa)
            presents.append(present)
        x = self.norm(x)
        # 2-D F.linear exports as Gemm(transB=1) on the embedding itself; a 3-D matmul with
        # weight.t() would make the exporter store a second, transposed copy of it.
        # (With a bias: without one the exporter still transposes, so use zeros.)
        w = self.embed_tokens.weight
        bias = self.lm_bias if self.lm_bias is not None else torch.zeros(w.shape[0], dtype=w.dtype, device=w.device)
        logits = F.linear(x.reshape(b * s, -1), w, bias)
        return logits.view(b, s, -1), presents

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def block_causal_allowed(q_pos: torch.Tensor, k_pos: torch.Tensor, block_size: int) -> torch.Tensor:
    """Boolean ``[B, 1, S, T]``: query at position p sees key at k iff k//bs <= p//bs.

    ``q_pos`` ``[B, S]`` and ``k_pos`` ``[B, T]`` are absolute positions; a negative
    position marks a padded slot, which nobody attends to.
    """
    qb = torch.div(q_pos, block_size, rounding_mode="floor").unsqueeze(-1)  # [B, S, 1]
    kb = torch.div(k_pos, block_size, rounding_mode="floor").unsqueeze(-2)  # [B, 1, T]
    allowed = (kb <= qb) & (k_pos >= 0).unsqueeze(-2)
    return allowed.unsqueeze(1)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The contract's additive form: 0 where allowed, -1e9 where not."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, MASK_NEG)
