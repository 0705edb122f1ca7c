"""HIL of a regression model (issue #25): PREDICT answers each row with its int32 fixed-point value,
compared bit for bit with the Python fixed-point model, on the native harness (always) and on
qemu-m4 (marker hil); a value the device gets wrong is a mismatch."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from treegen.device import hil
from treegen.device.protocol import DeviceInfo
from treegen.emit.lower_value import value_vote
from treegen.learn.regressors import RFRegressor


@pytest.fixture(scope="module")
def forest():
    d = load_diabetes(scaled=False)
    X, y = d.data, d.target
    return X, y, RFRegressor(n_trees=5, max_depth=6, random_state=2).fit(X, y).model_


def _check(report, model, X):
    assert report["ok"] is True and report["mismatches"] == 0 and report["rows"] == X.shape[0]
    assert report["value_frac_bits"] == value_vote(model).frac_bits
    diff = report["float_difference"]
    assert diff["max_abs"] <= value_vote(model).bound and diff["rmse"] <= diff["max_abs"]
    assert report["rmse"] == pytest.approx(np.sqrt(np.mean((model.predict(X) - load_diabetes().target) ** 2)),
                                           rel=1e-6)
    assert "int32 values identical" in report["checks"][1]["message"]


def test_native_device_returns_the_fixed_point_values(forest, tmp_path):
    X, y, model = forest
    report = hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path / "fw", bench_iters=50)
    _check(report, model, X)
    # the reference really is the value the device must send: one LSB off is a mismatch
    ref = hil.reference(model, X, y)
    assert hil.mismatch_rows(ref, ref.fixed + (np.arange(X.shape[0]) == 3), model)[0]["row"] == 3
    info = DeviceInfo(1, 10, 0, 512, 10, 1, 1, "0" * 64, "native", "0", "q15")
    assert info.class_bytes == 4 and info.is_regression


@pytest.mark.hil
def test_qemu_m4_returns_the_fixed_point_values(forest, tmp_path):
    X, y, model = forest
    report = hil.run_hil(model, "qemu-m4", data=(X, y), build_dir=tmp_path / "fw", bench_iters=50)
    _check(report, model, X)
    assert report["counter_unit"] == "instructions"
