"""Firmware builds shared by the PlatformIO, CLI and QEMU end-to-end tests.

A cold offline ``pio run`` takes a few seconds (PlatformIO initialises its core inside every new
project), so each emulated target is built at most once per test session: :func:`built_project`
caches the result in this module. Models are deterministic (fixed seeds on a shared dataset).

Missing tools make the callers FAIL, never skip: scripts/setup.sh installs them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import load_shared

from treegen import CARTClassifier, EFTIClassifier
from treegen.core.model import Model
from treegen.device import platformio as tpio

TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm")

# target -> (model, layout, variant) built for it; the variant "auto" resolves to dsp on M4/M7
BUILDS = {
    "qemu-m3": ("efti", "table", "auto"),      # oblique, scalar multiply-accumulate (no DSP on M3)
    "qemu-m4": ("efti", "table", "auto"),      # oblique, ARMv7E-M __smlad (the CLI defaults)
    "qemu-m7": ("cart", "unrolled", "auto"),   # axis-parallel, one code block per node
}


def require_tools(*names: str) -> None:
    missing = [n for n in (names or TOOLS) if shutil.which(n) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: install the Debian packages gcc-arm-none-eabi "
                    "libnewlib-arm-none-eabi qemu-system-arm (bash scripts/setup.sh)", pytrace=False)


_models: dict = {}


def dataset():
    """(X Q15 int array, y) of the shared 'veh' dataset (18 features, 4 classes)."""
    if "veh" not in _models:
        _models["veh"] = load_shared("veh")
    return _models["veh"]


def model(kind: str) -> Model:
    if kind not in _models:
        X, y = dataset()
        if kind == "efti":
            est = EFTIClassifier(max_iter=2000, random_state=1)
        elif kind == "cart":
            est = CARTClassifier(max_depth=6)
        else:
            raise ValueError(kind)
        _models[kind] = est.fit(X, y).model_
    return _models[kind]


@dataclass(frozen=True)
class Built:
    target: str
    model: Model
    layout: str
    variant: str
    project: Path
    elf: Path
    build_seconds: float


_built: dict = {}


def built_project(target: str, root: Path) -> Built:
    """The PlatformIO project of ``target`` (see BUILDS), written and built once per session."""
    if target not in _built:
        import time

        require_tools()
        kind, layout, variant = BUILDS[target]
        m = model(kind)
        project = tpio.write_project(m, root / f"pio-{target}", target=target, layout=layout, variant=variant)
        t0 = time.perf_counter()
        elf = tpio.build(project, target=target)
        _built[target] = Built(target, m, layout, variant, project, elf, time.perf_counter() - t0)
    return _built[target]


def q15_rows(m: Model) -> np.ndarray:
    X, _ = dataset()
    return np.asarray(m.scaling.to_q15(X), dtype=np.int64)
