/* The Arduino core's main(), reduced to what the stub needs: setup() once, loop() once. */
#include "Arduino.h"

TgStubSerial Serial;

int main(void)
{
    setup();
    loop();
    return 0;
}
