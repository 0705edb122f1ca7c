"""Issue #34, the export side of a new user's first hour: ``treegen export`` of an imported float model
is exact by default (point 1), its messages say what they mean (point 3)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli

sklearn = pytest.importorskip("sklearn")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
joblib = pytest.importorskip("joblib")

from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.ensemble import GradientBoostingClassifier  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("first_hour")
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[::2], y[::2]
    xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1, random_state=0).fit(X, y).get_booster() \
        .save_model(d / "x.json")
    lgb.LGBMClassifier(n_estimators=8, num_leaves=6, verbose=-1, n_jobs=1, random_state=0).fit(X, y) \
        .booster_.save_model(d / "l.txt")
    joblib.dump(GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y), d / "gb.joblib")
    joblib.dump(DecisionTreeClassifier(max_depth=5, random_state=0).fit(X, y), d / "dt.joblib")
    header = ",".join([f"f{i}" for i in range(X.shape[1])] + ["label"])
    np.savetxt(d / "train.csv", np.column_stack([X, y]), delimiter=",", header=header, comments="",
               fmt=["%.17g"] * X.shape[1] + ["%d"])
    return d


@pytest.mark.parametrize("src", ["x.json", "l.txt", "gb.joblib", "dt.joblib"])
def test_imported_float_model_exports_exact_by_default(files, capsys, src):
    """Point 1: no --dtype -> the float32 export of the source's own tests, ``exact yes``. Before the
    change the default was q15: ``exact no`` (99.8 %), and the boosted q15 C had no float entry."""
    d = files
    code, out, err = run_cli(capsys, ["import", d / src, "--trust-pickle", "--data", d / "train.csv",
                                      "-o", d / f"{src}.m.json"])
    assert code == 0, err
    code, out, err = run_cli(capsys, ["export", d / f"{src}.m.json", "--target", "qemu-m4", "--data",
                                      d / "train.csv", "--ignore-names", "-o", d / f"{src}_c"])
    assert code == 0, err
    assert ("dtype f32 (auto" if src != "dt.joblib" else "(auto") in out, out
    exact = next(line for line in out.splitlines() if line.startswith("exact "))
    assert exact.split()[1].rstrip(",") == "yes", exact
    if src == "dt.joblib":
        return                          # every threshold on its Q15 grid: q15 is exact (and chosen)
    # an explicit --dtype q15 still gives the fixed-point export, stated as inexact
    code, out, err = run_cli(capsys, ["export", d / f"{src}.m.json", "--target", "qemu-m4", "--dtype", "q15",
                                      "-o", d / f"{src}_q"])
    assert code == 0, err
    assert "dtype q15," in out and "exact           no" in out


def test_trained_model_keeps_q15_default(tmp_path):
    """treegen-trained models stay Q15 (exact by construction on the grid)."""
    from treegen.core.model import Model  # noqa: F401
    from treegen.emit.options import default_dtype
    from treegen.learn.estimators import make_estimator

    X, y = load_breast_cancer(return_X_y=True)
    est = make_estimator("cart", max_depth=3, random_state=0).fit(X, y)
    assert default_dtype(est.model_) == "q15"
