"""The self-check of contract v3: DiffusionGemma's exported graphs against transformers' own
``DiffusionGemmaForBlockDiffusion`` (encoder KV, then two denoising steps with self-conditioning,
then the accepted canvas encoded onto the cache, as ``generate`` does), driven the way the
engine drives them: additive masks built from absolute positions, the sliding layers' cache
cut to their last ``sliding_window - 1`` positions."""

from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np
import torch

NEG = -1e9


def masks(q_pos: np.ndarray, k_pos: np.ndarray, window: int, causal: bool):
    """Additive [B, 1, S, T] masks (full, sliding) for query and key positions [B, S], [B, T]."""
    q = q_pos[:, None, :, None]
    k = k_pos[:, None, None, :]
    full = np.ones_like(q - k, dtype=bool) if not causal else (k <= q)
    sliding = full & (k > q - window) if causal else np.ones_like(full)
    f = lambda m: np.where(m, 0.0, NEG).astype(np.float32)  # noqa: E731
    return f(full), f(sliding)


def rel(ref: np.ndarray, got: np.ndarray) -> float:
    if ref.shape != got.shape:
        raise RuntimeError(f"shape {got.shape} where transformers gives {ref.shape}")
    return float((np.abs(ref - got) / (1 + np.abs(ref))).max())


class Driver:
    """Runs encoder/denoiser graphs given as callables of numpy feeds -> list of numpy outputs."""

    def __init__(self, shapes, window: int, hidden: int, encode: Callable, denoise: Callable) -> None:
        self.shapes, self.window, self.hidden, self.encode_fn, self.denoise_fn = shapes, window, hidden, encode, denoise
        self.past = [np.zeros((1, kv, 0, d), np.float32) for (_, kv, d) in shapes for _ in range(2)]
        self.k_pos = {"full": np.zeros((1, 0), np.int64), "sliding": np.zeros((1, 0), np.int64)}
        self.length = 0

    def _past_feeds(self) -> Dict[str, np.ndarray]:
        feeds = {}
        for l in range(len(self.shapes)):
            feeds[f"past_key_values.{l}.key"] = self.past[2 * l]
            feeds[f"past_key_values.{l}.value"] = self.past[2 * l + 1]
        return feeds

    def _masks(self, pos: np.ndarray, causal: bool):
        full, _ = masks(pos, np.concatenate([self.k_pos["full"], pos], 1), self.window, causal)
        _, sliding = masks(pos, np.concatenate([self.k_pos["sliding"], pos], 1), self.window, causal)
        return full, sliding

    def encode(self, ids: np.ndarray, image_embeds: np.ndarray = None, image_blocks=()) -> List[np.ndarray]:
        """``image_blocks``: (start, end) index ranges of ``ids`` holding one image's tokens each,
        which attend to each other both ways (``use_bidirectional_attention: "vision"``)."""
        pos = np.arange(self.length, self.length + ids.shape[1], dtype=np.int64)[None]
        full, sliding = self._masks(pos, causal=True)
        for start, end in image_blocks:
            for m in (full, sliding):
                m[:, :, start:end, m.shape[3] - ids.shape[1] + start: m.shape[3] - ids.shape[1] + end] = 0.0
        if image_embeds is None:
            image_embeds = np.zeros((0, self.hidden), np.float32)
        out = self.encode_fn({"input_ids": ids, "position_ids": pos, "image_embeds": image_embeds, "full_attention_mask": full,
                              "sliding_attention_mask": sliding, **self._past_feeds()})
        keep = self.window - 1
        for l, (t, _, _) in enumerate(self.shapes):
            for j in (0, 1):
                x = out[2 * l + j]
                self.past[2 * l + j] = x[:, :, -keep:] if t == "sliding_attention" else x
        self.k_pos["full"] = np.concatenate([self.k_pos["full"], pos], 1)
        self.k_pos["sliding"] = self.k_pos["full"][:, -keep:]
        self.length += ids.shape[1]
        return out

    def denoise(self, canvas: np.ndarray, sc: np.ndarray, temperature: float, at=None):
        """``at``: the canvas positions whose logits to compute (default all of them)."""
        pos = np.arange(self.length, self.length + canvas.shape[1], dtype=np.int64)[None]
        full, sliding = self._masks(pos, causal=False)
        at = np.arange(canvas.shape[1], dtype=np.int64)[None] if at is None else np.asarray(at, np.int64)[None]
        return self.denoise_fn({"canvas_ids": canvas, "position_ids": pos, "self_conditioning_embeds": sc,
                                "temperature": np.array([temperature], np.float32), "full_attention_mask": full,
                                "sliding_attention_mask": sliding, "logits_positions": at, **self._past_feeds()})


