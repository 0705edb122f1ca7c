/*
 * Fuzz driver for the generated frame parser/builder (templates/firmware/tg_protocol.c).
 * Built by tests/device/test_fuzz_protocol.py with -fsanitize=address,undefined -fno-sanitize-recover=all.
 *
 *   fuzz_protocol run SEED ITERATIONS MAX_SECONDS
 *       Random byte streams (random bytes, sync-heavy bytes, valid frames, truncated frames, bad CRCs,
 *       oversize LEN headers) fed byte by byte; every event is checked against an independent
 *       table-driven CRC; after every stream a flush (TG_MAX_PAYLOAD + 8 zero bytes) followed by a
 *       valid frame must give exactly that frame (resynchronisation), and so must a valid frame right
 *       after an oversize header, after a bad-CRC frame, or after garbage without SYNC0.
 *       Prints one summary line; exit 0 = pass, 1 = a check failed (message on stderr).
 *   fuzz_protocol events
 *       stdin: records (u32 LE length, bytes); each record is fed to a fresh parser and the events
 *       are printed, one per line ("F type seq len payloadhex", "C type seq len", "L type seq len"),
 *       then "E". Compared with treegen.device.protocol.FrameParser by the test.
 *   fuzz_protocol info
 *       Prints "max_payload N".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg_protocol.h"

static uint64_t rng_state;
static unsigned long long g_seed;
static unsigned long g_iter;

static uint32_t rnd(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static uint32_t below(uint32_t n)
{
    return n == 0u ? 0u : rnd() % n;
}

#define FAIL(...)                                                                      \
    do {                                                                               \
        fprintf(stderr, "FAIL (seed %llu, iteration %lu): ", g_seed, g_iter);          \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                           \
        exit(1);                                                                       \
    } while (0)

/* ---------------------------------------------------------------- reference CRC (table) */
static uint16_t ref_table[256];

static void ref_init(void)
{
    unsigned i, k;
    for (i = 0; i < 256u; ++i) {
        uint16_t c = (uint16_t)(i << 8);
        for (k = 0; k < 8u; ++k) {
            c = (uint16_t)((c & 0x8000u) ? ((unsigned)(c << 1) ^ 0x1021u) : (unsigned)(c << 1));
        }
        ref_table[i] = c;
    }
}

static uint16_t ref_crc(uint16_t crc, const uint8_t *d, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        crc = (uint16_t)((crc << 8) ^ ref_table[((crc >> 8) ^ d[i]) & 0xFFu]);
    }
    return crc;
}

static uint16_t ref_frame_crc(const tg_parser_t *p)
{
    uint8_t h[4];
    h[0] = (uint8_t)(p->len & 0xFFu);
    h[1] = (uint8_t)(p->len >> 8);
    h[2] = p->type;
    h[3] = p->seq;
    return ref_crc(ref_crc(0xFFFFu, h, 4), p->payload, p->len);
}

/* ---------------------------------------------------------------- checked feeding */
static unsigned long n_frames, n_bad_crc, n_bad_len, n_probes, n_bytes;

static tg_parse_result_t feed(tg_parser_t *p, uint8_t b)
{
    tg_parse_result_t r = tg_parser_feed(p, b);
    n_bytes++;
    switch (r) {
    case TG_PARSE_FRAME:
        n_frames++;
        if (p->len > TG_MAX_PAYLOAD) FAIL("FRAME with LEN %u > max", (unsigned)p->len);
        if (ref_frame_crc(p) != p->crc_rx) FAIL("FRAME reported but the reference CRC differs");
        break;
    case TG_PARSE_BAD_CRC:
        n_bad_crc++;
        if (p->len > TG_MAX_PAYLOAD) FAIL("BAD_CRC with LEN %u > max", (unsigned)p->len);
        if (ref_frame_crc(p) == p->crc_rx) FAIL("BAD_CRC reported for a frame with a valid CRC");
        break;
    case TG_PARSE_BAD_LENGTH:
        n_bad_len++;
        if (p->len <= TG_MAX_PAYLOAD) FAIL("BAD_LENGTH with LEN %u <= max", (unsigned)p->len);
        break;
    case TG_PARSE_NONE:
        break;
    default:
        FAIL("unknown parse result %d", (int)r);
    }
    return r;
}

