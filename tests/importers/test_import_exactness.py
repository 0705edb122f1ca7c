"""Imported scikit-learn trees and forests on *every* float32 input near their thresholds.

For each threshold of each tree: the float32 values within +-64 ulps of scikit-learn's threshold and
of the q15 model's raw split (the float32 where its Q15 value crosses the grid threshold), in one
base row. All rows of a model go through one host-compiled driver run per entry point.

- f32 export: Python model of the C (``predict_f32``) == host C (``tg_<name>_predict``) ==
  ``Model.predict`` == scikit-learn's ``predict`` on every row (trees, and forests whose soft vote is
  exact); for a forest with impure leaves, equality on every row whose top two class means differ by
  more than the reported bound -- and the measured count of the others.
- q15 export: the C raw-input scaling gives the Python model's Q15 values on every row, and
  ``tg_<name>_predict`` == the Python fixed-point model.
- ``predict_proba`` (C, fixed point) == its Python model bit for bit, within 2^-15 of scikit-learn.
"""

from __future__ import annotations

import numpy as np
import pytest
from export_models import (build_driver, build_proba_driver, build_scale_driver, run_driver, run_proba_driver,
                           run_scale_driver)
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from treegen.core.tree import LEAF
from treegen.emit import quantize as qz
from treegen.emit.check import f32_leaves, predict_f32, predict_fixed
from treegen.emit.export import build_context, export_model
from treegen.importers import from_sklearn
from treegen.emit.lower_f32 import f32_axis_split

ULPS = 64


def _wide_scales():
    """A dataset whose features span 1e-3 .. 1e3 in scale (wine's features rescaled)."""
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    scales = np.logspace(-3, 3, X.shape[1])
    return X * scales + 10 * scales, y


def _data(name):
    return {"breast_cancer": lambda: load_breast_cancer(return_X_y=True), "wine": lambda: load_wine(return_X_y=True),
            "wide": _wide_scales}[name]()


CASES = {
    "tree-breast_cancer": ("breast_cancer", lambda: DecisionTreeClassifier(random_state=0)),
    "tree-wide": ("wide", lambda: DecisionTreeClassifier(random_state=1, min_samples_leaf=2)),
    "forest-wine-pure": ("wine", lambda: RandomForestClassifier(n_estimators=6, random_state=2)),
    "forest-wide-impure": ("wide", lambda: RandomForestClassifier(n_estimators=7, min_samples_leaf=4,
                                                                   random_state=3)),
}


def _ulp_range(v: np.float32, n: int = ULPS) -> np.ndarray:
    """The float32 values within n ulps of v (v included)."""
    bits = np.array([v], dtype=np.float32).view(np.int32)[0]
    if bits < 0:  # negative floats: step through the ordinals
        ords = -(bits & 0x7FFFFFFF) + np.arange(-n, n + 1)
    else:
        ords = bits + np.arange(-n, n + 1)
    ords = ords.astype(np.int64)
    out = np.where(ords >= 0, ords, 0x80000000 | -ords).astype(np.uint32).view(np.float32)
    return out[np.isfinite(out)]


def _neighbour_rows(est, model, X, rng) -> np.ndarray:
    """+-64 ulps around every threshold and around its Q15 raw split, each in a random row of X."""
    rows = []
    trees = est.estimators_ if hasattr(est, "estimators_") else [est]
    for sk, tree in zip(trees, model.trees):
        qt = qz.quantize_tree(tree)
        order = [k for k in tree.preorder() if tree.left[k] != LEAF]
        st = sk.tree_
        for node in np.flatnonzero(st.children_left != LEAF):
            f, t = int(st.feature[node]), float(st.threshold[node])
            below, _ = qz.f32_below_above(t)
            values = [_ulp_range(np.float32(below))]
            values_q = []
            for k in range(qt.n_internal):  # the Q15 splits of the same feature and threshold
                if int(qt.feature[k]) == f and tree.raw_threshold[order[k]] == t:
                    op, tq = f32_axis_split(float(model.scaling.offset[f]), float(model.scaling.scale[f]),
                                            int(qt.threshold[k]))
                    if tq is not None and np.isfinite(tq):
                        values_q.append(_ulp_range(np.float32(tq)))
            vals = np.unique(np.concatenate(values + values_q))
            base = np.repeat(X[rng.integers(0, X.shape[0])][None, :], vals.size, axis=0)
            base[:, f] = vals
            rows.append(base)
    return np.vstack(rows).astype(np.float32)


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    data_name, make = CASES[request.param]
    X, y = _data(data_name)
    est = make().fit(X, y)
    model = from_sklearn(est, X=X)
    R = _neighbour_rows(est, model, X, np.random.default_rng(11))
    return request.param, est, model, X, y, R


