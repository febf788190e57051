"""tessera convert for ``model_type: "diffusion_gemma"`` (contract v3, docs/model-contract.md).

Loads the checkpoint with transformers' own ``DiffusionGemmaForBlockDiffusion`` (fp32), wraps
its weights in the two contract graphs (gemma_graphs.py), exports them sharing one data file,
checks them against transformers (gemma_check.py) and writes config.json, the tokenizer files
and the sampler's settings from generation_config.json.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Callable, List

from .bounds import check as check_not_stopped, staging_dir
from .checkpoint import read_json, read_text, tensor_shapes, weight_files
from .errors import ConvertError
from .families import _ids, added_tokens
from .template import TemplateRefused
from .tensor_check import check_config_claims, check_parameter_count

CONTRACT_VERSION = 3
MODEL_TYPE = "diffusion_gemma"
# generate()'s defaults where generation_config.json leaves a key out (DiffusionGemmaGenerationConfig).
SAMPLER_DEFAULTS = {"max_denoising_steps": 48, "entropy_bound": 0.1, "t_min": 0.4, "t_max": 0.8,
                    "stability_threshold": 1, "confidence_threshold": 0.005}
END_OF_TURN_NAMES = ("<end_of_turn>", "<turn|>")
# Gemma 4's reply markup (its chat template and transformers' response template for gemma4): a call
# is <|tool_call>call:NAME{key:<|"|>v<|"|>}<tool_call|>, thinking <|channel>thought\n…<channel|>,
# and after a call the model opens <|tool_response> for the caller to fill, so that token ends a reply.
GEMMA4_TOOL_CALL = ("<|tool_call>", "<tool_call|>")
GEMMA4_THINKING = ("<|channel>thought", "<channel|>")
GEMMA4_TOOL_RESPONSE = "<|tool_response>"
GEMMA4_THINK = "<|think|>"
# --experts auto: sparse from this many experts per routed expert (E / k) up; below it dense, which
# runs as two large matmuls without a node per expert (convert/bench_experts.py, docs/model-contract.md "Experts").
SPARSE_FROM_RATIO = 4
EXPERT_FORMS = ("auto", "dense", "sparse")


def experts_form(text_config, requested: str) -> str:
    """The experts' formulation: ``requested``, or for ``auto`` sparse where E / k >= SPARSE_FROM_RATIO."""
    if requested not in EXPERT_FORMS:
        raise ConvertError(f"--experts {requested}: expected one of {', '.join(EXPERT_FORMS)}")
    if requested != "auto":
        return requested
    return "sparse" if text_config.num_experts >= SPARSE_FROM_RATIO * text_config.top_k_experts else "dense"


def sampler_settings(gen: dict) -> dict:
    out = dict(SAMPLER_DEFAULTS)
    for key in ("max_denoising_steps", "t_min", "t_max", "stability_threshold", "confidence_threshold"):
        if isinstance(gen.get(key), (int, float)) and not isinstance(gen.get(key), bool):
            out[key] = gen[key]
    sc = gen.get("sampler_config")
    if isinstance(sc, dict) and isinstance(sc.get("entropy_bound"), (int, float)):
        out["entropy_bound"] = float(sc["entropy_bound"])
    if not (0 <= out["t_min"] < out["t_max"]):
        raise ConvertError(f"generation_config.json: t_min {out['t_min']} / t_max {out['t_max']} must satisfy 0 <= t_min < t_max")
    return out


def chat_template(ckpt: str, tokenizer_config: dict) -> str:
    template = tokenizer_config.get("chat_template")
    jinja_path = os.path.join(ckpt, "chat_template.jinja")
    if not isinstance(template, str) or not template:
        template = read_text(jinja_path) or template
    if not isinstance(template, str) or not template:
        raise ConvertError(f"{ckpt}: no \"chat_template\" in tokenizer_config.json nor a chat_template.jinja")
    return template


def chat_format(template: str, tokens: dict) -> dict:
    """What the checkpoint's chat template can render and how its replies are parsed: Gemma 4's
    tool-call and thinking markup where the template writes them and the vocabulary has the tokens
    (``special_tokens`` with ``tool_call_format: "gemma4"``, capabilities ``tools`` / ``thinking``);
    nothing otherwise (tools and thinking refused with a 400)."""
    out = {"tools": False, "thinking": False, "special_tokens": None}
    tags = [*GEMMA4_TOOL_CALL, GEMMA4_TOOL_RESPONSE, '<|"|>']
    if all(t in template for t in tags) and all(t in tokens for t in tags):
        out["tools"] = True
        special = {"tool_call": list(GEMMA4_TOOL_CALL), "tool_call_format": "gemma4"}
        channel = [t.split("thought")[0] for t in GEMMA4_THINKING]
        # The switch: enable_thinking puts <|think|> in the system turn; the model answers in the thought channel.
        if "enable_thinking" in template and GEMMA4_THINK in template and all(t in tokens for t in [GEMMA4_THINK, *channel]):
            out["thinking"] = True
        special["thinking"] = list(GEMMA4_THINKING)
        out["special_tokens"] = special
    return out


