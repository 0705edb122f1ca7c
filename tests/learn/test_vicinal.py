"""Vicinal risk (treegen.learn.vicinal): probability propagation against hand-computed trees."""

from __future__ import annotations

import math

import numpy as np
import pytest

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree
from treegen.learn import vicinal


def Phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def tree(W, thr, left, right, leaf_class, n_classes=2) -> Tree:
    W = np.asarray(W, dtype=np.float64)
    return Tree(W, np.asarray(thr, dtype=np.float64), left, right, leaf_class,
                np.zeros((W.shape[0], n_classes), dtype=np.int64)).validate()


def axis_tree() -> Tree:
    """x0 <= 0.4 ? (x0 <= 0.2 ? C0 : C1) : (x1 <= 0.5 ? C1 : C0)  (pre-order ids 0..6)."""
    W = np.zeros((7, 2))
    W[0, 0] = W[1, 0] = W[4, 1] = 1.0
    return tree(W, [0.4, 0.2, 0, 0, 0.5, 0, 0], [1, 2, LEAF, LEAF, 5, LEAF, LEAF],
                [4, 3, LEAF, LEAF, 6, LEAF, LEAF], [0, 0, 0, 1, 0, 1, 0])


def test_phi_matches_erf():
    z = np.linspace(-8, 8, 1001)
    ref = np.array([Phi(v) for v in z])
    assert np.max(np.abs(vicinal.phi(z) - ref)) < 2e-7
    assert vicinal.phi(np.inf) == 1.0 and vicinal.phi(-np.inf) == 0.0


def test_axis_tree_hand_computed():
    x = np.array([[0.3, 0.6]])
    leaves, mass = vicinal.leaf_masses(axis_tree(), x, 0.1)
    assert leaves.tolist() == [2, 3, 5, 6]
    p_root_right = 1 - Phi(1.0)
    expected = [Phi(-1.0), Phi(1.0) - Phi(-1.0), p_root_right * Phi(-1.0), p_root_right * Phi(1.0)]
    assert np.allclose(mass[0], expected, atol=1e-7)
    assert mass.sum() == pytest.approx(1.0, abs=1e-7)
    # class 0 row: wrong leaves are 3 (C1) and 5 (C1)
    loss = vicinal.vicinal_losses(axis_tree(), x, np.array([0]), 0.1)
    assert loss[0] == pytest.approx(expected[1] + expected[2], abs=1e-7)


def test_fig4_limits_on_the_same_attribute():
    """Paper Fig. 4: root x0 <= 0.4, its left child tests x0 <= 0.5 — nothing can reach that
    child's right subtree, and the left child passes on all it receives."""
    W = np.zeros((5, 1))
    W[0, 0] = W[1, 0] = 1.0
    t = tree(W, [0.4, 0.5, 0, 0, 0], [1, 2, LEAF, LEAF, LEAF], [4, 3, LEAF, LEAF, LEAF], [0, 0, 0, 1, 1])
    x = np.array([[0.45], [0.1], [0.9]])
    leaves, mass = vicinal.leaf_masses(t, x, 0.1)
    assert leaves.tolist() == [2, 3, 4]
    assert np.all(mass[:, 1] == 0.0)                      # the unreachable leaf
    assert np.allclose(mass[:, 0], [Phi(-0.5), Phi(3.0), Phi(-5.0)], atol=1e-7)
    assert np.allclose(mass.sum(axis=1), 1.0, atol=1e-7)
    # without the refinement the unreachable leaf would get Phi(0.4..0.5 region) mass: check the
    # interval rule also on a narrowing test (x0 <= 0.4 then x0 <= 0.3 on the left)
    t2 = tree(W, [0.4, 0.3, 0, 0, 0], [1, 2, LEAF, LEAF, LEAF], [4, 3, LEAF, LEAF, LEAF], [0, 0, 0, 1, 1])
    _, m2 = vicinal.leaf_masses(t2, np.array([[0.35]]), 0.1)
    assert np.allclose(m2[0], [Phi(-0.5), Phi(0.5) - Phi(-0.5), 1 - Phi(0.5)], atol=1e-7)


def test_negative_axis_coefficient_mirrors_the_interval():
    W = np.zeros((3, 1))
    W[0, 0] = -2.0                     # -2 x <= -0.8  <=>  x >= 0.4 -> left
    t = tree(W, [-0.8, 0, 0], [1, LEAF, LEAF], [2, LEAF, LEAF], [1, 0, 1])
    _, mass = vicinal.leaf_masses(t, np.array([[0.5]]), 0.1)
    assert np.allclose(mass[0], [Phi(1.0), 1 - Phi(1.0)], atol=1e-7)


