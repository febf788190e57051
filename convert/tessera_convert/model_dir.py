"""The files of a model directory besides model.onnx: config.json (contract v2), tokenizer files,
decision.json and the model card."""

from __future__ import annotations

import json
import os
import string
from typing import Dict, List

from .checkpoint import read_json
from .errors import ConvertError
from .families import Checkpoint

CONTRACT_VERSION = 2
# The contract's `forced_tool` (docs/model-contract.md, "Chat template"): the prompt ends inside
# that call, written in the Qwen tool-call format the model's own template teaches. Published
# templates do not know the variable; this tail is the only addition to the model's template.
FORCED_TOOL_TAIL = (
    "{%- if add_generation_prompt and forced_tool is defined and forced_tool %}"
    "{{- '<tool_call>\\n{\"name\": \"' + forced_tool + '\", \"arguments\": ' }}"
    "{%- endif %}"
)
STATE_MARK = "\u2063STATE\u2063"
QUESTION_MARK = "\u2063QUESTION\u2063"


def write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def special_tokens(ck: Checkpoint) -> Dict[str, List[str]]:
    """The chat parser's delimiters, where the vocabulary has them as added tokens."""
    out: Dict[str, List[str]] = {}
    for key, pair in (("tool_call", ["<tool_call>", "</tool_call>"]), ("thinking", ["<think>", "</think>"])):
        if all(t in ck.tokens for t in pair):
            out[key] = pair
    return out


def config_json(ck: Checkpoint, weights: str, onnx_file: str, source: str) -> dict:
    a = ck.arch
    specials = special_tokens(ck)
    decoding = {"threshold": ck.family.default_threshold, "policy": ck.family.default_policy}
    if ck.family.sub_block_size:
        # Fast-dLLM v2's rule: threshold within the first sub-block with a mask, never opening the next early.
        size = min(ck.family.sub_block_size, ck.block_size)
        decoding["policy"] = f"subblocks(size={size},confident=1.01)+threshold"
        decoding["sub_block_size"] = size
    return {
        "contract_version": CONTRACT_VERSION,
        "model_type": ck.family.name,
        "num_hidden_layers": a.num_hidden_layers,
        "num_attention_heads": a.num_attention_heads,
        "num_key_value_heads": a.num_key_value_heads,
        "head_dim": a.head_dim,
        "hidden_size": a.hidden_size,
        "vocab_size": a.vocab_size,
        "block_size": ck.block_size,
        "max_position_embeddings": ck.max_positions,
        "mask_token_id": ck.mask_token_id,
        "eos_token_id": ck.eos_token_id,
        "pad_token_id": ck.pad_token_id,
        "stop_token_ids": ck.stop_token_ids,
        "logits_shift": ck.family.logits_shift,
        "decoding": decoding,
        "special_tokens": specials,
        "capabilities": {
            "images": False,
            "tools": "tool_call" in specials and "tools" in ck.chat_template,
            "thinking": "thinking" in specials and "enable_thinking" in ck.chat_template,
        },
        "onnx_file": onnx_file,
        "source": {"checkpoint": source, "family": ck.family.label, "weights": weights},
    }


def chat_template(ck: Checkpoint) -> str:
    """The model's template, plus the forced-call tail when it has Qwen's tool calls."""
    if "<tool_call>" in ck.chat_template and "forced_tool" not in ck.chat_template:
        return ck.chat_template + FORCED_TOOL_TAIL
    return ck.chat_template


def tokenizer_files(ck: Checkpoint, out: str) -> None:
    tok = read_json(os.path.join(ck.dir, "tokenizer.json"))
    write_json(os.path.join(out, "tokenizer.json"), tok)
    tc = dict(ck.tokenizer_config)
    tc["chat_template"] = chat_template(ck)  # the contract reads it from here
    write_json(os.path.join(out, "tokenizer_config.json"), tc)


def letters(n: int) -> List[str]:
    """A..Z, then AA, AB, ...: the option and level labels (ordinary tokens of every vocabulary)."""
    out = list(string.ascii_uppercase)
    for first in string.ascii_uppercase:
        for second in string.ascii_uppercase:
            if len(out) >= n:
                return out[:n]
            out.append(first + second)
    return out[:n]


def template_file(ck: Checkpoint) -> str:
    """The file the checkpoint's chat template was read from, for messages."""
    inline = isinstance(ck.tokenizer_config.get("chat_template"), (str, list)) and ck.tokenizer_config.get("chat_template")
    return os.path.join(ck.dir, "tokenizer_config.json" if inline else "chat_template.jinja")


def decision_json(ck: Checkpoint) -> dict:
    """Decision prompts in the model's own chat format: the chat template rendered around markers."""
    return decision_json_for(ck.chat_template, where=template_file(ck))


