"""Tests of the CART inducer (treegen.learn.inducers.cart) and CARTClassifier.

scikit-learn is a test dependency and is the reference: with the same criterion and limits our tree
must be its tree. scikit-learn visits the features in a random order (``random_state``) and keeps the
first best split it sees, so on *ties* between features its choice is random while ours is the lowest
feature index, then the lowest threshold. Hence:

* whole-tree equality is asserted on settings that were checked to be tie-free (scikit-learn builds the
  identical tree for several ``random_state`` values, and the test itself checks two of them);
* on trees with ties, every split of scikit-learn's tree is checked to be either ours or a tie that our
  rule resolves to a lower (feature, threshold).
"""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest
from conftest import load_shared
from sklearn.tree import DecisionTreeClassifier

import treegen
from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF
from treegen.learn.inducers import cart

Q = 32768.0


@lru_cache(maxsize=None)
def _data(name: str):
    """(X normalised to [0, 1), y 0-based, n_classes) of a shared dataset."""
    Xi, y1 = load_shared(name)
    X = Xi / Q
    y = (y1 - 1).astype(np.int64)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y, int(y.max()) + 1


def _features(tree) -> np.ndarray:
    """Split feature of every node, -1 for leaves."""
    return np.where(tree.is_leaf, -1, tree.weights.argmax(axis=1))


def _assert_same_tree_as_sklearn(tree, sk: DecisionTreeClassifier) -> None:
    t = sk.tree_
    assert tree.n_nodes == t.node_count
    internal = t.children_left != -1
    np.testing.assert_array_equal(tree.left, np.where(internal, t.children_left, LEAF))
    np.testing.assert_array_equal(tree.right, np.where(internal, t.children_right, LEAF))
    np.testing.assert_array_equal(_features(tree), np.where(internal, t.feature, -1))
    np.testing.assert_array_equal(tree.threshold, np.where(internal, t.threshold, 0.0))  # exact
    counts = np.rint(t.value[:, 0, :] * t.weighted_n_node_samples[:, None]).astype(np.int64)
    np.testing.assert_array_equal(tree.class_counts, counts)


# ------------------------------------------------------------------------------------------ hand-checked
# x = 1/16 .. 8/16 (on the Q15 grid: 2048 .. 16384), labels 0 0 0 0 1 0 0 1 (6 x class 0, 2 x class 1).
X8 = (np.arange(1, 9) / 16.0)[:, None]
Y8 = np.array([0, 0, 0, 0, 1, 0, 0, 1])


def test_hand_example_gini():
    # Root, Gini, score sum_k L_k^2/nL + sum_k R_k^2/nR (higher is better; child impurity = 1 - score/8):
    #   nL=1: 1 + 29/7 = 5.143   nL=2: 2 + 20/6 = 5.333   nL=3: 3 + 13/5 = 5.600   nL=4: 4 + 8/4 = 6.000
    #   nL=5: 17/5 + 5/3 = 5.067 nL=6: 26/6 + 1 = 5.333   nL=7: 37/7 + 1 = 6.286  <- best (impurity 0.2143)
    # Left (6,1) = x 1..7 labels 0000100: nL=4: 4 + 5/3 = 5.667 is best (others 5.333, 5.4, 5.5, 5.4, 5.333)
    # Its right (2,1) = labels 1 0 0: nL=1: 1 + 2 = 3 beats nL=2: 1 + 1 = 2.
    tree, info = cart.induce(X8, Y8, 2, criterion="gini")
    assert info == {"n_leaves": 4, "depth": 3}
    np.testing.assert_array_equal(tree.threshold, [7.5 / 16, 4.5 / 16, 0, 5.5 / 16, 0, 0, 0])
    np.testing.assert_array_equal(tree.left, [1, 2, -1, 4, -1, -1, -1])
    np.testing.assert_array_equal(tree.right, [6, 3, -1, 5, -1, -1, -1])
    np.testing.assert_array_equal(tree.leaf_class, [0, 0, 0, 0, 1, 0, 1])
    np.testing.assert_array_equal(tree.class_counts, [[6, 2], [6, 1], [4, 0], [2, 1], [0, 1], [2, 0], [0, 1]])
    np.testing.assert_array_equal(tree.weights[~tree.is_leaf], np.ones((3, 1)))
    np.testing.assert_array_equal(tree.predict_index(X8), Y8)


