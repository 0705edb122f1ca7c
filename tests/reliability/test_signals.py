"""SIGINT, SIGTERM and SIGHUP to fit, cv, hil (native and qemu-m4), flash and build: treegen stops
promptly, exits with 128 + the signal number (flash: Ctrl-C is its normal stop, status 0), and no
process it started survives (issue 10, items 2, 5, 7 and 8)."""

from __future__ import annotations

import gzip
import signal
import subprocess
import time

import numpy as np
import pytest

from rel_util import DATASETS, alive, descendants, popen, run

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
IDS = ["INT", "TERM", "HUP"]


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _wait_for_child(proc, names, timeout=60.0) -> list[int]:
    """Descendants of ``proc`` once one of them is called one of ``names``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"treegen exited ({proc.returncode}) before starting {names}: {err.decode()[-1500:]}")
        kids = descendants(proc.pid)
        if any(_comm(k).startswith(tuple(names)) for k in kids):
            return kids
        time.sleep(0.01)
    proc.kill()
    pytest.fail(f"no {names} child within {timeout} s")


def _stop_and_check(proc, kids, sig, expect_rc, within=5.0) -> str:
    time.sleep(0.2)                              # let it get going
    kids = sorted(set(kids) | set(descendants(proc.pid)))
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=within + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"treegen still running {within + 10:.0f} s after {sig.name}")
    took = time.monotonic() - t0
    survivors = [(k, _comm(k)) for k in kids if alive(k)]
    for k, _ in survivors:            # do not leave them behind even when the test fails
        try:
            import os
            os.kill(k, signal.SIGKILL)
        except OSError:
            pass
    err = err.decode()
    assert not survivors, f"left running after {sig.name}: {survivors}"
    assert proc.returncode == expect_rc, (proc.returncode, err[-1500:])
    assert "Traceback" not in err, err[-3000:]
    assert took < within, f"took {took:.1f} s to stop after {sig.name}"
    return err


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("signals")
    text = gzip.decompress((DATASETS / "irs.csv.gz").read_bytes())
    (d / "irs.csv").write_bytes(text)
    run("fit", d / "irs.csv", "--algo", "cart", "-o", d / "m.json").check_returncode()
    rng = np.random.default_rng(0)
    for n, name in ((300_000, "big.csv"), (6_000, "mid.csv")):
        X = rng.integers(0, 32768, size=(n, 4))
        np.savetxt(d / name, X, fmt="%d", delimiter=",", header="a0,a1,a2,a3", comments="")
    return d


@pytest.fixture(scope="module")
def qemu_build(work):
    proc = run("build", work / "m.json", "--target", "qemu-m4", "-o", work / "fw-m4", timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return work / "fw-m4"


@pytest.mark.parametrize("sig", SIGNALS, ids=IDS)
def test_hil_qemu(work, qemu_build, sig):
    proc = popen("hil", work / "m.json", "--target", "qemu-m4", "--data", work / "mid.csv", "-o", qemu_build, "-q",
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kids = _wait_for_child(proc, ["qemu-system-arm"])
    _stop_and_check(proc, kids, sig, 128 + sig)


@pytest.mark.parametrize("sig", SIGNALS, ids=IDS)
def test_hil_native(work, sig):
    build = work / "fw-native"
    proc = popen("hil", work / "m.json", "--target", "native", "--data", work / "big.csv", "-o", build, "-q",
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kids = _wait_for_child(proc, ["tg_", "m_", "harness", "firmware"], timeout=120)
    _stop_and_check(proc, kids, sig, 128 + sig)


@pytest.mark.parametrize("sig", SIGNALS, ids=IDS)
def test_flash_qemu(work, qemu_build, sig):
    proc = popen("flash", work / "m.json", "--target", "qemu-m4", "-o", qemu_build,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kids = _wait_for_child(proc, ["qemu-system-arm"])
    _stop_and_check(proc, kids, sig, 0 if sig == signal.SIGINT else 128 + sig)


@pytest.mark.parametrize("sig", SIGNALS, ids=IDS)
@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "bar"])
def test_native_engine_fit(work, tmp_path, sig, quiet):
    """A long native-engine EFTI fit (one C call before the fix) stops within 1 s, writes no model."""
    out = tmp_path / "m.json"
    args = ["fit", work / "irs.csv", "--algo", "efti", "--engine", "native", "--max-iter", "4000000000",
            "-o", out] + (["-q"] if quiet else [])
    proc = popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3.0)            # the engine is compiled (cached) and running
    assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
    _stop_and_check(proc, [], sig, 128 + sig, within=1.0)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_cv_workers_stop(work, sig):
    proc = popen("cv", work / "irs.csv", "--algo", "efti", "--engine", "python", "--max-iter", "100000000",
                 "--folds", "2", "--jobs", "2", "-q", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(descendants(proc.pid)) < 2:
        time.sleep(0.05)
    kids = descendants(proc.pid)
    assert kids, "cv started no worker processes"
    _stop_and_check(proc, kids, sig, 128 + sig, within=5.0)


def test_interrupted_build_leaves_no_process_and_no_complete_looking_project(work, tmp_path):
    out = tmp_path / "fw"
    proc = popen("build", work / "m.json", "--target", "qemu-m3", "-o", out,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kids = _wait_for_child(proc, ["pio", "python", "scons", "arm-none-eabi"], timeout=120)
    _stop_and_check(proc, kids, signal.SIGTERM, 128 + signal.SIGTERM, within=10.0)
    assert not (out / ".pio" / "build" / "qemu-m3" / "firmware.elf").exists() or \
        not (out / "platformio.ini").exists(), "an interrupted build left a project that looks complete"
