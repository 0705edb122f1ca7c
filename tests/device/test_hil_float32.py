"""HIL of the float32 export (issue #25): PREDICT_F32 answers with the float32 export's class and output
bits (a boosted classifier: XGBoost float32 raw score; a boosted regressor: LightGBM float64; a CART
regressor: float32 value), compared bit for bit with the reference on the data rows and +-N ulps around
every threshold; one wrong bit fails the check. Native harness always, qemu-m4 with marker hil."""

from __future__ import annotations

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402

from treegen.device import hil, hil_f32  # noqa: E402
from treegen.importers import from_lightgbm, from_xgboost  # noqa: E402
from treegen.learn.regressors import CARTRegressor  # noqa: E402


@pytest.fixture(scope="module")
def models():
    Xc, yc = load_breast_cancer(return_X_y=True)
    clf = from_xgboost(xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(Xc, yc), X=Xc)
    Xr, yr = load_diabetes(return_X_y=True)
    reg = from_lightgbm(lgb.LGBMRegressor(n_estimators=10, num_leaves=8, verbose=-1, n_jobs=1).fit(Xr, yr), X=Xr)
    cart = CARTRegressor(max_depth=4).fit(Xr, yr).model_
    return {"xgb": (clf, Xc[::4], yc[::4]), "lgbm": (reg, Xr[::4], yr[::4]), "cart": (cart, Xr[::4], yr[::4])}


def _float32_check(rep):
    c = [c for c in rep["checks"] if c["name"] == "float32"]
    assert len(c) == 1
    return c[0]


@pytest.mark.parametrize("key, what", [("xgb", "1 float32 output(s) and the class"),
                                       ("lgbm", "1 float64 output(s)"), ("cart", "1 float32 output(s)")])
def test_native_float32_export_is_bit_identical(models, key, what, tmp_path):
    model, X, y = models[key]
    rep = hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path, bench_iters=0, float_ulps=4)
    c = _float32_check(rep)
    assert rep["ok"] is True and c["ok"] is True, c
    f = rep["float32"]
    assert f["mismatches"] == 0 and f["data_rows"] == X.shape[0] and f["thresholds"] > 0
    assert f["rows"] == X.shape[0] + 9 * f["thresholds"]
    assert f"{what} bit-identical to the reference" in c["message"]


def test_one_wrong_bit_fails_the_check(models, tmp_path, monkeypatch):
    model, X, y = models["lgbm"]
    real = hil_f32.reference

    def off_by_one_ulp(m, rows, spec):        # the reference moved by one ulp in row 3: the device now differs
        cls, vals = real(m, rows, spec)
        vals = vals.copy()
        vals[3, 0] = np.nextafter(vals[3, 0], np.inf)
        return cls, vals

    monkeypatch.setattr(hil_f32, "reference", off_by_one_ulp)
    rep = hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path, bench_iters=0)
    c = _float32_check(rep)
    assert rep["ok"] is False and c["ok"] is False
    assert c["message"].startswith(f"1 of {X.shape[0]} float32 rows differ from the reference") and "row 3" in c["message"]


@pytest.mark.hil
def test_qemu_m4_float32_export_of_a_boosted_classifier_and_regressor(models, tmp_path):
    for key in ("xgb", "lgbm"):
        model, X, y = models[key]
        rep = hil.run_hil(model, "qemu-m4", data=(X, y), build_dir=tmp_path / key, bench_iters=0, float_ulps=8)
        assert rep["ok"] is True and rep["float32"]["mismatches"] == 0 and rep["float32"]["thresholds"] > 0


@pytest.mark.hil
def test_qemu_m4_float32_export_of_catboost_models(tmp_path):
    """CatBoost (issue #36): binary with NaN, multiclass, regression; double sums, scale and bias."""
    pytest.importorskip("catboost")
    from catboost_models import fit
    from treegen.importers.catboost_json import from_catboost

    for name, loss, nan in (("bc", "Logloss", True), ("iris", "MultiClass", False), ("diab", "RMSE", True)):
        est, X = fit(name, loss, nan, iterations=10, depth=3)
        rows = X[::8]
        model = from_catboost(est, X=X)
        rep = hil.run_hil(model, "qemu-m4", data=(rows, model.predict(rows)), build_dir=tmp_path / name,
                          bench_iters=0, float_ulps=8)
        assert rep["ok"] is True and rep["float32"]["mismatches"] == 0 and rep["float32"]["thresholds"] > 0
