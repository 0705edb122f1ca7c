"""A model under test and the rows sent to the device (:class:`Case`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from treegen.core.data import load_for_model
from treegen.core.model import Model, load


@dataclass(eq=False)
class Case:
    """A model under test and the rows streamed to the device."""
    name: str
    algo: str                    # efti, cart, ..., or "file" (a model file)
    model: Model
    X_raw: np.ndarray
    labels: np.ndarray | None
    layout: str                  # layout built for it (emulated and native targets)
    data: str                    # where the rows come from

    @cached_property
    def ref(self):
        """The expected answers (:class:`treegen.device.hil.Reference`): Q15 rows, fixed-point and float classes."""
        from treegen.device.hil import random_rows, reference

        if self.X_raw.shape[0] == 0:
            return reference(self.model, q15=random_rows(self.model.n_features))
        return reference(self.model, self.X_raw, self.labels)


def file_case(model_path, data_path=None, *, datasets_dir=None) -> Case:
    """A case for a model file: rows from ``data_path`` (columns matched to the model's features by
    name), else from ``datasets_dir``/<the dataset named in the model's metadata> when that file
    exists, else none (X_raw of 0 rows: the checks then stream seeded random Q15 rows)."""
    model = load(model_path)
    data = Path(data_path) if data_path else None
    if data is None and datasets_dir is not None:
        name = str((model.metadata or {}).get("dataset") or "")
        candidate = Path(datasets_dir) / Path(name).name if name else None
        if candidate is not None and candidate.is_file():
            data = candidate
    name = f"file-{Path(model_path).stem}"
    if data is not None:
        ds = load_for_model(data, model.n_features, feature_names=list(model.feature_names),
                            missing=model.handles_missing)
        labels = ds.labels if ds.labels.shape[0] else None
        return Case(name, "file", model, ds.X, labels, "table", str(data))
    return Case(name, "file", model, np.zeros((0, model.n_features)), None, "table", "seeded random Q15 rows")