def canvas_decision_json(template: str, tokenizer_config: dict, where: str = "the chat template"):
    """decision.json asking in the model's chat format, read on the first canvas (docs/model-contract.md,
    "Decisions on a canvas model"); None where the template cannot render the decision prompt."""
    from .model_dir import decision_json_for

    def special(key: str) -> str:
        v = tokenizer_config.get(key)
        return v if isinstance(v, str) else str(v.get("content", "")) if isinstance(v, dict) else ""

    try:
        return decision_json_for(template, "canvas", where, bos_token=special("bos_token"), eos_token=special("eos_token"))
    except TemplateRefused:
        raise  # a template that reaches outside its data or past the bounds is refused, not served
    except Exception:  # noqa: BLE001  any template error: the model serves chat, decisions are refused
        return None


def config_json(hf_config, shapes, tokens: dict, stops: List[int], sampler: dict, weights: str, source: str, experts: str) -> dict:
    text = hf_config.text_config
    layers = [{"type": t, "num_key_value_heads": kv, "head_dim": d} for (t, kv, d) in shapes]
    eos = stops[0]
    return {
        "contract_version": CONTRACT_VERSION,
        "model_type": MODEL_TYPE,
        "decoding_family": "canvas",
        "num_hidden_layers": len(shapes),
        "num_attention_heads": text.num_attention_heads,
        "hidden_size": text.hidden_size,
        "vocab_size": text.vocab_size,
        "layers": layers,
        "sliding_window": text.sliding_window,
        "canvas_length": hf_config.canvas_length,
        "block_size": hf_config.canvas_length,
        "max_position_embeddings": text.max_position_embeddings,
        "eos_token_id": eos,
        "pad_token_id": text.pad_token_id if text.pad_token_id is not None else eos,
        "bos_token_id": text.bos_token_id,
        "stop_token_ids": stops,
        "image_token_id": hf_config.image_token_id,
        "boi_token_id": hf_config.boi_token_id,
        "eoi_token_id": hf_config.eoi_token_id,
        "sampler": sampler,
        "capabilities": {"images": False, "tools": False, "thinking": False, "grammar": True},
        "encoder_file": "encoder.onnx",
        "denoiser_file": "denoiser.onnx",
        "source": {"checkpoint": source, "family": "DiffusionGemma (Gemma 4 layers, MoE)", "weights": weights, "experts": experts},
    }


