"""Vicinal-risk EFTI training on the device (issue 26): the engine built with TG_EFTI_VICINAL, the
Phi table const in flash and the kernel widths of the flash rows compiled beside them, evolves the
host's tree with the host's integer fitness (treegen.learn.engine.induce and the Python EFTI, both
with risk='vicinal'). The empirical engine's sources and parameter digest are unchanged.

FAILS (never skips) when a compiler or QEMU is missing (scripts/setup.sh).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from conftest import load_shared
from pio_projects import require_tools

from treegen import CARTClassifier
from treegen.core.errors import TreegenError
from treegen.device import train_firmware as tf
from treegen.device.emulator import QemuBoard
from treegen.device.protocol import DeviceClient
from treegen.device.train_hil import TrainingClient, build_train_firmware, run_train_hil
from treegen.learn import engine, vicinal_q16
from treegen.learn.inducers.efti import EFTIParams

PARAMS = EFTIParams(max_depth=4)
ITERS = 300
SIGMA2 = 0.05
#: params_digest(EFTIParams(max_depth=4)) before issue 26: the empirical engine's digest must not move
EMPIRICAL_DIGEST_DEPTH4 = "891fb5464e68be05"


def irs():
    X, y = load_shared("irs")
    classes, yi = np.unique(y, return_inverse=True)
    return X.astype(np.int64), yi.astype(np.int64), len(classes)


def test_vicinal_spec_widths_digest_and_refusals():
    X, y, C = irs()
    emp = tf.make_train_spec("qemu-m4", PARAMS, flash_data=(X, y, C))
    vic = tf.make_train_spec("qemu-m4", PARAMS, flash_data=(X, y, C), risk="vicinal", vicinity_sigma2=SIGMA2)
    assert not emp.vicinal and "vicinal" not in emp.sizes()
    assert emp.summary()["params_digest"] == tf.params_digest(PARAMS).hex() == EMPIRICAL_DIGEST_DEPTH4
    assert vic.summary()["params_digest"] not in (EMPIRICAL_DIGEST_DEPTH4,
                                                  tf.params_digest(PARAMS, risk="vicinal").hex())
    assert np.array_equal(vic.vicinal_sigma, vicinal_q16.sigma_q15(X / 32768.0, SIGMA2))
    # the recursion's arrays in RAM (the Phi table in flash)
    N = vic.sizes()["max_nodes"]
    assert tf.engine_static_bytes(vic.sizes()) - tf.engine_static_bytes(emp.sizes()) == 4 + 11 * N
    assert tf.flash_need(vic)["total"] - tf.flash_need(emp)["total"] == 4096 + 2 * X.shape[1] + 2048
    with pytest.raises(TreegenError, match="needs the rows in flash"):
        tf.make_train_spec("qemu-m4", PARAMS, max_rows=150, n_attr=4, n_classes=3, risk="vicinal")
    with pytest.raises(TreegenError, match="at most 65535 rows"):
        big = np.zeros((65536, 1), dtype=np.int64)
        tf.make_train_spec("qemu-m4", PARAMS, flash_data=(big, np.arange(65536) % 2, 2), risk="vicinal")


def test_vicinal_refused_in_one_line_where_only_the_empirical_risk_fits():
    """On the 16 KiB micro:bit, the most rows the empirical engine takes (depth 1, lean) leave no room
    for the recursion's arrays and stack: the refusal names the vicinal risk and what would fit."""
    from treegen.device.firmware import plan_train

    rng = np.random.default_rng(1)
    X = rng.integers(0, 32768, (4000, 18))
    y = np.arange(4000) % 2
    model = CARTClassifier(max_depth=1).fit(X[:50], y[:50]).model_

    def plan(n, **kw):
        spec = tf.make_train_spec("qemu-microbit", PARAMS, flash_data=(X[:n], y[:n], 2), depth_auto=True, **kw)
        return plan_train(model, tf._target("qemu-microbit"), spec, None)[0]

    with pytest.raises(TreegenError) as exc:
        plan(4000)
    most = int(str(exc.value).split("at most ")[1].split()[0])
    assert plan(most).max_depth == 1
    with pytest.raises(TreegenError, match=rf"rows in flash, vicinal risk, leanest mode .* at most \d+ rows would "
                                           rf"fit \(with the empirical risk all {most} fit: lean, depth 1"):
        plan(most, risk="vicinal")


