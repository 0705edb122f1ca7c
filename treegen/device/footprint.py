"""What a fitted tree costs on a target: flash bytes of its fixed-point export, measured by compiling it.

:class:`FlashSize` is the ``measure`` callable of :func:`treegen.learn.compare.run_task` (the learn
layer cannot export a model itself): it runs on a Dask worker right after the fit, exports the
estimator's model as ``treegen export --dtype q15`` would (its training rows resolve inexact
thresholds, as ``--data`` does) into a temporary directory, compiles it with the target's compiler and
returns ``{"flash_bytes": n, "flash_bytes_inference": m}`` (whole object / classification path alone,
see :func:`treegen.emit.export.inference_bytes`), ``None`` where the compiler is missing.
"""

from __future__ import annotations

import tempfile

import numpy as np

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.emit.export import LAYOUTS, export_model


class FlashSize:
    """Picklable ``measure(estimator, X_train) -> {"flash_bytes", "flash_bytes_inference"}`` for a target."""

    def __init__(self, target: str, layout: str = "table", variant: str = "auto"):
        _targets.get(target)          # unknown target -> TreegenError, before any task runs
        if layout not in LAYOUTS:
            raise TreegenError(f"unknown layout {layout!r} (choose from {', '.join(LAYOUTS)})")
        self.target = target
        self.layout = layout
        self.variant = variant

    def __call__(self, estimator, X_train: np.ndarray) -> dict:
        with tempfile.TemporaryDirectory(prefix="treegen-flash-") as tmp:
            report = export_model(estimator.model_, tmp, target=self.target, layout=self.layout, dtype="q15",
                                  variant=self.variant, data=(np.asarray(X_train),), measure=True, link=False)
        return {"flash_bytes": report.flash_bytes, "flash_bytes_inference": report.flash_bytes_inference}

    def __repr__(self) -> str:
        return f"FlashSize({self.target!r}, layout={self.layout!r})"
