/* Flash-size driver: one call of the model on an input the compiler cannot see (volatile pointer).
 * Built once with the model and once with -DTG_STUB (a trivial function in its place); the
 * difference of the two linked images (--gc-sections) is the model's flash cost, including any
 * library helpers it pulls in (e.g. soft-float double routines). */
#include <stdint.h>

#include "bench_config.h"

static TG_INPUT_T tg_input[TG_N_FEATURES];
TG_INPUT_T *volatile tg_input_ptr = tg_input;

#ifdef TG_STUB
__attribute__((noipa)) static int tg_stub(const TG_INPUT_T *x) { return (int)x[0]; }
#undef TG_PREDICT
#define TG_PREDICT(x) tg_stub(x)
#endif

int main(void) { return TG_PREDICT(tg_input_ptr) == 12345; }
