#!/usr/bin/env bash
# Everything treegen needs on a fresh machine (Debian/Ubuntu, Python >= 3.11 with pip).
# Idempotent: re-running it is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
