/*
 * Test driver for exported models (tests/emit/test_export_agreement.py; not shipped).
 *
 * Reads rows of TG_NF inputs from the binary file argv[1] (native byte order; int16_t Q15 rows, or
 * float raw rows when TG_INPUT_FLOAT is defined) and writes one byte per row, the class index
 * returned by TG_PREDICT, to argv[2]. Built with the model's header force-included:
 *   cc -include <name>.h -DTG_NF=TG_<NAME>_N_FEATURES -DTG_PREDICT=tg_<name>_predict_q15 ...
 * With -DTG_PROBA=tg_<name>_predict_proba[_q15] -DTG_NC=<classes> it writes, per row, the class byte
 * followed by the TG_NC uint16_t probabilities (native byte order).
 */
#include <stdint.h>
#include <stdio.h>

#ifdef TG_INPUT_FLOAT
typedef float tg_input_t;
#else
typedef int16_t tg_input_t;
#endif

#ifndef TG_CHUNK
#define TG_CHUNK 4096 /* rows per read; -DTG_CHUNK=... for small RAM */
#endif

static tg_input_t rows[TG_CHUNK][TG_NF];
static unsigned char classes[TG_CHUNK];
#ifdef TG_PROBA
static uint16_t proba[TG_NC];
#endif

int main(int argc, char **argv)
{
    FILE *in, *out;
    size_t n, r;
    int status = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s ROWS.bin CLASSES.bin\n", argv[0]);
        return 2;
    }
    in = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (in == NULL || out == NULL) {
        fprintf(stderr, "cannot open the input or output file\n");
        return 2;
    }
    while ((n = fread(rows, sizeof rows[0], TG_CHUNK, in)) > 0) {
#ifdef TG_PROBA
        for (r = 0; r < n; r++) {
            classes[0] = (unsigned char)TG_PREDICT(rows[r]);
            TG_PROBA(rows[r], proba);
            if (fwrite(classes, 1, 1, out) != 1 || fwrite(proba, sizeof proba, 1, out) != 1) {
                status = 3;
                break;
            }
        }
#else
        for (r = 0; r < n; r++) {
            classes[r] = (unsigned char)TG_PREDICT(rows[r]);
        }
        if (fwrite(classes, 1, n, out) != n) {
            status = 3;
            break;
        }
#endif
    }
    if (ferror(in)) {
        status = 4;
    }
    fclose(in);
    if (fclose(out) != 0) {
        status = 3;
    }
    return status;
}
