"""DiffusionGemma's two text graphs of contract v3 (docs/model-contract.md, "Contract v3"), as
torch modules over the weights of transformers' ``DiffusionGemmaForBlockDiffusion``.

* ``GemmaEncoderGraph``: tokens -> the prompt's KV (the encoder writes the cache; no logits).
* ``GemmaDenoiserGraph``: a canvas + the read-only KV + the self-conditioning embeddings ->
  soft-capped logits and the next step's self-conditioning embeddings (softmax(logits / T) @ E).

The attention, masks and experts are written out here so that the graphs trace to plain ONNX
(transformers' cache objects and its looped experts do not): masks are additive inputs, one for
the full-attention layers and one for the sliding ones (their cache is bounded by the engine);
the experts are sparse (SparseExperts: each token's top k only) or dense (DenseExperts: every
expert, the routing weights zero outside the top k), both made of 2-D MatMuls so weight-only
quantizers see ordinary matmuls (docs/model-contract.md, "Experts", has the measurements).
"""

from __future__ import annotations

from typing import List, Tuple

import torch
from torch import nn

FULL = "full_attention"
SLIDING = "sliding_attention"


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.pow(x.pow(2).mean(-1, keepdim=True) + eps, -0.5)


def norm(module, x: torch.Tensor) -> torch.Tensor:
    y = rms(x, module.eps)
    return y * module.weight if module.with_scale else y


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def layer_shapes(text_config, layers) -> List[Tuple[str, int, int]]:
    """(layer type, kv heads, head dim) of every layer, read from the modules themselves."""
    out = []
    for i, layer in enumerate(layers):
        attn = layer.self_attn
        out.append((text_config.layer_types[i], attn.k_proj.out_features // attn.head_dim, attn.head_dim))
    return out


def route(r, k: int, x_route: torch.Tensor):
    """transformers' router: scale-free RMS norm x scale x H^-1/2, softmax, top k, renormalised,
    x per_expert_scale -> (weights [N, k], expert ids [N, k])."""
    h = rms(x_route, r.eps) * r.scale * r.scalar_root_size
    probs = torch.softmax(r.proj(h), dim=-1)
    top_w, top_i = torch.topk(probs, k=k, dim=-1)
    return top_w / top_w.sum(dim=-1, keepdim=True) * r.per_expert_scale[top_i], top_i


class DenseExperts(nn.Module):
    """Router + experts of one layer, every expert on every token. gate_up [E, 2I, H] -> one
    [H, E*2I] matmul; down [E, H, I] -> one [E*I, H] matmul over the routing-weighted
    activations (zero outside the top k, so the sum over experts falls out)."""

    def __init__(self, router, experts, act) -> None:
        super().__init__()
        e, two_i, h = experts.gate_up_proj.shape
        self.e, self.i = e, two_i // 2
        self.k = router.config.top_k_experts
        self.router = router
        self.act = act
        self.register_buffer("gate_up", experts.gate_up_proj.detach().permute(2, 0, 1).reshape(h, e * two_i).clone())
        self.register_buffer("down", experts.down_proj.detach().permute(0, 2, 1).reshape(e * self.i, h).clone())

    def forward(self, x_route: torch.Tensor, x_expert: torch.Tensor) -> torch.Tensor:
        top_w, top_i = route(self.router, self.k, x_route)
        weights = torch.zeros(x_route.shape[0], self.e, dtype=top_w.dtype).scatter(-1, top_i, top_w)  # [N, E]
        gu = torch.matmul(x_expert, self.gate_up).reshape(x_expert.shape[0], self.e, 2 * self.i)
        act = self.act(gu[..., : self.i]) * gu[..., self.i :]
        act = (act * weights.unsqueeze(-1)).reshape(x_expert.shape[0], self.e * self.i)
        return torch.matmul(act, self.down)


class SparseExperts(nn.Module):
    """Router + experts of one layer, each expert on the tokens routed to it only (k of E).

    The N*k (token, expert) pairs are sorted by expert, so each expert's tokens are one
    contiguous run of the sorted rows; expert e multiplies its run (a Slice between its
    bounds, from a count per expert and a CumSum) by its own 2-D [H, 2I] and [I, H] weights,
    the activation runs once over all pairs, and the pairs' outputs, weighted, are put back
    in token order and summed over each token's k. Plain ONNX (TopK, CumSum, Slice, MatMul,
    Gather, ScatterElements), and every expert weight a 2-D MatMul the quantizers see; an
    expert no token chose multiplies an empty run."""

    def __init__(self, router, experts, act) -> None:
        super().__init__()
        e, two_i, _ = experts.gate_up_proj.shape
        self.e, self.i = e, two_i // 2
        self.k = router.config.top_k_experts
        self.router = router
        self.act = act
        for j in range(e):
            self.register_buffer(f"gate_up_{j}", experts.gate_up_proj[j].detach().t().contiguous().clone())
            self.register_buffer(f"down_{j}", experts.down_proj[j].detach().t().contiguous().clone())
        self.register_buffer("expert_ids", torch.arange(e))

    def forward(self, x_route: torch.Tensor, x_expert: torch.Tensor) -> torch.Tensor:
        top_w, top_i = route(self.router, self.k, x_route)
        n = x_expert.shape[0]
        pairs = torch.arange(top_i.numel()).reshape(top_i.shape)  # pair p = token * k + j
        keys = (top_i * top_i.numel() + pairs).reshape(-1)  # unique: sorting them groups by expert
        order = torch.sort(keys).indices
        rows = x_expert[torch.div(order, self.k, rounding_mode="floor")]  # [N*k, H], grouped by expert
        counts = (top_i.reshape(-1, 1) == self.expert_ids).sum(0)  # [E]
        ends = torch.cumsum(counts, 0)
        starts = ends - counts
        gu = torch.cat([torch.matmul(rows[starts[j] : ends[j]], getattr(self, f"gate_up_{j}")) for j in range(self.e)])
        act = self.act(gu[:, : self.i]) * gu[:, self.i :]
        out = torch.cat([torch.matmul(act[starts[j] : ends[j]], getattr(self, f"down_{j}")) for j in range(self.e)])
        back = torch.zeros_like(order).scatter(0, order, torch.arange(order.shape[0]))  # sorted row of each pair
        out = out[back] * top_w.reshape(-1, 1)
        return out.reshape(n, self.k, -1).sum(1)


EXPERTS = {"dense": DenseExperts, "sparse": SparseExperts}


class GemmaLayer(nn.Module):
    """One text layer: attention over (past ++ new) keys, dense MLP + experts in parallel."""

    def __init__(self, layer, act, experts: str) -> None:
        super().__init__()
        self.l = layer
        self.experts = EXPERTS[experts](layer.router, layer.experts, act)

    def attend(self, x, cos, sin, mask, past_k, past_v):
        a = self.l.self_attn
        b, s, _ = x.shape
        d = a.head_dim
        q = a.q_proj(x).view(b, s, -1, d)
        k_raw = a.k_proj(x).view(b, s, -1, d)
        v_raw = a.v_proj(x).view(b, s, -1, d) if a.v_proj is not None else k_raw
        q = norm(a.q_norm, q).transpose(1, 2)
        k = norm(a.k_norm, k_raw).transpose(1, 2)
        v = norm(a.v_norm, v_raw).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        kv_heads, t = k.shape[1], k.shape[2]
        groups = q.shape[1] // kv_heads
        kr = k.unsqueeze(2).expand(b, kv_heads, groups, t, d).reshape(b, -1, t, d)
        vr = v.unsqueeze(2).expand(b, kv_heads, groups, t, d).reshape(b, -1, t, d)
        scores = torch.matmul(q, kr.transpose(2, 3)) * a.scaling + mask
        out = torch.matmul(torch.softmax(scores, dim=-1), vr).transpose(1, 2).reshape(b, s, -1)
        return a.o_proj(out), k, v

    def forward(self, x, cos, sin, mask, past_k, past_v):
        l = self.l
        h, k, v = self.attend(norm(l.input_layernorm, x), cos, sin, mask, past_k, past_v)
        x = x + norm(l.post_attention_layernorm, h)
        residual = x
        h1 = norm(l.post_feedforward_layernorm_1, l.mlp(norm(l.pre_feedforward_layernorm, x)))
        flat = residual.reshape(-1, residual.shape[-1])
        h2 = self.experts(flat, norm(l.pre_feedforward_layernorm_2, flat)).reshape(residual.shape)
        h2 = norm(l.post_feedforward_layernorm_2, h2)
        x = residual + norm(l.post_feedforward_layernorm, h1 + h2)
        return x * l.layer_scalar, k, v


class _Stack(nn.Module):
    def __init__(self, text_config, layers, rotary, experts: str) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        act = ACT2FN[text_config.hidden_activation]
        self.types = list(text_config.layer_types)
        self.layers = nn.ModuleList([GemmaLayer(layer, act, experts) for layer in layers])
        # transformers builds a rotary table only for the layer types the model has.
        for t in dict.fromkeys(self.types):
            self.register_buffer(f"{t}_inv_freq", getattr(rotary, f"{t}_inv_freq").detach().clone().float())

    def rope(self, position_ids: torch.Tensor, layer_type: str):
        inv = getattr(self, f"{layer_type}_inv_freq")
        freqs = position_ids.to(torch.float32).unsqueeze(-1) * inv
        emb = torch.cat([freqs, freqs], dim=-1).unsqueeze(1)  # [B, 1, S, D]
        return emb.cos(), emb.sin()

    def run(self, x, position_ids, full_mask, sliding_mask, past_flat):
        ropes = {t: self.rope(position_ids, t) for t in dict.fromkeys(self.types)}
        flat: List[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            t = self.types[i]
            cos, sin = ropes[t]
            mask = full_mask if t == FULL else sliding_mask
            x, k, v = layer(x, cos, sin, mask, past_flat[2 * i], past_flat[2 * i + 1])
            flat += [k, v]
        return x, flat


class GemmaEncoderGraph(nn.Module):
    """``forward(input_ids, position_ids, image_embeds, full_attention_mask, sliding_attention_mask, *past)``
    -> presents. ``image_embeds`` ``[N, H]`` (vision.onnx's rows, N = 0 for text) replace the
    embeddings of the first N ``image_token_id`` positions, in order, as transformers' masked_scatter does."""

    def __init__(self, hf_model, experts: str = "dense") -> None:
        super().__init__()
        lm = hf_model.model.encoder.language_model
        self.text_config = lm.config
        self.embed = lm.embed_tokens
        self.image_token_id = int(hf_model.config.image_token_id)
        self.stack = _Stack(lm.config, lm.layers, lm.rotary_emb, experts)

    def forward(self, input_ids, position_ids, image_embeds, full_attention_mask, sliding_attention_mask, *past_flat):
        x = self.embed(input_ids)
        flat_x = x.reshape(-1, x.shape[-1])
        # The first N image-token positions take the N rows; a generated image token (a canvas
        # encoded back, no pixels) keeps its embedding, as in transformers.
        slots = torch.nonzero(input_ids.reshape(-1) == self.image_token_id).reshape(-1, 1)[: image_embeds.shape[0]]
        x = flat_x.scatter(0, slots.expand(-1, x.shape[-1]), image_embeds).reshape(x.shape)
        _, flat = self.stack.run(x, position_ids, full_attention_mask, sliding_attention_mask, past_flat)
        return tuple(flat)


class GemmaDenoiserGraph(nn.Module):
    """``forward(canvas_ids, position_ids, self_conditioning_embeds, temperature, full_attention_mask,
    sliding_attention_mask, logits_positions, *past)`` -> (logits, next_self_conditioning_embeds).

    ``logits_positions`` int64 ``[B, K]``: the canvas positions of each row whose logits and next
    self-conditioning embeddings the head computes (both come back ``[B, K, .]``). Denoising
    passes every position; a decision's readout passes ``[[0]]`` per row, so the head, the
    soft-cap and the self-conditioning product run on one position instead of the canvas
    (the layers still run on the whole canvas: position 0 attends to all of it)."""

    def __init__(self, hf_model, experts: str = "dense") -> None:
        super().__init__()
        dec = hf_model.model.decoder
        self.text_config = dec.text_config
        self.embed = dec.embed_tokens
        self.sc = dec.self_conditioning
        self.final_norm = dec.norm
        self.lm_head = hf_model.lm_head
        self.softcap = float(hf_model.final_logit_softcapping)
        self.stack = _Stack(dec.text_config, dec.layers, dec.rotary_emb, experts)

    def forward(self, canvas_ids, position_ids, self_conditioning_embeds, temperature, full_attention_mask, sliding_attention_mask,
                logits_positions, *past_flat):
        sc = self.sc
        x = self.embed(canvas_ids)
        n = norm(sc.pre_norm, self_conditioning_embeds)
        x = norm(sc.post_norm, x + sc.down_proj(sc.act_fn(sc.gate_proj(n)) * sc.up_proj(n)))
        x, _ = self.stack.run(x, position_ids, full_attention_mask, sliding_attention_mask, past_flat)
        b, c, h = x.shape
        rows = torch.arange(b).unsqueeze(1) * c + logits_positions  # [B, K] rows of the flat [B*C, H]
        x = x.reshape(b * c, h)[rows.reshape(-1)].reshape(b, -1, h)
        logits = self.lm_head(norm(self.final_norm, x))
        logits = torch.tanh(logits / self.softcap) * self.softcap
        probs = torch.softmax(logits / temperature.view(-1, 1, 1), dim=-1)
        next_sc = torch.matmul(probs, self.embed.weight) * self.embed.embed_scale
        return logits, next_sc