/* ---------------------------------------------------------------- stream building */
typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf_t;

static void put(buf_t *s, uint8_t v)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->b = (uint8_t *)realloc(s->b, s->cap);
        if (!s->b) { perror("realloc"); exit(2); }
    }
    s->b[s->n++] = v;
}

/* a valid frame via the builder under test, cross-checked with the reference CRC */
static size_t make_frame(uint8_t *out, uint8_t type, uint8_t seq, uint16_t len)
{
    static uint8_t payload[TG_MAX_PAYLOAD];
    uint16_t i;
    uint32_t n;

    for (i = 0; i < len; ++i) payload[i] = (uint8_t)rnd();
    if (below(4) == 0 && len >= 2) { payload[0] = TG_SYNC0; payload[1] = TG_SYNC1; } /* sync inside payload */
    n = tg_frame_build(out, TG_FRAME_MAX, type, seq, payload, len);
    if (n != (uint32_t)len + TG_FRAME_OVERHEAD) FAIL("tg_frame_build returned %lu for LEN %u", (unsigned long)n, (unsigned)len);
    if (out[0] != TG_SYNC0 || out[1] != TG_SYNC1 || out[4] != type || out[5] != seq) FAIL("bad frame header");
    if (ref_crc(0xFFFFu, out + 2, (size_t)len + 4u) != (uint16_t)(out[6 + len] | (out[7 + len] << 8)))
        FAIL("builder CRC differs from the reference CRC");
    if (memcmp(out + 6, payload, len) != 0) FAIL("builder payload differs");
    return n;
}

static uint16_t rand_len(void)
{
    switch (below(4)) {
    case 0: return 0;
    case 1: return (uint16_t)TG_MAX_PAYLOAD;
    default: return (uint16_t)below(TG_MAX_PAYLOAD + 1u);
    }
}

static void add_segment(buf_t *s)
{
    static uint8_t frame[TG_FRAME_MAX];
    static const uint8_t alphabet[] = {0xA5, 0x5A, 0x00, 0xFF, 0x01, 0x02, 0x03, 0x04, 0x81, 0x40};
    size_t n, i;

    switch (below(7)) {
    case 0: /* random bytes */
        n = below(3u * TG_MAX_PAYLOAD);
        for (i = 0; i < n; ++i) put(s, (uint8_t)rnd());
        break;
    case 1: /* sync-heavy bytes */
        n = below(64);
        for (i = 0; i < n; ++i) put(s, alphabet[below(sizeof alphabet)]);
        break;
    case 2: /* a valid frame */
        n = make_frame(frame, (uint8_t)rnd(), (uint8_t)rnd(), rand_len());
        for (i = 0; i < n; ++i) put(s, frame[i]);
        break;
    case 3: /* a truncated frame */
        n = make_frame(frame, (uint8_t)rnd(), (uint8_t)rnd(), rand_len());
        n = below((uint32_t)n);
        for (i = 0; i < n; ++i) put(s, frame[i]);
        break;
    case 4: /* a frame with one flipped bit (CRC, payload, TYPE, SEQ or LEN) */
        n = make_frame(frame, (uint8_t)rnd(), (uint8_t)rnd(), rand_len());
        i = 2u + below((uint32_t)n - 2u);
        frame[i] ^= (uint8_t)(1u << below(8));
        for (i = 0; i < n; ++i) put(s, frame[i]);
        break;
    case 5: /* an oversize LEN header, with some of the announced payload */
        put(s, TG_SYNC0);
        put(s, TG_SYNC1);
        {
            uint32_t len = TG_MAX_PAYLOAD + 1u + below(65535u - TG_MAX_PAYLOAD);
            put(s, (uint8_t)(len & 0xFFu));
            put(s, (uint8_t)(len >> 8));
        }
        put(s, (uint8_t)rnd());
        put(s, (uint8_t)rnd());
        n = below(2u * TG_MAX_PAYLOAD);
        for (i = 0; i < n; ++i) put(s, (uint8_t)rnd());
        break;
    default: /* runs of SYNC0 */
        n = 1u + below(8);
        for (i = 0; i < n; ++i) put(s, TG_SYNC0);
        break;
    }
}

