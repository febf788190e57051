"""Build the deterministic tiny test model: test/fixtures/tiny-model/.

    /usr/bin/python3 training/model/make_test_model.py [out-dir]

Random weights from a fixed seed, a byte-level BPE tokenizer with merges learned from a
fixed built-in text, the contract's special tokens, the chat template and decision
templates of training/templates/. Also writes reference.json (tokenizer encodings and
PyTorch logits for fixed inputs) that test/model/tiny-model.test.ts compares against.
Running it twice with the same torch version gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bpe_tokenizer import ByteBPE, special_token_ids, tokenizer_config_json, tokenizer_json, train_merges  # noqa: E402
from export_onnx import check, export, reference_outputs  # noqa: E402
from model import BlockDiffusionLM, ModelConfig, additive_mask, block_causal_allowed  # noqa: E402

TRAINING = os.path.dirname(HERE)
ROOT = os.path.dirname(TRAINING)
DEFAULT_OUT = os.path.join(ROOT, "test", "fixtures", "tiny-model")
SEED = 20240607
NUM_MERGES = 320
# Logit bias on <|im_end|> so the random model ends a reply now and then.
EOS_BIAS = 3.0
# Larger than a trained model's init so the random model is sometimes confident
# (lets tests reach the threshold-unmasking path, not only the at-least-one rule).
INIT_STD = 0.5

MERGE_CORPUS = """\
The quick brown fox jumps over the lazy dog. What does this word mean? It means that the
thing is true of the state. Use the word in a sentence: the weather is nice today, and the
children are playing in the garden with their friends. Synonyms and opposites of happy are
glad, cheerful, sad and unhappy. Is a dog a kind of animal? Yes, a dog is an animal.
Answer the question about the state below. Which option fits the state best? Rate the
state on this scale. Answer yes or no. Answer with the label of one option.
You can call these tools. To call one, reply with a tool call. Reply with one JSON object
only. {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
The function returns the result and the assistant uses it to answer the user. Let me think
about this step by step before I answer the question. This is an email about a meeting
tomorrow at ten in the morning; please confirm that you can attend. Click here to win a free
prize, limited offer, buy now! The movie was wonderful and the acting was great, but the
ending was not good. I would not recommend this product: it broke after two days.
There are 12 apples and 34 oranges in 2024, which is 46 pieces of fruit in total.
system user assistant tool
"""


def corpus() -> list:
    texts = [MERGE_CORPUS]
    with open(os.path.join(TRAINING, "templates", "chat_template.jinja"), encoding="utf-8") as f:
        texts.append(f.read())
    with open(os.path.join(TRAINING, "templates", "decision.json"), encoding="utf-8") as f:
        texts.append(json.dumps(json.load(f)["question_templates"], ensure_ascii=False))
    return texts


TOKENIZER_SAMPLES = [
    "Hello world!",
    "<|im_start|>user\nWhat does \"serendipity\" mean?<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nLet me think.</think>The answer is 42.<|im_end|>",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich"}}</tool_call>',
    "Unicode: café, naïve, 日本語, emoji 🙂👍🏽, math ∑x², tabs\tand\r\nCRLF  double  spaces   ",
    "<|opt_0|> red\n<|opt_127|> blue\n<|yes|><|no|><|mask|><|pad|><|endoftext|>",
    "it's don't we'll they've I'm you'd 1234567 3.14159",
    "",
]


def build_config(vocab_size: int, ids: dict) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=2048,
        block_size=64,
        mask_token_id=ids["<|mask|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|pad|>"],
        lm_head_bias=True,
        initializer_range=INIT_STD,
    )


def reference_ids(bpe: ByteBPE) -> list:
    """A fixed 100-token chat-like input (crosses a block boundary)."""
    text = (
        "<|im_start|>user\nThe quick brown fox jumps over the lazy dog. What does this word mean? "
        "Answer the question about the state below, please, with one JSON object.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    return (bpe.encode(text) * 4)[:100]


SIM_PROMPTS = [
    "Hello, who are you?",
    "What does serendipity mean?",
    "Write a poem about the sea.",
    "2+2=?",
    "Tell me a story about a dog named Rex who lived in Paris.",
    "hi",
    "Reply in JSON",
    "What is the capital of France?",
]


def reference_decode(model: BlockDiffusionLM, bpe: ByteBPE, max_tokens: int = 192) -> list:
    """Plain block-diffusion decode of SIM_PROMPTS, no KV cache: each step fills every masked
    position whose top probability is >= 0.9, else the single most confident one (first on
    ties); mask and pad are never chosen. Stops after the block holding <|im_end|> or at
    max_tokens. An engine with an exact KV cache commits the same tokens (up to float ties)."""
    cfg = model.config
    out = []
    for prompt in SIM_PROMPTS:
        prompt_ids = bpe.encode(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
        x, start, steps, at = list(prompt_ids), len(prompt_ids), 0, None
        while at is None and len(x) - start < max_tokens:
            x = x + [cfg.mask_token_id] * ((len(x) // cfg.block_size + 1) * cfg.block_size - len(x))
            while cfg.mask_token_id in x:
                pos = torch.arange(len(x)).unsqueeze(0)
                with torch.no_grad():
                    logits, _ = model(torch.tensor([x]), pos, additive_mask(block_causal_allowed(pos, pos, cfg.block_size)), [])
                steps += 1
                logits[..., [cfg.mask_token_id, cfg.pad_token_id]] = float("-inf")
                prob, best = logits[0].softmax(-1).max(-1)
                masked = [i for i, t in enumerate(x) if t == cfg.mask_token_id]
                for i in [i for i in masked if prob[i] >= 0.9] or [max(masked, key=lambda i: float(prob[i]))]:
                    x[i] = int(best[i])
            if cfg.eos_token_id in x[start:]:
                at = x[start:].index(cfg.eos_token_id)
        reply = x[start:]
        reply = reply[: at + 1] if at is not None else reply[:max_tokens]
        out.append({"prompt": prompt, "prompt_ids": prompt_ids, "reply_ids": reply, "eos_at": at, "forwards": steps})
    return out


def readme(cfg: ModelConfig, num_merges: int, ids: dict, params: int, decoded: list) -> str:
    eos_at = [d["eos_at"] for d in decoded]
    ended = sorted(a for a in eos_at if a is not None)
    return f"""# tiny-model: the deterministic test model

Written by `training/model/make_test_model.py`; do not edit by hand.

A random-weight model that follows [docs/model-contract.md](../../../docs/model-contract.md),
for fast tests of the engine, the decision service and the gateway. It knows no language:
its replies are random token soup, but the same soup every time.

Regenerate (byte-identical files with the same torch version; checked with Debian's torch
1.13; torch 2.11 gives the same weights and logits within 5e-5 but other ONNX bytes):

```
/usr/bin/python3 training/model/make_test_model.py
```

| | |
|---|---|
| architecture | Llama-style (RMSNorm, rotary, GQA, SwiGLU, tied LM head), block-causal, blocks of {cfg.block_size} |
| sizes | {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, {cfg.num_attention_heads} heads, {cfg.num_key_value_heads} kv heads, head_dim {cfg.head_dim}, MLP {cfg.intermediate_size}, {params} parameters |
| vocab | {cfg.vocab_size} = 256 byte symbols + {num_merges} merges + {len(ids)} special tokens |
| special ids | `<\\|pad\\|>` {ids["<|pad|>"]}, `<\\|mask\\|>` {ids["<|mask|>"]}, `<\\|im_start\\|>` {ids["<|im_start|>"]}, `<\\|im_end\\|>` {ids["<|im_end|>"]} (EOS), `<\\|yes\\|>` {ids["<|yes|>"]}, `<\\|no\\|>` {ids["<|no|>"]}, `<\\|opt_i\\|>` {ids["<|opt_0|>"]} + i |
| context | `max_position_embeddings` {cfg.max_position_embeddings} |
| weights | seed {SEED}, normal(0, {INIT_STD}): large on purpose, so the random model is sometimes confident and tests see both the threshold rule and the at-least-one rule |
| EOS | the LM head has a logit bias of +{EOS_BIAS} on `<\\|im_end\\|>` (`lm_head_bias`), so some replies end by themselves and others run to `max_tokens` |

Files: `config.json`, `tokenizer.json` (byte-level BPE), `tokenizer_config.json` (special
tokens, `chat_template` = `training/templates/chat_template.jinja`), `model.onnx` (opset 17),
`decision.json` (copy of `training/templates/decision.json`), and `reference.json`:
Python encodings of sample texts and PyTorch logits for one fixed 100-token input, which
`test/model/tiny-model.test.ts` compares against ONNX Runtime and `@huggingface/tokenizers`
(`node training/model/check_onnx.mjs test/fixtures/tiny-model test/fixtures/tiny-model/reference.json`
runs the model-side checks on their own). One B=1, S=64 forward takes about 1.5 ms on CPU.

Things an engine must do with any model, and sees quickly with this one:

- never commit `<|mask|>` or `<|pad|>`: set their logits to -inf before choosing;
- `Tokenizer.decode([])` of `@huggingface/tokenizers` throws: guard empty id lists;
- KV of a block is exact only once the block is complete (a partial block's keys change
  when later tokens of the same block arrive), as the contract says.

Under a plain block-diffusion decode (threshold 0.9, at least one token per step, mask/pad
never chosen, no KV cache; `reference_decode` in the script, its tokens in
`reference.json` → `decode`) of {len(SIM_PROMPTS)} one-turn user prompts,
`<|im_end|>` is token {", ".join(str(a) for a in ended)} of the reply for {len(ended)} of them
and not within 192 tokens for {len(eos_at) - len(ended)}. By prompt: {json.dumps(dict(zip(SIM_PROMPTS, eos_at)))}
"""


def main() -> None:
    out = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)

    merges = train_merges(corpus(), NUM_MERGES)
    tok = tokenizer_json(merges)
    ids = special_token_ids(merges)
    vocab_size = 256 + len(merges) + len(ids)
    with open(os.path.join(TRAINING, "templates", "chat_template.jinja"), encoding="utf-8") as f:
        chat_template = f.read()
    cfg = build_config(vocab_size, ids)
    tok_cfg = tokenizer_config_json(merges, chat_template, cfg.max_position_embeddings)

    def write_json(name: str, obj: dict) -> None:
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write("\n")

    write_json("tokenizer.json", tok)
    write_json("tokenizer_config.json", tok_cfg)
    cfg.save(os.path.join(out, "config.json"))
    shutil.copyfile(os.path.join(TRAINING, "templates", "decision.json"), os.path.join(out, "decision.json"))

    model = BlockDiffusionLM(cfg).eval()
    with torch.no_grad():
        model.lm_bias[cfg.eos_token_id] = EOS_BIAS
    onnx_path = os.path.join(out, cfg.onnx_file)
    export(model, onnx_path)

    bpe = ByteBPE(tok)
    decoded = reference_decode(model, bpe)
    ref = {
        "generated_by": "training/model/make_test_model.py",
        "torch_version": torch.__version__,
        "tokenizer": [{"text": t, "ids": bpe.encode(t)} for t in TOKENIZER_SAMPLES],
        "forward": reference_outputs(model, reference_ids(bpe)),
        "decode": decoded,
    }
    for sample in ref["tokenizer"]:
        if bpe.decode(sample["ids"]) != sample["text"]:
            raise RuntimeError(f"python round trip failed for {sample['text']!r}")
    write_json("reference.json", ref)
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(readme(cfg, len(merges), ids, model.num_parameters(), decoded))

    print(check(model, onnx_path))
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name)
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
        print(f"{name:24s} {os.path.getsize(path):>9d}  sha256:{digest}")
    print(f"vocab {vocab_size}, parameters {model.num_parameters()}")


if __name__ == "__main__":
    main()
