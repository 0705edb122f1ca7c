"""The integer vicinal recursion (treegen.learn.vicinal_q16) against hand-computed cases and the float
definition (treegen.learn.vicinal)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from treegen.core.tree import LEAF, Tree
from treegen.learn import vicinal, vicinal_q16 as vq

PHI = vq.phi_table()


def test_p_left_hard_cases_and_centre():
    assert vq.p_left(np.array([0, 5, -5]), 0, PHI).tolist() == [65536, 65536, 0]     # S = 0: hard test
    S = 1 << 20
    assert vq.p_left(np.array([4 * S, -4 * S, 10 * S, -10 * S]), S, PHI).tolist() == [65536, 0, 65536, 0]
    assert vq.p_left(np.array([0]), S, PHI)[0] == 32768                             # Phi(0)
    # in between: Phi(z) within the table's interpolation error
    z = np.linspace(-3.9, 3.9, 41)
    m = np.rint(z * S).astype(np.int64)
    p = vq.p_left(m, S, PHI) / 65536.0
    assert np.max(np.abs(p - vicinal.phi(m / S))) < 3e-5     # two Q16 steps
    assert np.all(np.diff(vq.p_left(np.arange(-4 * S, 4 * S, S // 7), S, PHI)) >= 0)   # monotone


def test_spread_is_the_truncated_root_sum_of_squares():
    w = np.array([32767, -16384, 0])
    sig = np.array([1000, 3000, 65535])
    v = [(32767 * 1000) >> 8, (16384 * 3000) >> 8, 0]
    assert vq.spread(w, sig) == math.isqrt(sum(t * t for t in v)) << 8
    assert vq.spread(np.zeros(3, dtype=np.int64), sig) == 0


def test_sigma_q15_is_capped():
    X = np.array([[0.0, 0.0, 0.5], [0.9, 0.2, 0.5]])
    s = vq.sigma_q15(X, 100.0)        # sqrt(100) * 0.45 * 32768 > 65535
    assert s.tolist() == [65535, int(np.rint(10 * 0.1 * 32768)), 0]


def _tree():
    # root: 0.6 x0 + 0.4 x1 <= 0.5 -> leaf class 0, else node: x1 <= 0.3 -> class 1 / class 0
    W = np.array([[0.6, 0.4], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    T = np.array([0.5, 0.0, 0.3, 0.0, 0.0])
    L = np.array([1, LEAF, 3, LEAF, LEAF])
    R = np.array([2, LEAF, 4, LEAF, LEAF])
    return Tree(W, T, L, R, np.array([0, 0, 0, 1, 0]), np.zeros((5, 2), dtype=np.int64))


def _q16(tree: Tree, Xq, y, sig):
    Wi = np.rint(tree.weights * 32768).astype(np.int64)
    Ti = np.rint(tree.threshold * (1 << 30)).astype(np.int64)
    cls = {k: int(tree.leaf_class[k]) for k in range(len(Ti)) if tree.left[k] == LEAF}
    return vq.correct_mass(Wi, Ti, tree.left, tree.right, 0, cls, Xq, y, sig, PHI)


def test_correct_mass_matches_the_float_definition():
    rng = np.random.default_rng(0)
    Xq = rng.integers(0, 32768, size=(400, 2))
    y = rng.integers(0, 2, size=400)
    X01 = Xq / 32768.0
    tree = _tree()
    for sigma2 in (0.001, 0.1, 1.0):
        sig = vq.sigma_q15(X01, sigma2)
        got = _q16(tree, Xq, y, sig) / 65536.0
        # the float recursion treats the axis node as an interval; with one axis node per path the two agree
        want = np.sum(1.0 - vicinal.vicinal_losses(tree, X01, y, sig / 32768.0))
        assert got == pytest.approx(want, abs=1e-4 * 400)


def test_correct_mass_conserves_mass_and_hard_limit():
    Xq = np.array([[16384, 9830], [1000, 30000], [32000, 32000]])
    tree = _tree()
    both = _q16(tree, Xq, np.zeros(3, dtype=np.int64), np.array([3000, 3000])) + \
        _q16(tree, Xq, np.ones(3, dtype=np.int64), np.array([3000, 3000]))
    assert both == 3 * 65536                          # every row's masses sum to exactly 1
    hard = _q16(tree, Xq, np.array([0, 0, 1]), np.zeros(2, dtype=np.int64))
    pred = tree.predict_index(Xq / 32768.0)
    assert hard == 65536 * int(np.sum(pred == np.array([0, 0, 1])))   # width 0: the empirical hits
