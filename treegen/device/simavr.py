"""The AVR boards' emulator: simavr, through treegen's own host program on libsimavr.

``templates/simavr/tg_simavr_board.c`` loads the board's ELF (the image it is flashed with) into
simavr's core (``[emulator] mcu``, e.g. ``atmega328p``, at the target's ``clock_hz``), bridges the
USART (``[emulator] uart``, default ``0``) to one TCP client and counts CPU cycles exactly: the
firmware's Timer1 counter reads simavr's cycle count, and input enters the simulation only at fixed
simulated instants, so BENCH and TRAIN report the same cycles in every run (the program's header
says how). It is compiled for the host on first use with :data:`STRICT_CFLAGS` against libsimavr and
cached by the native kernels' compiler step (:func:`treegen.core.native.compile_cached`, in
``simavr/<hash of source, flags and libraries>/``); a missing library is one line naming the Debian packages.

::

    with SimavrBoard("simavr-uno", "firmware.elf") as board:      # or device.emulated.emulated_board
        client = DeviceClient.open(board.url)
"""

from __future__ import annotations

from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.core.native import STRICT_CFLAGS, compile_cached
from treegen.core.resources import templates_dir
from treegen.device.emulator import EmulatorBoard

#: the host program's source, under templates/
SOURCE = "simavr/tg_simavr_board.c"
PROGRAM = "tg_simavr_board"
#: where libsimavr's headers are looked for (Debian: /usr/include/simavr)
INCLUDE_DIRS = ("/usr/include/simavr", "/usr/local/include/simavr")
LIBS = ("-lsimavr",)
OPT_FLAGS = ("-O2",)
#: what to install when the library is missing
PACKAGES = "simavr libsimavr-dev"


def missing_library() -> TreegenError:
    return TreegenError(f"simavr's library is missing: install the Debian packages {PACKAGES} "
                        "(scripts/setup.sh) to run the emulated AVR boards")


def include_dir() -> Path:
    """The folder holding libsimavr's headers (``sim_avr.h``)."""
    for folder in INCLUDE_DIRS:
        if (Path(folder) / "sim_avr.h").is_file():
            return Path(folder)
    raise missing_library()


def board_program(cc: str | None = None) -> Path:
    """The compiled host program (built on first use, cached by the hash of its source and flags)."""
    source = (templates_dir() / SOURCE).read_text(encoding="utf-8")
    flags = [*STRICT_CFLAGS, *OPT_FLAGS, "-isystem", str(include_dir())]

    def on_failure(stderr: str):
        return missing_library() if "-lsimavr" in stderr or "sim_avr.h" in stderr else None

    return compile_cached("simavr", {Path(SOURCE).name: source}, flags, PROGRAM, libs=LIBS, cc=cc,
                          needs="the simavr board program needs a host C compiler", label="simavr board program",
                          on_failure=on_failure)


class SimavrBoard(EmulatorBoard):
    """:class:`~treegen.device.emulator.EmulatorBoard` on simavr: the target's ``[emulator] mcu`` at its
    ``clock_hz``, the USART ``[emulator] uart`` on ``socket://127.0.0.1:PORT`` (TCP_NODELAY); the
    program waits for a client before the first instruction."""

    def __init__(self, target, elf, **kwargs):
        super().__init__(target, elf, **kwargs)
        emu = self.target.emulator
        if emu.get("engine") != "simavr" or not emu.get("mcu"):
            raise TreegenError(f"target {self.target.name!r} is not run by simavr ([emulator] engine = \"simavr\" "
                               "and mcu)")
        self.label = f"simavr ({emu['mcu']})"

    def _command(self, port: int) -> list[str]:
        emu = self.target.emulator
        return [str(board_program()), "--mcu", str(emu["mcu"]), "--freq", str(self.target.clock_hz),
                "--uart", str(emu.get("uart", "0")), "--host", self.host, "--port", str(port),
                *self.extra_args, str(self.elf)]
