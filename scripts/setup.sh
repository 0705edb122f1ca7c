#!/usr/bin/env bash
# Everything treegen needs on a fresh machine (Debian/Ubuntu, Python >= 3.11 with pip):
#   - the ARM cross compiler, newlib, QEMU and simavr's library (Debian packages), for export/build/HIL
#   - the treegen package with its test extras
# Idempotent: packages already present are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm gcc g++ gcc-avr avr-libc gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc simavr libsimavr-dev ser2net"   # g++: tests/emit/test_export_compile.py; avr, riscv, qemu-system-misc (riscv32): tests/emit/test_export_cross.py; simavr libsimavr-dev: simavr-uno (templates/simavr/); ser2net: the labgrid exporters of tests/device/test_farm.py (RFC 2217); libstdc++-arm-none-eabi-newlib: CatBoost's C++ export in bench/boosted.py peers
missing=""
for p in $APT_PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing Debian packages:$missing" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