/* feed a fresh valid frame; it must be recognised exactly at its last byte */
static void probe(tg_parser_t *p, const char *after)
{
    static uint8_t frame[TG_FRAME_MAX];
    uint8_t type = (uint8_t)rnd(), seq = (uint8_t)rnd();
    uint16_t len = rand_len();
    size_t n = make_frame(frame, type, seq, len), i;

    n_probes++;
    for (i = 0; i < n; ++i) {
        tg_parse_result_t r = feed(p, frame[i]);
        if (i + 1 < n && r != TG_PARSE_NONE) FAIL("probe frame after %s: event %d at byte %lu of %lu", after, (int)r,
                                               (unsigned long)i, (unsigned long)n);
        if (i + 1 == n) {
            if (r != TG_PARSE_FRAME) FAIL("probe frame after %s not recognised (result %d)", after, (int)r);
            if (p->type != type || p->seq != seq || p->len != len || memcmp(p->payload, frame + 6, len) != 0)
                FAIL("probe frame after %s decoded wrongly", after);
        }
    }
}

static void flush_zeros(tg_parser_t *p)
{
    unsigned i;
    for (i = 0; i < TG_MAX_PAYLOAD + 8u; ++i) (void)feed(p, 0u);
}

static int run(unsigned long long seed, unsigned long iterations, double max_seconds)
{
    tg_parser_t p;
    buf_t s = {NULL, 0, 0};
    clock_t t0 = clock();
    uint8_t crc_in[9] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
    size_t i;

    g_seed = seed;
    rng_state = seed * 0x2545F4914F6CDD1Dull + 1u;
    ref_init();
    if (tg_crc16(crc_in, 9) != 0x29B1u) FAIL("CRC-16/CCITT-FALSE(\"123456789\") = 0x%04X", tg_crc16(crc_in, 9));
    if (tg_crc16_update(tg_crc16(crc_in, 4), crc_in + 4, 5) != 0x29B1u) FAIL("tg_crc16_update does not chain");
    {
        uint8_t small[TG_FRAME_OVERHEAD + 4];
        uint8_t pl[4] = {1, 2, 3, 4};
        if (tg_frame_build(small, sizeof small - 1u, 1, 1, pl, 4) != 0u) FAIL("tg_frame_build ignored cap");
        if (tg_frame_finish(small, 1, 1, (uint16_t)(TG_MAX_PAYLOAD + 1u)) != 0u) FAIL("tg_frame_finish accepted LEN > max");
    }

    for (g_iter = 0; g_iter < iterations; ++g_iter) {
        unsigned k, segments;

        if (max_seconds > 0 && (double)(clock() - t0) / CLOCKS_PER_SEC > max_seconds) break;
        tg_parser_init(&p);

        /* 1. a random stream, then flush + probe */
        s.n = 0;
        segments = 1u + below(12);
        for (k = 0; k < segments; ++k) add_segment(&s);
        for (i = 0; i < s.n; ++i) (void)feed(&p, s.b[i]);
        flush_zeros(&p);
        probe(&p, "random stream + flush");

        /* 2. garbage without SYNC0, then a probe (no flush needed) */
        k = below(100);
        while (k--) {
            uint8_t b = (uint8_t)rnd();
            (void)feed(&p, b == TG_SYNC0 ? 0u : b);
        }
        probe(&p, "garbage without SYNC0");

        /* 3. an oversize header: BAD_LENGTH at its SEQ byte, then a probe right away */
        {
            uint32_t len = TG_MAX_PAYLOAD + 1u + below(65535u - TG_MAX_PAYLOAD);
            uint8_t h[6];
            h[0] = TG_SYNC0; h[1] = TG_SYNC1; h[2] = (uint8_t)(len & 0xFFu); h[3] = (uint8_t)(len >> 8);
            h[4] = (uint8_t)rnd(); h[5] = (uint8_t)rnd();
            for (k = 0; k < 6u; ++k) {
                tg_parse_result_t r = feed(&p, h[k]);
                if ((k < 5u && r != TG_PARSE_NONE) || (k == 5u && r != TG_PARSE_BAD_LENGTH))
                    FAIL("oversize header: result %d at byte %u", (int)r, k);
            }
            if (p.len != len || p.type != h[4] || p.seq != h[5]) FAIL("BAD_LENGTH fields wrong");
            probe(&p, "oversize header");
        }

        /* 4. a frame with a corrupted CRC: BAD_CRC at its last byte, then a probe right away */
        {
            static uint8_t frame[TG_FRAME_MAX];
            size_t n = make_frame(frame, (uint8_t)rnd(), (uint8_t)rnd(), rand_len());
            frame[n - 1u - below(2)] ^= (uint8_t)(1u + below(255));
            for (i = 0; i < n; ++i) {
                tg_parse_result_t r = feed(&p, frame[i]);
                if ((i + 1 < n && r != TG_PARSE_NONE) || (i + 1 == n && r != TG_PARSE_BAD_CRC))
                    FAIL("corrupted CRC: result %d at byte %lu of %lu", (int)r, (unsigned long)i, (unsigned long)n);
            }
            probe(&p, "bad CRC frame");
        }

        /* 5. runs of SYNC0 before a frame */
        k = below(5);
        while (k--) (void)feed(&p, TG_SYNC0);
        probe(&p, "SYNC0 run");
    }
    printf("iterations %lu bytes %lu frames %lu bad_crc %lu bad_length %lu probes %lu max_payload %u\n", g_iter,
           n_bytes, n_frames, n_bad_crc, n_bad_len, n_probes, (unsigned)TG_MAX_PAYLOAD);
    free(s.b);
    return 0;
}

