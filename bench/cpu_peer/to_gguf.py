"""A plain Qwen3 / Qwen2 checkpoint written as GGUF for llama.cpp: the peer of bench/cpu-peer.ts, on identical weights.

    convert/.venv/bin/python bench/cpu_peer/to_gguf.py <checkpoint-dir> <out.gguf> --type f32|f16|q8_0|q4_k_m

What llama.cpp's convert_hf_to_gguf.py writes for these two architectures (metadata keys, tensor
names, the byte-level BPE vocabulary padded to vocab_size with [PADn] tokens), with the gguf
package's GGUFWriter. Rotary needs no permutation: qwen2/qwen3 use llama.cpp's NeoX rope, which
is transformers' rotate_half. Norms and biases stay float32.

q8_0 is quantized by the gguf package (numpy). q4_k_m needs the K-quants, which only ggml has: it
calls ggml_quantize_chunk from node-llama-cpp's prebuilt libggml-base.so (llama.cpp's own
quantizer) and picks each tensor's type as llama-quantize's Q4_K_M rule does (llama_tensor_get_type:
Q6_K for the output head, or the embedding when the head is tied, and for attn_v / ffn_down in the
layers use_more_bits names; Q4_K elsewhere; Q8_0 / Q5_0 where a row is not whole super-blocks of
256, as its fallback does). No importance matrix, as a plain llama-quantize run.
Tensors are read from the safetensors one at a time; the writer holds the quantized model.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from safetensors import safe_open  # noqa: E402

NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
FILE_TYPE = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M}


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    if parts[:2] == ["model", "layers"]:
        return f"blk.{parts[2]}.{NAMES['.'.join(parts[3:])]}"
    raise SystemExit(f"{hf}: not a tensor of a Qwen2 / Qwen3 checkpoint")


def use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m_type(name: str, layers: int, tied: bool, cols: int) -> Q:
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        qtype = Q.Q6_K
    elif name.endswith("attn_v.weight") or name.endswith("ffn_down.weight"):
        qtype = Q.Q6_K if use_more_bits(int(name.split(".")[1]), layers) else Q.Q4_K
    else:
        qtype = Q.Q4_K
    # llama-quantize's fallback for rows that are not whole K-quant super-blocks of 256.
    if cols % gguf.QK_K != 0:
        qtype = Q.Q8_0 if qtype == Q.Q6_K else Q.Q5_0
    return qtype


class GgmlQuantizer:
    """llama.cpp's quantizer (ggml_quantize_chunk) from node-llama-cpp's prebuilt ggml."""

    def __init__(self) -> None:
        libs = glob.glob(os.path.join(REPO, "node_modules/@node-llama-cpp/linux-x64/bins/*/libggml-base.so"))
        if not libs:
            raise SystemExit("q4_k_m needs node-llama-cpp's libggml-base.so (node_modules/@node-llama-cpp/linux-x64)")
        self.lib = ctypes.CDLL(libs[0])
        f = self.lib.ggml_quantize_chunk
        f.restype = ctypes.c_size_t
        f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        self.lib.ggml_quantize_init.argtypes = [ctypes.c_int]

    def __call__(self, x: np.ndarray, qtype: Q) -> np.ndarray:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        rows, cols = x.shape
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty((rows, cols // block * size), dtype=np.uint8)
        self.lib.ggml_quantize_init(int(qtype))
        n = self.lib.ggml_quantize_chunk(int(qtype), x.ctypes.data, out.ctypes.data, 0, rows, cols, None)
        assert n == out.nbytes, (n, out.nbytes)
        return out


def vocabulary(ckpt: str, vocab_size: int):
    """Tokens by id, their GGUF types and the merges, as convert_hf_to_gguf's get_vocab_base does."""
    with open(os.path.join(ckpt, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(vocab_size):
        if i in added:
            tokens.append(added[i]["content"])
            types.append(gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED)
        elif i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
    return tokens, types, merges


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--type", choices=sorted(FILE_TYPE), default="q8_0")
    a = ap.parse_args()
    with open(os.path.join(a.checkpoint, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    arch = cfg["model_type"]
    if arch not in ("qwen2", "qwen3"):
        raise SystemExit(f"model_type {arch!r}: this writer knows qwen2 and qwen3")
    layers, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    tied = bool(cfg.get("tie_word_embeddings", False))

    w = gguf.GGUFWriter(a.out, arch)
    w.add_name(os.path.basename(os.path.normpath(a.checkpoint)))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(cfg.get("num_key_value_heads", heads))
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_file_type(FILE_TYPE[a.type])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    tokens, types, merges = vocabulary(a.checkpoint, cfg["vocab_size"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    gen_path = os.path.join(a.checkpoint, "generation_config.json")
    gen = json.load(open(gen_path, encoding="utf-8")) if os.path.exists(gen_path) else {}
    eos = cfg.get("eos_token_id")
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    if gen.get("pad_token_id") is not None:
        w.add_pad_token_id(gen["pad_token_id"])
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    w.add_add_bos_token(False)
    with open(os.path.join(a.checkpoint, "tokenizer_config.json"), encoding="utf-8") as f:
        template = json.load(f).get("chat_template")
    if isinstance(template, str):
        w.add_chat_template(template)

    ggml = GgmlQuantizer() if a.type == "q4_k_m" else None
    files = sorted(glob.glob(os.path.join(a.checkpoint, "*.safetensors")))
    for path in files:
        with safe_open(path, framework="pt") as st:
            for hf in st.keys():
                name = gguf_name(hf)
                x = st.get_tensor(hf).float().numpy()
                if x.ndim == 1 or a.type == "f32":
                    w.add_tensor(name, x.astype(np.float32))
                elif a.type == "f16":
                    w.add_tensor(name, x.astype(np.float16))
                elif a.type == "q8_0":
                    w.add_tensor(name, gguf.quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
                else:
                    qtype = q4_k_m_type(name, layers, tied, x.shape[1])
                    w.add_tensor(name, ggml(x, qtype), raw_dtype=qtype)
                del x
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out} ({os.path.getsize(a.out) / 1e6:.1f} MB, {a.type})", file=sys.stderr)


if __name__ == "__main__":
    main()
