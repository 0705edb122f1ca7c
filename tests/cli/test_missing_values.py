"""Missing values in a CSV (issue #34 point 7): empty cells and ``nan`` are missing values wherever the
model routes them (an imported model whose library has default directions): predict and eval answer as
the library does, and hil checks those rows through the float32 export (the Q15 entry takes no NaN).
A model without a missing direction refuses them in one line that says why."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from conftest import assert_user_error, run_cli
from treegen.core.model import save

pytest.importorskip("sklearn")
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402

from treegen.importers import from_sklearn  # noqa: E402


def _write(path, X, y, names):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names + ["label"])
        for k, (row, label) in enumerate(zip(X, y)):
            # both spellings of a missing value: an empty field and nan (any case)
            w.writerow([("" if k % 2 else "NaN") if np.isnan(v) else repr(float(v)) for v in row] + [int(label)])


@pytest.fixture(scope="module")
def hgb(tmp_path_factory):
    d = tmp_path_factory.mktemp("missing")
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :8].copy()
    X[np.random.default_rng(0).random(X.shape) < 0.08] = np.nan
    clf = HistGradientBoostingClassifier(max_iter=8, max_depth=3, random_state=0).fit(X[:400], y[:400])
    save(from_sklearn(clf), d / "hgb.json")
    names = [f"x{i}" for i in range(X.shape[1])]
    _write(d / "test.csv", X[400:], y[400:], names)
    assert np.isnan(X[400:]).any(axis=1).sum() > 20          # the rows the old reader refused
    return d, clf, X[400:], y[400:]


def test_predict_and_eval_read_missing_cells_as_the_library(hgb, capsys):
    d, clf, X, y = hgb
    code, out, err = run_cli(capsys, ["predict", d / "hgb.json", d / "test.csv", "-o", d / "pred.csv"])
    assert code == 0, err
    pred = np.loadtxt(d / "pred.csv", skiprows=1)
    assert np.array_equal(pred, clf.predict(X))
    code, out, err = run_cli(capsys, ["eval", d / "hgb.json", d / "test.csv"])
    assert code == 0, err
    correct = int(np.sum(clf.predict(X) == y))
    assert f"({correct}/{len(y)})" in out, out


def test_a_model_without_missing_directions_refuses_them(hgb, tmp_path, capsys):
    d, _, _, _ = hgb
    data = tmp_path / "train.csv"
    rng = np.random.default_rng(1)
    X = rng.random((60, 3))
    y = (X[:, 0] > 0.5).astype(int)
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", header="a,b,c,label", comments="")
    code, out, err = run_cli(capsys, ["fit", data, "--algo", "cart", "-o", tmp_path / "cart.json"])
    assert code == 0, err
    holes = tmp_path / "holes.csv"
    holes.write_text("a,b,c,label\n0.1,,0.3,0\n")
    line = assert_user_error(capsys, ["predict", tmp_path / "cart.json", holes], "no direction for missing values")
    assert "line 2, column 'b'" in line
    holes.write_text("a,b,c,label\n0.1,nan,0.3,0\n")
    assert_user_error(capsys, ["eval", tmp_path / "cart.json", holes], "no direction for missing values")
    # training data: still refused (the inducers take no missing values)
    assert_user_error(capsys, ["fit", holes, "--algo", "cart", "-o", tmp_path / "h.json"], "missing value")


def test_hil_checks_rows_with_missing_values_through_the_float32_export(hgb, tmp_path, capsys):
    d, clf, X, y = hgb
    code, out, err = run_cli(capsys, ["hil", d / "hgb.json", "--target", "native", "--data", d / "test.csv",
                                      "-o", tmp_path / "fw", "--json", tmp_path / "hil.json"])
    assert code == 0, (out, err)
    rep = json.loads((tmp_path / "hil.json").read_text())
    missing = int(np.isnan(X).any(axis=1).sum())
    assert rep["rows_missing"] == missing and rep["rows"] == len(y) - missing
    assert rep["float32"]["data_rows"] == len(y) and rep["float32"]["mismatches"] == 0
    assert f"+ {missing} rows with missing or infinite values" in out
    assert "result          PASS" in out
