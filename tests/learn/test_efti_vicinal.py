"""EFTI with the vicinal risk in its fitness: the Python reference and the native engine give the
identical tree (the integer recursion of treegen.learn.vicinal_q16 in both)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared

from treegen import EFTIClassifier
from treegen.core.errors import TreegenError
from treegen.core.native import have_compiler
from treegen.learn import engine, vicinal
from treegen.learn.inducers import efti

native = pytest.mark.skipif(not have_compiler(), reason="needs a host C compiler")


def _data(name: str, rows: int | None = None):
    X, y = load_shared(name)
    X01, y0 = X[:rows] / 32768.0, y[:rows] - y.min()
    return X01, y0, int(y0.max()) + 1


def test_vicinal_fitness_is_the_probability_of_correct_classification():
    X01, y0, C = _data("bcw", 200)
    tree, info = efti.induce(X01, y0, C, efti.EFTIParams(max_iter=400, oversize_weight=0.0), seed=2,
                             risk="vicinal", vicinity_sigma2=0.1)
    sigma = vicinal.kernel_sigma(X01, 0.1)
    risk = vicinal.vicinal_risk(tree, X01, y0, sigma)
    # no size penalty (Ko = 0): fitness = 1 - vicinal risk, up to the integer recursion's rounding
    assert info["fitness"] == pytest.approx(1.0 - risk, abs=1e-4)
    assert info["training_vicinal_risk"] == pytest.approx(risk, abs=1e-12)
    assert info["risk"] == "vicinal" and info["vicinity_sigma2"] == 0.1
    emp, _ = efti.induce(X01, y0, C, efti.EFTIParams(max_iter=400, oversize_weight=0.0), seed=2)
    assert not emp.equals(tree)                    # a different objective, a different search


@native
@pytest.mark.parametrize("name, seed, sigma2, options", [
    ("irs", 0, 0.1, {}),
    ("irs", 3, 0.001, {"dipole": "node", "coefficient_mutation_rate": 0.05}),
    ("gls", 1, 0.1, {"max_depth": 4}),
    ("veh", 2, 1.0, {"partial_reclassification": False}),
    ("pid", 4, 0.01, {}),
])
def test_native_vicinal_equals_python(name, seed, sigma2, options):
    X01, y0, C = _data(name, 300)
    params = efti.EFTIParams(max_iter=600, oversize_weight=0.0, **options)
    a, ia = efti.induce(X01, y0, C, params, seed=seed, risk="vicinal", vicinity_sigma2=sigma2)
    b, ib = engine.induce(X01, y0, C, params, seed=seed, risk="vicinal", vicinity_sigma2=sigma2)
    assert a.equals(b) and a.n_leaves >= 3
    assert ia["fitness_int"] == ib["fitness_int"] and ia["fitness"] == ib["fitness"]
    assert ib["risk"] == "vicinal" and ib["training_vicinal_risk"] == ia["training_vicinal_risk"]


@native
def test_native_vicinal_with_a_constant_attribute():
    X01, y0, C = _data("irs")
    X01 = np.hstack([X01, np.full((X01.shape[0], 1), 0.25)])      # kernel width 0 on that attribute
    params = efti.EFTIParams(max_iter=500, oversize_weight=0.0)
    a, ia = efti.induce(X01, y0, C, params, seed=7, risk="vicinal")
    b, ib = engine.induce(X01, y0, C, params, seed=7, risk="vicinal")
    assert a.equals(b) and ia["fitness_int"] == ib["fitness_int"]


def test_estimator_vicinal_engines_agree():
    X, y = load_shared("bcw")
    X, y = X[:200], y[:200]
    b = EFTIClassifier(max_iter=300, risk="vicinal", random_state=1, engine="python").fit(X, y)
    assert b.fit_info_["engine"] == "python" and b.score(X, y) > 0.9
    if have_compiler():
        a = EFTIClassifier(max_iter=300, risk="vicinal", random_state=1).fit(X, y)
        c = EFTIClassifier(max_iter=300, risk="vicinal", random_state=1, engine="native").fit(X, y)
        assert a.fit_info_["engine"] == c.fit_info_["engine"] == "native"
        assert a.tree_.equals(b.tree_) and c.tree_.equals(b.tree_)
    with pytest.raises(TreegenError):
        EFTIClassifier(max_iter=10, risk="vicinal", vicinity_sigma2=-1).fit(X, y)
    assert np.isfinite(b.fit_info_["fitness"])


@native
def test_native_vicinal_row_limit():
    X01 = (np.arange(65536 * 2) % 32768).reshape(-1, 2) / 32768.0
    y0 = np.arange(65536) % 2
    with pytest.raises(TreegenError, match="at most 65535 rows"):
        engine.induce(X01, y0, 2, efti.EFTIParams(max_iter=1), risk="vicinal")
