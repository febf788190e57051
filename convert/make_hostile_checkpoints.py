"""A corpus of hostile checkpoint folders for `tessera convert`, each a tiny SDAR or DiffusionGemma checkpoint with one attack.

    python convert/make_hostile_checkpoints.py <out-dir>   ->  <out-dir>/cases.json, <out-dir>/cases/<name>/...

cases.json lists every case: its folder, extra converter arguments, and what must happen —
"refused" with a one-line message matching `message`, or "converted" (the attack ignored).
Files the attacks aim at lie in <out-dir>/outside/ (a secret and a shard, the read is what is
refused) and the attacks that would run code create <out-dir>/PWNED; test/hostile/checkpoints.test.ts
runs the converter on each case and checks that no command ran, nothing outside was read and
nothing was left behind.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from make_tiny_checkpoints import make_sdar  # noqa: E402
from make_tiny_diffusion_gemma import make as make_diffusion_gemma  # noqa: E402

SECRET = "tessera-hostile-secret-7f3a"
SHARD = "model-00001-of-00002.safetensors"


class Command:
    """Unpickling it runs `command` (what a hostile pytorch_model.bin does)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def edit_json(path: str, **changes) -> None:
    with open(path, encoding="utf-8") as f:
        value = json.load(f)
    value.update(changes)
    write_json(path, value)


def huge_length(header, data) -> bytes:
    """A safetensors file whose header claims 2^60 bytes."""
    return struct.pack("<Q", 2**60) + json.dumps(header).encode() + data


