#!/usr/bin/env bash
# Here (Node + the training data sources): prepares model v2's data, records the held-out
# sets' hashes (training/results/heldout_v2.sha256: written before any training, checked by
# device-v2.sh), and compresses what the device call carries into training/carry/ (ignored
# by git; name it in the run's carry). Prints the size of the tree the call will carry.
#   npm ci --prefix training && bash training/v2/pack-v2.sh [--skip-prepare]
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${DATA:-training/data}
if [ "${1:-}" != --skip-prepare ]; then
  node --import tsx training/pipeline/prepare-data.mjs --out "$DATA"
  node --import tsx training/v2/prepare-v2.mjs --out "$DATA"
fi
(cd "$DATA" && sha256sum eval_v2_*.jsonl) > training/results/heldout_v2.sha256
node training/v2/check-heldout.mjs "$DATA"
mkdir -p training/carry
for f in train.jsonl train_v2.jsonl raw_pool.jsonl val.jsonl val_v2.jsonl eval_v2_spam.jsonl eval_v2_yelp.jsonl \
  eval_v2_copy.jsonl eval_v2_raw.jsonl eval_v2_struct.jsonl eval_v2_decode.jsonl; do
  [ "training/carry/$f.xz" -nt "$DATA/$f" ] || xz -T2 -9 -c "$DATA/$f" > "training/carry/$f.xz"
done
tracked=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
carry=$(du -cb training/carry/* | tail -1 | cut -f1)
echo "tracked files: $tracked bytes; training/carry: $carry bytes; together $((tracked + carry)) of 67108864 (64 MiB)"
# Over the limit: carry one evenly spread share of the training files (train.jsonl,
# train_v2.jsonl, raw_pool.jsonl); validation and held-out files travel whole.
room=${ROOM:-$((67108864 - 1048576 - tracked))}
keep=1
for pass in 1 2 3; do
  [ "$carry" -gt "$room" ] || break
  big=$(du -cb training/carry/train.jsonl.xz training/carry/train_v2.jsonl.xz training/carry/raw_pool.jsonl.xz | tail -1 | cut -f1)
  keep=$(awk "BEGIN{f = $keep * ($big - ($carry - $room)) / $big * 0.95; print (f > 0.1 ? f : 0)}")
  [ "$keep" = 0 ] && { echo "under a tenth of the training files would fit next to the tracked tree: make room first (fp16 weights)" >&2; exit 1; }
  echo "over by $((carry - room)) bytes: carrying a $keep share of the training files"
  for f in train.jsonl train_v2.jsonl raw_pool.jsonl; do
    awk -v f="$keep" '{ if (int(NR * f) > int((NR - 1) * f)) print }' "$DATA/$f" | xz -T2 -9 > "training/carry/$f.xz"
  done
  carry=$(du -cb training/carry/* | tail -1 | cut -f1)
  echo "tracked files: $tracked bytes; training/carry: $carry bytes; together $((tracked + carry)) of 67108864"
done
[ "$carry" -le "$room" ] || { echo "still over the limit after three passes" >&2; exit 1; }
