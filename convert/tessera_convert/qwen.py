"""Qwen2 / Qwen3 decoder layers behind Tessera's ONNX contract (docs/model-contract.md).

Parameter names are those of the Hugging Face checkpoints (``model.layers.{i}.self_attn.q_proj``
...), so a checkpoint's state dict loads as it is. The forward is the contract's: an additive
float mask ``[B, 1, S, P+S]``, past keys/values ``[B, H_kv, P, D]`` (keys after rotary), and it
returns ``(logits [B, S, V], presents [B, H_kv, P+S, D])``.

Qwen3 (SDAR): RMSNorm over each head of q and k before rotary, no q/k/v bias.
Qwen2 (Fast-dLLM v2): bias on q, k, v (none on o), no q/k norm.
"""

from __future__ import annotations

from typing import List, Tuple

import torch
from torch import nn

from .arch import Arch

KV = Tuple[torch.Tensor, torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.a = a
        self.q_proj = nn.Linear(a.hidden_size, a.num_attention_heads * a.head_dim, bias=a.qkv_bias)
        self.k_proj = nn.Linear(a.hidden_size, a.num_key_value_heads * a.head_dim, bias=a.qkv_bias)
        self.v_proj = nn.Linear(a.hidden_size, a.num_key_value_heads * a.head_dim, bias=a.qkv_bias)
        self.o_proj = nn.Linear(a.num_attention_heads * a.head_dim, a.hidden_size, bias=False)
        if a.qk_norm:
            self.q_norm = RMSNorm(a.head_dim, a.rms_norm_eps)
            self.k_norm = RMSNorm(a.head_dim, a.rms_norm_eps)

    def forward(self, x, cos, sin, mask, past: KV) -> Tuple[torch.Tensor, KV]:
        a = self.a
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, a.num_attention_heads, a.head_dim)
        k = self.k_proj(x).view(b, s, a.num_key_value_heads, a.head_dim)
        v = self.v_proj(x).view(b, s, a.num_key_value_heads, a.head_dim)
        if a.qk_norm:
            q = self.q_norm(q)
            k = self.k_norm(k)
        q = q.transpose(1, 2)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past[0], k], dim=2)
        v = torch.cat([past[1], v], dim=2)
        # Grouped-query attention without materialising K/V per query head: the G query heads
        # that share kv head j (heads j*G .. j*G+G-1) become G*S rows of one matmul against
        # that head's K and V, which MatMul broadcasts over [B, H_kv]. Expanding K/V to all
        # heads instead copied 2 x (P+S) x H x D floats per layer each forward (most of a
        # 4k-context forward at 1.7B: bench/full_size/README.md).
        groups = a.num_attention_heads // a.num_key_value_heads
        t = k.shape[2]
        qg = q.reshape(b, a.num_key_value_heads, groups * s, a.head_dim)
        scores = torch.matmul(qg * (a.head_dim**-0.5), k.transpose(2, 3))
        scores = scores.view(b, a.num_key_value_heads, groups, s, t) + mask.unsqueeze(2)
        probs = torch.softmax(scores, dim=-1).view(b, a.num_key_value_heads, groups * s, t)
        out = torch.matmul(probs, v).view(b, a.num_attention_heads, s, a.head_dim)
        out = out.transpose(1, 2).reshape(b, s, a.num_attention_heads * a.head_dim)
        return self.o_proj(out), (k, v)


class MLP(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(a.hidden_size, a.intermediate_size, bias=False)
        self.up_proj = nn.Linear(a.hidden_size, a.intermediate_size, bias=False)
        self.down_proj = nn.Linear(a.intermediate_size, a.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.self_attn = Attention(a)
        self.mlp = MLP(a)
        self.input_layernorm = RMSNorm(a.hidden_size, a.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(a.hidden_size, a.rms_norm_eps)

    def forward(self, x, cos, sin, mask, past: KV) -> Tuple[torch.Tensor, KV]:
        h, present = self.self_attn(self.input_layernorm(x), cos, sin, mask, past)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), present


class Body(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(a.vocab_size, a.hidden_size)
        self.layers = nn.ModuleList([Layer(a) for _ in range(a.num_hidden_layers)])
        self.norm = RMSNorm(a.hidden_size, a.rms_norm_eps)


class QwenContractLM(nn.Module):
    """The denoiser: ``forward(input_ids, position_ids, attention_mask, *past_flat)``."""

    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.a = a
        self.model = Body(a)
        self.lm_head = nn.Linear(a.hidden_size, a.vocab_size, bias=False)
        if a.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, a.head_dim, 2, dtype=torch.float32) / a.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, input_ids, position_ids, attention_mask, *past_flat):
        freqs = position_ids.to(torch.float32).unsqueeze(-1) * self.inv_freq  # [B, S, D/2]
        emb = torch.cat([freqs, freqs], dim=-1).unsqueeze(1)  # [B, 1, S, D]
        cos, sin = emb.cos(), emb.sin()
        x = self.model.embed_tokens(input_ids)
        flat: List[torch.Tensor] = []
        for i, layer in enumerate(self.model.layers):
            x, (k, v) = layer(x, cos, sin, attention_mask, (past_flat[2 * i], past_flat[2 * i + 1]))
            flat += [k, v]
        logits = self.lm_head(self.model.norm(x))
        return (logits, *flat)
