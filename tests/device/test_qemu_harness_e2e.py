"""End to end on the emulated boards: model -> PlatformIO project (harness + model) -> offline
``pio run`` -> QEMU (mps2-an385 / an386 / an500) -> INFO, PREDICT, BENCH and PING over the socket UART
with treegen.device.protocol.DeviceClient; every prediction equals the Python fixed-point model
(treegen.emit.quantize). Also ``treegen flash`` for an emulated target.

FAILS (never skips) when arm-none-eabi-gcc or qemu-system-arm is missing (scripts/setup.sh).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import DATASETS
from pio_projects import BUILDS, built_project, model, q15_rows

from treegen import __version__
from treegen.core.model import save
from treegen.device.emulator import QemuBoard
from treegen.device.protocol import CounterUnit, DeviceClient
from treegen.emit.quantize import predict_model_q15, predict_q15, quantize_model

pytestmark = pytest.mark.hil

EXPECTED_VARIANT = {"qemu-m3": "q15-table-scalar", "qemu-m4": "q15-table-dsp", "qemu-m7": "q15-unrolled-"}


@pytest.fixture(scope="module")
def pio_root(tmp_path_factory):
    root = tmp_path_factory.getbasetemp() / "pio-builds"
    root.mkdir(exist_ok=True)
    return root


def expected_classes(model, X):
    qtrees = quantize_model(model, X)
    if len(qtrees) == 1:
        return predict_q15(qtrees[0], X)
    return predict_model_q15(qtrees, model.n_classes, X)


@pytest.mark.parametrize("target", sorted(BUILDS))
def test_info_predict_bench_over_the_socket_uart(pio_root, target):
    built = built_project(target, pio_root)
    m = built.model
    X = q15_rows(m)
    expected = expected_classes(m, X)
    with QemuBoard(target, built.elf) as board:
        with DeviceClient.open(board.url, timeout=20) as dev:
            info = dev.info()
            assert info.protocol_version == 1
            assert (info.n_features, info.n_classes) == (m.n_features, m.n_classes)
            assert info.model_hash == m.hash()
            assert info.target == target and info.treegen_version == __version__
            assert info.variant.startswith(EXPECTED_VARIANT[target])
            assert info.counter_unit == CounterUnit.INSTRUCTIONS
            assert info.max_batch >= 1 and info.capabilities & 0b11 == 0b11

            got = dev.predict(X)                     # every row of the dataset, in max_batch batches
            assert got.shape == expected.shape
            mismatch = np.flatnonzero(got != expected)
            assert mismatch.size == 0, f"{mismatch.size} rows differ, first {mismatch[:5]}"

            assert dev.ping(bytes(range(64))) == bytes(range(64))

            row = X[0]
            a = dev.bench(row, 1000)
            b = dev.bench(row, 1000)
            assert a.unit == CounterUnit.INSTRUCTIONS and a.n_iter == 1000
            assert a.cls == expected[0]
            per_call = a.total / a.n_iter
            assert 10 < per_call < 5000, per_call
            # deterministic under -icount: equal up to the 40-instruction SysTick resolution per chunk
            assert abs(a.total - b.total) <= 40 * 16, (a, b)
        assert board.poll() is None


@contextlib.contextmanager
def started_flash(cmd: list[str]):
    """Run `treegen flash` for an emulated target: yields (process, serial URL, stdout lines so far);
    on exit the process group (treegen and its QEMU) is killed if still running."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        lines: list[str] = []
        while not lines or not lines[-1].startswith("serial"):
            line = proc.stdout.readline()
            assert line, f"treegen flash ended early: {lines} {proc.stderr.read()}"
            lines.append(line)
        yield proc, lines[-1].split()[1], lines
    finally:
        if proc.poll() is None:
            # SIGTERM: treegen stops its QEMU (which runs in a process group of its own) and exits;
            # SIGKILL to treegen's group only if it does not
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_treegen_flash_runs_qemu_until_interrupted(pio_root, tmp_path):
    """`treegen flash` on an emulated target: reuses the up-to-date build, prints the pyserial URL,
    serves until SIGINT, then stops QEMU and exits 0."""
    built = built_project("qemu-m4", pio_root)
    model_file = tmp_path / "veh.json"
    save(built.model, model_file)
    cmd = [sys.executable, "-m", "treegen", "flash", str(model_file), "--target", "qemu-m4",
           "-o", str(built.project), "--layout", built.layout, "--variant", built.variant]
    with started_flash(cmd) as (proc, url, lines):
        assert any("(up to date)" in ln for ln in lines), lines
        assert url.startswith("socket://127.0.0.1:")
        with DeviceClient.open(url, timeout=20) as dev:
            assert dev.info().model_hash == built.model.hash()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "stopped" in out


def test_board_training_path_flash_then_hil_over_the_port(tmp_path):
    """The path a real board takes for on-device training, on qemu-m4: `treegen flash --train --data`
    (build + start; a board would be uploaded), then `treegen hil --train --port URL` against it:
    device tree and fitness identical to the host's."""
    model_file = tmp_path / "veh.json"
    save(model("efti"), model_file)
    data = DATASETS / "veh.csv.gz"
    cmd = [sys.executable, "-m", "treegen", "flash", str(model_file), "--target", "qemu-m4",
           "-o", str(tmp_path / "proj"), "--train", "--data", str(data)]
    with started_flash(cmd) as (_, url, lines):
        assert any("engine for 846 rows x 18 attributes" in ln for ln in lines), lines
        hil = subprocess.run([sys.executable, "-m", "treegen", "hil", str(model_file), "--target", "qemu-m4",
                              "--port", url, "--data", str(data), "--train", "--iters", "300", "--seed", "4"],
                             capture_output=True, text=True, timeout=300)
        assert hil.returncode == 0, hil.stdout + hil.stderr
        assert "train           IDENTICAL" in hil.stdout and "result          PASS" in hil.stdout
