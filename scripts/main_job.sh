#!/usr/bin/env bash
# Set up, then run the main job end to end on a shared dataset:
#   fit (EFTI, native engine) -> export (fixed-point C) -> build (PlatformIO, offline)
#   -> emulated Cortex-M4 (QEMU mps2-an386) -> HIL report (device == Python fixed-point model).
# Output goes to ./out (override with OUT=dir; DATA=... picks another dataset).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DATA=${DATA:-../shared/datasets/veh.csv.gz}
OUT=${OUT:-out}
TARGET=${TARGET:-qemu-m4}
mkdir -p "$OUT"
set -x
treegen fit "$DATA" --algo efti --max-iter 200000 --oversize-weight 0.05 --seed 1 -o "$OUT/model.json" --json "$OUT/fit.json"
treegen eval "$OUT/model.json" "$DATA" --json "$OUT/eval.json"
treegen show "$OUT/model.json"
treegen export "$OUT/model.json" --target "$TARGET" --data "$DATA" -o "$OUT/c" --json "$OUT/export.json"
treegen build "$OUT/model.json" --target "$TARGET" -o "$OUT/firmware"
treegen hil "$OUT/model.json" --target "$TARGET" --data "$DATA" -o "$OUT/firmware" --json "$OUT/hil.json" --junit "$OUT/hil.xml"
