"""Uploading firmware to a real board: the uploader per board, its exact command, and the probe check.

A board's ``[upload]`` table names its uploader (``pyocd`` for the ST and Nordic boards: pyOCD drives
the ST-LINK and CMSIS-DAP/DAPLink probes those boards carry) and pyOCD's part name
(``pyocd_target``), or ``openocd`` and OpenOCD's board configuration (``openocd_config``: the
HiFive1's ``board/sifive-hifive1.cfg``; OpenOCD drives its FTDI JTAG adapter, and J-Link probes too),
or ``avrdude`` (the Arduino Uno: its bootloader over the USB serial port; ``avrdude_part``,
``avrdude_programmer``, ``avrdude_baud``).
``--uploader platformio`` uses PlatformIO's own upload of the project instead (``pio run -t upload``;
the online Arduino build's only way). :func:`upload_invocation` is what ``treegen flash`` runs and
``--dry-run`` prints (:func:`shown`); :func:`check_probe` fails in about a second, with one line naming
the probe to connect, when pyOCD sees none.

No name reaches a script (issue 33): OpenOCD reads its ``-c`` argument as Tcl, and its ``program``
procedure evaluates the file name a second time (``eval flash write_image erase $flash_args``);
avrdude splits ``-U`` at colons. So the project path is never a word of either: every uploader runs
in the firmware's folder and names the image by its fixed file name (``firmware.elf``); the path is
only the working directory of an argument vector, which nothing parses.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

from treegen.core import targets as targets_mod
from treegen.core.errors import TreegenError

UPLOADERS = ("pyocd", "openocd", "avrdude", "platformio")
#: the serial port avrdude talks to the Uno's bootloader on when --port is not given
AVRDUDE_DEFAULT_PORT = "/dev/ttyACM0"


def _target(target) -> targets_mod.Target:
    return target if isinstance(target, targets_mod.Target) else targets_mod.get(str(target))


def uploader_for(target, override: str | None = None) -> str:
    """``override`` when given, else the board's ``[upload] uploader``, else ``platformio``."""
    t = _target(target)
    choice = override or t.upload.get("uploader") or "platformio"
    if choice not in UPLOADERS:
        raise TreegenError(f"unknown uploader {choice!r} (choose from {', '.join(UPLOADERS)})")
    if choice == "avrdude" and not t.upload.get("avrdude_part"):
        raise TreegenError(f"target {t.name!r} has no avrdude part name ([upload] avrdude_part): "
                           "use --uploader platformio")
    if choice == "pyocd" and not t.upload.get("pyocd_target"):
        raise TreegenError(f"target {t.name!r} has no pyOCD part name ([upload] pyocd_target): "
                           "use --uploader platformio")
    if choice == "openocd" and not t.upload.get("openocd_config"):
        raise TreegenError(f"target {t.name!r} has no OpenOCD configuration ([upload] openocd_config): "
                           "use --uploader platformio")
    return choice


def pyocd_executable() -> str:
    """``pyocd`` on PATH, else beside this Python (the device extra installs it there)."""
    found = shutil.which("pyocd")
    if found:
        return "pyocd"
    beside = Path(sys.executable).with_name("pyocd")
    return str(beside) if beside.exists() else "pyocd"


#: an image name that is the same word in every uploader's language (Tcl, avrdude's -U, a shell):
#: letters, digits and _ . / + -, not starting with - ; ``$SOURCE``: SCons's name for a relative one
_PLAIN_IMAGE = re.compile(r"(?!-)[A-Za-z0-9_./+-]+|\$SOURCE")


