/*
 * Test driver for the raw-input scaling of a q15 export (tests/emit/test_import_exactness.py; not
 * shipped). Includes the exported source itself (its scaling function is static) and writes, for
 * every float row of TG_NF values in argv[1], the TG_NF int16_t Q15 values TG_SCALE computes.
 *   cc -DTG_SRC='"<name>.c"' -DTG_NF=TG_<NAME>_N_FEATURES -DTG_SCALE=tg_<name>_scale_q15 ...
 */
#include <stdint.h>
#include <stdio.h>

#include TG_SRC

int main(int argc, char **argv)
{
    FILE *in, *out;
    float row[TG_NF];
    int16_t q[TG_NF];
    int status = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s ROWS.bin Q15.bin\n", argv[0]);
        return 2;
    }
    in = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (in == NULL || out == NULL) {
        fprintf(stderr, "cannot open the input or output file\n");
        return 2;
    }
    while (fread(row, sizeof row, 1, in) == 1) {
        TG_SCALE(row, q);
        if (fwrite(q, sizeof q, 1, out) != 1) {
            status = 3;
            break;
        }
    }
    fclose(in);
    if (fclose(out) != 0) {
        status = 3;
    }
    return status;
}
