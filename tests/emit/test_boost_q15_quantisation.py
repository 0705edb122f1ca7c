"""The boosted Q15 export's quantisation figures are computed (issue #32): ``quantisation N data rows of
--data take another branch`` counts the rows whose Q15 grid tests take another branch than the
library's own tests (it printed "no" for every model, an empty list in the code, while 2 to 45 of 500
rows do), and the agreement / value difference is the one definition of :mod:`treegen.core.metrics`."""

from __future__ import annotations

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402

import treegen  # noqa: E402
from conftest import run_cli  # noqa: E402
from treegen.core.model import save  # noqa: E402
from treegen.emit.lower_boost import lower_boost_q15  # noqa: E402
from treegen.importers import from_xgboost  # noqa: E402
from treegen.importers.xgboost_json import parse_xgboost  # noqa: E402


def _q15_leaf_values(tq, Xq):
    """Per row and tree, the integer leaf value the Q15 tables reach, walked here by hand."""
    out = np.zeros((Xq.shape[0], tq.roots.size), dtype=np.int64)
    for r in range(Xq.shape[0]):
        for k, i in enumerate(tq.roots.tolist()):
            while tq.feat[i] != tq.leaf_code:
                i = i + 1 if Xq[r, tq.feat[i]] <= tq.thr[i] else i + int(tq.right[i])
            out[r, k] = tq.values[tq.right[i]]
    return out


def _library_leaf_values(est, X, frac_bits):
    """Per row and tree, the library's leaf value (its own tests on the raw rows) on the Q15 value grid."""
    ens = parse_xgboost(est)
    Z = ens.as_float32_rows(X)
    return np.stack([np.rint(np.ldexp(t.value[t.leaves(Z, ens.op)], frac_bits)).astype(np.int64)
                     for t in ens.trees], axis=1)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_rows_taking_another_branch_are_counted(kind, tmp_path):
    if kind == "regressor":
        X, y = load_diabetes(return_X_y=True)
        est = xgb.XGBRegressor(n_estimators=20, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    else:
        X, y = load_breast_cancer(return_X_y=True)
        est = xgb.XGBClassifier(n_estimators=20, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    model = from_xgboost(est)             # no data: the scaling from the thresholds, cells wide enough to move rows
    rep = treegen.export_model(model, tmp_path / "q", target="cortex-m4", dtype="q15", data=(X, y), measure=False)
    tq = lower_boost_q15(model)
    Xq = model.scaling.to_q15(X)
    moved = np.flatnonzero(np.any(_q15_leaf_values(tq, Xq) != _library_leaf_values(est, X, tq.frac_bits), axis=1))
    assert moved.size > 0                 # the figure is not a constant "no"
    assert rep.unresolved_rows == moved.tolist()
    if kind == "regressor":
        got = np.ldexp(_q15_leaf_values(tq, Xq).sum(axis=1) + tq.base[0], -tq.frac_bits)
        diff = got - est.predict(X).astype(np.float64)
        assert rep.agreement["fixed_vs_float_rmse"] == pytest.approx(np.sqrt(np.mean(diff ** 2)), rel=1e-5)
    else:
        assert 0.9 < rep.agreement["fixed_vs_float"] < 1.0 or moved.size == 0


def test_cli_prints_the_count(tmp_path, capsys):
    X, y = load_diabetes(return_X_y=True)
    est = xgb.XGBRegressor(n_estimators=20, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    model = from_xgboost(est)
    rep = treegen.export_model(model, tmp_path / "api", target="cortex-m4", dtype="q15", data=(X, y), measure=False)
    mpath = tmp_path / "m.json"
    save(model, mpath)
    csv = tmp_path / "d.csv"
    with csv.open("w") as f:
        f.write(",".join(list(model.feature_names) + ["y"]) + "\n")
        for row, label in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{label!r}\n")
    code, out, err = run_cli(capsys, ["export", mpath, "-o", tmp_path / "cli", "--dtype", "q15", "--data", csv,
                                      "--label", "y", "--target", "cortex-m4"])
    assert code == 0, err
    n = len(rep.unresolved_rows)
    assert n > 0 and f"quantisation    {n} data rows of --data take another branch" in out, out
