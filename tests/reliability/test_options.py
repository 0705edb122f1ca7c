"""Integer options are checked against what the engines can count (issue 10, item 6) and cv's
--jobs is capped at the available cores (item 8)."""

from __future__ import annotations

import os
import signal
import subprocess

import numpy as np
import pytest

from conftest import assert_user_error
from rel_util import popen
from treegen import EFTIClassifier
from treegen.core.errors import TreegenError


@pytest.fixture()
def toy(tmp_path):
    path = tmp_path / "toy.csv"
    rng = np.random.default_rng(0)
    X = rng.integers(0, 100, size=(40, 2))
    y = (X[:, 0] > 50).astype(int)
    path.write_text("a,b,y\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y)))
    return path


@pytest.mark.parametrize("value", ["4294967296", "4294967301", "18446744073709551621"])
def test_max_iter_beyond_the_32_bit_counter_is_refused(toy, tmp_path, capsys, value):
    line = assert_user_error(capsys, ["fit", toy, "--algo", "efti", "--max-iter", value, "-o", tmp_path / "m.json"],
                             "--max-iter")
    assert "4294967295" in line
    assert not (tmp_path / "m.json").exists()


def test_max_iter_api(toy):
    X = np.loadtxt(toy, delimiter=",", skiprows=1)
    for bad in (4294967301, 2**64 + 5, True, -1):
        with pytest.raises(TreegenError, match="max_iter"):
            EFTIClassifier(max_iter=bad, engine="native").fit(X[:, :2], X[:, 2])
        with pytest.raises(TreegenError, match="max_iter"):
            EFTIClassifier(max_iter=bad, engine="python").fit(X[:, :2], X[:, 2])


def test_seed_beyond_64_bits_is_refused(toy, tmp_path, capsys):
    assert_user_error(capsys, ["fit", toy, "--algo", "efti", "--max-iter", "10", "--seed", str(2**64 + 1),
                               "-o", tmp_path / "m.json"], "--seed")
    X = np.loadtxt(toy, delimiter=",", skiprows=1)
    with pytest.raises(TreegenError, match="random_state"):
        EFTIClassifier(max_iter=10, random_state=2**64 + 1).fit(X[:, :2], X[:, 2])


def test_cv_jobs_capped_at_the_cores(toy):
    """Run in its own session and killed as a group whatever happens: before the fix this started
    one worker per requested job."""
    cores = len(os.sched_getaffinity(0))
    proc = popen("cv", toy, "--algo", "cart", "--folds", "2", "--jobs", "100000", "-q",
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    assert proc.returncode == 0, err.decode()[-2000:]
    assert f"jobs 100000 capped at {cores}" in err.decode(), err.decode()