def _sk_index(est, R):
    return np.searchsorted(est.classes_, est.predict(R))


def test_f32_every_neighbour_of_every_threshold(case, tmp_path):
    key, est, model, X, y, R = case
    assert model.has_raw_thresholds and model.contract == "float32"
    soft = est.__class__.__name__ != "DecisionTreeClassifier"
    rep = export_model(model, tmp_path, target="cortex-m4", dtype="f32", name="m", measure=False)
    sv = qz.soft_vote(model) if soft else None
    ctx = build_context(model, name="m", target=__import__("treegen.core.targets", fromlist=["get"]).get("cortex-m4"),
                        layout="table", dtype="f32", variant="scalar", qtrees=None, soft=sv)
    py = predict_f32(ctx["trees"], R, model.n_classes, sv)
    c = run_driver(build_driver(tmp_path, "m", float_input=True, predict="tg_m_predict"), R, tmp_path)
    sk = _sk_index(est, R)
    np.testing.assert_array_equal(c, py)                       # host C == its Python model, every row
    assert soft is False or sv.exact == key.endswith("-pure")    # both kinds of forest are covered
    if not soft or sv.exact:
        assert rep.exact
        np.testing.assert_array_equal(py, sk)                  # == scikit-learn on every row
        np.testing.assert_array_equal(model.predict_index(R.astype(np.float64)), sk)
    else:
        assert not rep.exact and rep.soft_vote_bound == pytest.approx(2.0 ** -15, rel=1e-6)
        p = np.sort(est.predict_proba(R), axis=1)
        clear = p[:, -1] - p[:, -2] > rep.soft_vote_bound
        np.testing.assert_array_equal(py[clear], sk[clear])     # guaranteed outside the near-tie zone
        assert np.mean(py == sk) >= 0.999                       # measured (near ties are rare)
    assert R.shape[0] > 1000


def test_q15_raw_wrapper_gives_the_python_q15_values(case, tmp_path):
    key, est, model, X, y, R = case
    soft = est.__class__.__name__ != "DecisionTreeClassifier"
    rep = export_model(model, tmp_path, target="cortex-m4", dtype="q15", name="m", measure=False)
    q_c = run_scale_driver(build_scale_driver(tmp_path, "m"), R, tmp_path)
    q_py = model.scaling.to_q15(R.astype(np.float64)).astype(np.int64)
    used = sorted({int(f) for t in model.trees for f in t.test_feature()[t.left != LEAF]})
    np.testing.assert_array_equal(q_c[:, used], q_py[:, used])  # the same Q15 value on every row
    assert np.all(q_c[:, [f for f in range(R.shape[1]) if f not in used]] == 0)
    sv = qz.soft_vote(model) if soft else None
    qtrees = qz.quantize_model(model, None, None if sv is None else sv.leaf_ids)
    py = predict_fixed(qtrees, q_py, model.n_classes, sv)
    c = run_driver(build_driver(tmp_path, "m", float_input=True, predict="tg_m_predict"), R, tmp_path)
    np.testing.assert_array_equal(c, py)
    # truthful report: exact only without thresholds off the grid (and an exact vote)
    assert rep.thresholds_off_grid == model.metadata["thresholds_off_grid"]
    assert rep.exact == (rep.thresholds_off_grid == 0 and (sv is None or sv.exact))
    # q15 agreement with scikit-learn on these adversarial rows (measured, reported in the bench)
    assert np.mean(py == _sk_index(est, R)) >= 0.9


