"""The silicon ports' counter (templates/firmware/tg_tick_counter.h) compiled for the host with a
scripted 24-bit tick source: every delta across the SysTick wrap is taken modulo 2^24 (issue #32: the
delta unmasked -- ``now - last`` without ``& TG_TICK_MASK`` -- went unnoticed; on a board it turns a
BENCH span across the wrap into ~2^32 ticks). Checked against a Python model of the counter on
constructed wraps and on a seeded random walk, for the 64-bit sum and the AVR's 32-bit one."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from treegen.core.codegen import render
from treegen.core.native import STRICT_CFLAGS

MASK = 0xFFFFFF

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#define TG_COUNTER_BITS 24
#define TG_COUNTER_MASK 0x00FFFFFFu
#define TG_TICK_MASK 0x00FFFFFFu
#define TG_TICK_ARCH_HOOKS 1
#define TG_SPIN_ARG uint32_t
#define TG_QEMU_UNIT 0u
#ifdef SUM32
#define TG_COUNT_Q8_T uint32_t
#endif
static uint32_t tg_script_now;
static uint32_t tg_ticks(void) { return tg_script_now; }
/* TICKS_Q8 ticks per 256 instructions: 256 = one per instruction (silicon), fewer = QEMU -icount */
static void tg_spin(uint32_t n)
{
    tg_script_now = (uint32_t)((tg_script_now + (uint64_t)n * 2u * TICKS_Q8 / 256u) & 0x00FFFFFFu);
}
#include "tg_tick_counter.h"
int main(void)
{
    unsigned long v;
    uint32_t c;
    tg_counter_calibrate();
    printf("%lu %u\n", (unsigned long)tg_ratio_q8, (unsigned)tg_port_counter_unit());
    while (scanf("%lu", &v) == 1) {
        tg_script_now = (uint32_t)v;
        c = tg_port_counter();
        printf("%lu %llu\n", (unsigned long)c, (unsigned long long)tg_count_q8);
    }
    return 0;
}
"""


def _run(tmp_path, ticks, sum32=False, ticks_q8=256):
    cc = shutil.which("gcc")
    if cc is None:
        pytest.fail("gcc is required (host build of the tick counter)")
    (tmp_path / "tg_tick_counter.h").write_text(render("firmware/tg_tick_counter.h", {"version": "test"}))
    (tmp_path / "drv.c").write_text(DRIVER)
    exe = tmp_path / ("drv32" if sum32 else "drv")
    flags = [f for f in STRICT_CFLAGS if f != "-Werror"] + ["-Werror"]
    subprocess.run([cc, *flags, "-O1", f"-DTICKS_Q8={ticks_q8}u", *(["-DSUM32"] if sum32 else []), "-I", str(tmp_path), str(tmp_path / "drv.c"),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], input="\n".join(str(int(t)) for t in ticks) + "\n", capture_output=True,
                         text=True, check=True, timeout=30).stdout
    vals = [int(v) for v in out.split()]
    return vals[0], vals[1], vals[2::2], vals[3::2]


def _model(ratio_q8, ticks, sum_bits, total):
    """The counter after each read: the 24-bit tick deltas (modulo 2^24) times the ratio, summed in
    ``sum_bits`` bits from ``total``, in units (the sum / 256) modulo 2^24."""
    last, out = ticks[0], []
    for t in ticks[1:]:
        total = (total + ((t - last) & MASK) * ratio_q8) % (1 << sum_bits)
        last = t
        out.append((total >> 8) & MASK)
    return out


@pytest.mark.parametrize("sum32", [False, True], ids=["sum64", "sum32-avr"])
@pytest.mark.parametrize("ticks_q8", [256, 43, 53], ids=["silicon", "qemu-ratio", "qemu-ratio-rounded"])
def test_tick_deltas_across_the_24_bit_wrap(tmp_path, sum32, ticks_q8):
    """Silicon: one unit per tick (ratio 256); QEMU: 256 / 43 = 5.95 instructions per tick (ratio 1524,
    the netduinoplus2's), where an unmasked delta changes the units (255 * 2^24 extra ticks times a ratio
    that is no multiple of 256; with ratio 256 the extra is a multiple of 2^32 in the sum, unseen)."""
    rng = np.random.default_rng(17)
    wraps = [MASK - 0xFF, 0x100, MASK, 0, 0x7FFFFF, 0xFFFFFE, 5]               # steps across the wrap
    walk = (np.cumsum(rng.integers(0, 0x400000, 2000)) + MASK - 0x1000) & MASK      # 2000 reads, many wraps
    ticks = [0] + wraps + walk.tolist()
    ratio, unit, got, sums = _run(tmp_path, ticks, sum32, ticks_q8)
    # 2^29 / ticks rounded: 53 ticks per 256 instructions give 1236.53 -> 1237 (truncated: 1236)
    assert (ratio, unit) == {256: (256, 1), 43: (1524, 0), 53: (1237, 0)}[ticks_q8]
    assert got[1:] == _model(ratio, ticks, 32 if sum32 else 64, sums[0])   # from the first read (tick 0) on
    assert (got[2] - got[1]) & MASK == (0x200 * ratio + sums[1] % 256) // 256   # 0xFFFF00 -> 0x100: 0x200 ticks
