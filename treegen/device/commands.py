"""The Python counterparts of ``treegen build``, ``treegen flash`` and ``treegen hil``.

:func:`build_firmware` writes a model's PlatformIO project and builds it (through
:func:`treegen.device.build.build`, the one home of "build this model for this target": emulated
targets, boards with a bare-metal port, Arduino boards whose platform is installed);
:func:`start_emulator` gives the running QEMU board of ``treegen flash`` for an emulated target
(built first unless the project's firmware is up to date);
:func:`upload_firmware` uploads to a real board with PlatformIO; :func:`run_hil` is
:func:`treegen.device.hil.run_hil`. The CLI (:mod:`treegen.cli.firmware`) calls these and only adds
the printing. Nothing here prints.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.targets import Target
from treegen.core.targets import get as get_target
from treegen.device import buildfolder
from treegen.device.hil import run_hil

__all__ = ["BuildResult", "build_firmware", "start_emulator", "upload_firmware", "run_hil"]


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_firmware` did: the project folder, the ELF (None when the target's PlatformIO
    platform is not installed here: the project is written, ``upload_command`` builds and uploads it
    where the registry is reachable), sizes in bytes, build seconds, and whether an up-to-date
    firmware was reused."""
    project: Path
    elf: Path | None
    flash_bytes: int | None
    ram_bytes: int | None
    seconds: float
    upload_command: list
    up_to_date: bool = False

    @property
    def bin(self) -> Path | None:
        """The raw binary beside the ELF (objcopy -O binary: what a drag-and-drop upload takes)."""
        if self.elf is None:
            return None
        path = self.elf.with_suffix(".bin")
        return path if path.is_file() else None

    @property
    def image_sha256(self) -> str | None:
        """sha256 of the ELF's loadable sections (:mod:`treegen.device.image`)."""
        if self.elf is None:
            return None
        from treegen.device.image import image_sha256

        return image_sha256(self.elf)


def _target(target) -> Target:
    return target if isinstance(target, Target) else get_target(str(target))


def build_firmware(model: Model, target, output, *, layout: str = "table", variant: str = "auto", train=None,
                   verbose: bool = False, reuse: bool = False, framework: str = "baremetal") -> BuildResult:
    """Write the PlatformIO project of ``model`` (model C + firmware harness) for ``target`` into
    ``output`` and build it offline: ``treegen build``.

    Parameters
    ----------
    model : Model
    target : str or Target
        An emulated target (``qemu-m4``, ...) or a board (``nucleo_f446re``, ...).
    output : path
        Project folder (locked while it is written and built).
    layout, variant : str
        As ``treegen export``.
    train : TrainSpec or None
        On-device training (:func:`treegen.device.train_firmware.make_train_spec`).
    verbose : bool
        Show PlatformIO's output while it builds.
    reuse : bool
        Keep an up-to-date firmware of the same model, layout and variant instead of rebuilding
        (``treegen flash`` does; never with ``train``).
    framework : str
        ``baremetal`` (default: the board's register-level port, built offline) or ``arduino`` (boards:
        the Arduino core from the official PlatformIO platform, built where the registry is reachable).
        An emulated target that runs a board's image (``image``) builds that board's firmware.

    Raises :class:`TreegenError` for a target without a firmware build (``native``, export-only
    targets), a failed build, or a firmware too big for the target.
    """
    from treegen.device import platformio as pio
    from treegen.device.build import build

    tgt = _target(target)
    if tgt.kind not in ("emulated", "board"):
        raise TreegenError(f"target {tgt.name!r} (kind {tgt.kind!r}) has no firmware build; use an emulated target "
                           "(qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55) or a board (see 'treegen targets')")
    out = Path(output)
    with buildfolder.locked(out):
        b = build(model, tgt, out, layout=layout, variant=variant, train=train, framework=framework,
                  reuse=reuse, verbose=verbose)
    return BuildResult(out, b.path, b.flash_bytes, b.ram_bytes, b.seconds, pio.upload_command(out),
                       up_to_date=b.reused)


def start_emulator(target, elf, *, port: int | None = None):
    """The emulator board of an emulated target running ``elf`` (a context manager: ``with
    start_emulator(...) as board: board.url``; QEMU, or simavr for the AVR boards); it waits for a serial
    client on ``board.url``
    (``socket://127.0.0.1:PORT``, what :func:`run_hil` takes as ``port``). ``treegen flash`` for an
    emulated target."""
    from treegen.device.emulated import emulated_board

    tgt = _target(target)
    if tgt.kind != "emulated":
        raise TreegenError(f"target {tgt.name!r} ({tgt.kind}) is not emulated: upload to the board with "
                           "upload_firmware (treegen flash)")
    return emulated_board(tgt, elf, port=port)


def upload_firmware(project, *, port: str | None = None) -> int:
    """``pio run -t upload`` in a project written by :func:`build_firmware` for a board: builds and
    uploads (needs the PlatformIO registry or an installed platform); returns PlatformIO's exit status.
    ``treegen flash`` for a board."""
    from treegen.device import platformio as pio
    from treegen.device import processes

    cmd = pio.pio_command() + pio.upload_command(project, port=port)[1:]
    try:
        return processes.run(cmd, env=pio.pio_environ(), stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise TreegenError(f"cannot run PlatformIO: {exc.strerror or exc}") from None
