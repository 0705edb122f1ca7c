"""Data from a pipe of several megabytes, written in many small writes, gives the same model as the
same bytes from a file (issue 24's mutation audit: a reader that stopped after one 64 KiB read passed
every test, whose pipes carried a 3.7 KB file)."""

from __future__ import annotations

import os
import subprocess
import threading

import numpy as np
import pytest

from rel_util import env, treegen_cmd
from treegen.core.data import load_csv
from treegen.core.model import load

ROWS = 150_000          # 3.7 MB of CSV


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 32768, (ROWS, 4))
    y = ((X[:, 0] + X[:, 1]) > 32768).astype(int) + (X[:, 2] > 30000)
    path = tmp_path_factory.mktemp("pipes") / "big.csv"
    path.write_text("a,b,c,d,y\n" + "".join(f"{a},{b},{c},{d},{lab}\n" for (a, b, c, d), lab in zip(X, y)))
    assert path.stat().st_size > 3_000_000
    return path


def _dribble(fh, data: bytes, size: int = 1000) -> None:
    """Write ``data`` in writes of ``size`` bytes (each flushed: the reader sees many short reads)."""
    try:
        for i in range(0, len(data), size):
            fh.write(data[i:i + size])
            fh.flush()
    finally:
        fh.close()


def test_stdin_pipe_of_megabytes_in_small_writes_gives_the_models_of_the_file(big, tmp_path):
    from_file = subprocess.run(treegen_cmd("fit", big, "--algo", "cart", "--max-depth", "3", "-q",
                                           "-o", tmp_path / "file.json"), capture_output=True, env=env(), timeout=120)
    assert from_file.returncode == 0, from_file.stderr.decode()[-2000:]
    with open(tmp_path / "stderr", "wb") as err:    # the writer thread owns stdin (communicate would close it)
        proc = subprocess.Popen(treegen_cmd("fit", "-", "--algo", "cart", "--max-depth", "3", "-q",
                                            "-o", tmp_path / "pipe.json"),
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=env())
        writer = threading.Thread(target=_dribble, args=(proc.stdin, big.read_bytes()))
        writer.start()
        try:
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            writer.join(timeout=60)
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()[-2000:]
    a, b = load(tmp_path / "file.json"), load(tmp_path / "pipe.json")
    assert a.metadata["n_train"] == b.metadata["n_train"] == ROWS
    assert a.hash() == b.hash()


def test_fifo_of_megabytes_in_small_writes_reads_every_row(big, tmp_path):
    fifo = tmp_path / "data.fifo"
    os.mkfifo(fifo)
    data = big.read_bytes()
    writer = threading.Thread(target=lambda: _dribble(open(fifo, "wb", buffering=0), data, 4096))
    writer.start()
    try:
        ds = load_csv(fifo)
    finally:
        writer.join(timeout=60)
    ref = load_csv(big)
    assert ds.n_rows == ROWS and np.array_equal(ds.X, ref.X) and ds.labels.tolist() == ref.labels.tolist()
