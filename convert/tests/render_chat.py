"""Renders chat conversations with transformers' own ``apply_chat_template`` (the reference the
engine's prompts are compared with, test/convert/diffusion-gemma-chat-template.test.ts).

    python convert/tests/render_chat.py <model-or-checkpoint-dir> <cases.json>   (prints a JSON list of strings)

Each case is ``{"messages": [...OpenAI messages...], "tools": [...] | null, "enable_thinking": bool}``.
Tool-call arguments (JSON strings in OpenAI's messages) are parsed into mappings first, as
transformers' server does before it applies the template (cli/serving/utils.py,
get_processor_inputs_from_messages).
"""

import json
import sys

from transformers import AutoTokenizer


def hf_messages(messages):
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c["function"])
                if isinstance(fn.get("arguments"), str):
                    try:
                        parsed = json.loads(fn["arguments"])
                        if isinstance(parsed, dict):
                            fn["arguments"] = parsed
                    except ValueError:
                        pass
                calls.append({**c, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


def main() -> None:
    tok = AutoTokenizer.from_pretrained(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        cases = json.load(f)
    rendered = [
        tok.apply_chat_template(hf_messages(c["messages"]), tools=c.get("tools") or None, tokenize=False,
                                add_generation_prompt=True, enable_thinking=bool(c.get("enable_thinking")))
        for c in cases
    ]
    json.dump(rendered, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
