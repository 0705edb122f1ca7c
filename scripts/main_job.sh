#!/usr/bin/env bash
# Set up, then run the main job end to end on a shared dataset:
#   fit (EFTI) -> eval -> show, plus a 5-fold cross-validation.
# Output goes to ./out (override with OUT=dir).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DATA=${DATA:-../shared/datasets/veh.csv.gz}
OUT=${OUT:-out}
mkdir -p "$OUT"
set -x
treegen fit "$DATA" --algo efti --max-iter 50000 --oversize-weight 0.05 --seed 1 -o "$OUT/model.json" --json "$OUT/fit.json"
treegen eval "$OUT/model.json" "$DATA" --json "$OUT/eval.json"
treegen show "$OUT/model.json"
treegen cv "$DATA" --algo efti --folds 5 --repeats 1 --max-iter 20000 --oversize-weight 0.05 --seed 1 --jobs 2 --json "$OUT/cv.json"
