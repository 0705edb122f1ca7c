"""EFTI with the vicinal risk in its fitness (Python engine); the native engine refuses it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared

from treegen import EFTIClassifier
from treegen.core.errors import TreegenError
from treegen.learn import vicinal
from treegen.learn.inducers import efti


def test_vicinal_fitness_is_the_probability_of_correct_classification():
    X, y = load_shared("bcw")
    X01, y0 = X[:200] / 32768.0, y[:200] - 1
    tree, info = efti.induce(X01, y0, 2, efti.EFTIParams(max_iter=400, oversize_weight=0.0), seed=2,
                             risk="vicinal", vicinity_sigma2=0.1)
    sigma = vicinal.kernel_sigma(X01, 0.1)
    risk = vicinal.vicinal_risk(tree, X01, y0, sigma)
    # no size penalty (Ko = 0): fitness = 1 - vicinal risk, up to the 2**-16 rounding
    assert info["fitness"] == pytest.approx(1.0 - risk, abs=1e-4)
    assert info["training_vicinal_risk"] == pytest.approx(risk, abs=1e-12)
    assert info["risk"] == "vicinal" and info["vicinity_sigma2"] == 0.1
    emp, _ = efti.induce(X01, y0, 2, efti.EFTIParams(max_iter=400, oversize_weight=0.0), seed=2)
    assert not emp.equals(tree)                    # a different objective, a different search


def test_estimator_vicinal_runs_python_and_native_refuses():
    X, y = load_shared("bcw")
    X, y = X[:200], y[:200]
    a = EFTIClassifier(max_iter=300, risk="vicinal", random_state=1).fit(X, y)
    b = EFTIClassifier(max_iter=300, risk="vicinal", random_state=1, engine="python").fit(X, y)
    assert a.tree_.equals(b.tree_) and a.fit_info_["engine"] == "python"
    assert a.score(X, y) > 0.9
    with pytest.raises(TreegenError, match="native EFTI engine does not implement"):
        EFTIClassifier(max_iter=10, risk="vicinal", engine="native").fit(X, y)
    with pytest.raises(TreegenError):
        EFTIClassifier(max_iter=10, risk="vicinal", vicinity_sigma2=-1).fit(X, y)
    assert np.isfinite(a.fit_info_["fitness"])
