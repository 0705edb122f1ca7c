/*
 * tg_simavr_board.c -- treegen's emulated AVR board: simavr's core runs an AVR ELF unchanged, its
 * USART bridged to one TCP client, CPU cycles counted exactly and repeatably
 *
 * Part of treegen (templates/simavr/): compiled for the host on first use by treegen.device.simavr
 * against libsimavr (Debian: simavr, libsimavr-dev) and cached by the hash of this source.
 *
 *   tg_simavr_board --mcu atmega328p --freq 16000000 --port PORT [--host 127.0.0.1] [--uart 0] FIRMWARE.elf
 *
 * It loads the ELF (the image a board is flashed with), listens on HOST:PORT and waits for one client
 * before the first instruction runs (so no early output is lost; QEMU's server=on,wait=on). A client
 * that disconnects is replaced by the next one that connects. Bytes the firmware writes to UDRn go to
 * the client (TCP_NODELAY); bytes from the client go into the USART's receiver.
 *
 * Determinism. simavr counts CPU cycles exactly (Timer1 at clk/1 reads avr->cycle), but a cycle count
 * measured by the firmware also depends on WHEN input arrived: Timer1's overflow interrupt lands in a
 * measured span or not depending on the phase of the clock when the request came in. So input enters
 * the simulation only at fixed simulated instants, never at host-timing-dependent ones:
 *   - a "gate" cycle timer fires every TG_GATE_CYCLES cycles (the 16-bit Timer1 period);
 *   - only at a gate, and only while the CPU is asleep with every byte received so far consumed (the
 *     harness waits for input in SLEEP: nothing left to do; it also sleeps between the bytes of a
 *     frame, while the USART still holds some), is the socket read; the simulation stops there until
 *     the client sends something, so waiting for the host costs no simulated time and no host CPU;
 *   - bytes read are handed to the USART as its receiver accepts them (below).
 * The firmware's timeline from one request to its reply is then a function of the bytes alone: two
 * runs report the same cycle counts. A firmware that never sleeps never receives input.
 *
 * Receive readiness: simavr's USART keeps a small input FIFO and announces on its XOFF line when that
 * FIFO is full (a byte raised then would be dropped with an overrun) and on XON when it has drained
 * (raised as the firmware reads UDRn or polls the status register with the FIFO empty). Bytes are raised
 * only while the last word was XON; raised bytes are paced by the USART model itself (one RXC per
 * frame time at the configured baud rate). Before the firmware enables the receiver (RXEN) nothing is
 * raised: simavr discards input to a disabled receiver.
 *
 * Exit status: 0 when the firmware stops (SLEEP with interrupts off), 3 when simavr reports a crash,
 * 2 for bad arguments or an unreadable ELF, 1 for socket errors.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <avr_uart.h>
#include <sim_avr.h>
#include <sim_cycle_timers.h>
#include <sim_elf.h>
#include <sim_io.h>
#include <sim_irq.h>

#define TG_GATE_CYCLES 65536u       /* input gate period: Timer1's (16-bit, clk/1) overflow period */
#define TG_IN_CAP 4096u             /* bytes read from the client per gate, at most */
#define TG_OUT_CAP 4096u            /* bytes of firmware output buffered before a send */
#define TG_FLUSH_STEPS 2048u        /* simulation steps between output flushes while the CPU runs */

static struct {
    avr_t *avr;
    avr_irq_t *uart_in;             /* UART_IRQ_INPUT: a byte into the receiver */
    int listen_fd;
    int conn_fd;                    /* -1: no client */
    uint8_t in[TG_IN_CAP];          /* read from the client, not yet handed to the USART */
    size_t in_pos;
    size_t in_len;
    uint8_t out[TG_OUT_CAP];        /* written by the firmware, not yet sent */
    size_t out_len;
    int rx_blocked;                 /* 1 until the USART announces room (XON), again on XOFF */
    int rx_queued;                  /* bytes handed to the USART since it last reported its FIFO empty */
} tg;

static void tg_fail(int status, const char *what)
{
    fprintf(stderr, "tg_simavr_board: %s\n", what);
    exit(status);
}

