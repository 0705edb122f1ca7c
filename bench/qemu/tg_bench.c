#include "tg_bench.h"

#include <stdio.h>

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SCB_ICSR (*(volatile uint32_t *)0xE000ED04u)
#define ICSR_PENDSTSET (1u << 26)
#define SYST_RELOAD 0x00FFFFFFu

static volatile uint32_t tg_wraps;
volatile int tg_bench_sink;

void SysTick_Handler(void) { tg_wraps++; }

void tg_ticks_start(void)
{
    SYST_CSR = 0;
    SYST_RVR = SYST_RELOAD;
    SYST_CVR = 0;        /* any write clears the counter; it reloads on the next tick */
    tg_wraps = 0;
    SYST_CSR = 7;        /* ENABLE | TICKINT | CLKSOURCE = processor clock */
    __asm volatile("cpsie i" ::: "memory");
    /* QEMU raises a SysTick exception when the counter first reloads from the 0 written above;
     * let it be taken (and forgotten) before anything is timed. */
    uint32_t v0 = SYST_CVR;
    while (SYST_CVR == v0 || (SCB_ICSR & ICSR_PENDSTSET))
        TG_BARRIER();
    for (volatile int i = 0; i < 16; i++)
        ;
    tg_wraps = 0;
}

uint64_t tg_ticks(void)
{
    uint32_t w1, w2, v, pending;
    do {
        w1 = tg_wraps;
        v = SYST_CVR;
        pending = SCB_ICSR & ICSR_PENDSTSET;
        w2 = tg_wraps;
    } while (w1 != w2);
    /* a wrap whose interrupt has not been taken yet: the counter was just reloaded */
    if (pending && v > SYST_RELOAD / 2)
        w1++;
    return ((uint64_t)w1 << 24) + (SYST_RELOAD - v);
}

__attribute__((noipa)) static int tg_bench_empty(uint32_t i)
{
    (void)i;
    return 0;
}

__attribute__((noipa)) uint64_t tg_bench_run(tg_bench_fn fn, uint32_t n_rows, uint32_t n_calls)
{
    int acc = 0;
    uint32_t row = 0;
    uint64_t t0 = tg_ticks();
    for (uint32_t k = 0; k < n_calls; k++) {
        acc += fn(row);
        TG_BARRIER();
        if (++row == n_rows)
            row = 0;
    }
    uint64_t t1 = tg_ticks();
    tg_bench_sink = acc;
    return t1 - t0;
}

uint64_t tg_bench_overhead(uint32_t n_rows, uint32_t n_calls)
{
    return tg_bench_run(tg_bench_empty, n_rows, n_calls);
}

__attribute__((noipa)) static void tg_spin(uint32_t n)
{
    /* exactly 2 * n instructions */
    __asm volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n)::"cc");
}

void tg_bench_calibrate(void)
{
    /* the difference of two spans cancels the call and tg_ticks() overhead exactly */
    uint64_t t0 = tg_ticks();
    tg_spin(1u << 16);
    uint64_t t1 = tg_ticks();
    tg_spin((1u << 20) + (1u << 16));
    uint64_t t2 = tg_ticks();
    printf("tg_calib %lu %lu\n", (unsigned long)((t2 - t1) - (t1 - t0)), (unsigned long)(1u << 21));
}

uint64_t tg_bench_report(const char *name, tg_bench_fn fn, uint32_t n_rows, uint32_t n_calls)
{
    uint64_t gross = tg_bench_run(fn, n_rows, n_calls);
    uint64_t over = tg_bench_overhead(n_rows, n_calls);
    uint64_t net = gross > over ? gross - over : 0;
    printf("tg_result %s %lu %lu\n", name, (unsigned long)net, (unsigned long)n_calls);
    return net;
}
