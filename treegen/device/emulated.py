"""The emulator of an emulated target: QEMU, or simavr for the AVR boards, by its ``[emulator] engine``.

::

    with emulated_board("simavr-uno", "firmware.elf") as board:
        client = DeviceClient.open(board.url)
"""

from __future__ import annotations

from treegen.core import targets as targets_mod
from treegen.device.emulator import EmulatorBoard, QemuBoard
from treegen.device.simavr import SimavrBoard

#: the board class of each ``[emulator] engine`` (targets.ENGINES lists the keys each needs)
BOARDS = {"qemu": QemuBoard, "simavr": SimavrBoard}


def emulated_board(target, elf, **kwargs) -> EmulatorBoard:
    """The board object (not started) that runs ``elf`` on the emulated ``target`` (name or Target) with
    the emulator its ``[emulator] engine`` names; ``kwargs`` as :class:`EmulatorBoard`'s."""
    tgt = target if isinstance(target, targets_mod.Target) else targets_mod.get(str(target))
    return BOARDS[tgt.emulator.get("engine", "qemu")](tgt, elf, **kwargs)