static void tg_fail_errno(const char *what)
{
    fprintf(stderr, "tg_simavr_board: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void tg_drop_client(void)
{
    if (tg.conn_fd >= 0) {
        close(tg.conn_fd);
    }
    tg.conn_fd = -1;
    tg.out_len = 0u;
}

static void tg_accept_client(void)
{
    int one = 1;
    int fd;

    do {
        fd = accept(tg.listen_fd, NULL, NULL);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        tg_fail_errno("accept");
    }
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, (socklen_t)sizeof one) != 0) {
        tg_fail_errno("setsockopt TCP_NODELAY");
    }
    tg.conn_fd = fd;
}

static void tg_flush_output(void)
{
    size_t sent = 0u;

    while (sent < tg.out_len && tg.conn_fd >= 0) {
        ssize_t n = send(tg.conn_fd, tg.out + sent, tg.out_len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            tg_drop_client();               /* the client went away: its output goes nowhere */
            return;
        }
        sent += (size_t)n;
    }
    tg.out_len = 0u;
}

/* block until the client sends at least one byte (accepting a new client if the last one left) */
static void tg_read_input(void)
{
    for (;;) {
        ssize_t n;
        if (tg.conn_fd < 0) {
            tg_accept_client();
        }
        n = recv(tg.conn_fd, tg.in, sizeof tg.in, 0);
        if (n > 0) {
            tg.in_pos = 0u;
            tg.in_len = (size_t)n;
            return;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        tg_drop_client();
    }
}

/* hand buffered bytes to the USART while it has room */
static void tg_feed_receiver(void)
{
    while (tg.rx_blocked == 0 && tg.in_pos < tg.in_len) {
        uint8_t byte = tg.in[tg.in_pos];
        tg.in_pos++;
        tg.rx_queued = 1;
        avr_raise_irq(tg.uart_in, byte);    /* may raise XOFF (FIFO now full) before it returns */
    }
}

static void tg_on_output(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    if (tg.conn_fd < 0) {
        return;
    }
    if (tg.out_len == sizeof tg.out) {
        tg_flush_output();
    }
    tg.out[tg.out_len] = (uint8_t)value;
    tg.out_len++;
}

static void tg_on_xon(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    if (value != 0u) {
        tg.rx_blocked = 0;
        tg.rx_queued = 0;                   /* XON is raised with the FIFO empty */
        tg_feed_receiver();
    }
}

static void tg_on_xoff(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    if (value != 0u) {
        tg.rx_blocked = 1;
    }
}

/* the input gate (see the top of the file) */
static avr_cycle_count_t tg_gate(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)param;
    tg_flush_output();
    if (avr->state == cpu_Sleeping && tg.in_pos == tg.in_len && tg.rx_queued == 0) {
        tg_read_input();
    }
    tg_feed_receiver();
    return when + TG_GATE_CYCLES;
}

/* SLEEP costs no host time: simavr's default would wait to keep simulated time near wall time */
static void tg_sleep(struct avr_t *avr, avr_cycle_count_t how_long)
{
    (void)avr;
    (void)how_long;
}

static unsigned long tg_number(const char *text, const char *what, unsigned long max)
{
    char *end = NULL;
    unsigned long v;

    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v == 0u || v > max) {
        fprintf(stderr, "tg_simavr_board: %s %s is not a number 1..%lu\n", what, text, max);
        exit(2);
    }
    return v;
}

static void tg_listen(const char *host, unsigned long port)
{
    struct sockaddr_in addr;
    int one = 1;

    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        tg_fail(2, "--host must be an IPv4 address");
    }
    tg.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (tg.listen_fd < 0) {
        tg_fail_errno("socket");
    }
    if (setsockopt(tg.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, (socklen_t)sizeof one) != 0) {
        tg_fail_errno("setsockopt SO_REUSEADDR");
    }
    if (bind(tg.listen_fd, (struct sockaddr *)&addr, (socklen_t)sizeof addr) != 0) {
        tg_fail_errno("bind");                 /* "Address already in use": the caller picks another port */
    }
    if (listen(tg.listen_fd, 1) != 0) {
        tg_fail_errno("listen");
    }
}