def check(hf_model, driver: Driver, prompt_len: int, seed: int = 0) -> Dict[str, float]:
    """Worst relative difference (|a-b| / (1+|a|)) of the KV cache and the logits, per figure."""
    from transformers import DynamicCache

    cfg = hf_model.config
    text = cfg.text_config
    c = cfg.canvas_length
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, text.vocab_size, (1, prompt_len), generator=g)
    cache = DynamicCache(config=text)
    worst = {"encoder_kv": 0.0, "logits": 0.0, "self_conditioning": 0.0}

    def kv_diff() -> float:
        w = 0.0
        for l in range(len(driver.shapes)):
            layer = cache.layers[l]
            w = max(w, rel(layer.keys.numpy(), driver.past[2 * l]), rel(layer.values.numpy(), driver.past[2 * l + 1]))
        return w

    with torch.no_grad():
        hf_model.model.encoder(input_ids=ids, past_key_values=cache, position_ids=torch.arange(prompt_len)[None])
        driver.encode(ids.numpy())
        worst["encoder_kv"] = kv_diff()
        temperature = 0.7
        canvas = torch.randint(0, text.vocab_size, (1, c), generator=g)
        sc = np.zeros((1, c, text.hidden_size), np.float32)
        sc_logits = None
        for _ in range(2):
            pos = torch.arange(driver.length, driver.length + c)[None]
            ref = hf_model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=sc_logits,
                           decoder_position_ids=pos).logits
            logits, next_sc = driver.denoise(canvas.numpy(), sc, temperature)
            worst["logits"] = max(worst["logits"], rel(ref.numpy(), logits))
            # The head narrowed to canvas position 0 (a decision's readout) reads the same logits.
            first, _ = driver.denoise(canvas.numpy(), sc, temperature, at=[0])
            worst["logits"] = max(worst["logits"], rel(ref.numpy()[:, :1], first))
            sc_logits = ref / temperature
            soft = torch.matmul(sc_logits.softmax(-1), hf_model.model.decoder.embed_tokens.weight)
            soft = soft * hf_model.model.decoder.embed_tokens.embed_scale
            worst["self_conditioning"] = max(worst["self_conditioning"], rel(soft.numpy(), next_sc))
            sc = next_sc
            canvas = torch.randint(0, text.vocab_size, (1, c), generator=g)
        accepted = ref.argmax(-1)
        hf_model.model.encoder(input_ids=accepted, past_key_values=cache, position_ids=torch.arange(driver.length, driver.length + c)[None])
        driver.encode(accepted.numpy())
        worst["encoder_kv"] = max(worst["encoder_kv"], kv_diff())
    return worst


def torch_driver(hf_model, encoder, denoiser, shapes, window) -> Driver:
    hidden = hf_model.config.text_config.hidden_size
    def run(module, names):
        def call(feeds):
            with torch.no_grad():
                out = module(*(torch.from_numpy(feeds[n]) for n in names))
            return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]
        return call

    from .gemma_export import decoder_input_names, encoder_input_names

    return Driver(shapes, window, hidden, run(encoder, encoder_input_names(len(shapes))), run(denoiser, decoder_input_names(len(shapes))))


def ort_driver(encoder_path: str, denoiser_path: str, shapes, window, hidden: int) -> Driver:
    import onnxruntime as ort

    def runner(path: str) -> Callable:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        # The exporter drops an input whose every use is dead code (the encoder of a pattern whose
        # only full layer is the last: that layer's attention output is never read), so each graph
        # is fed only the inputs it declares, as the engine does.
        declared = {i.name for i in sess.get_inputs()}
        return lambda f: sess.run(None, {k: v for k, v in f.items() if k in declared})

    return Driver(shapes, window, hidden, runner(encoder_path), runner(denoiser_path))
