"""One home for "build this model's firmware for this target".

:func:`build` writes the project (model C + firmware harness, optionally the on-device training engine)
and builds it: the host executable for ``native``, an offline PlatformIO build for emulated targets and
for boards with a bare-metal port, nothing but the project for a board's online Arduino build whose
PlatformIO platform is not installed. Every entry point goes through it:
``treegen build``/``flash`` (:func:`treegen.device.commands.build_firmware`), ``treegen hil``, the pytest
plugin and the benches (:func:`treegen.device.hil.build_firmware`), on-device training
(:func:`treegen.device.train_hil.build_train_firmware`) -- each only shapes the result for its callers.

An emulated target that runs a board's image (``image = "nucleo_f446re"``) builds that board's
firmware; :attr:`Built.target` is the target the image was built for.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.core.model import Model

_BUILD_LINE = re.compile(r"^; model (\S+)  layout (\S+)  variant (\S+)$", re.M)


@dataclass(frozen=True)
class Built:
    """What :func:`build` produced. ``path``: the ELF (PlatformIO builds) or the host executable
    (``native``); None when a board's online platform is not installed here (the project is written,
    ``pio run`` builds it where the registry is reachable). Sizes in bytes (None for the host)."""
    target: _targets.Target      # the target the firmware is built for (the board, for an image target)
    project: Path
    path: Path | None
    flash_bytes: int | None
    ram_bytes: int | None
    seconds: float
    reused: bool = False         # an up-to-date build of the same model/layout/variant, not rebuilt
    replaced: str | None = None  # rebuilt over a build of this other model (hash) in the same folder


def _target(target) -> _targets.Target:
    return target if isinstance(target, _targets.Target) else _targets.get(str(target))


def image_target(target) -> _targets.Target:
    """The target a firmware is built for: the board whose image an emulated target runs (key
    ``image``: qemu-netduinoplus2 -> nucleo_f446re), else the target itself."""
    tgt = _target(target)
    return tgt if tgt.image == tgt.name else _targets.get(tgt.image)


def built_model(build_dir, target) -> tuple[str, str, str] | None:
    """(model hash, layout, variant as asked) of the PlatformIO project in ``build_dir`` for ``target``
    (``treegen build``/``flash``/``hil`` write them into platformio.ini), or None."""
    tgt = _target(target)
    try:
        ini = (Path(build_dir) / "platformio.ini").read_text(encoding="utf-8")
    except OSError:
        return None
    m = _BUILD_LINE.search(ini)
    if m is None or f"; target {tgt.name}:" not in ini:
        return None
    return m.group(1), m.group(2), m.group(3)


def reusable_firmware(model: Model, target, build_dir, *, layout: str, variant: str) -> Path | None:
    """The firmware.elf of a complete build in ``build_dir`` (e.g. by ``treegen build -o DIR``) of this
    model for ``target`` with this layout and (resolved) variant, built the same way (offline bare metal
    or Arduino), without on-device training; else None. "Complete" is the build folder's stamp
    (:mod:`treegen.device.buildfolder`): the ELF was built from the project as it is now."""
    from treegen.device import platformio as pio
    from treegen.emit.export import resolve_variant

    tgt = _target(target)
    built = built_model(build_dir, tgt)
    if built is None or built[0] != model.hash() or built[1] != layout:
        return None
    try:
        if resolve_variant(built[2], tgt, "q15") != resolve_variant(variant, tgt, "q15"):
            return None
        ini = (Path(build_dir) / "platformio.ini").read_text(encoding="utf-8")
    except (TreegenError, OSError):
        return None
    if ("platforms_dir = offline/platforms" in ini) != pio.offline(tgt):     # Arduino vs bare metal
        return None
    if (Path(build_dir) / "src" / "tg_train.c").exists():      # built with --train: another firmware
        return None
    return pio.firmware_current(build_dir, tgt, f"model {model.hash()}  layout {layout}  variant {built[2]}")


def build(model: Model, target, out, *, layout: str = "table", variant: str = "auto", train=None,
          framework: str = "baremetal", reuse: bool = False, verbose: bool = False,
          sanitize: bool = False) -> Built:
    """Write and build the firmware of ``model`` for ``target`` in the folder ``out``.

    ``train``: a TrainSpec (after :func:`treegen.device.firmware.plan_train`) adds on-device training.
    ``framework``: ``baremetal`` or ``arduino`` (boards). ``reuse``: keep an up-to-date build of the
    same model, layout and variant (never with ``train``). ``verbose``: PlatformIO's output while it
    builds. ``sanitize``: ASan/UBSan (``native`` only). The caller locks ``out`` if it needs to
    (:mod:`treegen.device.buildfolder`). Raises :class:`TreegenError` for a target without a firmware
    build (export-only targets), a failed build, or a firmware too big for the target.
    """
    tgt = _target(target)
    out = Path(out)
    t0 = time.perf_counter()
    if tgt.kind == "host":
        from treegen.device.firmware import build_native

        kw = {} if train is None else {"train": train}
        exe = build_native(model, out, sanitize=sanitize, layout=layout, variant=variant, **kw)
        return Built(tgt, out, exe, None, None, time.perf_counter() - t0)
    if tgt.kind not in ("emulated", "board"):
        raise TreegenError(f"target {tgt.name!r} (kind {tgt.kind!r}) has no firmware build; use an emulated target "
                           "(qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55) or a board (see 'treegen targets')")
    from treegen.device import platformio as pio

    tgt = pio.for_framework(image_target(tgt), framework)
    if reuse and train is None:
        elf = reusable_firmware(model, tgt, out, layout=layout, variant=variant)
        if elf is not None:
            size = pio.check_size(elf, tgt)
            return Built(tgt, out, elf.resolve(), size.flash, size.ram, 0.0, reused=True)
    before = built_model(out, tgt)
    replaced = before[0] if before is not None and before[0] != model.hash() else None
    pio.write_project(model, out, target=tgt, layout=layout, variant=variant, train=train)
    if not pio.offline(tgt) and not pio.platform_installed(tgt.platformio.get("platform", "")):
        return Built(tgt, out, None, None, None, 0.0, replaced=replaced)
    elf = pio.build(out, verbose=verbose, target=tgt)
    seconds = time.perf_counter() - t0
    size = pio.check_size(elf, tgt)
    return Built(tgt, out, elf, size.flash, size.ram, seconds, replaced=replaced)