def test_exported_library_trains_with_the_vicinal_risk_like_the_host(tmp_path):
    """export --train --risk vicinal: the library's example (widths of the flash rows passed to
    tg_efti_vicinal) compiles cleanly and evolves the host engine's tree and integer fitness."""
    require_tools("cc")
    X, y, C = irs()
    out = tmp_path / "lib"
    tf.export_train_library(out, "native", PARAMS, max_rows=0, n_attr=0, n_classes=0, data=(X, y, C), example=True,
                            risk="vicinal", vicinity_sigma2=SIGMA2)
    assert "tg_efti_vicinal(tg_efti_data_sigma_q15)" in (out / "example" / "main.c").read_text()
    exe = tmp_path / "example"
    cc = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic", "-O2",
                         f"-DTG_EXAMPLE_ITERATIONS={ITERS}u", "-I", str(out), "-o", str(exe),
                         *map(str, sorted(out.glob("*.c"))), str(out / "example" / "main.c")],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    tree, info = engine.induce(X / 32768.0, y, C, replace(PARAMS, max_iter=ITERS), seed=1, risk="vicinal",
                               vicinity_sigma2=SIGMA2)
    assert int(re.search(r"^fitness (\d+)", run.stdout, re.M).group(1)) == info["fitness_int"]
    assert int(re.search(r"^nodes (\d+)", run.stdout, re.M).group(1)) == tree.n_nodes


@pytest.mark.hil
def test_qemu_m4_vicinal_training_equals_host(tmp_path):
    """irs on qemu-m4 (DSP): identical tree and integer vicinal fitness on the device, the host engine
    and the Python EFTI; TRAIN_INFO says vicinal and its RAM figure is exact; the host refuses to
    compare with the empirical risk, and the device refuses RAM rows."""
    require_tools()
    X, y, C = irs()
    spec = tf.make_train_spec("qemu-m4", PARAMS, flash_data=(X, y, C), risk="vicinal", vicinity_sigma2=SIGMA2)
    model = CARTClassifier(max_depth=1).fit(X, y).model_
    fw = build_train_firmware(model, "qemu-m4", tmp_path / "m4", spec)
    with QemuBoard(fw.target, fw.path) as board, DeviceClient.open(board.url, timeout=20) as client:
        ti = TrainingClient(client).info()
        assert ti.vicinal and ti.risk == "vicinal" and ti.has_flash_data
        assert ti.ram_bytes == tf.train_static_bytes(fw.spec, ptr_bytes=4)
        with pytest.raises(TreegenError, match="trains with the vicinal risk, empirical was asked for"):
            run_train_hil(PARAMS, (X, y), client, 3, ITERS, source="flash")
        rep = run_train_hil(PARAMS, (X, y), client, 3, ITERS, source="flash", risk="vicinal",
                            vicinity_sigma2=SIGMA2)
        t = rep["train"]
        assert rep["ok"] and t["identical"] and t["tree_equal_host"] and t["tree_equal_python"], rep
        assert t["device_fitness"] == t["host_fitness"] == t["python_fitness"]
        assert t["float_fitness"] == t["device_fitness"] / (X.shape[0] * 2.0 ** 48)
        assert t["risk"] == "vicinal" and t["iterations"] == ITERS
        assert rep["predict_trained"]["identical"]
        with pytest.raises(TreegenError, match="source flash"):
            run_train_hil(PARAMS, (X, y), client, 3, 10, source="ram", risk="vicinal", vicinity_sigma2=SIGMA2)
        assert board.poll() is None
