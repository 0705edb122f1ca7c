"""treegen.device.emulator.QemuBoard and the bare-metal pieces of the emulated targets (startup_cortexm.c,
cortexm.ld, tg_port_cmsdk_uart.c), with a minimal firmware on QEMU mps2-an385/an386/an500 and the
TrustZone images mps2-an505 (Cortex-M33) and mps3-an547 (Cortex-M55: other memory map, UART base,
RX interrupt and SysTick clock) talking over the socket UART through pyserial.

These tests FAIL (never skip) when arm-none-eabi-gcc or qemu-system-arm is missing: scripts/setup.sh
installs them.
"""

from __future__ import annotations

import dataclasses
import math
import socket
import subprocess
import time
from pathlib import Path

import pytest
import serial
from export_models import make_model, small_axis_tree
from pio_projects import require_tools

from treegen.core import targets
from treegen.core.errors import TreegenError
from treegen.device.emulator import QemuBoard, _proc_listening, free_port
from treegen.device.firmware import write_harness
from treegen.device.platformio import write_baremetal

EMULATED = ("qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55")
STRICT = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic")
SPIN_ITERATIONS = 100000            # the asm loop below: exactly 2 instructions per iteration

# A minimal firmware on the real port and startup code. Commands (one byte each):
#   'I' -> 4 bytes: .data initialised, .bss zeroed, float arithmetic (FPU enabled on M4F/M7), unit
#   'C' -> u32 counter delta around exactly 2 * SPIN_ITERATIONS instructions
#   'B' -> spins ~40 M instructions (bytes sent meanwhile wait in the RX ring buffer), then 'b'
#   anything else -> echoed with bit 5 flipped
MAIN_C = r"""
#include <stdint.h>
#include "tg_port.h"

static volatile float tg_f = 1.5f;
static int32_t tg_initialised = 12345;
static volatile uint8_t tg_zeroed[64];

static void tg_spin(uint32_t n)
{
    __asm volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

int main(void)
{
    tg_port_init();
    for (;;) {
        int c = tg_port_getc();
        if (c == 'I') {
            uint8_t z = 0u;
            uint32_t i;
            float f = tg_f * 3.0f;
            uint8_t out[4];
            for (i = 0u; i < 64u; ++i) {
                z = (uint8_t)(z | tg_zeroed[i]);
            }
            out[0] = (uint8_t)(tg_initialised == 12345);
            out[1] = (uint8_t)(z == 0u);
            out[2] = (uint8_t)(f == 4.5f);
            out[3] = tg_port_counter_unit();
            tg_port_write(out, 4u);
        } else if (c == 'C') {
            uint32_t a = tg_port_counter();
            uint32_t b;
            uint32_t d;
            uint8_t out[4];
            tg_spin(TG_SPIN_ITERATIONSu);
            b = tg_port_counter();
            d = (b - a) & TG_COUNTER_MASK;
            out[0] = (uint8_t)d;
            out[1] = (uint8_t)(d >> 8);
            out[2] = (uint8_t)(d >> 16);
            out[3] = (uint8_t)(d >> 24);
            tg_port_write(out, 4u);
        } else if (c == 'B') {
            uint8_t ack = (uint8_t)'b';
            tg_spin(20000000u);
            tg_port_write(&ack, 1u);
        } else if (c >= 0) {
            uint8_t e = (uint8_t)(c ^ 0x20);
            tg_port_write(&e, 1u);
        }
    }
}
""".replace("TG_SPIN_ITERATIONS", str(SPIN_ITERATIONS))


@pytest.fixture(scope="module")
def tools():
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")


