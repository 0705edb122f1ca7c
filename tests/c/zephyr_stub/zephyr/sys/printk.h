/* A minimal stand-in for Zephyr's <zephyr/sys/printk.h>: printk(fmt, ...) as the host's printf (the
 * sample prints only integers and strings: no float conversions, as in Zephyr's printk). */
#ifndef TG_ZEPHYR_STUB_PRINTK_H
#define TG_ZEPHYR_STUB_PRINTK_H

#include <stdio.h>

#define printk(...) ((void)printf(__VA_ARGS__))

#endif