def replace(path: str, make) -> None:
    """Removes `path` and lets `make(path)` put something else there."""
    os.remove(path)
    make(path)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_hostile_checkpoints.py <out-dir>")
    out = os.path.abspath(sys.argv[1])
    base = os.path.join(out, "base")
    make_sdar(base)
    outside = os.path.join(out, "outside")
    os.makedirs(outside, exist_ok=True)
    secret = os.path.join(outside, "secret.txt")
    with open(secret, "w", encoding="utf-8") as f:
        f.write(SECRET + "\n")
    shutil.copy(os.path.join(base, SHARD), os.path.join(outside, SHARD))
    marker = os.path.join(out, "PWNED")
    touch = f"touch {marker}"
    with open(os.path.join(base, "chat_template.jinja"), encoding="utf-8") as f:
        template = f.read()

    cases = []

    def case(name: str, expect: str, message: str = "", args=(), parent: str = "cases", source: str = base):
        folder = os.path.join(out, parent, name)
        shutil.copytree(source, folder, symlinks=True)
        cases.append({"name": name, "dir": folder, "expect": expect, "message": message, "args": list(args)})
        return folder

    def with_template(name: str, prefix: str, message: str) -> None:
        with open(os.path.join(case(name, "refused", message), "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(prefix + template)

    # Templates: code, files, time and memory.
    with_template("template-runs-a-command", "{% set _ = cycler.__init__.__globals__.os.system('" + touch + "') %}",
                  r"chat_template\.jinja: the chat template reaches outside its data")
    with_template("template-reads-a-file", "{{ self.__init__.__globals__.__builtins__.open('" + secret + "').read() }}",
                  r"chat_template\.jinja: the chat template reaches outside its data")
    with_template("template-mutates-its-input", "{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}",
                  r"chat_template\.jinja: the chat template reaches outside its data")
    with_template("template-loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                  r"chat_template\.jinja: the chat template ran past the render's bound \(more than 2 s of CPU\)")
    with_template("template-ten-gigabytes", "{{ 'x' * 10**10 }}", r"chat_template\.jinja: the chat template ran past the render's bound")
    with_template("template-doubles-a-string", "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                  r"chat_template\.jinja: the chat template ran past the render's bound")
    with_template("template-includes-a-file", "{% include '" + secret + "' %}", r"chat_template\.jinja: the chat template cannot render")
    with_template("template-recurses", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                  r"chat_template\.jinja: the chat template cannot render \(RecursionError")

    # Files: outside the folder, special files, lying sizes.
    d = case("shard-is-a-fifo", "refused", SHARD + r": not a regular file")
    replace(os.path.join(d, SHARD), os.mkfifo)
    d = case("shard-links-out", "refused", SHARD + r": a link out of the checkpoint folder")
    replace(os.path.join(d, SHARD), lambda p: os.symlink(os.path.join(outside, SHARD), p))
    d = case("config-links-to-passwd", "refused", r"config\.json: a link out of the checkpoint folder")
    replace(os.path.join(d, "config.json"), lambda p: os.symlink("/etc/passwd", p))
    d = case("tokenizer-links-to-dev-zero", "refused", r"tokenizer\.json: a link out of the checkpoint folder")
    replace(os.path.join(d, "tokenizer.json"), lambda p: os.symlink("/dev/zero", p))
    d = case("template-links-to-the-secret", "refused", r"chat_template\.jinja: a link out of the checkpoint folder")
    replace(os.path.join(d, "chat_template.jinja"), lambda p: os.symlink(secret, p))
    index = os.path.join(base, "model.safetensors.index.json")
    with open(index, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]

    def point_index(folder: str, name: str) -> None:
        write_json(os.path.join(folder, "model.safetensors.index.json"),
                   {"weight_map": {k: (name if v == SHARD else v) for k, v in weight_map.items()}})

    point_index(case("index-climbs-out", "refused", r"names '\.\./\.\./outside/" + SHARD + "', outside the checkpoint folder"),
                f"../../outside/{SHARD}")
    point_index(case("index-names-proc-environ", "refused", r"names '/proc/self/environ', not a file inside the checkpoint folder"),
                "/proc/self/environ")
    # The same link, once to a file that exists and once to none: the two messages must not differ.
    for parent, exists in (("oracle-present", True), ("oracle-absent", False)):
        target = os.path.join(out, parent, "elsewhere.safetensors")
        d = case("ck", "refused", SHARD + r": a link out of the checkpoint folder", parent=parent)
        if exists:
            shutil.copy(os.path.join(base, SHARD), target)
        replace(os.path.join(d, SHARD), lambda p, t=target: os.symlink(t, p))

    def rewrite_header(folder: str, edit, name: str = SHARD) -> None:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        raw = edit(header, data)
        with open(path, "wb") as f:
            f.write(raw)

    def lying_offsets(header, data):
        key = next(k for k in header if k != "__metadata__")
        header[key]["shape"] = [1 << 20, 1 << 20]
        raw = json.dumps(header).encode()
        return struct.pack("<Q", len(raw)) + raw + data

    rewrite_header(case("header-length-2-to-the-60", "refused", SHARD + r": not a safetensors file \(header of"), huge_length)
    rewrite_header(case("header-lies-about-a-shape", "refused", SHARD + r": tensor .* does not lie in the file"), lying_offsets)
    with open(os.path.join(case("tokenizer-nested-deeply", "refused", r"tokenizer\.json: not readable JSON \(nested too deeply\)"),
                           "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write("[" * 100_000 + "]" * 100_000)

    # config.json against the tensors that exist.
    edit_json(os.path.join(case("config-million-layers", "refused", r"\"num_hidden_layers\" is 1000000; the safetensors hold 2 layers"),
                           "config.json"), num_hidden_layers=1_000_000)
    edit_json(os.path.join(case("config-hidden-size-1e9", "refused", r"imply tensor \"[^\"]+\" of shape \([^)]*1000000000"),
                           "config.json"), hidden_size=10**9, head_dim=24)
    edit_json(os.path.join(case("config-vocab-too-large", "refused", r"imply tensor .* the safetensors hold"), "config.json"),
              vocab_size=10**7)

    # Code and pickles: never loaded.
    d = case("pickle-weights-only", "refused", r"pickled weights such as pytorch_model\.bin are never loaded")
    for name in os.listdir(d):
        if name.endswith(".safetensors") or name.endswith(".index.json"):
            os.remove(os.path.join(d, name))
    with open(os.path.join(d, "pytorch_model.bin"), "wb") as f:
        pickle.dump(Command(touch), f)
    # Laid out as huggingface_hub's cache: every file of snapshots/<rev>/ a link into the repository's blobs/ (allowed).
    d = case("remote-code-and-pickle-beside-safetensors", "converted", r"not loaded: configuration_sdar\.py, modeling_sdar\.py, pytorch_model\.bin",
             args=["--weights", "fp32"], parent="hub/models--hostile--sdar/snapshots")
    for name in ("configuration_sdar.py", "modeling_sdar.py"):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(f"import os\nos.system({touch!r})\n")
    with open(os.path.join(d, "pytorch_model.bin"), "wb") as f:
        pickle.dump(Command(touch), f)
    blobs = os.path.join(out, "hub/models--hostile--sdar/blobs")
    os.makedirs(blobs)
    for i, name in enumerate(sorted(os.listdir(d))):
        os.rename(os.path.join(d, name), os.path.join(blobs, f"blob{i:02d}"))
        os.symlink(f"../../blobs/blob{i:02d}", os.path.join(d, name))

    # The whole conversion's time and memory bounds.
    case("time-limit", "refused", r"ran past its time limit of 1 s", args=["--time-limit", "1"])
    case("memory-limit", "refused", r"out of memory.*--memory-limit", args=["--memory-limit", "0.2"])

    diffusion_gemma_cases(out, case, rewrite_header, secret, outside, touch)

    write_json(os.path.join(out, "cases.json"), {"marker": marker, "secret": secret, "secret_text": SECRET, "outside": outside, "cases": cases})
    print(f"wrote {len(cases)} cases to {out}")


def diffusion_gemma_cases(out: str, case, rewrite_header, secret: str, outside: str, touch: str) -> None:
    """The attacks on DiffusionGemma's own path (its template in tokenizer_config.json, one
    model.safetensors, config.json's text_config), refused before any weight is read."""
    base = make_diffusion_gemma(os.path.join(out, "base-gemma"))
    weights = "model.safetensors"
    shutil.copy(os.path.join(base, weights), os.path.join(outside, "gemma-" + weights))

    def gemma(name: str, message: str, args=()) -> str:
        return case("gemma-" + name, "refused", message, args=args, source=base)

    def with_template(name: str, prefix: str, message: str) -> None:
        path = os.path.join(gemma(name, message), "tokenizer_config.json")
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        config["chat_template"] = prefix + config["chat_template"]
        write_json(path, config)

    reaches_out = r"tokenizer_config\.json: the chat template reaches outside its data"
    with_template("template-runs-a-command", "{% set _ = cycler.__init__.__globals__.os.system('" + touch + "') %}", reaches_out)
    with_template("template-reads-a-file", "{{ self.__init__.__globals__.__builtins__.open('" + secret + "').read() }}", reaches_out)
    with_template("template-loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                  r"tokenizer_config\.json: the chat template ran past the render's bound")
    d = gemma("weights-link-out", weights + r": a link out of the checkpoint folder")
    replace(os.path.join(d, weights), lambda p: os.symlink(os.path.join(outside, "gemma-" + weights), p))
    d = gemma("config-links-to-passwd", r"config\.json: a link out of the checkpoint folder")
    replace(os.path.join(d, "config.json"), lambda p: os.symlink("/etc/passwd", p))
    d = gemma("weights-are-a-fifo", weights + r": not a regular file")
    replace(os.path.join(d, weights), os.mkfifo)

    rewrite_header(gemma("header-length-2-to-the-60", weights + r": not a safetensors file \(header of"), huge_length, weights)

    def text_config(name: str, message: str, **changes) -> None:
        path = os.path.join(gemma(name, message), "config.json")
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        config["text_config"].update(changes)
        write_json(path, config)

    text_config("config-million-layers", r"\"num_hidden_layers\" 1000000 is not the layer count of any stack the safetensors hold",
                num_hidden_layers=1_000_000)
    text_config("config-hidden-size-1e9", r"\"hidden_size\" 1000000000 is not a dimension of any tensor the safetensors hold",
                hidden_size=10**9)
    d = gemma("pickle-weights-only", r"pickled weights such as pytorch_model\.bin are never loaded")
    os.remove(os.path.join(d, weights))
    with open(os.path.join(d, "pytorch_model.bin"), "wb") as f:
        pickle.dump(Command(touch), f)


if __name__ == "__main__":
    main()
