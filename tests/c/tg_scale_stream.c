/* Reads float32 values; for each, sets every feature of a row to it and writes the int16_t Q15
 * values tg_<name>_scale_q15 gives (TG_N_FEATURES per value). Streams stdin -> stdout, or the files
 * TG_IN_PATH -> TG_OUT_PATH when defined (e.g. semihosting on an emulated target). Build with
 * -DTG_HEADER='"name.h"' -DTG_SCALE=tg_name_scale_q15 -DTG_N_FEATURES=n. Not shipped. */
#include <stdint.h>
#include <stdio.h>

#include TG_HEADER

int main(void)
{
    static float v[256];
    static int16_t q[256][TG_N_FEATURES];
    float x[TG_N_FEATURES];
    size_t n, k;
    int i;
#ifdef TG_IN_PATH
    FILE *in = fopen(TG_IN_PATH, "rb"), *out = fopen(TG_OUT_PATH, "wb");

    if (in == NULL || out == NULL) {
        return 2;
    }
#else
    FILE *in = stdin, *out = stdout;
#endif

    while ((n = fread(v, sizeof v[0], 256, in)) > 0) { /* blocks: few semihosting calls */
        for (k = 0; k < n; k++) {
            for (i = 0; i < TG_N_FEATURES; i++) {
                x[i] = v[k];
            }
            TG_SCALE(x, q[k]);
        }
        if (fwrite(q, sizeof q[0], n, out) != n) {
            return 1;
        }
    }
    return fclose(out) == 0 ? 0 : 1;
}
