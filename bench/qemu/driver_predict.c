/* Bench driver: predict every row of bench_rows.h on the target, print the classes, then time them.
 * bench_config.h (generated per implementation) defines TG_INPUT_T, TG_N_FEATURES and
 * TG_PREDICT(x) and declares the model function; bench_rows.h defines TG_N_ROWS and tg_rows.
 * Output: tg_calib, one "tg_pred <i> <class>" per row, "tg_result predict <ticks> <calls>". */
#include <stdint.h>
#include <stdio.h>

#include "bench_config.h"
#include "bench_rows.h"
#include "tg_bench.h"

#ifndef TG_TIME
#define TG_TIME 1
#endif

__attribute__((noipa)) static int call_model(uint32_t i) { return (int)TG_PREDICT(tg_rows[i]); }

int main(void)
{
    tg_ticks_start();
    tg_bench_calibrate();
    for (uint32_t i = 0; i < TG_N_ROWS; i++)
        printf("tg_pred %lu %d\n", (unsigned long)i, call_model(i));
#if TG_TIME
    /* every row once: the mean over the row set (resolution: instructions per tick / TG_N_ROWS) */
    tg_bench_report("predict", call_model, TG_N_ROWS, TG_N_ROWS);
#endif
    return 0;
}
