/* A minimal stand-in for Zephyr's <zephyr/kernel.h> (Zephyr is not installable offline): what the
 * sample of `treegen export --lib-layout zephyr --example` uses from it, nothing. Used by
 * tests/emit/test_library_portable.py to compile and run the sample's src/main.c on the host. */
#ifndef TG_ZEPHYR_STUB_KERNEL_H
#define TG_ZEPHYR_STUB_KERNEL_H

#include <stdint.h>

#endif
