"""Random forests (RFClassifier, treegen.learn.forest): OOB bookkeeping, feature sampling,
probabilities, determinism, oblique (EFTI) forests."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared

from treegen import RFClassifier
from treegen.core.errors import TreegenError
from treegen.learn import forest
from treegen.learn.inducers import cart


@pytest.fixture(scope="module")
def pid():
    X, y = load_shared("pid")
    return X[:300], y[:300]


def test_oob_bookkeeping_matches_a_recount(pid):
    X, y = pid
    clf = RFClassifier(n_trees=12, random_state=5).fit(X, y)
    Xn = clf.scaling_.transform(X)
    yi = np.searchsorted(clf.classes_, y)
    # redo the bootstrap draws: the same generators give the same in-bag rows
    acc = np.zeros((X.shape[0], 2))
    seen = np.zeros(X.shape[0], dtype=int)
    for t, tree in enumerate(clf.trees_):
        rows = forest.draw_sample(forest.tree_rng(5, t), X.shape[0], 1.0)
        out = np.setdiff1d(np.arange(X.shape[0]), rows)
        acc[out] += tree.predict_proba(Xn[out])
        seen[out] += 1
        # the tree's root counts are its bootstrap sample (multiplicities included)
        assert tree.class_counts[0].tolist() == np.bincount(yi[rows], minlength=2).tolist()
    scored = seen > 0
    assert 0.9 * X.shape[0] < scored.sum() <= X.shape[0]        # 12 trees: almost every row is out once
    expected = np.mean((acc[scored] / seen[scored, None]).argmax(axis=1) == yi[scored])
    assert clf.oob_score_ == pytest.approx(expected, abs=0)
    assert np.allclose(clf.oob_decision_function_[scored], acc[scored] / seen[scored, None])
    assert np.all(np.isnan(clf.oob_decision_function_[~scored]))
    assert clf.model_.metadata["oob_score"] == clf.oob_score_


def test_forest_is_one_model_and_deterministic_across_jobs(pid):
    X, y = pid
    a = RFClassifier(n_trees=6, random_state=2, n_jobs=1).fit(X, y)
    b = RFClassifier(n_trees=6, random_state=2, n_jobs=2).fit(X, y)
    assert len(a.model_.trees) == 6 and all(s.equals(t) for s, t in zip(a.trees_, b.trees_))
    assert a.oob_score_ == b.oob_score_
    P = a.predict_proba(X)
    assert P.shape == (X.shape[0], 2) and np.allclose(P.sum(axis=1), 1.0)
    # hard vote of the model (what the C exports) vs soft vote: agree on most rows
    assert np.mean(a.classes_[P.argmax(axis=1)] == a.predict(X)) > 0.95
    c = RFClassifier(n_trees=6, random_state=3).fit(X, y)
    assert not all(s.equals(t) for s, t in zip(a.trees_, c.trees_))


def test_max_features_per_split_searches_a_subset():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 32768, (200, 6)) / 32768.0
    y = (X[:, 0] > 0.5).astype(np.int64)          # only feature 0 is informative
    full, _ = cart.induce(X, y, 2)
    assert set(np.flatnonzero(full.weights[0])) == {0}
    roots = set()
    for s in range(12):
        t, _ = cart.induce(X, y, 2, max_features=1, rng=np.random.default_rng(s))
        roots.add(int(np.flatnonzero(t.weights[0])[0]))
    assert len(roots) > 1                         # the root often cannot see feature 0
    with pytest.raises(TreegenError):
        cart.induce(X, y, 2, max_features=1)      # needs an rng


def test_feature_bagging_per_tree_uses_k_features(pid):
    X, y = pid
    clf = RFClassifier(n_trees=5, max_features=2, feature_bagging="tree", random_state=1).fit(X, y)
    for t in clf.trees_:
        used = np.flatnonzero(np.any(t.weights != 0, axis=0))
        assert used.size <= 2
    assert clf.fit_info_["feature_bagging"] == "tree" and clf.fit_info_["max_features"] == 2
    assert forest.resolve_max_features("sqrt", 8) == 2 and forest.resolve_max_features("log2", 8) == 3
    assert forest.resolve_max_features(None, 8) == 8 and forest.resolve_max_features(20, 8) == 8


def test_oblique_forest_of_efti_trees(pid):
    """Fitted on 300 rows of pid, scored on the other 468: above the held-out majority class (a
    constant forest scores exactly the majority share; the old bar, > 0.6 on the training rows,
    passed one)."""
    X, y = pid
    Xa, ya = load_shared("pid")
    X_test, y_test = Xa[300:], ya[300:]
    # 5 trees of 4 features (3 trees of 2 features, the old setting, scored exactly the held-out
    # majority share 0.671 at this seed: none of them saw glucose, pid's main feature)
    clf = RFClassifier(n_trees=5, base="efti", max_iter=300, max_features=4, random_state=1).fit(X, y)
    assert clf.fit_info_["feature_bagging"] == "tree"
    assert any(not t.is_axis_parallel() for t in clf.trees_)
    majority = np.max(np.unique(y_test, return_counts=True)[1]) / y_test.shape[0]
    assert 0.0 <= clf.oob_score_ <= 1.0
    assert clf.score(X_test, y_test) > majority + 0.03, (clf.score(X_test, y_test), majority)
    assert len(np.unique(clf.predict(X_test))) == 2


def test_oblique_forest_with_attributes_per_node():
    """ger: the per-tree subspace forest falls to the majority class (few trees see the attribute that
    carries the class); drawn per node, every tree can reach it (issue 26)."""
    X, y = load_shared("ger")
    tr, te = slice(0, 500), slice(500, None)
    majority = np.max(np.unique(y[te], return_counts=True)[1]) / y[te].shape[0]
    kw = {"n_trees": 5, "base": "efti", "max_iter": 300, "random_state": 4}
    node = RFClassifier(feature_bagging="node", **kw).fit(X[tr], y[tr])
    tree = RFClassifier(feature_bagging="tree", **kw).fit(X[tr], y[tr])
    k = node.fit_info_["max_features"]
    assert node.fit_info_["feature_bagging"] == "node" and k == 4
    for t in node.trees_:
        assert all(np.count_nonzero(t.weights[j]) <= k for j in np.flatnonzero(t.left >= 0))
    assert np.count_nonzero(np.any(np.vstack([t.weights for t in node.trees_]) != 0, axis=0)) > k
    assert node.score(X[te], y[te]) > majority + 0.1 > tree.score(X[te], y[te]), (node.score(X[te], y[te]), majority)
    again = RFClassifier(feature_bagging="node", **kw).fit(X[tr], y[tr])
    assert all(a.equals(b) for a, b in zip(node.trees_, again.trees_))


@pytest.mark.parametrize("params, match", [
    ({"n_trees": 0}, "n_trees"),
    ({"base": "svm"}, "not a tree learner"),
    ({"base": "rf"}, "not a tree learner"),
    ({"sample_fraction": 0.0}, "sample_fraction"),
    ({"max_features": "half"}, "max_features"),
    ({"base": "efti", "feature_bagging": "split"}, "split"),
    ({"base": "cart", "feature_bagging": "node"}, "needs base='efti'"),
    ({"base": "gp", "feature_bagging": "node"}, "needs base='efti'"),
])
def test_bad_forest_parameters(pid, params, match):
    X, y = pid
    with pytest.raises(TreegenError, match=match):
        RFClassifier(**{"n_trees": 2, **params}).fit(X, y)


def test_regression_oob_r2_equals_an_independent_recount():
    """RFRegressor's OOB R² and OOB predictions recomputed here: the bootstrap draws redone, each row
    predicted by the trees whose sample left it out only, R² = 1 - SS_res / SS_tot by hand (issue #32:
    an OOB computed on the in-bag rows gave 0.70 instead of 0.34 unnoticed)."""
    from treegen.learn.regressors import RFRegressor

    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, size=(160, 4))
    y = np.sin(6 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * rng.normal(size=160)
    reg = RFRegressor(n_trees=15, random_state=11).fit(X, y)
    Xn = reg.scaling_.transform(X)
    total = np.zeros(X.shape[0])
    seen = np.zeros(X.shape[0], dtype=int)
    for t, tree in enumerate(reg.trees_):
        rows = forest.draw_sample(forest.tree_rng(11, t), X.shape[0], 1.0)
        out = np.setdiff1d(np.arange(X.shape[0]), rows)
        total[out] += tree.predict_value(Xn[out])
        seen[out] += 1
    scored = seen > 0
    assert 0.9 * X.shape[0] < scored.sum() < X.shape[0] + 1
    pred = total[scored] / seen[scored]
    r2 = 1.0 - np.sum((y[scored] - pred) ** 2) / np.sum((y[scored] - y[scored].mean()) ** 2)
    assert reg.oob_score_ == pytest.approx(r2, rel=1e-12)
    assert np.allclose(reg.oob_prediction_[scored], pred, rtol=0, atol=1e-12)
    assert np.all(np.isnan(reg.oob_prediction_[~scored]))
    in_sample = 1.0 - np.sum((y - reg.predict(X)) ** 2) / np.sum((y - y.mean()) ** 2)
    assert r2 < in_sample - 0.05        # the out-of-bag figure is not the (optimistic) in-bag one
