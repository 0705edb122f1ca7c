"""HIL of imported boosted models (issue #25): the firmware runs the q15 boosted export (integer sums);
PREDICT answers are compared with the Python integer model row by row: a boosted classifier (XGBoost)
and a boosted regressor (LightGBM), on the native harness (always) and on qemu-m4 (marker hil)."""

from __future__ import annotations

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402

from treegen.device import hil  # noqa: E402
from treegen.importers import from_lightgbm, from_xgboost  # noqa: E402


@pytest.fixture(scope="module")
def models():
    Xc, yc = load_breast_cancer(return_X_y=True)
    clf = from_xgboost(xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1).fit(Xc, yc), X=Xc)
    Xr, yr = load_diabetes(return_X_y=True)
    reg = from_lightgbm(lgb.LGBMRegressor(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(Xr, yr), X=Xr)
    return (clf, Xc[::3], yc[::3]), (reg, Xr[::3], yr[::3])


def _run(target, models, tmp_path):
    (clf, Xc, yc), (reg, Xr, yr) = models
    rep = hil.run_hil(clf, target, data=(Xc, yc), build_dir=tmp_path / "c", bench_iters=20)
    assert rep["ok"] is True and rep["mismatches"] == 0 and rep["rows"] == Xc.shape[0]
    assert rep["float_agreement"] >= 0.97
    rep = hil.run_hil(reg, target, data=(Xr, yr), build_dir=tmp_path / "r", bench_iters=20)
    assert rep["ok"] is True and rep["mismatches"] == 0 and rep["rows"] == Xr.shape[0]
    assert "int32 values identical" in rep["checks"][1]["message"]
    # the reference is what the device must send: one unit off in one row is a mismatch
    ref = hil.reference(reg, Xr, yr)
    assert hil.mismatch_rows(ref, ref.fixed + (np.arange(Xr.shape[0]) == 2), reg)[0]["row"] == 2


def test_native_boosted_classifier_and_regressor(models, tmp_path):
    _run("native", models, tmp_path)


@pytest.mark.hil
def test_qemu_m4_boosted_classifier_and_regressor(models, tmp_path):
    _run("qemu-m4", models, tmp_path)
