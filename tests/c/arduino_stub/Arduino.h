/* A tiny stand-in for the Arduino core's Arduino.h (no Arduino core is installed here): just the
 * Serial calls that the example sketch of `treegen export --lib-layout arduino --example` makes, printing
 * to stdout. Used by tests/emit/test_export_in_app.py to compile the sketch as C++ the way an
 * Arduino build does (.ino as C++, the library sources as C) and run it on the host. */
#ifndef TG_ARDUINO_STUB_H
#define TG_ARDUINO_STUB_H

#include <stdio.h>

class TgStubSerial {
public:
    void begin(unsigned long baud) { (void)baud; }
    void print(const char *s) { fputs(s, stdout); }
    void print(int v) { printf("%d", v); }
    void println(const char *s) { printf("%s\n", s); }
    void println(int v) { printf("%d\n", v); }
    void print(long v) { printf("%ld", v); }
    void println(long v) { printf("%ld\n", v); }
    void print(double v, int digits) { printf("%.*f", digits, v); }
    void println(double v, int digits) { printf("%.*f\n", digits, v); }
};

extern TgStubSerial Serial;

void setup(void);
void loop(void);

#endif
