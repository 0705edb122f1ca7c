/* Reads rows of TG_N_FEATURES float32 inputs from TG_IN_PATH and writes one byte per row, the class
 * index of the float entry point TG_PREDICT (tg_<name>_predict), to TG_OUT_PATH (semihosting files on
 * an emulated core: tests/device/test_hifive1_float_entry.py). Build with -DTG_HEADER='"name.h"'
 * -DTG_PREDICT=tg_name_predict -DTG_N_FEATURES=n -DTG_IN_PATH=... -DTG_OUT_PATH=... Not shipped. */
#include <stdint.h>
#include <stdio.h>

#include TG_HEADER

#define TG_CHUNK 64

int main(void)
{
    static float rows[TG_CHUNK][TG_N_FEATURES];
    static unsigned char classes[TG_CHUNK];
    FILE *in = fopen(TG_IN_PATH, "rb");
    FILE *out = fopen(TG_OUT_PATH, "wb");
    size_t n, r;

    if (in == NULL || out == NULL) {
        return 2;
    }
    while ((n = fread(rows, sizeof rows[0], TG_CHUNK, in)) > 0) { /* blocks: few semihosting calls */
        for (r = 0; r < n; r++) {
            classes[r] = (unsigned char)TG_PREDICT(rows[r]);
        }
        if (fwrite(classes, 1, n, out) != n) {
            return 1;
        }
    }
    return fclose(out) == 0 ? 0 : 1;
}
