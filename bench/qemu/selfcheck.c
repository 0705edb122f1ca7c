/* Harness self-check, run by tests/device/test_qemu_harness.py:
 *  - tg_calib: SysTick against a loop of exactly 2^21 instructions;
 *  - spin_4000: a 4000-instruction difference measured between two tg_ticks() spans;
 *  - spin_long: 40,000,000 instructions across many 24-bit SysTick wraps;
 *  - dot_q15: the reference point of shared/notes/toolchain.md, a 64-element Q15 dot product with
 *    SMLAD on Cortex-M4 (~176 instructions per call). */
#include <arm_acle.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tg_bench.h"

#define N_ROWS 4
static int16_t va[N_ROWS][64], vb[64];

__attribute__((noipa)) static void spin(uint32_t n)
{
    __asm volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n)::"cc"); /* exactly 2 * n instructions */
}

__attribute__((noipa)) int32_t dot_q15(const int16_t *x, const int16_t *y)
{
    int32_t acc = 0;
    for (int i = 0; i < 64; i += 2) {
        int16x2_t px, py;
        memcpy(&px, x + i, 4);
        memcpy(&py, y + i, 4);
        acc = __smlad(px, py, acc);
    }
    return acc;
}

__attribute__((noipa)) static int bench_dot(uint32_t i) { return (int)dot_q15(va[i], vb); }

int main(void)
{
    for (int r = 0; r < N_ROWS; r++)
        for (int i = 0; i < 64; i++)
            va[r][i] = (int16_t)(i * 37 + r * 1000 - 1200);
    for (int i = 0; i < 64; i++)
        vb[i] = (int16_t)(500 - i * 13);
    tg_ticks_start();
    tg_bench_calibrate();

    uint64_t t0 = tg_ticks();
    spin(1000);
    uint64_t t1 = tg_ticks();
    spin(3000);
    uint64_t t2 = tg_ticks();
    printf("tg_value spin_4000_ticks %ld\n", (long)((t2 - t1) - (t1 - t0)));

    uint64_t t3 = tg_ticks();
    spin(20000000u);
    uint64_t t4 = tg_ticks();
    printf("tg_value spin_40M_ticks %lu\n", (unsigned long)(t4 - t3));

    tg_bench_report("dot_q15", bench_dot, N_ROWS, 4000);
    int32_t ref = 0;
    for (int i = 0; i < 64; i++)
        ref += va[1][i] * vb[i];
    printf("tg_value dot_value %ld\n", (long)dot_q15(va[1], vb));
    printf("tg_value dot_ref %ld\n", (long)ref);
    return 0;
}
