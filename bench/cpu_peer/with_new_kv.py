"""A converted model directory with the `present_new.*` outputs (convert/tessera_convert/new_kv.py)
made from one converted before them, for bench/cpu-peer.ts: the same graph pass the converter now
runs at export, applied to the finished model.onnx; the weights (model.onnx.data) are hard-linked,
not copied (1.8 GB at 1.7B), and the old directory is left as it is for whoever reads it.

    python bench/cpu_peer/with_new_kv.py OLD_DIR NEW_DIR
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from tessera_convert.new_kv import add_new_kv_outputs


def main(old: str, new: str) -> None:
    staging = new + ".making"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    for name in os.listdir(old):
        src = os.path.join(old, name)
        if name == "model.onnx":
            continue
        if name.endswith(".data"):
            os.link(src, os.path.join(staging, name))
        else:
            shutil.copy2(src, os.path.join(staging, name))
    with open(os.path.join(old, "config.json"), encoding="utf-8") as f:
        layers = json.load(f)["num_hidden_layers"]
    add_new_kv_outputs(os.path.join(old, "model.onnx"), layers, os.path.join(staging, "model.onnx"))
    os.rename(staging, new)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
