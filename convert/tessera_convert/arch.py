"""The layer shapes and options of a checkpoint (no torch import: config errors are reported fast)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Arch:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rope_theta: float
    rms_norm_eps: float
    qk_norm: bool
    qkv_bias: bool
    tie_word_embeddings: bool
