"""The import table of docs/guide/export.md names every scikit-learn estimator the importer takes
(issue #34 point 8: RandomForestClassifier imported fine but was not listed), and each of those
imports from a pickle with ``treegen import --trust-pickle``, predicting as scikit-learn does."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from treegen.core.model import load

pytest.importorskip("sklearn")
joblib = pytest.importorskip("joblib")
from sklearn import ensemble, tree  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402

from treegen.importers.sklearn_values import VALUE_ESTIMATORS  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "export.md"
CLASSIFIERS = ("DecisionTreeClassifier", "RandomForestClassifier", "ExtraTreesClassifier")
SUPPORTED = CLASSIFIERS + VALUE_ESTIMATORS


def _sklearn_row() -> str:
    rows = [ln for ln in DOC.read_text(encoding="utf-8").splitlines() if ln.startswith("| scikit-learn")]
    assert len(rows) == 1, rows
    return rows[0]


def _listed(row: str, name: str) -> bool:
    """``name`` in the row: by itself, or by a ``Prefix*`` pattern the row gives."""
    cells = re.findall(r"`([A-Za-z*]+)`", row)
    return any(c == name or (c.endswith("*") and name.startswith(c[:-1])) for c in cells)


def test_the_table_lists_every_supported_estimator():
    row = _sklearn_row()
    missing = [n for n in SUPPORTED if not _listed(row, n)]
    assert not missing, f"docs/guide/export.md's import table omits {missing}"


@pytest.mark.parametrize("name", SUPPORTED)
def test_every_listed_estimator_imports_from_a_pickle(name, tmp_path, capsys):
    X, y = load_iris(return_X_y=True)
    cls = getattr(ensemble, name, None) or getattr(tree, name)
    kw = {"random_state": 0}
    if "Forest" in name or "Trees" in name or "Boosting" in name:
        kw["max_iter" if "Hist" in name else "n_estimators"] = 3
    est = cls(**kw).fit(X, y if "Classifier" in name else y.astype(float))
    joblib.dump(est, tmp_path / "m.joblib")
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",", header="a,b,c,d,label", comments="")
    code, out, err = run_cli(capsys, ["import", tmp_path / "m.joblib", "--trust-pickle", "-o", tmp_path / "m.json",
                                      "--data", tmp_path / "d.csv"])
    assert code == 0, err
    model = load(tmp_path / "m.json")
    got = model.predict(X)
    if "Classifier" in name:
        assert np.array_equal(got, est.predict(X))
    else:
        assert np.allclose(got, est.predict(X), rtol=0, atol=1e-9)
