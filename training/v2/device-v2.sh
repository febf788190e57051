#!/usr/bin/env bash
# Model v2 (issue 25) in ONE device call of at most 10 minutes: train (warm start from the
# bundled weights, 4,096 positions, the v2 mixture), self-distil on the model's own decodes,
# export to the contract, calibrate, evaluate against the targets on the held-out v2 sets,
# and leave the model and the reports under $OUT. No Node there: the data is prepared here
# (training/pipeline/prepare-data.mjs + prepare-v2.mjs) and travels xz-compressed in training/carry/.
#
#   bash training/v2/pack-v2.sh                     # here: data -> training/carry/ (+ held-out hashes)
#   device run, carry ["training/carry"]:  OUT=$OUT bash training/v2/device-v2.sh
#   bash training/v2/unpack-v2.sh <files_at> <dir>  # here: the model directory back together
#   SMOKE=1 OUT=/tmp/smoke-v2 bash training/v2/device-v2.sh   # CPU smoke test: same steps, toy sizes
#
# INIT: the warm start's model directory (default the bundled one; its ONNX weights must read
# back exactly, fp32 or fp16: onnx_weights.py refuses anything else, e.g. int8).
# Time checkpoints (seconds after start, BUDGET=530 on the device): training stops at
# TRAIN_END, distillation decodes until DISTILL_GEN_END and fine-tunes until DISTILL_END; each
# step runs under `timeout`, and export + evaluation run whatever happened before them (the
# last checkpoint is saved every minute), so the call ends with a model and a report.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
START=$(date +%s)
OUT=${OUT:-/tmp/device-v2-out}
WORK=${WORK:-training/out-v2}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/device.log"
exec > >(tee -a "$LOG") 2>&1

if [ "${SMOKE:-0}" = 1 ]; then
  # one thread: on a loaded 2-core machine torch's second thread spins and slows it 50-fold
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  PRESET=smoke-v2 INIT=test/fixtures/tiny-model DATA=${DATA:-/tmp/v2-smoke-data}
  BUDGET=${BUDGET:-900} TRAIN_END=${TRAIN_END:-600} DISTILL_GEN_END=${DISTILL_GEN_END:-700} DISTILL_END=${DISTILL_END:-800}
  TRAIN_EXTRA="--limit 1500 --max-steps 4 --workers 0" DISTILL_EXTRA="--limit 300 --prompts 6 --batch 6"
  FT_EXTRA="--max-steps 2 --workers 0" EVAL_EXTRA="--limit-decisions 6 --limit-gen 3" CAL_EXTRA="--limit 200"
else
  PRESET=v2 INIT=${INIT:-models/tessera-bd-small} DATA=${DATA:-training/carry}
  BUDGET=${BUDGET:-530} TRAIN_END=${TRAIN_END:-320} DISTILL_GEN_END=${DISTILL_GEN_END:-355} DISTILL_END=${DISTILL_END:-425}
  TRAIN_EXTRA="--workers 8 --ckpt-every-minutes 1" DISTILL_EXTRA="--prompts 12000 --batch 512"
  FT_EXTRA="--workers 4 --ckpt-every-minutes 0.5" EVAL_EXTRA="--limit-decisions 1000" CAL_EXTRA=""
fi
now() { echo $(($(date +%s) - START)); }
until_s() { local s=$(($1 - $(now))); [ "$s" -gt 5 ] && echo "$s" || echo 5; }
phase() { echo "=== [$(now)s] $*"; }

phase "device"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU"
$PY -c "import torch, tokenizers, onnx, onnxruntime; print('torch', torch.__version__, 'tokenizers', tokenizers.__version__, 'onnx', onnx.__version__, 'ort', onnxruntime.__version__)"
phase "held-out sets as written before training"
if [ "${SMOKE:-0}" != 1 ]; then
  $PY - "$DATA" <<'EOF' || echo "WARNING: could not check the held-out hashes"
import hashlib, lzma, os, sys
for line in open("training/results/heldout_v2.sha256"):
    want, name = line.split()
    p = os.path.join(sys.argv[1], name)
    data = lzma.open(p + ".xz").read() if os.path.exists(p + ".xz") else open(p, "rb").read()
    print(name, "as recorded" if hashlib.sha256(data).hexdigest() == want else "WARNING: differs from training/results/heldout_v2.sha256")
EOF
fi