def decision_json_for(chat_template: str, answer_slot: str = "mask", where: str = "the chat template", **specials: str) -> dict:
    """decision.json from a chat template. `answer_slot` says how the engine reads the answer ("mask":
    a masked slot after the prompt; "canvas": the first canvas position of a canvas model's first
    denoising step, docs/model-contract.md); `specials` are the template's extra variables
    (bos_token, eos_token), as the engine renders it. The template is rendered in the bounded
    sandbox (template.py); `where` names its file in a refusal."""
    from .template import render_template

    rendered = render_template(
        chat_template, where,
        messages=[
            {"role": "system", "content": "Answer the question about the state below with the label of one answer only."},
            {"role": "user", "content": f"State:\n{STATE_MARK}\n{QUESTION_MARK}"},
        ],
        tools=None, add_generation_prompt=True, enable_thinking=False, **specials,
    )
    if rendered.count(STATE_MARK) != 1 or rendered.count(QUESTION_MARK) != 1:
        raise ConvertError(f"{where}: the chat template does not render the decision prompt's user message once")
    prefix, rest = rendered.split(STATE_MARK)
    between, after = rest.split(QUESTION_MARK)
    esc = lambda s: s.replace("{", "{{ '{' }}").replace("}", "{{ '}' }}")  # noqa: E731  literal text inside Jinja
    prefix, between, after = esc(prefix), esc(between), esc(after)
    instr = lambda default: "{{ instructions if instructions else '" + default + "' }}"  # noqa: E731
    return {
        "version": 1,
        "answer_slot": answer_slot,
        "prefix_template": prefix + "{{ state }}",
        "question_templates": {
            "noul": between + "Question: " + instr("Is this true of the state?") + "\n"
            "{% if true_description %}Yes means: {{ true_description }}\n{% endif %}"
            "{% if false_description %}No means: {{ false_description }}\n{% endif %}Answer Yes or No." + after,
            "choice": between + "Question: " + instr("Which option fits the state best?") + "\nOptions:\n"
            "{% for o in options %}{{ o.label }}. {{ o.name }}{% if o.description %}: {{ o.description }}{% endif %}\n{% endfor %}"
            "Answer with the letter of one option." + after,
            "score": between + "Question: " + instr("Rate the state on this scale.") + "\nLevels, lowest first:\n"
            "{% for l in levels %}{{ l.label }}. {{ l.text }}\n{% endfor %}Answer with the letter of one level." + after,
        },
        # 255 option labels: the widest choice the API takes (lib/decision-types/choice.ts).
        "labels": {"noul": ["Yes", "No"], "choice": letters(255), "score": letters(10)},
        "temperatures": {"noul": 1.0, "choice": 1.0, "score": 1.0},
        "calibrated": False,
    }


# Measured on SDAR-1.7B-Chat's layout, 2 ONNX Runtime threads of a shared 2-core Xeon (AVX-512
# VNNI, AMX), bench/full_size/README.md: resident memory of a loaded session per parameter, and
# ms per 64-token block forward per billion parameters (no past; the block is compute-bound, so
# time scales with the matmul parameters). int4 as the service runs it on the CPU
# (MatMulNBits' accuracy_level 4 set at load, int8 compute): 1.43 GiB loaded at 1.7B (0.83 GiB
# as converted), 2.1-3.4x int8's time per block in one alternating run (1.4x in a quieter one).
SERVING_BYTES_PER_PARAM = {"fp32": 3.83, "fp16": 3.83, "int8": 0.97, "int4": 0.89}
FORWARD_MS_PER_B = {"fp32": 4950, "fp16": 4950, "int8": 1530, "int4": 3800}


def memory_and_speed(a, weights: str, params: int, onnx_bytes: int) -> List[str]:
    """The card's memory and speed lines for this model's size, from the measured rates."""
    kv_per_token = 2 * a.num_hidden_layers * a.num_key_value_heads * a.head_dim * 4
    rss = params * SERVING_BYTES_PER_PARAM.get(weights, 4.0)
    fwd = params / 1e9 * FORWARD_MS_PER_B.get(weights, 4950)
    return [
        f"Expected when served (measured rates of bench/full_size/README.md, scaled to {params / 1e9:.2f} B parameters; "
        "2 threads of the 2-core Xeon it was measured on, so treat times as an order of magnitude):",
        "",
        "| | |",
        "|---|---|",
        f"| files | {onnx_bytes / 1e9:.2f} GB |",
        f"| resident memory of the loaded model | about {rss / 1e9:.1f} GB (weights mapped from the file, kernels' own packed copies) |",
        f"| KV cache | {kv_per_token / 1024:.0f} KiB per token of context (float32): {kv_per_token * 4096 / 2**30:.2f} GiB at 4,096 |",
        f"| one 64-token block forward, no past | about {fwd / 1000:.1f} s (int8 is the fastest format on CPUs with int8 units) |",
        "| converting | peak memory about 1.6x the fp32 weights (fp32, int8, int4); 2.5x (fp16) |",
    ] + ([
        "| int4 on the CPU | the service sets MatMulNBits' `accuracy_level` 4 (int8 compute) at load: same accuracy, 1.7x the memory, "
        "0.7-2.8x the speed of as converted across runs; `\"cpu_int4_accuracy_level\": 0` in config.json keeps the smaller memory; "
        "int8 is still 2-3x faster and more accurate (bench/full_size/README.md) |",
    ] if weights == "int4" else [])


