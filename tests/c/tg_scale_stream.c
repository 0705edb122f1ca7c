/* Reads float32 values from stdin; for each, sets every feature of a row to it and writes the
 * int16_t Q15 values tg_<name>_scale_q15 gives (TG_N_FEATURES per value) to stdout. Build with
 * -DTG_HEADER='"name.h"' -DTG_SCALE=tg_name_scale_q15 -DTG_N_FEATURES=n. */
#include <stdint.h>
#include <stdio.h>

#include TG_HEADER

int main(void)
{
    float x[TG_N_FEATURES], v;
    int16_t q[TG_N_FEATURES];
    int i;

    while (fread(&v, sizeof v, 1, stdin) == 1) {
        for (i = 0; i < TG_N_FEATURES; i++) {
            x[i] = v;
        }
        TG_SCALE(x, q);
        if (fwrite(q, sizeof q[0], TG_N_FEATURES, stdout) != TG_N_FEATURES) {
            return 1;
        }
    }
    return 0;
}
