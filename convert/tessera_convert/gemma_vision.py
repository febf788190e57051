"""DiffusionGemma's vision tower as its own graph (contract v3, ``vision.onnx``): patches ->
image embeddings in the text model's space, exported from transformers' own modules
(``get_image_features``: Gemma 4's patch embedder, vision encoder, pooler, then the multimodal
projection) and checked against them on images of several sizes.

Inputs: ``pixel_values`` float32 ``[1, patches, 3 * patch_size^2]`` (values in [0, 1], rescaled
and patchified as Gemma 4's processor does; no padding patches), ``pixel_position_ids`` int64
``[1, patches, 2]`` (x, y of each patch). Output: ``image_embeds`` float32
``[patches / pooling_kernel_size^2, hidden_size]``, one row per image token.
"""

from __future__ import annotations

import os
from typing import Dict, Tuple

import numpy as np
import torch
from torch import nn

from .export import OPSET


class VisionGraph(nn.Module):
    def __init__(self, hf_model) -> None:
        super().__init__()
        self.encoder = hf_model.model.encoder

    def forward(self, pixel_values, pixel_position_ids):
        return self.encoder.get_image_features(pixel_values, pixel_position_ids).pooler_output


def patches(vision_config, height: int, width: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """A random image of height x width pixels as the graph takes it (row-major patches)."""
    p = vision_config.patch_size
    g = torch.Generator().manual_seed(seed)
    ph, pw = height // p, width // p
    pixel_values = torch.rand(1, ph * pw, 3 * p * p, generator=g)
    ys, xs = torch.meshgrid(torch.arange(ph), torch.arange(pw), indexing="ij")
    return pixel_values, torch.stack([xs.flatten(), ys.flatten()], -1)[None]


def sizes(vision_config):
    """Image sizes for the export and the check: unequal sides, whole pooling windows."""
    unit = vision_config.patch_size * vision_config.pooling_kernel_size
    return [(2 * unit, 3 * unit), (4 * unit, 2 * unit), (unit, unit)]


def export_vision(hf_model, work_dir: str):
    import onnx

    vc = hf_model.config.vision_config
    module = VisionGraph(hf_model).eval()
    h, w = sizes(vc)[0]
    path = os.path.join(work_dir, "vision.onnx")
    with torch.no_grad():
        torch.onnx.export(module, patches(vc, h, w, 0), path, input_names=["pixel_values", "pixel_position_ids"],
                          output_names=["image_embeds"], opset_version=OPSET, do_constant_folding=True, dynamo=False,
                          dynamic_axes={"pixel_values": {1: "patches"}, "pixel_position_ids": {1: "patches"}, "image_embeds": {0: "tokens"}})
    return onnx.load(path)


def check_vision(hf_model, vision_path: str) -> float:
    """Worst |a - b| / (1 + |a|) of ONNX Runtime's image embeddings against transformers'."""
    import onnxruntime as ort

    vc = hf_model.config.vision_config
    sess = ort.InferenceSession(vision_path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for i, (h, w) in enumerate(sizes(vc)):
        pv, pos = patches(vc, h, w, 100 + i)
        with torch.no_grad():
            ref = VisionGraph(hf_model).eval()(pv, pos).numpy()
        got = sess.run(None, {"pixel_values": pv.numpy(), "pixel_position_ids": pos.numpy()})[0]
        if got.shape != ref.shape:
            raise RuntimeError(f"vision.onnx gives {got.shape} image embeddings for a {h}x{w} image, transformers {ref.shape}")
        worst = max(worst, float((np.abs(ref - got) / (1 + np.abs(ref))).max()))
    return worst


def vision_config_json(hf_model) -> Dict[str, int]:
    vc = hf_model.config.vision_config
    return {"patch_size": vc.patch_size, "pooling_kernel_size": vc.pooling_kernel_size,
            "position_embedding_size": vc.position_embedding_size}


def check_image_prompt(hf_model, driver, vision_path: str) -> float:
    """An image prompt's KV cache through vision.onnx + encoder.onnx (the engine's masks: one
    image's tokens attend to each other both ways) against transformers' encoder given the
    pixels and ``mm_token_type_ids``, with the masks ``generate`` builds. Worst relative difference."""
    import onnxruntime as ort
    from transformers import DynamicCache

    from .gemma_check import rel

    cfg = hf_model.config
    vc = cfg.vision_config
    h, w = sizes(vc)[0]
    pv, ppos = patches(vc, h, w, 7)
    n = pv.shape[1] // vc.pooling_kernel_size**2
    text = [cfg.text_config.bos_token_id, 40, 41, cfg.boi_token_id]
    ids = torch.tensor([text + [cfg.image_token_id] * n + [cfg.eoi_token_id, 42, 43, 44]])
    types = (ids == cfg.image_token_id).long()
    pos = torch.arange(ids.shape[1])[None]
    cache = DynamicCache(config=cfg.text_config)
    enc = hf_model.model.encoder
    with torch.no_grad():
        masks = enc.create_masks_for_generate(config=cfg, inputs_embeds=torch.empty(1, ids.shape[1], 0),
                                              attention_mask=torch.ones(1, ids.shape[1], dtype=torch.bool),
                                              past_key_values=cache, position_ids=pos, mm_token_type_ids=types)
        enc(input_ids=ids, pixel_values=pv, image_position_ids=ppos, attention_mask=masks, past_key_values=cache, position_ids=pos)
    sess = ort.InferenceSession(vision_path, providers=["CPUExecutionProvider"])
    image_embeds = sess.run(None, {"pixel_values": pv.numpy(), "pixel_position_ids": ppos.numpy()})[0]
    driver.encode(ids.numpy(), image_embeds, image_blocks=[(len(text), len(text) + n)])
    worst = 0.0
    for l in range(len(driver.shapes)):
        layer = cache.layers[l]
        worst = max(worst, rel(layer.keys.numpy(), driver.past[2 * l]), rel(layer.values.numpy(), driver.past[2 * l + 1]))
    return worst