def upload_command(target, image, port: str | None = None) -> list[str]:
    """The board's uploader command that writes ``image`` (an ELF) to its flash and resets it: pyOCD's,
    OpenOCD's through the board's JTAG adapter (``port`` is not used by either: the probe is found on
    USB), or avrdude's through the bootloader on the serial ``port`` (default /dev/ttyACM0; ``-D``: no
    chip erase, the bootloader erases page by page; ``:e``: ELF input); [] when the board has none.
    ``image`` must be a plain name (``firmware.elf`` in the working directory, see
    :func:`upload_invocation`): it becomes a word of OpenOCD's Tcl and of avrdude's ``-U``."""
    t = _target(target)
    image = str(image)
    if not _PLAIN_IMAGE.fullmatch(image):
        raise TreegenError(f"the firmware path {image!r} is not a plain name (letters, digits, _ . / + -); "
                           "the uploader would parse it")
    if t.upload.get("uploader") == "openocd":
        return ["openocd", "-f", str(t.upload["openocd_config"]), "-c", f"program {image} verify reset exit"]
    if t.upload.get("uploader") == "avrdude":
        return ["avrdude", "-p", str(t.upload["avrdude_part"]), "-c", str(t.upload.get("avrdude_programmer", "arduino")),
                "-P", str(port or AVRDUDE_DEFAULT_PORT), "-b", str(t.upload.get("avrdude_baud", 115200)), "-D",
                "-U", f"flash:w:{image}:e"]
    part = t.upload.get("pyocd_target")
    if not part:
        return []
    return [pyocd_executable(), "flash", "--target", str(part), "--format", "elf", str(image)]


def upload_invocation(target, elf, port: str | None = None) -> tuple[list[str], Path]:
    """(argument vector, working directory) that writes the built ``elf`` to the board: the uploader runs
    in the ELF's folder and names it by its file name, so the project path is not in the command."""
    elf = Path(elf).absolute()
    return upload_command(target, elf.name, port), elf.parent


def shown(cmd: list[str], cwd=None) -> str:
    """``cmd`` (run in ``cwd``) as a line to paste into a POSIX shell: ``cd DIR && CMD``, every word quoted."""
    line = shlex.join(cmd)
    return f"cd {shlex.quote(str(cwd))} && {line}" if cwd is not None else line


def check_openocd(target) -> None:
    """Raise a one-line :class:`TreegenError` when OpenOCD is not installed (it reports a missing probe
    itself, in its output, with a non-zero exit status)."""
    t = _target(target)
    if shutil.which("openocd") is None:
        raise TreegenError(f"openocd not found: install OpenOCD (Debian package openocd) to upload to {t.name}, "
                           "or run the command 'treegen flash --dry-run' prints where it is installed")
def check_avrdude(target) -> None:
    """Raise a one-line :class:`TreegenError` when avrdude is not installed."""
    if shutil.which("avrdude") is None:
        raise TreegenError(f"avrdude not found: install it (Debian package avrdude) to upload to {_target(target).name}, "
                           "or run the same image on simavr (--target simavr-uno)")


def _require_pyocd():
    try:
        import pyocd  # noqa: F401
    except ImportError:
        from treegen.device.extra import missing

        raise missing("pyocd", "uploading to a board") from None


def check_probe(target) -> None:
    """Raise a one-line :class:`TreegenError` naming the probe to connect when pyOCD finds none."""
    t = _target(target)
    _require_pyocd()
    import logging

    logging.getLogger("pyocd").setLevel(logging.CRITICAL)   # its own "no probes" warnings: ours is one line
    try:
        from pyocd.probe.aggregator import DebugProbeAggregator

        probes = DebugProbeAggregator.get_all_connected_probes(unique_id=None)
    except Exception as exc:                               # a USB backend error is "no probe" as well
        probes = []
        detail = f" ({' '.join(str(exc).split())[:120]})"
    else:
        detail = ""
    if not probes:
        probe = t.upload.get("probe", "a debug probe (ST-LINK or CMSIS-DAP)")
        raise TreegenError(f"no debug probe found for {t.name}: connect {probe}{detail}")


def check_part(target) -> None:
    """Raise a one-line error when pyOCD knows no part ``[upload] pyocd_target`` (neither built in nor
    from an installed CMSIS pack)."""
    t = _target(target)
    part = str(t.upload.get("pyocd_target", "")).lower()
    _require_pyocd()
    try:
        from pyocd.target import TARGET

        if part in TARGET:
            return
        from pyocd.target.pack.pack_target import ManagedPacks

        if any(dev.part_number.lower() == part for dev in ManagedPacks.get_installed_targets()):
            return
    except Exception:                                      # an unreadable pack index: let pyOCD say it
        return
    raise TreegenError(f"pyOCD has no target {part!r} built in: install its CMSIS pack once while online "
                       f"('pyocd pack install {part}')")
