#!/usr/bin/env bash
# Here, after the device call: puts the model directory back together from device-v2.sh's
# outputs (model.onnx in 15 MB parts, the small files, the reports).
#   bash training/v2/unpack-v2.sh <files_at> <model-dir> [<reports-dir>]
set -euo pipefail
SRC=$1 DEST=$2 REPORTS=${3:-$2.reports}
mkdir -p "$DEST" "$REPORTS"
cat "$SRC"/model.onnx.part-* > "$DEST/model.onnx"
tar -xzf "$SRC/model-files.tar.gz" -C "$DEST"
tar -xzf "$SRC/reports.tar.gz" -C "$REPORTS"
cp "$SRC/device.log" "$REPORTS/" 2>/dev/null || true
echo "model: $DEST ($(du -sh "$DEST" | cut -f1)); reports: $REPORTS"
echo "next: node training/pipeline/check-bundle.mjs $DEST; npx tsx bench/decode.ts $DEST"
