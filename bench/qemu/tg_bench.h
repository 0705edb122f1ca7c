/* Instruction counting on QEMU Cortex-M boards.
 *
 * Run QEMU with `-icount shift=0,align=off,sleep=off`: the SysTick timer clocked from the CPU clock
 * (CLKSOURCE = 1) then advances exactly one tick per executed instruction. DWT->CYCCNT is not
 * implemented by QEMU (reads 0) and is not used.
 *
 * tg_ticks() is a 64-bit monotonic tick count: the 24-bit SysTick counter extended by counting its
 * wraps in SysTick_Handler (one interrupt per 2^24 ticks). Time N calls between two reads and
 * subtract the same loop around an empty call (tg_bench_overhead) for a per-call figure.
 */
#ifndef TG_BENCH_H
#define TG_BENCH_H

#include <stdint.h>

#define TG_BARRIER() __asm volatile("" ::: "memory")

void tg_ticks_start(void);
uint64_t tg_ticks(void);

/* One call of the function under test on row i; must be __attribute__((noipa)). */
typedef int (*tg_bench_fn)(uint32_t i);

/* Ticks for calling fn(i % n_rows) for i = 0..n_calls-1 (loop and call overhead included). */
uint64_t tg_bench_run(tg_bench_fn fn, uint32_t n_rows, uint32_t n_calls);

/* The same loop around an empty noipa function: subtract it from tg_bench_run. */
uint64_t tg_bench_overhead(uint32_t n_rows, uint32_t n_calls);

/* Print "tg_calib <ticks> <instructions>": ticks for a loop of exactly 2^21 instructions
 * (the host derives instructions per tick from it). Call once after tg_ticks_start(). */
void tg_bench_calibrate(void);

/* Time fn over n_calls calls (rows 0..n_rows-1 in turn), subtract the empty-call loop, and print
 * "tg_result <name> <net ticks> <n_calls>". Returns the net ticks. */
uint64_t tg_bench_report(const char *name, tg_bench_fn fn, uint32_t n_rows, uint32_t n_calls);

extern volatile int tg_bench_sink;

#endif