@pytest.mark.parametrize("dtype", ["f32", "q15"])
def test_forest_predict_proba(dtype, tmp_path):
    X, y = _wide_scales()
    rf = RandomForestClassifier(n_estimators=9, min_samples_leaf=3, random_state=5).fit(X, y)
    model = from_sklearn(rf, X=X)
    assert model.vote == "soft"
    R = np.vstack([X, np.random.default_rng(6).uniform(X.min(0), X.max(0), (3000, X.shape[1]))]).astype(np.float32)
    export_model(model, tmp_path, target="cortex-m4", dtype=dtype, name="m", measure=False)
    sv = qz.soft_vote(model)
    if dtype == "f32":
        exe = build_proba_driver(tmp_path, "m", model.n_classes, float_input=True)
        cls, proba = run_proba_driver(exe, R, model.n_classes, tmp_path)
        from treegen.core import targets
        ctx = build_context(model, name="m", target=targets.get("cortex-m4"), layout="table", dtype="f32",
                            variant="scalar", qtrees=None, soft=sv)
        leaves = f32_leaves(ctx["trees"], R)
        sums = sum(sv.table[leaves[:, k]] for k in range(leaves.shape[1]))
    else:
        Q = model.scaling.to_q15(R.astype(np.float64))
        exe = build_proba_driver(tmp_path, "m", model.n_classes, float_input=False)
        cls, proba = run_proba_driver(exe, Q, model.n_classes, tmp_path)
        sums = qz.soft_sums(qz.quantize_model(model, None, sv.leaf_ids), sv, Q)
    np.testing.assert_array_equal(proba, qz.proba_q15(sums, len(model.trees)))   # bit-exact Python model
    np.testing.assert_array_equal(cls, sums.argmax(axis=1))
    if dtype == "f32":  # f32 leaves are scikit-learn's: probabilities within the fixed-point bound
        assert np.max(np.abs(proba / 32768 - rf.predict_proba(R))) <= 2.0 ** -15 + 1e-12
    # the Python float model is scikit-learn's predict_proba
    np.testing.assert_allclose(model.predict_proba(R.astype(np.float64)), rf.predict_proba(R), rtol=0, atol=1e-12)


def test_estimators_predict_proba():
    from treegen import CARTClassifier
    X, y = load_wine(return_X_y=True)
    clf = CARTClassifier(max_depth=3).fit(X, y)
    p = clf.predict_proba(X)
    assert p.shape == (X.shape[0], 3) and np.allclose(p.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[p.argmax(axis=1)], clf.predict(X))
    leaves = clf.tree_.apply(clf.model_.scaling.transform(X))
    counts = clf.tree_.class_counts[leaves]
    np.testing.assert_allclose(p, counts / counts.sum(axis=1, keepdims=True))


