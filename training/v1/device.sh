#!/usr/bin/env bash
# The two GPU runs that made the bundled model, as sent to the lent H100 (no Node, no
# network there). The prepared data travels compressed in training/carry/ (git-ignored).
#   bash training/v1/device.sh train   # tokenizer + first part of training; bf16 weights back
#   bash training/v1/device.sh finish  # resume, export, calibrate, evaluate; model back
# Env: PRESET (small), TRAIN_MINUTES (schedule length), WALL1/WALL2 (minutes per run),
# OUT (files to bring back). training/v1/run.sh is the same thing in one go.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
PRESET=${PRESET:-small}
TRAIN_MINUTES=${TRAIN_MINUTES:-10.5}
WALL1=${WALL1:-8.5}
WALL2=${WALL2:-3.8}
OUT=${OUT:-/tmp/device-out}
EXTRA=${EXTRA:-}
CARRY=training/carry
WORK=training/out
mkdir -p "$OUT" "$WORK" training/data
[ -f training/data/train.jsonl ] || tar -xJf "$CARRY/data.tar.xz" -C training/data
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
python3 -c "import torch, tokenizers, onnxruntime; print('torch', torch.__version__, 'tokenizers', tokenizers.__version__, 'ort', onnxruntime.__version__)" 2>/dev/null || true

case "${1:-}" in
train)
  python3 training/pipeline/train.py --data training/data --out "$WORK" --preset "$PRESET" --train-minutes "$TRAIN_MINUTES" \
    --wall-minutes "$WALL1" --tokenizer-sample 200000 --workers 8 --weights-out "$WORK/weights.bf16.pt" $EXTRA 2>&1 | tee "$OUT/train1.log"
  python3 training/pipeline/tokcheck.py "$WORK/tokenizer/tokenizer.json" training/data "$WORK/tok_samples.json" 2>&1 | tee -a "$OUT/train1.log"
  split -b 15M -d "$WORK/weights.bf16.pt" "$OUT/weights.bf16.pt.part-"
  tar -czf "$OUT/phase1.tar.gz" -C "$WORK" tokenizer loss.csv data_stats.json train_state.json tok_samples.json
  ;;
finish)
  INIT=""
  if [ ! -f "$WORK/ckpt.pt" ]; then
    echo "cold machine: resuming from the carried bf16 weights"
    mkdir -p "$WORK"
    cp -r "$CARRY/tokenizer" "$WORK/"
    cp "$CARRY/loss.csv" "$WORK/loss.csv"
    cat "$CARRY"/weights.bf16.pt.part-* > "$WORK/weights.bf16.pt"
    INIT="--init-weights $WORK/weights.bf16.pt"
  fi
  python3 training/pipeline/train.py --data training/data --out "$WORK" --preset "$PRESET" --train-minutes "$TRAIN_MINUTES" \
    --wall-minutes "$WALL2" --resume $INIT --workers 8 $EXTRA 2>&1 | tee "$OUT/train2.log"
  STAGE=/tmp/stage
  rm -rf "$STAGE" /tmp/int8
  python3 training/pipeline/export_bundle.py "$WORK/ckpt.pt" "$WORK/tokenizer" "$STAGE" --int8 /tmp/int8 --report "$WORK/export_check.json" 2>&1 | tee "$OUT/finish.log"
  python3 training/pipeline/calibrate.py --ckpt "$WORK/ckpt.pt" --tokenizer "$STAGE/tokenizer.json" --data training/data \
    --out "$STAGE/decision.json" --report "$WORK/calibration.json" ${CAL_LIMIT:+--limit $CAL_LIMIT} 2>&1 | tee -a "$OUT/finish.log"
  python3 training/pipeline/evaluate.py --ckpt "$WORK/ckpt.pt" --tokenizer "$STAGE/tokenizer.json" --decision "$STAGE/decision.json" \
    --data training/data --out "$WORK/eval" $( [ -f /tmp/int8/model.onnx ] && echo --onnx /tmp/int8/model.onnx ) --onnx-limit "${ONNX_LIMIT:-500}" \
    --chat-limit "${CHAT_LIMIT:-150}" ${DECISION_LIMIT:+--decision-limit $DECISION_LIMIT} 2>&1 | tee -a "$OUT/finish.log"
  split -b 15M -d "$STAGE/model.onnx" "$OUT/model.onnx.part-"
  cp "$WORK/loss.csv" "$WORK/train_state.json" "$STAGE/" 2>/dev/null || true
  tar -czf "$OUT/phase2.tar.gz" -C "$STAGE" config.json tokenizer.json tokenizer_config.json decision.json loss.csv train_state.json \
    -C "$(pwd)/$WORK" eval calibration.json export_check.json data_stats.json
  ;;
*)
  echo "usage: $0 train|finish" >&2
  exit 2
  ;;
esac
ls -la "$OUT"