def test_oblique_tree_hand_computed():
    W = np.zeros((5, 2))
    W[0] = [1.0, 1.0]
    W[1] = [0.5, -1.0]
    t = tree(W, [1.0, 0.0, 0, 0, 0], [1, 2, LEAF, LEAF, LEAF], [4, 3, LEAF, LEAF, LEAF], [0, 0, 1, 0, 1])
    x = np.array([[0.4, 0.5]])
    sigma = 0.1
    p0 = Phi((1.0 - 0.9) / (sigma * math.sqrt(2.0)))
    p1 = Phi((0.0 - (0.2 - 0.5)) / (sigma * math.sqrt(1.25)))
    _, mass = vicinal.leaf_masses(t, x, sigma)
    assert np.allclose(mass[0], [p0 * p1, p0 * (1 - p1), 1 - p0], atol=1e-7)
    loss = vicinal.vicinal_losses(t, x, np.array([1]), sigma)
    assert loss[0] == pytest.approx(p0 * (1 - p1), abs=1e-7)   # leaf 3 predicts class 0


def test_per_attribute_widths_on_an_oblique_node():
    W = np.zeros((3, 2))
    W[0] = [1.0, 2.0]
    t = tree(W, [1.0, 0, 0], [1, LEAF, LEAF], [2, LEAF, LEAF], [0, 1, 0])
    sig = np.array([0.1, 0.2])
    _, mass = vicinal.leaf_masses(t, np.array([[0.3, 0.3]]), sig)
    assert mass[0, 0] == pytest.approx(Phi(0.1 / math.sqrt(0.01 + 4 * 0.04)), abs=1e-7)


@pytest.mark.parametrize("mode", ["axis", "oblique"])
def test_small_sigma_gives_the_empirical_risk(mode):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 32768, size=(400, 3)) / 32768.0
    y = (X[:, 0] + 0.5 * X[:, 1] > 0.7).astype(np.int64)
    y[rng.random(400) < 0.1] ^= 1
    W = np.zeros((7, 3))
    if mode == "axis":
        W[0, 0] = W[1, 1] = W[4, 2] = 1.0
    else:
        W[0] = [1.0, 0.5, 0.0]
        W[1] = [0.3, -1.0, 0.2]
        W[4] = [0.0, 1.0, 1.0]
    # thresholds off the Q15 grid: no row sits on a boundary
    thr = [0.7 + 1 / 65536, 0.25 + 1 / 65536, 0, 0, 0.9 + 1 / 65536, 0, 0]
    t = tree(W, thr, [1, 2, LEAF, LEAF, 5, LEAF, LEAF], [4, 3, LEAF, LEAF, 6, LEAF, LEAF], [0, 0, 0, 1, 0, 1, 1])
    emp = vicinal.empirical_risk(t, X, y)
    assert 0.05 < emp < 0.6
    assert vicinal.vicinal_risk(t, X, y, 1e-9) == pytest.approx(emp, abs=1e-12)
    assert vicinal.vicinal_risk(t, X, y, 0.0) == pytest.approx(emp, abs=1e-12)       # hard tests
    assert abs(vicinal.vicinal_risk(t, X, y, 0.05) - emp) > 1e-3                       # and it moves


def test_kernel_sigma_and_checks():
    X = np.array([[0.0, 0.5], [1.0, 0.5]])
    assert np.allclose(vicinal.kernel_sigma(X, 0.1), [math.sqrt(0.1) * 0.5, 0.0])
    for bad in (0, -1.0, float("nan"), float("inf"), "x", True):
        with pytest.raises(TreegenError):
            vicinal.check_sigma2(bad)
    assert vicinal.check_sigma2("auto") == "auto"
    with pytest.raises(TreegenError):
        vicinal.check_risk("vicinity")


def test_phi_table_q16():
    tab = vicinal.phi_table_q16()
    assert tab.shape == (1024,) and tab[0] == 2 and tab[-1] == 65534 and np.all(np.diff(tab) >= 0)


