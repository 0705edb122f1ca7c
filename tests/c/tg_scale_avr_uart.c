/* ATmega328P test program (not shipped): sends 'R', then for every 4-byte little-endian float32
 * received on USART0 sets every feature of a row to it and sends the TG_N_FEATURES int16_t Q15 values
 * of TG_SCALE, little-endian. Register-level USART0 (avr-libc <avr/io.h>), 8N1. Build with
 * -DTG_HEADER='"name.h"' -DTG_SCALE=tg_name_scale_q15 -DTG_N_FEATURES=n. */
#include <stdint.h>

#include <avr/io.h>

#include TG_HEADER

static uint8_t rx(void)
{
    while ((UCSR0A & (1u << RXC0)) == 0u) {
    }
    return UDR0;
}

static void tx(uint8_t b)
{
    while ((UCSR0A & (1u << UDRE0)) == 0u) {
    }
    UDR0 = b;
}

int main(void)
{
    union {
        float f;
        uint8_t b[4];
    } u;
    float x[TG_N_FEATURES];
    int16_t q[TG_N_FEATURES];
    uint8_t i;

    UBRR0H = 0u;
    UBRR0L = 8u; /* 115200 baud at 16 MHz (-3.5 %); QEMU ignores the rate */
    UCSR0B = (uint8_t)((1u << RXEN0) | (1u << TXEN0));
    UCSR0C = (uint8_t)((1u << UCSZ01) | (1u << UCSZ00));
    tx('R');
    for (;;) {
        for (i = 0u; i < 4u; i++) {
            u.b[i] = rx();
        }
        for (i = 0u; i < TG_N_FEATURES; i++) {
            x[i] = u.f;
        }
        TG_SCALE(x, q);
        for (i = 0u; i < TG_N_FEATURES; i++) {
            tx((uint8_t)((uint16_t)q[i] & 0xFFu));
            tx((uint8_t)((uint16_t)q[i] >> 8));
        }
    }
}
