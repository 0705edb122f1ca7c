"""Shared fixtures. The shared datasets live beside the repository at ../shared (also in CI)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

# the native engine's compiled libraries go to a folder of this test run, never to ~/.cache/treegen
# (unless the caller chose a cache with TREEGEN_CACHE); subprocesses inherit it
if "TREEGEN_CACHE" not in os.environ:
    os.environ["TREEGEN_CACHE"] = tempfile.mkdtemp(prefix="treegen-test-cache-")
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


def run_cli(capsys, argv):
    """Run ``treegen ARGV`` in-process: (exit code, stdout, stderr)."""
    from treegen import cli

    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(capsys, argv, match: str) -> str:
    """The CLI must fail with exit 2 and exactly one line ``treegen: error: ...`` containing ``match``."""
    code, out, err = run_cli(capsys, argv)
    assert code == 2, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("treegen: error: "), err
    assert "Traceback" not in err
    assert match.lower() in lines[0].lower(), lines[0]
    return lines[0]