def random_tree(rng: np.random.Generator, n_features: int, depth: int) -> Tree:
    """A random pre-order tree mixing axis tests (positive and negative weights, attributes reused on
    a path), oblique tests and all-zero (hard) tests."""
    W, thr, left, right, cls = [], [], [], [], []

    def grow(d: int) -> int:
        i = len(W)
        W.append(np.zeros(n_features))
        thr.append(0.0)
        left.append(LEAF)
        right.append(LEAF)
        cls.append(int(rng.integers(3)))
        if d < depth and rng.random() < 0.8:
            kind = rng.random()
            if kind < 0.6:
                W[i][int(rng.integers(2))] = rng.choice([1.0, -1.0, 2.5])     # two attributes: many repeats
                thr[i] = float(rng.random() * W[i].sum())
            elif kind < 0.9:
                W[i] = rng.normal(size=n_features)
                thr[i] = float(rng.normal())
            else:
                thr[i] = float(rng.choice([-1.0, 1.0]))
            left[i] = grow(d + 1)
            right[i] = grow(d + 1)
        return i

    grow(0)
    return tree(np.array(W), thr, left, right, cls, n_classes=3)


def _leaf_masses_per_node(tree: Tree, X: np.ndarray, sigma) -> tuple[np.ndarray, np.ndarray]:
    """``vicinal.leaf_masses`` (same arguments and result), one numpy pass per node: the recursion
    the vectorised version replaced, kept as its oracle."""
    X, sig = vicinal.checked_rows_and_widths(tree, X, sigma)
    n = X.shape[0]
    W, T, L, R = tree.weights, tree.threshold, tree.left, tree.right
    leaves: list[int] = []
    columns: list[np.ndarray] = []
    one = np.ones(n)
    # stack entries: node, mass from oblique tests, {attr: (lo, hi, factor)} for axis tests
    stack: list[tuple[int, np.ndarray, dict]] = [(0, one, {})]
    while stack:
        node, rest, limits = stack.pop()
        if L[node] == LEAF:
            mass = rest
            for _lo, _hi, factor in limits.values():
                mass = mass * factor
            leaves.append(node)
            columns.append(mass)
            continue
        w = W[node]
        nz = np.flatnonzero(w)
        left_l, right_l = limits, limits
        left_rest = right_rest = rest
        if nz.size == 0:
            go_left = 0.0 <= T[node]
            left_rest = rest if go_left else rest * 0.0
            right_rest = rest * 0.0 if go_left else rest
        elif nz.size == 1:
            a = int(nz[0])
            c = float(w[a])
            b = float(T[node]) / c
            lo, hi, _ = limits.get(a, (-math.inf, math.inf, None))
            if c > 0:   # left: x_a <= b
                l_int, r_int = (lo, min(hi, b)), (max(lo, b), hi)
            else:       # left: x_a >= b (equality goes left: x_a == b gives c*x_a == theta)
                l_int, r_int = (max(lo, b), hi), (lo, min(hi, b))
            xa = X[:, a]
            s = float(sig[a])
            if c < 0:   # the interval test is lo < x <= hi; mirror so that the boundary goes left
                lm = vicinal._interval_mass(-xa, -l_int[1], -l_int[0], s)
                rm = vicinal._interval_mass(-xa, -r_int[1], -r_int[0], s)
            else:
                lm = vicinal._interval_mass(xa, *l_int, s)
                rm = vicinal._interval_mass(xa, *r_int, s)
            left_l = {**limits, a: (l_int[0], l_int[1], lm)}
            right_l = {**limits, a: (r_int[0], r_int[1], rm)}
        else:
            proj = X @ w
            s = math.sqrt(float(np.sum((w * sig) ** 2)))
            if s > 0:
                p_left = vicinal.phi((T[node] - proj) / s)
            else:
                p_left = (proj <= T[node]).astype(np.float64)
            left_rest = rest * p_left
            right_rest = rest * (1.0 - p_left)
        stack.append((int(R[node]), right_rest, right_l))
        stack.append((int(L[node]), left_rest, left_l))
    return np.array(leaves, dtype=np.int64), np.column_stack(columns)


def test_vectorised_leaf_masses_are_bit_identical_to_the_per_node_recursion():
    rng = np.random.default_rng(11)
    X = rng.random((60, 3))
    X[:5, 0] = 0.5                                  # rows on a boundary
    for k in range(80):
        t = random_tree(rng, 3, int(rng.integers(1, 7)))
        for sig in (0.1, 0.0, np.array([0.05, 0.0, 0.2])):
            a = _leaf_masses_per_node(t, X, sig)
            b = vicinal.leaf_masses(t, X, sig)
            assert np.array_equal(a[0], b[0])
            assert np.array_equal(a[1], b[1]), (k, sig)
