#!/usr/bin/env bash
# Set up, then run the whole test suite (the README's test command; CI runs this).
#
# In parallel (pytest-xdist): most of the suite waits on emulators, serial links and compilers, so it
# runs TREEGEN_TEST_WORKERS worker processes, by default twice the machine's cores (nproc). A whole
# test file goes to one worker (--dist loadfile), so a file's module-scoped builds and emulator
# sessions are made once; the workers take the longest files first (--no-loadscope-reorder keeps the
# order tests/conftest.py gives from tests/file_durations.json). TREEGEN_TEST_WORKERS=0 runs the
# suite in this process, one test at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# byte-compile the checkout once, as `pip install` does for a wheel: the suite starts a python process
# for most commands it checks (and PYTHONDONTWRITEBYTECODE, if set, would make every one of them compile
# treegen's modules again); python reads the .pyc files whatever that variable says
python3 -m compileall -q -j 0 treegen hil tests >/dev/null
workers=${TREEGEN_TEST_WORKERS:-$(( $(nproc) * 2 ))}
python3 -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