phase "train (until ${TRAIN_END}s)"
W=$(until_s "$TRAIN_END")
timeout $((W + 60)) $PY training/pipeline/train.py --data "$DATA" --out "$WORK" --preset "$PRESET" --init-onnx "$INIT" \
  --train-minutes "$(awk "BEGIN{print ($W - 50) / 60}")" --wall-minutes "$(awk "BEGIN{print $W / 60}")" $TRAIN_EXTRA
FINAL="$WORK/ckpt.pt"

phase "self-distillation: own decodes (until ${DISTILL_GEN_END}s)"
mkdir -p "$WORK/distill"
rm -rf "$WORK/distill/tokenizer" && cp -r "$WORK/tokenizer" "$WORK/distill/"
for f in val.jsonl val_v2.jsonl; do for x in "$f" "$f.xz"; do [ -f "$DATA/$x" ] && ln -sf "$(realpath "$DATA/$x")" "$WORK/distill/$x"; done; done
W=$(until_s "$DISTILL_GEN_END")
[ -f "$FINAL" ] && timeout $((W + 30)) $PY training/v2/distill.py --ckpt "$FINAL" --tokenizer "$WORK/tokenizer/tokenizer.json" --data "$DATA" \
  --out "$WORK/distill/distill.jsonl" --seconds "$W" $DISTILL_EXTRA
phase "self-distillation: fine-tune (until ${DISTILL_END}s)"
W=$(until_s "$DISTILL_END")
if [ -s "$WORK/distill/distill.jsonl" ]; then
  timeout $((W + 30)) $PY training/pipeline/train.py --data "$WORK/distill" --train-files distill.jsonl --out "$WORK/distill" --preset "$PRESET" \
    --init-ckpt "$FINAL" --lr 2e-4 --train-minutes "$(awk "BEGIN{print ($W - 25) / 60}")" --wall-minutes "$(awk "BEGIN{print $W / 60}")" $FT_EXTRA \
    && [ -f "$WORK/distill/ckpt.pt" ] && FINAL="$WORK/distill/ckpt.pt"
fi
echo "final checkpoint: $FINAL"

phase "export + ONNX Runtime check"
STAGE="$WORK/model"
rm -rf "$STAGE"
$PY training/pipeline/export_bundle.py "$FINAL" "$WORK/tokenizer" "$STAGE" --report "$WORK/export_check.json"
phase "calibrate"
$PY training/pipeline/calibrate.py --ckpt "$FINAL" --tokenizer "$STAGE/tokenizer.json" --data "$DATA" --out "$STAGE/decision.json" \
  --report "$WORK/calibration.json" --max-len 4096 $CAL_EXTRA
phase "evaluate on the held-out v2 sets (budget ends at ${BUDGET}s)"
W=$(until_s "$BUDGET")
timeout $((W - 20 > 10 ? W - 20 : 10)) $PY training/v2/eval_targets.py --ckpt "$FINAL" --tokenizer "$STAGE/tokenizer.json" \
  --decision "$STAGE/decision.json" --data "$DATA" --out "$WORK/eval" $EVAL_EXTRA
# The decoding default: the policy eval_targets chose on its tune prompts (bench/decode.ts re-checks it in Node).
$PY - "$WORK/eval/targets.json" "$STAGE/config.json" <<'EOF' || true
import json, re, sys
res, cfg_path = json.load(open(sys.argv[1])), sys.argv[2]
m = re.fullmatch(r"(fill\([\d.]+\)\+)?threshold\(([\d.]+)\)", res["decoding"]["chosen_on_tune"])
if m:
    cfg = json.load(open(cfg_path))
    cfg["decoding"] = {"policy": (m.group(1) or "") + "threshold", "threshold": float(m.group(2))}
    json.dump(cfg, open(cfg_path, "w"), indent=2)
    print("decoding default:", cfg["decoding"])
EOF

phase "pack outputs"
[ -f "$STAGE/model.onnx" ] && split -b 15M -d "$STAGE/model.onnx" "$OUT/model.onnx.part-"
cp "$WORK/loss.csv" "$STAGE/" 2>/dev/null || true
tar -czf "$OUT/model-files.tar.gz" -C "$STAGE" --exclude model.onnx . 2>/dev/null || true
tar -czf "$OUT/reports.tar.gz" -C "$WORK" eval export_check.json calibration.json data_stats.json train_state.json loss.csv \
  distill/loss.csv distill/train_state.json 2>/dev/null || true
cp "$WORK/eval/targets.md" "$OUT/targets.md" 2>/dev/null || true
phase "done"; ls -la "$OUT"
cat "$OUT/targets.md" 2>/dev/null || echo "no evaluation report"