def model_card(ck: Checkpoint, config: dict, weights: str, report: dict, source: str) -> str:
    a = ck.arch
    params = report.get("parameters", 0)
    lines = [
        f"# {os.path.basename(os.path.normpath(source))} for Tessera",
        "",
        f"Converted by `tessera convert` from the Hugging Face checkpoint `{source}`.",
        "",
        "| | |",
        "|---|---|",
        f"| family | {ck.family.label} (`model_type` {ck.family.name}) |",
        f"| parameters | {params / 1e9:.3f} B |",
        f"| layers, heads, kv heads, head dim, hidden | {a.num_hidden_layers}, {a.num_attention_heads}, {a.num_key_value_heads}, {a.head_dim}, {a.hidden_size} |",
        f"| vocabulary | {a.vocab_size} |",
        f"| block size | {ck.block_size} |",
        f"| context | {ck.max_positions} tokens |",
        f"| weights | {weights} ({report.get('onnx_bytes', 0) / 1e6:.1f} MB on disk) |",
        f"| mask token id | {'none: autoregressive (config.json holds the pad id as a placeholder)' if ck.family.autoregressive else ck.mask_token_id} |",
        f"| end of turn / stop ids | {ck.eos_token_id} / {', '.join(map(str, ck.stop_token_ids))} |",
        f"| logits shift | {ck.family.logits_shift} ({'row i predicts token i + 1' if ck.family.logits_shift else 'row i predicts token i'}) |",
        f"| decoding defaults | {json.dumps(config['decoding'])} |",
        "",
        "## Memory and speed",
        "",
        *memory_and_speed(a, weights, params, report.get("onnx_bytes", 0)),
        "",
        "## What was verified at conversion",
        "",
        f"ONNX Runtime against the converter's PyTorch module (fp32, from the same safetensors) on block-causal "
        f"inputs with and without a past: worst difference relative to 1 + |x|: logits {report['check']['logits']:.2e}, "
        f"presents {report['check']['present']:.2e}.",
        "",
        "The converter's tests (`test/convert/`) check the same export, on tiny checkpoints of this family's exact layout, "
        "against transformers' own Qwen3 / Qwen2 models with the block-causal mask passed in.",
        "",
        "## Decisions",
        "",
        "`decision.json` asks in the model's own chat format and reads ordinary tokens (Yes / No, letters for options "
        "and levels; labels of several tokens use the multi-token readout). Its temperatures are 1.0: **uncalibrated**, "
        "so its probabilities are the model's raw confidence, not measured frequencies.",
        "",
        "To calibrate, write a few hundred labelled decisions like the ones you will ask, one `/v1/systemone` request "
        "body per line with its correct answers (`\"model\"` may be left out):",
        "",
        "```",
        '{"state": "...", "questions": {"spam": {"type": "noul"}, "team": {"type": "choice", "criteria": '
        '{"billing": null, "support": null}}}, "answers": {"spam": false, "team": "billing"}}',
        "```",
        "",
        "(noul: `true`/`false`; choice: the option's name; score: the level's number from 0, or its text), then",
        "",
        "```",
        "npx tessera calibrate <model-dir> labelled.jsonl --holdout 0.2   # report only",
        "npx tessera calibrate <model-dir> labelled.jsonl --write         # store the fit",
        "```",
        "",
        "where `<model-dir>` is this directory. It asks the model every question in-process, fits one temperature per question "
        "type (the T minimising the negative log-likelihood of the correct answers under softmax(logits / T)), prints "
        "NLL, ECE and accuracy per type before and after (on the held-out last 20% with `--holdout 0.2`), and with "
        "`--write` puts the temperatures and `\"calibrated\": true` into `decision.json`.",
        "",
    ]
    for note in ck.notes:
        lines.insert(4, f"> {note}\n")
    return "\n".join(lines)
