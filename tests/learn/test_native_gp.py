"""The native GP engine (treegen.learn.native_gp, templates/gp) returns the Python GP's tree for the
same data, parameters and seed: the same draws, the same integer objectives, the same population."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared

from treegen import GPClassifier
from treegen.core.errors import TreegenError
from treegen.core.native import have_compiler
from treegen.learn import native_gp
from treegen.learn.inducers import gp

pytestmark = pytest.mark.skipif(not have_compiler(), reason="needs a host C compiler")

SAME = ("training_risk", "training_risk_int", "empirical_risk", "front_size", "iterations", "evaluations",
        "children_inserted", "risk", "gp_params")


def _data(name: str, rows: int = 250):
    X, y = load_shared(name)
    return X[:rows] / 32768.0, y[:rows] - y.min(), int(y.max() - y.min()) + 1


@pytest.mark.parametrize("risk", ["empirical", "vicinal"])
@pytest.mark.parametrize("name, seed", [("irs", 0), ("bcw", 1), ("veh", 2), ("gls", 3)])
def test_native_gp_equals_python(name, seed, risk):
    X01, y0, C = _data(name)
    params = gp.GPParams(max_iter=120, population=24, risk=risk, max_depth=6, init_max_depth=4)
    a, ia = gp.induce(X01, y0, C, params, seed=seed)
    b, ib = native_gp.induce(X01, y0, C, params, seed=seed)
    assert a.equals(b)
    assert {k: ia[k] for k in SAME} == {k: ib[k] for k in SAME} and ib["engine"] == "native"
    assert ia["children_inserted"] > 0 and a.n_leaves >= 2


def test_native_gp_callbacks_and_sigma2():
    X01, y0, C = _data("pid", 200)
    calls = {"py": [], "c": []}
    params = gp.GPParams(max_iter=600, population=20, risk="vicinal", sigma2=0.01)
    a, _ = gp.induce(X01, y0, C, params, seed=9, callback=lambda *v: calls["py"].append(v))
    b, _ = native_gp.induce(X01, y0, C, params, seed=9, callback=lambda *v: calls["c"].append(v))
    assert a.equals(b) and calls["py"] == calls["c"] and [c[0] for c in calls["c"]] == [256, 512, 600]


def test_estimator_engines_agree_and_bad_seed():
    X, y = load_shared("bcw")
    X, y = X[:150], y[:150]
    kw = dict(max_iter=60, population=12, random_state=4)
    a = GPClassifier(engine="native", **kw).fit(X, y)
    b = GPClassifier(engine="python", **kw).fit(X, y)
    c = GPClassifier(**kw).fit(X, y)
    assert a.tree_.equals(b.tree_) and c.tree_.equals(b.tree_)
    assert (a.fit_info_["engine"], b.fit_info_["engine"], c.fit_info_["engine"]) == ("native", "python", "native")
    with pytest.raises(TreegenError, match="unknown"):
        GPClassifier(engine="gpu", **kw).fit(X, y)
    with pytest.raises(TreegenError, match="64-bit seed"):
        native_gp.induce(X / 32768.0, y - 1, 2, gp.GPParams(max_iter=1), seed=-1)
    # beyond the native engine's genome memory: one line from native, the Python reference under auto
    big = dict(max_iter=2, population=4, max_depth=30, random_state=1)
    with pytest.raises(TreegenError, match="MiB"):
        GPClassifier(engine="native", **big).fit(X, y)
    assert GPClassifier(**big).fit(X, y).fit_info_["engine"] == "python"