def build_minimal(target_name: str, out: Path) -> Path:
    """Compile MAIN_C with the rendered port (write_harness), startup and linker script: strict C99."""
    t = targets.get(target_name)
    src = out / "src"
    write_harness(make_model([small_axis_tree()], 3, 3), src, target=t)
    write_baremetal(src)
    (src / "main.c").write_text(MAIN_C)
    elf = out / "fw.elf"
    emu = t.emulator
    # what the PlatformIO board manifest passes (treegen.device.platformio): UART, RX IRQ, SysTick ratio
    defines = [f"-DTG_UART_BASE={emu['uart_base']:#x}u", f"-DTG_UART_RX_IRQ={emu.get('uart_irq', 0)}",
               f"-DTG_INSNS_PER_TICK_Q8={256_000_000_000 // t.clock_hz}u"]
    cmd = ["arm-none-eabi-gcc", *t.cflags, *STRICT, *defines, "-ffunction-sections", "-fdata-sections", "-I", str(src),
           "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs", "-T", str(src / "cortexm.ld"),
           f"-Wl,--defsym=TG_FLASH_SIZE={t.flash_bytes}", f"-Wl,--defsym=TG_RAM_SIZE={t.ram_bytes}",
           f"-Wl,--defsym=TG_FLASH_ORIGIN={emu.get('flash_base', 0)}",
           f"-Wl,--defsym=TG_RAM_ORIGIN={emu.get('ram_base', 0x20000000)}",
           "-Wl,--gc-sections", "-o", str(elf),
           str(src / "main.c"), str(src / "startup_cortexm.c"), str(src / "tg_port_cmsdk_uart.c")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return elf


@pytest.fixture(scope="module")
def firmware(tools, tmp_path_factory):
    root = tmp_path_factory.mktemp("qemu-min")
    return {t: build_minimal(t, root / t) for t in EMULATED}


def read_exact(link, n: int) -> bytes:
    data = link.read(n)
    assert len(data) == n, f"timeout: got {data!r}, expected {n} bytes"
    return data


# ---------------------------------------------------------------------- the minimal firmware
@pytest.mark.parametrize("target", EMULATED)
def test_boot_and_exchange_bytes(firmware, target):
    with QemuBoard(target, firmware[target]) as board:
        assert board.url == f"socket://127.0.0.1:{board.port}"
        link = serial.serial_for_url(board.url, timeout=10)
        try:
            # startup: .data copied, .bss zeroed, float works (hardware FPU enabled on M4F / M7)
            link.write(b"I")
            assert read_exact(link, 4) == b"\x01\x01\x01\x00"          # unit 0 = instructions
            # a larger exchange: every byte arrives, in order (RX interrupt + ring buffer)
            payload = bytes(b for b in range(256) if b not in b"ICB" and (b ^ 0x20) not in b"ICB") * 8
            link.write(payload)
            assert read_exact(link, len(payload)) == bytes(b ^ 0x20 for b in payload)
            # bytes sent while the firmware is busy wait in the RX buffer
            link.write(b"B" + b"x" * 200)
            assert read_exact(link, 1 + 200) == b"b" + b"X" * 200
        finally:
            link.close()
        assert board.poll() is None


@pytest.mark.parametrize("target", EMULATED)
def test_counter_counts_instructions(firmware, target):
    """SysTick under -icount shift=0 (1 instruction = 1 ns) ticks every 40 instructions at 25 MHz
    (mps2), 50 at 20 MHz (AN505), 31.25 at 32 MHz (AN547); the port reports instructions, to one tick."""
    tick = 1e9 / targets.get(target).clock_hz
    with QemuBoard(target, firmware[target]) as board:
        link = serial.serial_for_url(board.url, timeout=10)
        try:
            counts = []
            for _ in range(3):
                link.write(b"C")
                counts.append(int.from_bytes(read_exact(link, 4), "little"))
        finally:
            link.close()
    for n in counts:
        assert abs(n - 2 * SPIN_ITERATIONS) <= math.ceil(tick), counts   # one tick, counts rounded down
        if tick == int(tick):
            assert n % int(tick) == 0


def test_link_and_sizes(firmware):
    for target, elf in firmware.items():
        out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True).stdout
        symbols = {line.split()[-1]: line.split()[0] for line in out.splitlines() if len(line.split()) == 3}
        t = targets.get(target)
        flash_base, ram_base = t.emulator.get("flash_base", 0), t.emulator.get("ram_base", 0x20000000)
        # the vector table at the start of code memory (AN505: the VTOR_S reset value 0x10000000)
        assert int(symbols["tg_vector_table"], 16) == flash_base, target
        assert int(symbols["_estack"], 16) == ram_base + t.ram_kb * 1024, target   # stack at the end of RAM
        # the UART RX handler fills the vector of the board's RX interrupt (tg_port_cmsdk_uart.c)
        assert f"IRQ{t.emulator.get('uart_irq', 0)}_Handler" in symbols
    assert targets.get("qemu-m4").ram_kb == 4096   # mps.ssram23 at 0x20000000, 4 MiB


# ---------------------------------------------------------------------- QemuBoard
def test_qemu_is_killed_on_exit_and_on_error(firmware):
    with QemuBoard("qemu-m4", firmware["qemu-m4"]) as board:
        proc = board.process
        link = serial.serial_for_url(board.url, timeout=10)
        link.write(b"I")
        read_exact(link, 4)
        link.close()
    assert proc.poll() is not None and board.process is None
    with pytest.raises(RuntimeError, match="boom"):
        with QemuBoard("qemu-m3", firmware["qemu-m3"]) as board:
            proc = board.process
            raise RuntimeError("boom")
    assert proc.poll() is not None


