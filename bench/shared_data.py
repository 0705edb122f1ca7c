"""The shared UCI datasets (../shared/datasets, beside the repository) as the benches use them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def load_raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(Q15 integer features, original labels) of a shared dataset."""
    data = np.loadtxt(DATASETS / f"{name}.csv.gz", delimiter=",", skiprows=1, dtype=np.int64)
    return data[:, :-1], data[:, -1]


def load_normalised(name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(features / 32768, class indices 0..C-1, C): the inducers' input."""
    X, labels = load_raw(name)
    classes, y = np.unique(labels, return_inverse=True)
    return X / 32768.0, y.astype(np.int64), len(classes)