def test_large_forest_compiles_and_stays_exact(tmp_path):
    """40 trees of depth 12 (digits; bench/import_exactness.py --big-forest runs 100): the f32 table export
    compiles with the strict flags and equals scikit-learn on test-like and random rows; the q15 export
    equals its Python model."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=40, max_depth=12, random_state=0).fit(X, y)
    model = from_sklearn(rf, X=X, input_contract="float32")
    assert model.scaling.method == "minmax" and model.contract == "float32"   # integer data, float contract
    rng = np.random.default_rng(7)
    R = np.vstack([X[::3], rng.uniform(0, 16, size=(1500, X.shape[1]))]).astype(np.float32)
    rep = export_model(model, tmp_path / "f", target="cortex-m4", dtype="f32", name="m", measure=False)
    got = run_driver(build_driver(tmp_path / "f", "m", float_input=True, predict="tg_m_predict"), R, tmp_path)
    sk = _sk_index(rf, R)
    p = np.sort(rf.predict_proba(R), axis=1)
    clear = p[:, -1] - p[:, -2] > (rep.soft_vote_bound or 0.0)
    np.testing.assert_array_equal(got[clear], sk[clear])
    assert np.mean(got == sk) >= 0.999
    rep = export_model(model, tmp_path / "q", target="cortex-m4", dtype="q15", name="m", measure=False)
    sv = qz.soft_vote(model)
    want = predict_fixed(qz.quantize_model(model, None, sv.leaf_ids), model.scaling.to_q15(R.astype(np.float64)),
                         model.n_classes, sv)
    got = run_driver(build_driver(tmp_path / "q", "m", float_input=True, predict="tg_m_predict"), R, tmp_path)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ contracts and reports
def test_input_contract_is_explicit_and_recorded(tmp_path):
    from conftest import load_shared

    from treegen import load, save

    X, y = load_shared("pid")                      # integers 0..32767
    clf = DecisionTreeClassifier(random_state=0, max_depth=4).fit(X, y)
    auto = from_sklearn(clf, X=X)
    assert auto.contract == "integer" and auto.scaling.method == "q15"
    flt = from_sklearn(clf, X=X, input_contract="float32")   # the same data, raw float inputs intended
    assert flt.contract == "float32" and flt.scaling.method == "minmax"
    again = load(save(flt, tmp_path / "m.json"))
    assert again.contract == "float32" and again.hash() == flt.hash()
    # a float-input model never rounds: x = k + 0.5 exactly at a threshold goes where scikit-learn sends it
    st = clf.tree_
    node = int(np.flatnonzero(st.children_left != LEAF)[0])
    f, t = int(st.feature[node]), float(st.threshold[node])
    R = np.repeat(X[:1].astype(np.float64), 3, axis=0)
    R[:, f] = [t, np.nextafter(np.float32(t), np.float32(np.inf)), np.floor(t)]
    np.testing.assert_array_equal(flt.predict(R), clf.predict(R))
    np.testing.assert_array_equal(auto.predict(R), clf.predict(R))   # raw thresholds: every float32 input
    with pytest.raises(Exception, match="integer data"):
        from_sklearn(DecisionTreeClassifier(max_depth=2).fit(load_wine(return_X_y=True)[0], load_wine(
            return_X_y=True)[1]), X=load_wine(return_X_y=True)[0], input_contract="integer")


def test_export_report_is_truthful(tmp_path, capsys):
    from conftest import run_cli

    from treegen import save

    X, y = load_wine(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=4, min_samples_leaf=3, random_state=0).fit(X, y)
    model = from_sklearn(rf, X=X)
    assert model.metadata["thresholds_off_grid"] > 0
    path = save(model, tmp_path / "rf.json")
    csv = tmp_path / "wine.csv"
    np.savetxt(csv, np.c_[X, y], delimiter=",", header=",".join([f"f{i}" for i in range(13)] + ["y"]), comments="",
               fmt="%.17g")
    code, out, _ = run_cli(capsys, ["export", path, "--target", "cortex-m4", "--dtype", "q15", "--data", csv,
                                    "-o", tmp_path / "q"])
    assert code == 0
    assert "input contract  float32" in out and "vote            soft" in out
    exact = next(line for line in out.splitlines() if line.startswith("exact"))
    assert exact.startswith("exact           no (") and "off the Q15 grid" in exact and "soft vote within" in exact
    assert f"measured 100.00 % agreement on the {X.shape[0]} rows" in exact
    code, out, _ = run_cli(capsys, ["export", path, "--target", "cortex-m4", "--dtype", "f32", "--vote", "hard",
                                    "-o", tmp_path / "f"])
    assert code == 0 and "exact           yes, for every float32 input" in out and "vote            hard" in out
    # hard vote of the exported C == the hard vote of scikit-learn's trees
    R = np.random.default_rng(3).uniform(X.min(0), X.max(0), (2000, X.shape[1])).astype(np.float32)
    got = run_driver(build_driver(tmp_path / "f", "rf", float_input=True, predict="tg_rf_predict"), R, tmp_path)
    votes = np.zeros((R.shape[0], 3), dtype=int)
    for sk in rf.estimators_:
        votes[np.arange(R.shape[0]), sk.predict(R).astype(int)] += 1
    np.testing.assert_array_equal(got, votes.argmax(axis=1))