def test_waits_for_the_client(firmware):
    """wait=on: QEMU holds the boot until the client connects, so nothing is lost; it listens at once."""
    with QemuBoard("qemu-m7", firmware["qemu-m7"]) as board:
        time.sleep(0.3)
        assert board.poll() is None
        with socket.create_connection(("127.0.0.1", board.port), timeout=5) as s:
            s.sendall(b"a")
            s.settimeout(10)
            assert s.recv(1) == b"A"


def test_fixed_port(firmware):
    port = free_port()
    with QemuBoard("qemu-m3", firmware["qemu-m3"], port=port) as board:
        assert board.url == f"socket://127.0.0.1:{port}"
        link = serial.serial_for_url(board.url, timeout=10)
        link.write(b"q")
        assert read_exact(link, 1) == b"Q"
        link.close()


def _with_emulator(name: str, **changes) -> targets.Target:
    t = targets.get(name)
    extra = dict(t.extra)
    extra["emulator"] = {**t.emulator, **changes}
    return dataclasses.replace(t, extra=extra)


def test_missing_qemu_is_a_clear_error(firmware):
    t = _with_emulator("qemu-m4", qemu="qemu-system-does-not-exist")
    with pytest.raises(TreegenError, match=r"qemu-system-does-not-exist not found: install QEMU") as info:
        QemuBoard(t, firmware["qemu-m4"]).start()
    assert "\n" not in str(info.value)


def test_early_exit_reports_qemu_stderr(firmware):
    t = _with_emulator("qemu-m4", machine="no-such-board")
    expected = r"QEMU \(no-such-board\) exited early with status \d+: qemu-system-arm: unsupported machine type"
    with pytest.raises(TreegenError, match=expected) as info:
        with QemuBoard(t, firmware["qemu-m4"]):
            pass
    assert "\n" not in str(info.value)


def test_bad_arguments(tmp_path, firmware):
    with pytest.raises(TreegenError, match="not an emulated board"):
        QemuBoard("nucleo_f446re", firmware["qemu-m4"])
    with pytest.raises(TreegenError, match="not found"):
        QemuBoard("qemu-m4", tmp_path / "missing.elf").start()
    board = QemuBoard("qemu-m4", firmware["qemu-m4"])
    with pytest.raises(TreegenError, match="not running"):
        board.url
    board.close()   # idempotent, nothing started


def test_missing_qemu_names_its_debian_package(tmp_path, monkeypatch):
    """qemu-system-riscv32 (qemu-hifive1) comes with Debian's qemu-system-misc, not qemu-system-arm."""
    from treegen.device import emulator

    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    monkeypatch.setattr(emulator.shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(TreegenError, match=r"qemu-system-riscv32 not found: install QEMU \(Debian package "
                                           r"qemu-system-misc, see scripts/setup.sh\) to run the emulated target "
                                           r"qemu-hifive1$"):
        QemuBoard("qemu-hifive1", elf).start()


def test_a_port_another_process_listens_on_is_not_our_boards():
    """Parallel test workers may start two QEMUs on the same free port at once: the one that lost the
    race must not take the winner's listening socket for its own (the board's readiness check looks
    for a listening socket of *its* process)."""
    import os
    import socket
    import subprocess

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        other = subprocess.Popen(["sleep", "30"])
        try:
            assert _proc_listening(port) is True
            assert _proc_listening(port, os.getpid()) is True
            assert _proc_listening(port, other.pid) is False
        finally:
            other.kill()
            other.wait()
    assert _proc_listening(port, os.getpid()) is False


def _cpu_seconds(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m55"])
def test_an_idle_board_uses_no_host_cpu(firmware, target):
    """A booted board waiting for its next request (WFI in tg_port_getc) sleeps on the host: QEMU runs
    with -icount sleep=on. With sleep=off an idle QEMU jumped virtual time from one SysTick deadline to
    the next as fast as it could: 0.35-0.6 s of CPU per second of waiting (measured), taken from
    every other job of the machine."""
    with QemuBoard(target, firmware[target]) as board:
        link = serial.serial_for_url(board.url, timeout=10)
        try:
            link.write(b"I")
            read_exact(link, 4)                       # booted and calibrated: now waiting in WFI
            before = _cpu_seconds(board.process.pid)
            time.sleep(2.0)
            used = _cpu_seconds(board.process.pid) - before
            link.write(b"a")
            assert read_exact(link, 1) == b"A"        # and it still answers
        finally:
            link.close()
    assert used < 0.15, f"QEMU used {used:.2f} s of CPU in 2 s of waiting"