int main(int argc, char **argv)
{
    const char *mcu = "atmega328p";
    const char *host = "127.0.0.1";
    const char *elf = NULL;
    unsigned long freq = 16000000u;
    unsigned long port = 0u;
    char uart = '0';
    elf_firmware_t fw;
    uint32_t uart_flags = 0u;
    uint32_t uart_irqs;
    uint32_t steps = 0u;
    int i;
    int state;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mcu") == 0 && i + 1 < argc) {
            mcu = argv[++i];
        } else if (strcmp(argv[i], "--freq") == 0 && i + 1 < argc) {
            freq = tg_number(argv[++i], "--freq", 100000000u);
        } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            port = tg_number(argv[++i], "--port", 65535u);
        } else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
            host = argv[++i];
        } else if (strcmp(argv[i], "--uart") == 0 && i + 1 < argc && strlen(argv[i + 1]) == 1u) {
            uart = argv[++i][0];
        } else if (argv[i][0] != '-' && elf == NULL) {
            elf = argv[i];
        } else {
            fprintf(stderr, "tg_simavr_board: unexpected argument %s\n", argv[i]);
            return 2;
        }
    }
    if (elf == NULL || port == 0u) {
        tg_fail(2, "usage: tg_simavr_board --port PORT [--mcu NAME] [--freq HZ] [--host IP] [--uart N] FIRMWARE.elf");
    }

    memset(&fw, 0, sizeof fw);
    if (elf_read_firmware(elf, &fw) != 0 || fw.flash == NULL) {
        fprintf(stderr, "tg_simavr_board: cannot read the AVR ELF %s\n", elf);
        return 2;
    }
    tg.avr = avr_make_mcu_by_name(mcu);
    if (tg.avr == NULL) {
        fprintf(stderr, "tg_simavr_board: simavr has no core named %s\n", mcu);
        return 2;
    }
    avr_init(tg.avr);
    fw.frequency = (uint32_t)freq;
    avr_load_firmware(tg.avr, &fw);
    tg.avr->frequency = (uint32_t)freq;
    tg.avr->log = LOG_ERROR;
    tg.avr->sleep = tg_sleep;

    /* no console echo of output lines, no host sleeps while the firmware polls the status register */
    if (avr_ioctl(tg.avr, (uint32_t)AVR_IOCTL_UART_SET_FLAGS(uart), &uart_flags) != 0) {
        fprintf(stderr, "tg_simavr_board: %s has no USART%c\n", mcu, uart);
        return 2;
    }
    uart_irqs = (uint32_t)AVR_IOCTL_UART_GETIRQ(uart);
    tg.uart_in = avr_io_getirq(tg.avr, uart_irqs, UART_IRQ_INPUT);
    avr_irq_register_notify(avr_io_getirq(tg.avr, uart_irqs, UART_IRQ_OUTPUT), tg_on_output, NULL);
    avr_irq_register_notify(avr_io_getirq(tg.avr, uart_irqs, UART_IRQ_OUT_XON), tg_on_xon, NULL);
    avr_irq_register_notify(avr_io_getirq(tg.avr, uart_irqs, UART_IRQ_OUT_XOFF), tg_on_xoff, NULL);
    tg.rx_blocked = 1;
    tg.conn_fd = -1;
    avr_cycle_timer_register(tg.avr, TG_GATE_CYCLES, tg_gate, NULL);

    tg_listen(host, port);
    tg_accept_client();

    for (;;) {
        state = avr_run(tg.avr);
        if (state == cpu_Done || state == cpu_Crashed) {
            break;
        }
        if (++steps == TG_FLUSH_STEPS) {
            steps = 0u;
            if (tg.out_len != 0u) {
                tg_flush_output();
            }
        }
    }
    tg_flush_output();
    if (state == cpu_Crashed) {
        fprintf(stderr, "tg_simavr_board: the firmware crashed at pc 0x%05x, cycle %llu\n",
                (unsigned)tg.avr->pc, (unsigned long long)tg.avr->cycle);
        return 3;
    }
    return 0;
}