def convert(ckpt: str, out_dir: str, family, *, weights: str, force: bool, progress: Callable[[str], None], experts: str = "auto",
            block_size=None, external: str = "auto") -> dict:
    """The pipeline of families.FAMILIES["diffusion_gemma"]; ``block_size`` and ``external`` are the dense
    families' options, unused here (a canvas has no fixed block; the weights always go to weights.onnx.data)."""
    import torch

    from .gemma_check import check, ort_driver
    from .gemma_export import export_graphs, graph_bytes, quantize, save_shared
    from .gemma_graphs import GemmaDenoiserGraph, GemmaEncoderGraph, layer_shapes
    from .gemma_vision import check_image_prompt, check_vision, export_vision, vision_config_json
    from .model_dir import write_json

    if os.path.exists(out_dir) and not force:
        raise ConvertError(f"{out_dir}: already exists (remove it, or pass --force to replace it)")
    tok_json = read_json(os.path.join(ckpt, "tokenizer.json"))
    tc = read_json(os.path.join(ckpt, "tokenizer_config.json"))
    gen = read_json(os.path.join(ckpt, "generation_config.json"), required=False) or {}
    tokens = added_tokens(ckpt, tok_json, tc)
    template = chat_template(ckpt, tc)
    where = os.path.join(ckpt, "tokenizer_config.json" if isinstance(tc.get("chat_template"), str) and tc["chat_template"] else "chat_template.jinja")
    decision = canvas_decision_json(template, tc, where)  # the sandboxed render, before any work
    sampler = sampler_settings(gen)
    cfg_path = os.path.join(ckpt, "config.json")
    shapes_held = tensor_shapes(weight_files(ckpt), ckpt)
    check_config_claims(read_json(cfg_path), shapes_held, cfg_path)

    hf_class = family.module_class()  # transformers' DiffusionGemmaForBlockDiffusion

    try:
        hf_config = hf_class.config_class.from_pretrained(ckpt)
        with torch.device("meta"):
            meta = hf_class(hf_config)
        check_parameter_count(sum(p.numel() for p in meta.parameters()), shapes_held, cfg_path)
        del meta
        model = hf_class.from_pretrained(ckpt, dtype=torch.float32, use_safetensors=True, local_files_only=True).eval()
    except (OSError, ValueError) as err:
        raise ConvertError(f"{ckpt}: transformers cannot load it as DiffusionGemmaForBlockDiffusion ({err})") from err
    text = model.config.text_config
    shapes = layer_shapes(text, model.model.encoder.language_model.layers)
    stops: List[int] = []
    fmt = chat_format(template, tokens)
    ends_reply = [tokens.get(GEMMA4_TOOL_RESPONSE)] if fmt["tools"] else []
    for tid in [tokens.get(n) for n in END_OF_TURN_NAMES] + _ids(gen.get("eos_token_id")) + _ids(text.eos_token_id) + ends_reply:
        if isinstance(tid, int) and tid not in stops:
            if tid >= text.vocab_size:
                raise ConvertError(f"{ckpt}: stop token id {tid} is outside vocab_size {text.vocab_size}")
            stops.append(tid)
    if not stops:
        raise ConvertError(f"{ckpt}: no end-of-turn token ({' / '.join(END_OF_TURN_NAMES)}) and no eos_token_id")
    params = sum(p.numel() for p in model.parameters())
    form = experts_form(text, experts)
    progress(f"DiffusionGemma: {len(shapes)} layers ({sum(t == 'sliding_attention' for t, _, _ in shapes)} sliding, window "
             f"{text.sliding_window}), hidden {text.hidden_size}, {text.num_experts} experts top {text.top_k_experts}, "
             f"vocab {text.vocab_size}, canvas {model.config.canvas_length}, stops {stops}; {params / 1e6:.1f} M parameters; "
             f"{form} experts")

    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = staging_dir(parent, f".{os.path.basename(out_dir)}.converting-")
    work = tempfile.mkdtemp(prefix="tessera-convert-")
    try:
        enc, dec = GemmaEncoderGraph(model, form), GemmaDenoiserGraph(model, form)
        t0 = time.time()
        enc_proto, dec_proto = export_graphs(enc, dec, shapes, text.hidden_size, work)
        progress(f"exported encoder + denoiser in {time.time() - t0:.1f} s ({weights})")
        enc_proto, dec_proto = quantize(enc_proto, weights, progress), quantize(dec_proto, weights, progress)
        graphs = {"encoder.onnx": enc_proto, "denoiser.onnx": dec_proto}
        has_vision = getattr(model.model.encoder, "vision_tower", None) is not None
        if has_vision:
            graphs["vision.onnx"] = quantize(export_vision(model, work), weights, progress)
        shared, unshared = save_shared(graphs, staging)
        progress(f"weights.onnx.data: {shared / 1e6:.1f} MB for {unshared / 1e6:.1f} MB of graph weights (shared by content)")
        onnx_bytes = graph_bytes(staging)
        drv = ort_driver(os.path.join(staging, "encoder.onnx"), os.path.join(staging, "denoiser.onnx"), shapes, text.sliding_window, text.hidden_size)
        prompt_len = text.sliding_window + 3  # past the window, so the bounded sliding cache is exercised
        result = check(model, drv, prompt_len)
        if has_vision:
            vision_path = os.path.join(staging, "vision.onnx")
            result["vision"] = check_vision(model, vision_path)
            fresh = ort_driver(os.path.join(staging, "encoder.onnx"), os.path.join(staging, "denoiser.onnx"), shapes,
                               text.sliding_window, text.hidden_size)
            result["image_prompt_kv"] = check_image_prompt(model, fresh, vision_path)
        progress("ONNX Runtime vs transformers (relative to 1 + |x|): " + ", ".join(f"{k} {v:.2e}" for k, v in result.items()))
        if weights == "fp32" and max(result.values()) > 1e-3:
            raise ConvertError(f"ONNX Runtime differs from transformers by {max(result.values()):.2e} (fp32 must agree within 1e-3)")
        config = config_json(model.config, shapes, tokens, stops, sampler, weights, ckpt, form)
        config["capabilities"].update(tools=fmt["tools"], thinking=fmt["thinking"])
        if fmt["special_tokens"] is not None:
            config["special_tokens"] = fmt["special_tokens"]
        if has_vision:
            config["vision_file"] = "vision.onnx"
            config["vision"] = vision_config_json(model)
            # The image processor's token budget per image, where the checkpoint ships its processor config.
            for name in ("processor_config.json", "preprocessor_config.json"):
                proc = read_json(os.path.join(ckpt, name), required=False) or {}
                budget = proc.get("image_processor", proc).get("max_soft_tokens")
                if isinstance(budget, int):
                    config["vision"]["max_soft_tokens"] = budget
                    break
            config["capabilities"]["images"] = True
        write_json(os.path.join(staging, "config.json"), config)
        write_json(os.path.join(staging, "tokenizer.json"), tok_json)
        tc_out = dict(tc)
        tc_out["chat_template"] = template
        write_json(os.path.join(staging, "tokenizer_config.json"), tc_out)
        if decision is None:
            progress("note: the chat template cannot render the decision prompt; no decision.json (decisions are refused)")
        else:
            write_json(os.path.join(staging, "decision.json"), decision)
        check_not_stopped()
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.rename(staging, out_dir)
        progress(f"done: {out_dir}")
        return {"family": MODEL_TYPE, "parameters": params, "onnx_bytes": onnx_bytes, "weights_bytes": shared,
                "weights_bytes_unshared": unshared, "check": result, "weights": weights, "experts": form}
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(staging):
            shutil.rmtree(staging, ignore_errors=True)