def test_hand_example_entropy():
    # Root, weighted child entropy in bits (lower is better):
    #   nL=4: 4/8*0 + 4/8*H(2,2) = 0.5  <- best      nL=7: 7/8*H(6,1) = 0.875*0.5917 = 0.518
    #   nL=3: 3/8*0 + 5/8*H(3,2) = 0.607             nL=5: 5/8*H(4,1) + 3/8*H(2,1) = 0.451 + 0.344 = 0.795
    # so Gini and entropy disagree on this data. Right (2,2) = labels 1 0 0 1: nL=1 and nL=3 tie
    # (0 + 3/4*H(2,1) = 0.689 each, nL=2 gives 1.0) -> the lowest threshold, 5.5/16. Then (2,1) = 0 0 1 -> 7.5/16.
    tree, info = cart.induce(X8, Y8, 2, criterion="entropy")
    assert info == {"n_leaves": 4, "depth": 3}
    np.testing.assert_array_equal(tree.threshold, [4.5 / 16, 0, 5.5 / 16, 0, 7.5 / 16, 0, 0])
    np.testing.assert_array_equal(tree.left, [1, -1, 3, -1, 5, -1, -1])
    np.testing.assert_array_equal(tree.right, [2, -1, 4, -1, 6, -1, -1])
    # node 2 holds (2,2): majority tie -> lowest class index
    np.testing.assert_array_equal(tree.leaf_class, [0, 0, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(tree.class_counts, [[6, 2], [4, 0], [2, 2], [0, 1], [2, 1], [2, 0], [0, 1]])
    np.testing.assert_array_equal(tree.predict_index(X8), Y8)


@pytest.mark.parametrize("criterion, threshold, leaf_classes", [
    ("gini", 7.5 / 16, [0, 1]),      # (6,1) | (0,1)
    ("entropy", 4.5 / 16, [0, 0]),   # (4,0) | (2,2): majority tie -> class 0
])
def test_hand_example_stump(criterion, threshold, leaf_classes):
    tree, info = cart.induce(X8, Y8, 2, criterion=criterion, max_depth=1)
    assert info == {"n_leaves": 2, "depth": 1}
    assert tree.threshold[0] == threshold
    assert tree.leaf_class[1:].tolist() == leaf_classes


def test_hand_example_matches_sklearn():
    for criterion in ("gini", "entropy"):
        tree, _ = cart.induce(X8, Y8, 2, criterion=criterion)
        _assert_same_tree_as_sklearn(tree, DecisionTreeClassifier(criterion=criterion, random_state=0).fit(X8, Y8))


def test_tie_between_thresholds_goes_to_lowest():
    # labels 0 1 1 0, Gini score: nL=1: 1 + 5/3, nL=2: 1 + 1, nL=3: 5/3 + 1 -> nL=1 and nL=3 tie exactly
    X = (np.arange(1, 5) / 16.0)[:, None]
    tree, _ = cart.induce(X, np.array([0, 1, 1, 0]), 2, criterion="gini", max_depth=1)
    assert tree.threshold[0] == 1.5 / 16


def test_tie_between_features_goes_to_lowest_index():
    x = X8[:, 0]
    for criterion in ("gini", "entropy"):
        # the same column twice: feature 0 wins
        tree, _ = cart.induce(np.column_stack([x, x]), Y8, 2, criterion=criterion, max_depth=1)
        assert _features(tree)[0] == 0
        # a mirrored copy first: the same partition is found on both features; feature 0 wins
        # (gini: {x=8/16} vs the rest -> on the mirror 1-x <= 8.5/16)
        tree, _ = cart.induce(np.column_stack([1.0 - x, x]), Y8, 2, criterion=criterion, max_depth=1)
        assert _features(tree)[0] == 0
        # a constant column cannot be split: feature 1
        tree, _ = cart.induce(np.column_stack([np.full(8, 0.5), x]), Y8, 2, criterion=criterion, max_depth=1)
        assert _features(tree)[0] == 1
    tree, _ = cart.induce(np.column_stack([1.0 - x, x]), Y8, 2, criterion="gini", max_depth=1)
    assert tree.threshold[0] == 8.5 / 16


# ------------------------------------------------------------------------------------------ vs scikit-learn
# Settings checked to be tie-free: scikit-learn gives the same tree for random_state 0..3.
TIE_FREE = [
    ("veh", "gini", dict(max_depth=3)),
    ("veh", "entropy", dict(max_depth=3)),
    ("bcw", "entropy", dict(max_depth=3)),
    ("liv", "gini", dict(max_depth=3)),
    ("hrts", "entropy", dict(max_depth=3)),
    ("son", "gini", dict(max_depth=3)),
    ("zoo", "gini", dict(min_samples_leaf=5)),
    ("zoo", "entropy", dict(min_samples_leaf=5)),
    ("wine", "gini", dict(max_depth=4)),
    ("wine", "entropy", dict(max_depth=5, min_samples_leaf=20)),
    ("pen", "gini", dict(max_depth=4)),
    ("magic", "entropy", dict(max_depth=5, min_samples_leaf=20)),
    ("w40", "gini", dict(max_depth=5, min_samples_leaf=20)),
]


@pytest.mark.parametrize("name, criterion, params", TIE_FREE, ids=lambda v: str(v))
def test_same_tree_as_sklearn(name, criterion, params):
    X, y, k = _data(name)
    tree, info = cart.induce(X, y, k, criterion=criterion, **params)
    for seed in (0, 1):
        sk = DecisionTreeClassifier(criterion=criterion, random_state=seed, **params).fit(X, y)
        _assert_same_tree_as_sklearn(tree, sk)
        np.testing.assert_array_equal(tree.predict_index(X), sk.predict(X))
        assert info == {"n_leaves": int(sk.get_n_leaves()), "depth": int(sk.get_depth())}


# Unpruned trees: these have ties deep down, but on these data sets the number of leaves does not
# depend on how they are broken (scikit-learn gives the same count for random_state 0..3), and an
# unpruned tree reproduces the training labels of every distinct point in either case.
UNPRUNED = [("irs", "gini"), ("irs", "entropy"), ("vene", "gini"), ("vene", "entropy"), ("zoo", "gini"),
            ("bcw", "entropy"), ("hrts", "gini"), ("liv", "entropy"), ("gls", "gini")]


@pytest.mark.parametrize("name, criterion", UNPRUNED)
def test_unpruned_agrees_with_sklearn(name, criterion):
    X, y, k = _data(name)
    tree, info = cart.induce(X, y, k, criterion=criterion)
    sk = DecisionTreeClassifier(criterion=criterion, random_state=0).fit(X, y)
    np.testing.assert_array_equal(tree.predict_index(X), sk.predict(X))
    assert info["n_leaves"] == sk.get_n_leaves()


def _split_score(X, y, k, feature, threshold, criterion):
    """Exact Gini score sum_k L_k^2/nL + R_k^2/nR, or sum c ln c - n ln n over both children (higher = better)."""
    left = X[:, feature] <= threshold
    parts = [np.bincount(y[left], minlength=k), np.bincount(y[~left], minlength=k)]
    if criterion == "gini":
        return sum(Fraction(int(c @ c), int(c.sum())) for c in parts)
    xlx = lambda v: v * math.log(v) if v > 0 else 0.0  # noqa: E731
    return math.fsum(xlx(int(v)) for c in parts for v in c) - math.fsum(xlx(int(c.sum())) for c in parts)


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("min_samples_leaf", [1, 5])
def test_every_sklearn_split_is_ours_or_a_tie(criterion, min_samples_leaf):
    """On veh (many ties), for every internal node of scikit-learn's unpruned tree our split of the same
    samples is its split, or one exactly as good with a lower (feature, threshold)."""
    X, y, k = _data("veh")
    sk = DecisionTreeClassifier(criterion=criterion, min_samples_leaf=min_samples_leaf, random_state=0).fit(X, y)
    t = sk.tree_
    paths = sk.decision_path(X).tocsc()
    n_same = n_ties = 0
    for node in np.flatnonzero(t.children_left != -1):
        idx = paths[:, node].nonzero()[0]
        Xn, yn = X[idx], y[idx]
        stump, _ = cart.induce(Xn, yn, k, criterion=criterion, max_depth=1, min_samples_leaf=min_samples_leaf)
        ours = (int(_features(stump)[0]), float(stump.threshold[0]))
        theirs = (int(t.feature[node]), float(t.threshold[node]))
        if ours == theirs:
            n_same += 1
            continue
        a = _split_score(Xn, yn, k, *ours, criterion)
        b = _split_score(Xn, yn, k, *theirs, criterion)
        if criterion == "gini":
            assert a == b, (node, ours, theirs)
        else:
            assert a == pytest.approx(b, rel=1e-12, abs=1e-9), (node, ours, theirs)
        assert ours < theirs, (node, ours, theirs)
        n_ties += 1
    assert n_same > 0 and n_ties > 0  # the data really exercise the tie-breaking


# Pruning: trees that equal scikit-learn's up to ties that do not change the pruning path.
CCP = [
    ("irs", "gini", {}), ("irs", "entropy", {}), ("zoo", "gini", {}), ("zoo", "entropy", {}),
    ("gls", "gini", {}), ("hrts", "gini", {}), ("liv", "entropy", {}), ("bcw", "entropy", {}),
    ("vene", "entropy", {}),
    ("wine", "gini", dict(max_depth=5, min_samples_leaf=20)),
    ("magic", "entropy", dict(max_depth=5, min_samples_leaf=20)),
]


@pytest.mark.parametrize("name, criterion, params", CCP, ids=lambda v: str(v))
def test_ccp_agrees_with_sklearn(name, criterion, params):
    X, y, k = _data(name)
    alphas, impurities = cart.cost_complexity_pruning_path(X, y, k, criterion=criterion, **params)
    path = DecisionTreeClassifier(criterion=criterion, random_state=0, **params).cost_complexity_pruning_path(X, y)
    np.testing.assert_allclose(alphas, path.ccp_alphas, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(impurities, path.impurities, rtol=1e-12, atol=1e-15)
    assert alphas[0] == 0.0 and np.all(np.diff(alphas) >= 0) and np.all(np.diff(impurities) >= -1e-15)
    # alphas strictly between consecutive path values (clear of rounding at the boundaries)
    distinct = np.unique(alphas)
    mids = (distinct[:-1] + distinct[1:]) / 2
    picks = sorted({mids[i] for i in (0, len(mids) // 3, len(mids) // 2, (2 * len(mids)) // 3, len(mids) - 1)})
    leaves = []
    for alpha in picks:
        tree, info = cart.induce(X, y, k, criterion=criterion, ccp_alpha=float(alpha), **params)
        sk = DecisionTreeClassifier(criterion=criterion, random_state=0, ccp_alpha=float(alpha), **params).fit(X, y)
        tree.validate()
        assert info["n_leaves"] == sk.get_n_leaves() == tree.n_leaves
        np.testing.assert_array_equal(tree.predict_index(X), sk.predict(X))
        leaves.append(info["n_leaves"])
    assert leaves == sorted(leaves, reverse=True) and leaves[-1] >= 2
    # beyond the last alpha everything is pruned
    tree, info = cart.induce(X, y, k, criterion=criterion, ccp_alpha=float(alphas[-1]) * 2 + 1.0, **params)
    assert tree.n_nodes == 1 and info == {"n_leaves": 1, "depth": 0}


def test_ccp_zero_prunes_nothing():
    X, y, k = _data("veh")
    full, _ = cart.induce(X, y, k)
    assert full.equals(cart.induce(X, y, k, ccp_alpha=0.0)[0])
    alphas, _ = cart.cost_complexity_pruning_path(X, y, k)
    assert full.equals(cart.induce(X, y, k, ccp_alpha=float(alphas[1]) / 2)[0])
    assert cart.induce(X, y, k, ccp_alpha=float(alphas[1]))[0].n_leaves < full.n_leaves


# ------------------------------------------------------------------------------------------ invariants
@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("params", [
    {}, dict(max_depth=1), dict(max_depth=4), dict(min_samples_leaf=7), dict(min_samples_split=30),
    dict(max_depth=6, min_samples_leaf=3, min_samples_split=10), dict(ccp_alpha=0.005),
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_invariants(criterion, params):
    X, y, k = _data("veh")
    tree, info = cart.induce(X, y, k, criterion=criterion, **params)
    tree.validate()
    assert tree.preorder() == list(range(tree.n_nodes))
    assert json.loads(json.dumps(info)) == info and set(info) == {"n_leaves", "depth"}
    assert info == {"n_leaves": tree.n_leaves, "depth": tree.depth}
    internal = ~tree.is_leaf
    # axis-parallel: exactly one weight 1.0 per internal node
    assert np.all(np.count_nonzero(tree.weights[internal], axis=1) == 1)
    assert np.all(tree.weights[internal].max(axis=1) == 1.0)
    # thresholds are midpoints of Q15 grid values
    thr = tree.threshold[internal] * 2 * Q
    np.testing.assert_array_equal(thr, np.round(thr))
    # counts: root = all data, internal = sum of children, and they are what the data reach
    np.testing.assert_array_equal(tree.class_counts[0], np.bincount(y, minlength=k))
    nodes = np.flatnonzero(internal)
    np.testing.assert_array_equal(tree.class_counts[nodes],
                                  tree.class_counts[tree.left[nodes]] + tree.class_counts[tree.right[nodes]])
    assert tree.copy().refit_counts(X, y, relabel=False).equals(tree)
    # majority leaf class, ties -> lowest index
    np.testing.assert_array_equal(tree.leaf_class, tree.class_counts.argmax(axis=1))
    # limits
    n_node = tree.class_counts.sum(axis=1)
    if "max_depth" in params:
        assert tree.depth <= params["max_depth"]
    assert n_node[tree.is_leaf].min() >= params.get("min_samples_leaf", 1)
    assert np.all(n_node[internal] >= params.get("min_samples_split", 2))
    # no child is left unsplit for a reason other than the limits (unlimited, unpruned -> training data fit
    # up to points that share all feature values)
    if not params:
        pure = tree.class_counts[tree.is_leaf].max(axis=1) == n_node[tree.is_leaf]
        for leaf in tree.leaves()[~pure]:
            rows = tree.apply(X) == leaf
            assert np.all(X[rows] == X[rows][0])


def test_deterministic():
    X, y, k = _data("veh")
    a, _ = cart.induce(X, y, k, criterion="entropy", min_samples_leaf=2)
    b, _ = cart.induce(X.copy(), y.copy(), k, criterion="entropy", min_samples_leaf=2)
    assert a.equals(b)


def test_pure_data_gives_a_single_leaf():
    X, _, _ = _data("irs")
    tree, info = cart.induce(X, np.full(X.shape[0], 2), 3)
    assert tree.n_nodes == 1 and info == {"n_leaves": 1, "depth": 0}
    assert tree.leaf_class[0] == 2 and tree.class_counts[0].tolist() == [0, 0, X.shape[0]]


def test_separable_data_gives_a_single_split():
    x = np.arange(0, 32768, 512) / Q
    X = np.column_stack([np.full_like(x, 0.25), x, x[::-1]])
    y = (x > 0.5).astype(np.int64)
    for criterion in ("gini", "entropy"):
        tree, info = cart.induce(X, y, 2, criterion=criterion)
        assert info == {"n_leaves": 2, "depth": 1}
        assert _features(tree)[0] == 1 and tree.threshold[0] == (16384 + 16896) / 2 / Q
        assert tree.leaf_class.tolist() == [0, 0, 1]
        np.testing.assert_array_equal(tree.predict_index(X), y)


def test_unsplittable_data_gives_a_majority_leaf():
    X = np.full((5, 2), 0.5)
    tree, info = cart.induce(X, np.array([1, 0, 1, 0, 2]), 3)
    assert tree.n_nodes == 1 and tree.leaf_class[0] == 0 and tree.class_counts[0].tolist() == [2, 2, 1]


def test_deep_tree_needs_no_recursion():
    # alternating labels on one feature: every split peels off one point -> a chain of depth n-1
    n = 2 * sys.getrecursionlimit() + 1
    X = (np.arange(n) / Q)[:, None]
    y = np.arange(n) % 2
    tree, info = cart.induce(X, y, 2)
    assert info == {"n_leaves": n, "depth": n - 1}
    np.testing.assert_array_equal(tree.predict_index(X), y)


@pytest.mark.parametrize("kwargs", [
    dict(criterion="mse"), dict(criterion="Gini"), dict(criterion=None),
    dict(max_depth=0), dict(max_depth=-1), dict(max_depth=2.5), dict(max_depth=True),
    dict(min_samples_split=1), dict(min_samples_split=2.0), dict(min_samples_leaf=0),
    dict(ccp_alpha=-0.1), dict(ccp_alpha=float("nan")), dict(ccp_alpha=float("inf")), dict(ccp_alpha="0.1"),
], ids=lambda d: ",".join(f"{k}={v!r}" for k, v in d.items()))
def test_bad_parameters(kwargs):
    with pytest.raises(TreegenError) as exc:
        cart.induce(X8, Y8, 2, **kwargs)
    assert "\n" not in str(exc.value)
    if "ccp_alpha" not in kwargs:
        with pytest.raises(TreegenError):
            cart.cost_complexity_pruning_path(X8, Y8, 2, **kwargs)


def test_bad_data():
    with pytest.raises(TreegenError):
        cart.induce(X8, Y8[:-1], 2)
    with pytest.raises(TreegenError):
        cart.induce(X8, Y8 + 1, 2)  # label 2 with n_classes=2
    with pytest.raises(TreegenError):
        cart.induce(X8[:, 0], Y8, 2)


# ------------------------------------------------------------------------------------------ estimator
def test_cart_classifier():
    Xi, y1 = load_shared("veh")  # raw Q15 integers, labels 1..4
    clf = treegen.CARTClassifier(max_depth=3).fit(Xi, y1)
    score = clf.score(Xi, y1)
    sk = DecisionTreeClassifier(max_depth=3, random_state=0).fit(Xi / Q, y1)
    assert score == sk.score(Xi / Q, y1)
    assert 0.5 < score < 1.0
    np.testing.assert_array_equal(clf.predict(Xi), sk.predict(Xi / Q))
    assert set(np.unique(clf.predict(Xi))) <= {1, 2, 3, 4}
    assert clf.fit_info_ == {"n_leaves": 8, "depth": 3}
    assert clf.scaling_.method == "q15"
    assert clf.model_.metadata["algorithm"] == "cart"
    assert clf.model_.metadata["train_accuracy"] == score


def test_cart_classifier_params():
    Xi, y1 = load_shared("veh")
    clf = treegen.make_estimator("cart", criterion="entropy", min_samples_leaf=5, ccp_alpha=0.01).fit(Xi, y1)
    tree, _ = cart.induce(Xi / Q, y1 - 1, 4, criterion="entropy", min_samples_leaf=5, ccp_alpha=0.01)
    assert clf.tree_.equals(tree)
    with pytest.raises(TreegenError):
        treegen.CARTClassifier(criterion="bogus").fit(Xi, y1)
