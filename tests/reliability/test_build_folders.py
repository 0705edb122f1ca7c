"""Build folders (issue 10, item 7): concurrent ``hil`` runs on one folder, and an interrupted
``build`` that must neither leave a process behind nor make another model's firmware look up to date."""

from __future__ import annotations

import gzip
import signal
import subprocess
import time

import pytest

from rel_util import DATASETS, alive, descendants, popen, run
from test_signals import _comm, _kill_all, _start


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("folders")
    (d / "irs.csv").write_bytes(gzip.decompress((DATASETS / "irs.csv.gz").read_bytes()))
    run("fit", d / "irs.csv", "--algo", "cart", "-o", d / "a.json").check_returncode()
    run("fit", d / "irs.csv", "--algo", "cart", "--max-depth", "1", "-o", d / "b.json").check_returncode()
    return d


@pytest.mark.parametrize("target", ["native", "qemu-m4"])
def test_concurrent_hil_on_one_folder(work, tmp_path, target):
    folder = tmp_path / "build"
    procs = [popen("hil", work / "a.json", "--target", target, "--data", work / "irs.csv", "-o", folder, "-q",
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err.decode()[-2000:]
        assert b"result          PASS" in out


def test_interrupted_build_leaves_nothing_running_and_is_rebuilt(work, tmp_path):
    folder = tmp_path / "fw"
    proc = run("build", work / "a.json", "--target", "qemu-m4", "-o", folder, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    # build model B into the same folder, interrupted while PlatformIO runs
    b = _start(tmp_path, "build", work / "b.json", "--target", "qemu-m4", "-o", folder)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any("python" in _comm(k) or "pio" in _comm(k)
                                                  for k in descendants(b.pid)):
        assert b.poll() is None, b.err_path.read_text()
        time.sleep(0.01)
    time.sleep(0.3)
    kids = descendants(b.pid)
    b.send_signal(signal.SIGTERM)
    try:
        b.wait(timeout=15)
    except subprocess.TimeoutExpired:
        _kill_all(descendants(b.pid))
        b.kill()
        pytest.fail("build still running 15 s after SIGTERM")
    time.sleep(0.5)
    survivors = [(k, _comm(k)) for k in kids if alive(k)]
    _kill_all(k for k, _ in survivors)
    assert not survivors, survivors
    assert b.returncode == 128 + signal.SIGTERM, b.err_path.read_text()
    # 'flash B' must not run A's firmware as "up to date": it rebuilds, and the device answers as B
    f = _start(tmp_path, "flash", work / "b.json", "--target", "qemu-m4", "-o", folder)
    out_path = b.err_path.with_name(f.err_path.name.replace(".err", ".out"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "serial" not in out_path.read_text():
        assert f.poll() is None, f.err_path.read_text()
        time.sleep(0.05)
    f.send_signal(signal.SIGINT)
    f.wait(timeout=15)
    out = out_path.read_text()
    assert "(up to date)" not in out, out
    proc = run("hil", work / "b.json", "--target", "qemu-m4", "--data", work / "irs.csv", "-o", folder, "-q",
               timeout=300)
    assert proc.returncode == 0 and b"PASS" in proc.stdout, proc.stderr.decode()[-2000:]
