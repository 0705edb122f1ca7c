#!/usr/bin/env bash
# Set up, then run the whole test suite (the README's test command; CI runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q "$@"
