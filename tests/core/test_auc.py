"""ROC AUC (treegen.core.metrics.roc_auc_*) against scikit-learn's roc_auc_score."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from treegen.core.errors import TreegenError
from treegen.core.metrics import roc_auc_binary, roc_auc_ovr


@pytest.mark.parametrize("seed", range(5))
def test_binary_auc_equals_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 300)
    score = np.round(rng.random(300) + 0.3 * y, 1)          # many ties
    assert roc_auc_binary(y == 1, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)
    P = np.column_stack([1 - score / 2, score / 2])
    assert roc_auc_ovr(y, P)["auc"] == pytest.approx(roc_auc_score(y, P[:, 1]), abs=1e-12)


@pytest.mark.parametrize("k", [3, 5])
def test_multiclass_ovr_macro_equals_sklearn(k):
    rng = np.random.default_rng(k)
    y = rng.integers(0, k, 400)
    P = rng.dirichlet(np.ones(k), 400)
    P[np.arange(400), y] += 0.3
    P = np.round(P / P.sum(axis=1, keepdims=True), 2)
    P = P / P.sum(axis=1, keepdims=True)
    ref = roc_auc_score(y, P, multi_class="ovr", average="macro")
    got = roc_auc_ovr(y, P)
    assert got["auc"] == pytest.approx(ref, abs=1e-12)
    assert len(got["per_class"]) == k


def test_undefined_auc():
    with pytest.raises(TreegenError):
        roc_auc_binary(np.ones(4, dtype=bool), np.arange(4.0))
    out = roc_auc_ovr(np.array([0, 1, 0, 1]), np.full((4, 3), 1 / 3))     # class 2 has no row
    assert out["per_class"][2] is None and out["auc"] == pytest.approx(0.5)
