#!/usr/bin/env bash
# CPU smoke test of model v2's device call (issue 25): smoke-sized data (prepare-v2.mjs
# --small), then device-v2.sh with SMOKE=1 (the tiny test model as the warm start, a few
# steps of each stage), then checks that the outputs the device call must bring back exist
# and hold what they should. A few minutes on a loaded 2-core machine.
#   npm ci --prefix training && bash training/v2/smoke-v2.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${SMOKE_DIR:-/tmp/v2-smoke}
rm -rf "$D" && mkdir -p "$D"
node --import tsx training/v2/prepare-v2.mjs --out "$D/data" --small > "$D/prepare.log"
touch "$D/data/train.jsonl" "$D/data/val.jsonl"   # prepare-data.mjs's files: not needed at this size
PYTHON=${PYTHON:-convert/.venv/bin/python} SMOKE=1 DATA="$D/data" OUT="$D/out" WORK="$D/work" bash training/v2/device-v2.sh > "$D/run.log" 2>&1 || true
fail() { echo "smoke-v2: FAIL: $*" >&2; tail -40 "$D/run.log" >&2; exit 1; }
for f in model.onnx.part-00 model-files.tar.gz reports.tar.gz targets.md device.log; do [ -s "$D/out/$f" ] || fail "no $f"; done
[ "$(ls "$D/out" | wc -l)" -le 8 ] || fail "more than 8 files under OUT"
bash training/v2/unpack-v2.sh "$D/out" "$D/model" "$D/reports" > /dev/null
grep -q '"max_position_embeddings": 4096' "$D/model/config.json" || fail "config.json is not 4,096 positions"
grep -q '"model_max_length": 4096' "$D/model/tokenizer_config.json" || fail "tokenizer_config.json is not 4,096"
grep -q '"temperatures"' "$D/model/decision.json" || fail "no calibrated decision.json"
for row in spam_noul_heldout yelp_noul_heldout yelp_choice_unseen_names "copy rate" "raw completion" "structured replies" "tokens per forward"; do
  grep -q "$row" "$D/out/targets.md" || fail "targets.md has no $row row"
done
grep -q "final checkpoint: .*distill/ckpt.pt" "$D/run.log" || fail "self-distillation did not produce the final checkpoint"
grep -q "onnxruntime matches torch" "$D/run.log" || fail "export check"
echo "smoke-v2: OK ($(grep -c '^=== ' "$D/run.log") phases; outputs $(du -sh "$D/out" | cut -f1)); log $D/run.log"
