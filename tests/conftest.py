"""Shared fixtures. The shared datasets live beside the repository at ../shared (also in CI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATASETS = SHARED / "datasets"


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        raise RuntimeError(f"shared datasets not found at {DATASETS}; tests need ../shared beside the repo")
    return DATASETS


def load_shared(name: str):
    """(X int Q15 array, y 1-based labels) of a shared dataset."""
    path = DATASETS / f"{name}.csv.gz"
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64)
    return data[:, :-1], data[:, -1]