static int events(void)
{
    static tg_parser_t p;
    uint8_t hdr[4];
    uint16_t i;

    while (fread(hdr, 1, 4, stdin) == 4) {
        unsigned long n = (unsigned long)hdr[0] | ((unsigned long)hdr[1] << 8) | ((unsigned long)hdr[2] << 16) |
                          ((unsigned long)hdr[3] << 24);
        tg_parser_init(&p);
        while (n--) {
            int c = getchar();
            if (c == EOF) { fprintf(stderr, "truncated record\n"); return 2; }
            switch (tg_parser_feed(&p, (uint8_t)c)) {
            case TG_PARSE_FRAME:
                printf("F %u %u %u ", p.type, p.seq, p.len);
                for (i = 0; i < p.len; ++i) printf("%02x", p.payload[i]);
                printf("\n");
                break;
            case TG_PARSE_BAD_CRC:
                printf("C %u %u %u\n", p.type, p.seq, p.len);
                break;
            case TG_PARSE_BAD_LENGTH:
                printf("L %u %u %u\n", p.type, p.seq, p.len);
                break;
            default:
                break;
            }
        }
        printf("E\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "run") == 0) {
        return run(strtoull(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), atof(argv[4]));
    }
    if (argc == 2 && strcmp(argv[1], "events") == 0) {
        return events();
    }
    if (argc == 2 && strcmp(argv[1], "info") == 0) {
        printf("max_payload %u\n", (unsigned)TG_MAX_PAYLOAD);
        return 0;
    }
    fprintf(stderr, "usage: fuzz_protocol run SEED ITERATIONS MAX_SECONDS | events | info\n");
    return 2;
}
