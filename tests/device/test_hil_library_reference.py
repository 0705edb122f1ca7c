"""HIL's float reference of an imported ensemble is the source library's own arithmetic (issue #32):
LightGBM and HistGradientBoosting models trained with missing values hold splits at threshold +inf
("every value left", NaN apart); an input of exactly +inf must go where the library sends it, on the
host model, in the float32 C on the device, and in the probes of ``--float-ulps``. The test plants the
old import bug (the +inf threshold stored as the largest finite float32) and requires HIL to fail on
it, which it did not while HIL compared the device with treegen's own model of the library.

One agreement figure (issue #34 point 2): ``export`` and ``hil`` measure the same Q15 export against
the same reference (the library, on the raw rows) and report the same agreement."""

from __future__ import annotations

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")
from sklearn import ensemble as E  # noqa: E402

import treegen  # noqa: E402
from treegen.device import hil  # noqa: E402
from treegen.device.library_ref import library_ensemble, reference_classes  # noqa: E402
from treegen.importers import from_lightgbm, from_sklearn  # noqa: E402
from treegen.importers.ensemble import F32_MAX, ImportedEnsemble, le_threshold  # noqa: E402


def _missing_data():
    """Feature 0 missing in 30 % of the rows, and its missingness predicts the target: both libraries
    split on it at threshold +inf."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    miss = rng.random(400) < 0.3
    X[miss, 0] = np.nan
    y = (miss ^ (X[:, 1] > 0.8)).astype(int)
    yr = 3.0 * miss + X[:, 1] + 0.1 * rng.normal(size=400)
    return X, y, yr


def _models():
    X, y, yr = _missing_data()
    X = X.astype(np.float32).astype(np.float64)      # float32 values: what the exports and the device take
    lgbm = lgb.LGBMClassifier(n_estimators=10, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    hgb = E.HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(X, yr)
    return {"lightgbm-binary": (lgbm, from_lightgbm, X, y), "hgb-regressor": (hgb, from_sklearn, X, yr)}


MODELS = _models()


def _clipped(self, tree):     # the planted bug: +inf stored as the largest finite float32
    out = np.zeros(tree.n_nodes)
    for node in np.flatnonzero(tree.left != -1):
        out[node] = np.clip(le_threshold(float(tree.threshold[node]), self.op), -F32_MAX, F32_MAX)
    return out


def _inf_rows(X):
    rows = np.where(np.isnan(X[:50]), 0.0, X[:50]).astype(np.float32)   # the models' float32 inputs
    rows[:, 0] = np.inf
    return rows.astype(np.float64)


@pytest.mark.parametrize("key", list(MODELS))
def test_plus_inf_goes_where_the_library_sends_it(key):
    est, imp, X, _ = MODELS[key]
    model = imp(est, X=X)
    assert any(np.isposinf(t.raw_threshold).any() for t in model.trees)
    Z = _inf_rows(X)
    lib = est.predict(Z) if key == "hgb-regressor" else est.booster_.predict(Z, raw_score=True)
    mine = model.predict(Z) if key == "hgb-regressor" else model.decision_function(Z)
    assert np.array_equal(np.asarray(mine, dtype=np.float64).view(np.int64), lib.view(np.int64))
    from treegen.device.float_probes import raw_threshold_probes

    probes, _ = raw_threshold_probes(model, np.where(np.isnan(X), 0.0, X), 2)
    assert np.isposinf(probes[:, 0]).any()             # --float-ulps probes +inf itself
    ens = library_ensemble(model)                      # kept in the model file, +inf included
    assert isinstance(ens, ImportedEnsemble)
    assert np.array_equal(ens.raw(Z)[:, 0].view(np.int64), lib.view(np.int64))


@pytest.mark.parametrize("key", list(MODELS))
def test_hil_float32_reference_is_the_library(key, tmp_path, monkeypatch):
    est, imp, X, y = MODELS[key]
    data = (np.where(np.isnan(X), 0.0, X)[::4], y[::4])
    model = imp(est, X=X)
    rep = hil.run_hil(model, "native", data=data, build_dir=tmp_path / "ok", bench_iters=0, float_ulps=2)
    f = rep["float32"]
    assert rep["ok"] is True and f["mismatches"] == 0 and f["thresholds"] > 0, rep["checks"]

    # planted: the import clips +inf; the device runs the clipped tests, the library does not
    monkeypatch.setattr(ImportedEnsemble, "le_thresholds", _clipped)
    bad = imp(est, X=X)
    assert not any(np.isposinf(t.raw_threshold).any() for t in bad.trees)
    rep = hil.run_hil(bad, "native", data=data, build_dir=tmp_path / "bad", bench_iters=0, float_ulps=2)
    assert rep["ok"] is False and rep["float32"]["mismatches"] > 0, rep["checks"]
    assert "differ from the reference" in [c for c in rep["checks"] if c["name"] == "float32"][0]["message"]


def test_export_and_hil_report_one_agreement_figure(tmp_path):
    """The Q15 export's agreement (export, on --data) == HIL's float agreement on the same rows: both the
    Q15 class against the library's class of the raw row. An XGBoost model on pid imported without data
    (the grid from the thresholds): quantisation changes classes there, so a figure measured against the
    float model on the Q15 grid (HIL's old one: 100 %) differs from this one."""
    xgb = pytest.importorskip("xgboost")
    from conftest import load_shared

    from treegen.importers import from_xgboost

    X, y = load_shared("pid")
    X = X.astype(np.float64)
    est = xgb.XGBClassifier(n_estimators=50, max_depth=3, random_state=0, n_jobs=1).fit(X, y - 1)
    model = from_xgboost(est)
    rep = treegen.export_model(model, tmp_path / "q", target="cortex-m4", dtype="q15", data=(X, y - 1),
                               measure=False)
    h = hil.run_hil(model, "native", data=(X, y - 1), build_dir=tmp_path / "hil", bench_iters=0)
    assert h["ok"] is True
    assert rep.agreement["fixed_vs_float"] < 0.99 and rep.unresolved_rows    # quantisation costs agreement here
    assert h["float_agreement"] == pytest.approx(rep.agreement["fixed_vs_float"], abs=1e-6)
    lib = reference_classes(model, X)
    fixed = hil.reference(model, X).fixed
    assert h["float_agreement"] == pytest.approx(float(np.mean(fixed == lib)), abs=1e-6)
    assert np.array_equal(lib, est.predict(X))
    assert h["float_accuracy"] == pytest.approx(float(np.mean(est.predict(X) == y - 1)), abs=1e-6)
    assert h["quantisation_rows"] == int(np.count_nonzero(fixed != lib)) > 0
