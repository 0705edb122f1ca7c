"""Emulated twins of real boards (qemu-f446re, qemu-f103c8, qemu-l031k6): QEMU machines running code
built for the board's core with the board's flash and RAM sizes in the linker script, so that a
firmware too large for the real board fails at link time (proven by the build, not estimated).

FAILS (never skips) when arm-none-eabi-gcc or QEMU is missing (scripts/setup.sh).
"""

from __future__ import annotations

import pytest
from pio_projects import require_tools

from treegen import CARTClassifier
from treegen.core import targets
from treegen.core.errors import TreegenError
from treegen.device import platformio as tpio
from treegen.device.emulator import QemuBoard
from treegen.device.protocol import DeviceClient

TWINS = {"qemu-f446re": ("nucleo_f446re", "mps2-an386"), "qemu-f103c8": ("bluepill_f103c8", "mps2-an385"),
         "qemu-l031k6": ("nucleo_l031k6", "mps2-an385")}

#: a static array referenced from a constructor (kept by --gc-sections through .init_array)
OVERSIZE_C = """#include <stdint.h>
volatile uint8_t tg_test_oversize[{n}];
static void tg_test_touch(void) __attribute__((constructor, used));
static void tg_test_touch(void) {{ tg_test_oversize[0] = 1u; }}
"""


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_twin_has_the_boards_core_and_memory(twin):
    board_name, machine = TWINS[twin]
    t, board = targets.get(twin), targets.get(board_name)
    assert t.kind == "emulated" and t.emulator["machine"] == machine
    assert (t.core, t.flash_kb, t.ram_kb, t.dsp, t.fpu) == (board.core, board.flash_kb, board.ram_kb, board.dsp,
                                                             board.fpu)
    assert t.cflags == board.cflags                  # the board's own code generation (M0+ on the M3 machine)


def _model():
    X = [[0, 0], [0, 1], [1, 0], [1, 1]] * 4
    y = [0, 1, 1, 0] * 4
    return CARTClassifier(max_depth=2).fit(X, y).model_


def test_oversize_firmware_fails_at_link_time_on_the_twin_only(tmp_path):
    """The same extra 24 KiB of RAM links for qemu-m3 (4 MiB) and fails for the 20 KiB qemu-f103c8."""
    require_tools()
    model = _model()
    for name, fits in (("qemu-m3", True), ("qemu-f103c8", False)):
        project = tpio.write_project(model, tmp_path / name, target=name, layout="table", variant="auto")
        (project / "src" / "tg_test_oversize.c").write_text(OVERSIZE_C.format(n=24 * 1024))
        if fits:
            tpio.build(project, target=name)
        else:
            with pytest.raises(TreegenError, match=r"too big for qemu-f103c8: needs \d+\.\d KiB RAM, has 20 KiB"):
                tpio.build(project, target=name)
            assert "region `RAM' overflowed" in (project / "build.log").read_text()


def test_m0plus_code_runs_on_the_m3_machine(tmp_path):
    require_tools()
    model = _model()
    project = tpio.write_project(model, tmp_path / "l031", target="qemu-l031k6", layout="table", variant="auto")
    elf = tpio.build(project, target="qemu-l031k6")
    size = tpio.check_size(elf, "qemu-l031k6")
    assert size.flash <= 32 * 1024 and size.ram <= 8 * 1024
    attrs = __import__("subprocess").run(["arm-none-eabi-readelf", "-A", str(elf)], capture_output=True,
                                         text=True).stdout
    assert "Tag_CPU_arch: v6S-M" in attrs or "v6-M" in attrs     # ARMv6-M code, not ARMv7-M
    with QemuBoard("qemu-l031k6", elf) as board, DeviceClient.open(board.url, timeout=20) as client:
        assert client.predict([[0, 32767]])[0] == 1 and client.predict([[32767, 32767]])[0] == 0
