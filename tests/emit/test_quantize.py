"""Quantisation float tree -> integer tree, and the Python fixed-point model."""

import numpy as np
import pytest
from conftest import load_shared

from treegen import CARTClassifier, EFTIClassifier
from treegen.core.tree import LEAF, Tree
from treegen.emit.quantize import ACC32_LIMIT, predict_model_q15, predict_q15, quantize_tree


def _stump(w, theta, n_features=None, classes=(0, 1)):
    w = np.asarray(w, dtype=np.float64)
    A = w.shape[0]
    W = np.zeros((3, A))
    W[0] = w
    return Tree(W, np.array([theta, 0, 0]), np.array([1, LEAF, LEAF]), np.array([2, LEAF, LEAF]),
                np.array([0, classes[0], classes[1]]), np.zeros((3, 2), dtype=np.int64))


ALL_Q15 = np.arange(32768).reshape(-1, 1)


@pytest.mark.parametrize("c, theta", [(1.0, 0.5), (1.0, 0.1), (2.5, 0.3), (-1.0, -0.25), (-0.7, -0.123456),
                                      (1.0, -0.1), (1.0, 1.5), (-3.0, 0.2)])
def test_axis_test_is_exact_on_every_q15_input(c, theta):
    tree = _stump([c], theta)
    qt = quantize_tree(tree)
    assert qt.kind == "axis" and qt.exact
    assert -1 <= qt.threshold[0] <= 32767
    assert np.array_equal(predict_q15(qt, ALL_Q15), tree.predict_index(ALL_Q15 / 32768.0))


def test_axis_negative_weight_swaps_children():
    tree = _stump([-1.0], -0.5)          # -x <= -0.5  <=>  x >= 0.5 -> class 0
    qt = quantize_tree(tree)
    assert qt.left[0] == -2 and qt.right[0] == -1     # children swapped
    assert qt.threshold[0] == 16383                     # x_q <= 16383 -> class 1


def test_oblique_shift_uses_the_full_int16_range():
    tree = _stump([0.001, -0.0003, 0.0007], 0.0004)
    qt = quantize_tree(tree)
    assert qt.kind == "oblique"
    assert 16384 <= np.abs(qt.weights[0]).max() <= 32767


def test_oblique_weights_round_to_nearest():
    """w_q = round(w * 2^s) (the documented rounding; a truncation moves every weight toward 0 by up to
    one unit): weights whose scaled values lie just below an integer, of both signs."""
    tree = _stump([0.001, -0.00029999, 0.00069999], 0.0004)
    qt = quantize_tree(tree)
    s = int(np.round(np.log2(np.abs(qt.weights[0][0]) / 0.001)))   # the node's shift: 0.001 * 2^s ~ w_q[0]
    want = np.rint(np.ldexp(np.array([0.001, -0.00029999, 0.00069999]), s)).astype(np.int64)
    assert np.array_equal(qt.weights[0], want)
    assert np.any(want != np.trunc(np.ldexp(np.array([0.001, -0.00029999, 0.00069999]), s)))


@pytest.mark.parametrize("name", ["veh", "son", "bcw"])
def test_efti_trees_quantise_exactly(name):
    X, y = load_shared(name)
    clf = EFTIClassifier(max_iter=1500, random_state=2).fit(X, y)
    qt = quantize_tree(clf.tree_)
    assert qt.exact and qt.unresolved_rows == []
    R = np.random.default_rng(0).integers(0, 32768, size=(20000, X.shape[1]))
    assert np.array_equal(predict_q15(qt, R), clf.tree_.predict_index(R / 32768.0))


@pytest.mark.parametrize("name", ["pid", "ttt"])
def test_cart_trees_quantise_exactly(name):
    X, y = load_shared(name)
    clf = CARTClassifier().fit(X, y)
    qt = quantize_tree(clf.tree_)
    assert qt.kind == "axis" and qt.exact
    R = np.random.default_rng(1).integers(0, 32768, size=(20000, X.shape[1]))
    Xq = clf.scaling_.to_q15(X)
    for rows in (R, Xq):
        assert np.array_equal(predict_q15(qt, rows), clf.tree_.predict_index(rows / 32768.0))


def test_inexact_weights_keep_training_rows_on_their_side():
    rng = np.random.default_rng(3)
    w = np.array([0.1, 1 / 3, -0.2718281828])
    tree = _stump(w, 0.0123456789)
    X = rng.integers(0, 32768, size=(5000, 3))
    qt = quantize_tree(tree, X)
    assert not qt.exact
    float_pred = tree.predict_index(X / 32768.0)
    fixed_pred = predict_q15(qt, X)
    wrong = np.flatnonzero(float_pred != fixed_pred)
    assert set(wrong.tolist()) == set(qt.unresolved_rows)
    assert len(wrong) <= 2


def test_rows_that_cannot_keep_their_side_are_reported():
    # two rows whose float projections are in the opposite order of their integer projections
    w = np.array([1.0, 1.0 + 2.0 ** -20])        # rounds to equal int16 weights
    x_a = np.array([[20000, 10000]])              # float: 30000 + tiny  (right)
    x_b = np.array([[10000, 20000]])              # float: 30000 + 2*tiny (right)
    theta = (30000 + 15000 * 2.0 ** -20) / 32768  # between the two in float
    tree = _stump(w, theta)
    X = np.vstack([x_a, x_b])
    assert list(tree.predict_index(X / 32768.0)) == [0, 1]
    qt = quantize_tree(tree, X)
    assert len(qt.unresolved_rows) == 1


def test_accumulator_width_follows_the_worst_case_bound():
    small = _stump([1e-3] * 2, 1e-3)
    qt = quantize_tree(small)
    worst = int(np.abs(qt.weights[0]).sum()) * 32767
    assert qt.acc_bits == (32 if worst <= ACC32_LIMIT else 64)
    big = _stump([1.0] * 60, 10.0)
    qt64 = quantize_tree(big)
    assert qt64.acc_bits == 64
    # worst-case inputs: the exact int64 model still decides correctly at the extremes
    X = np.array([[32767] * 60, [0] * 60])
    assert np.array_equal(predict_q15(qt64, X), big.predict_index(X / 32768.0))
    two = _stump([1.0, 1.0], 1.0)
    qt2 = quantize_tree(two)
    bound = int(np.abs(qt2.weights[0]).sum()) * 32767
    assert (qt2.acc_bits == 32) == (bound <= ACC32_LIMIT)


def test_single_leaf_tree():
    t = Tree.leaf_only(4, 3, leaf_class=2)
    qt = quantize_tree(t)
    assert qt.root == -3
    assert list(predict_q15(qt, np.zeros((5, 4), dtype=np.int64))) == [2] * 5


def test_ensemble_vote_ties_go_to_the_lowest_class():
    a = quantize_tree(_stump([1.0], 0.5, classes=(0, 1)))
    b = quantize_tree(_stump([1.0], 0.5, classes=(1, 0)))
    X = np.array([[100], [30000]])
    assert list(predict_model_q15([a, b], 2, X)) == [0, 0]
    assert list(predict_model_q15([a, a, b], 2, X)) == [0, 1]


def test_huge_threshold_is_clamped_not_overflowing():
    tree = _stump([1e-9, 1e-9], 100.0)
    qt = quantize_tree(tree)
    X = np.array([[32767, 32767], [0, 0]])
    assert np.array_equal(predict_q15(qt, X), tree.predict_index(X / 32768.0))
    tree2 = _stump([1e-9, -1e-9], -100.0)
    qt2 = quantize_tree(tree2)
    assert np.array_equal(predict_q15(qt2, X), tree2.predict_index(X / 32768.0))
