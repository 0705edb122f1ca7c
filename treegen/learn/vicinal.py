"""Vicinal risk of a decision tree (Cao & Rockett 2015, shared/seeds/002_*.txt).

Each training row ``x_i`` is replaced by a Gaussian kernel centred on it. Probability 1 enters the
root; every internal node passes ``P(test true)`` to its left child and the rest to its right child.
The *vicinal loss* of a row is the probability mass that reaches leaves predicting a class other
than the row's; the *vicinal risk* is the mean loss over the rows. As the kernel width goes to 0
the vicinal risk becomes the empirical (0/1) risk.

Kernel width
------------
``sigma2`` is the kernel variance **in units of each attribute's variance on the training rows**:
the paper standardised every attribute to unit variance and used ``sigma2 = 0.1``; treegen's trees
work on features normalised to [0, 1) (:mod:`treegen.core.scaling`), so the kernel standard
deviation of attribute ``a`` is ``sigma_a = sqrt(sigma2) * std_a`` (:func:`kernel_sigma`), which is
the paper's kernel on the paper's scale. A constant attribute gets ``sigma_a = 0`` (a hard test).

Nodes (the IR's test is ``w . x <= theta`` -> left)
----------------------------------------------------
* **Axis-parallel** (one non-zero weight ``c`` on attribute ``a``): the test is an interval of
  ``x_a``. As in the paper's refinement (section 3.3, Fig. 4) the lower and upper limits
  ``(t_l, t_u)`` already applied to ``a`` on the path are tracked, and the mass of the row in the
  node's region is the product over the attributes tested on the path of
  ``Phi((t_u - x_a)/sigma_a) - Phi((t_l - x_a)/sigma_a)`` — the exact Gaussian mass of the
  hyper-rectangle (a node whose threshold lies outside ``(t_l, t_u)`` sends everything one way).
  For a single split this is the paper's ``Phi((theta - x_a)/sigma)``.
* **Oblique** (several non-zero weights): ``P(left) = Phi((theta - w.x) / s)`` with
  ``s = sqrt(sum_a w_a^2 sigma_a^2)`` (``= sigma * ||w||`` for equal widths), multiplied into the
  mass reaching the node (the half-spaces of different oblique nodes are treated as independent:
  exact along one direction, an approximation when several oblique tests on a path interact).
* A node with all-zero weights is a hard test ``0 <= theta``.

Fixed point (how a C engine or a device would compute it)
---------------------------------------------------------
The same recursion runs in integers: Q15 inputs, per-attribute ``1/sigma_a`` as a Q16 factor,
``z = ((t - x) * inv_sigma) >> k`` clamped to +-4 sigma and looked up in a 1024-entry Q16 table of
``Phi`` (``PHI_Q16[i] = round(65536 * Phi(-4 + 8 i / 1023))``, linear interpolation optional);
path masses are Q16 integers multiplied with a rounding shift (``(m * p + 2**15) >> 16``); a row's
loss is the Q16 mass summed over wrong-class leaves and the risk is ``sum_i loss_i`` compared as an
integer (no division needed to compare two trees on the same rows). :func:`phi_table_q16` builds
that table; the Python estimators use float64 (this module).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree

DEFAULT_SIGMA2 = 0.1
#: grid searched by ``sigma2="auto"`` (inner cross-validation)
AUTO_GRID = (0.001, 0.01, 0.1, 1.0)
RISKS = ("empirical", "vicinal")

# Numerical Recipes' erfc (Chebyshev fit), fractional error < 1.2e-7 everywhere
_ERFC_COEF = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
              0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erfc(x: np.ndarray) -> np.ndarray:
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = _ERFC_COEF[-1]
    for c in _ERFC_COEF[-2::-1]:
        poly = poly * t + c
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        r = t * np.exp(-z * z + poly)
    r = np.where(np.isfinite(z), r, 0.0)
    return np.where(x >= 0, r, 2.0 - r)


def phi(z) -> np.ndarray:
    """Standard normal CDF (float64, absolute error < 1e-7; ``phi(+-inf)`` = 1 / 0)."""
    z = np.asarray(z, dtype=np.float64)
    return 0.5 * _erfc(-z / math.sqrt(2.0))


def phi_table_q16(size: int = 1024, span: float = 4.0) -> np.ndarray:
    """``round(65536 * Phi(z))`` on ``size`` points evenly spaced in ``[-span, span]`` (see module doc)."""
    z = np.linspace(-span, span, size)
    return np.rint(65536.0 * phi(z)).astype(np.int64)


def check_sigma2(sigma2, *, allow_auto: bool = True):
    """Validate a kernel variance: a finite number > 0, or ``'auto'``."""
    if allow_auto and isinstance(sigma2, str) and sigma2 == "auto":
        return sigma2
    if isinstance(sigma2, bool) or not isinstance(sigma2, numbers.Real) or not math.isfinite(sigma2) or sigma2 <= 0:
        raise TreegenError(f"vicinity sigma^2 must be a finite number > 0{' or auto' if allow_auto else ''}, "
                           f"got {sigma2!r}")
    return float(sigma2)


def check_risk(risk) -> str:
    if not isinstance(risk, str) or risk not in RISKS:
        raise TreegenError(f"unknown risk {risk!r} (choose from {', '.join(RISKS)})")
    return risk


def kernel_sigma(X: np.ndarray, sigma2: float) -> np.ndarray:
    """Per-attribute kernel standard deviation ``sqrt(sigma2) * std_a`` (see module doc)."""
    X = np.asarray(X, dtype=np.float64)
    return math.sqrt(check_sigma2(sigma2, allow_auto=False)) * X.std(axis=0)


def _interval_mass(x: np.ndarray, lo: float, hi: float, sigma: float) -> np.ndarray:
    """Gaussian mass of ``lo < X <= hi`` for kernels centred on ``x`` (width ``sigma``; 0 = hard)."""
    if hi <= lo:
        return np.zeros_like(x)
    if sigma <= 0.0:
        return ((x > lo) & (x <= hi)).astype(np.float64)
    upper = phi((hi - x) / sigma) if math.isfinite(hi) else 1.0
    lower = phi((lo - x) / sigma) if math.isfinite(lo) else 0.0
    return np.clip(upper - lower, 0.0, 1.0)


def checked_rows_and_widths(tree: Tree, X, sigma) -> tuple[np.ndarray, np.ndarray]:
    """``(X as float64, one kernel width per attribute)`` for :func:`leaf_masses`; a wrong number of
    features or a width that is not finite and >= 0 raises :class:`TreegenError`."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != tree.n_features:
        raise TreegenError(f"expected {tree.n_features} features, got array of shape {X.shape}")
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (tree.n_features,))
    if np.any(~np.isfinite(sig)) or np.any(sig < 0):
        raise TreegenError("kernel widths must be finite and >= 0")
    return X, sig


def leaf_masses(tree: Tree, X: np.ndarray, sigma) -> tuple[np.ndarray, np.ndarray]:
    """Probability mass of every row at every leaf.

    Parameters
    ----------
    tree : Tree
    X : ndarray (n_rows, n_features)
        Normalised features (the tree's inputs).
    sigma : float or ndarray (n_features,)
        Kernel standard deviation per attribute (see :func:`kernel_sigma`); 0 = hard test.

    Returns
    -------
    leaves : ndarray (n_leaves,)
        Leaf node indices (pre-order).
    mass : ndarray (n_rows, n_leaves)
        Each row sums to 1 (up to rounding).

    Notes
    -----
    Two passes: the tree is walked once without touching the rows, collecting per leaf the
    factors of its path (oblique ``P(left)`` / ``1 - P(left)`` columns in path order, then the
    axis intervals in first-use order of their attribute); then every factor column is computed in
    ONE vectorised ``Phi`` call on an ``(n_rows, n_factors)`` matrix and each leaf's mass is the
    product of its columns taken in the same order, starting from 1, as the per-node recursion
    (``_leaf_masses_per_node`` in tests/learn/test_vicinal.py) — element-wise the same float operations, so the masses are
    bit-identical, at about one numpy call per tree instead of several per node.
    """
    X, sig = checked_rows_and_widths(tree, X, sigma)
    n = X.shape[0]
    W, T, L, R = tree.weights, tree.threshold, tree.left, tree.right
    # factor columns: 0 = ones (padding), 1 = zeros (hard zero-weight test); then one column per
    # axis interval (attr, sign, lo, hi) and two per oblique node (P(left), 1 - P(left))
    axis_specs: list[tuple[int, float, float, float]] = []
    axis_col: dict[tuple[int, float, float, float], int] = {}
    obl_nodes: list[int] = []
    leaves: list[int] = []
    paths: list[list[int]] = []      # per leaf: factor ids ('a', k) -> k >= 0 axis, < 0 special/oblique

    def axis_id(a: int, sign: float, lo: float, hi: float) -> int:
        key = (a, sign, lo, hi)
        k = axis_col.get(key)
        if k is None:
            k = axis_col[key] = len(axis_specs)
            axis_specs.append(key)
        return k

    nnz = np.count_nonzero(W, axis=1)
    first = np.argmax(W != 0, axis=1)
    # stack entries: node, oblique factor ids ('o', j, side) or ('z',), {attr: (lo, hi, factor id)}
    stack: list[tuple[int, tuple, dict]] = [(0, (), {})]
    while stack:
        node, rest, limits = stack.pop()
        if L[node] == LEAF:
            leaves.append(node)
            paths.append(list(rest) + [("a", f) for _lo, _hi, f in limits.values()])
            continue
        k_nz = int(nnz[node])
        left_l, right_l = limits, limits
        left_rest = right_rest = rest
        if k_nz == 0:
            if 0.0 <= T[node]:
                right_rest = rest + (("z",),)
            else:
                left_rest = rest + (("z",),)
        elif k_nz == 1:
            a = int(first[node])
            c = float(W[node, a])
            b = float(T[node]) / c
            lo, hi, _ = limits.get(a, (-math.inf, math.inf, None))
            if c > 0:   # left: x_a <= b
                l_int, r_int = (lo, min(hi, b)), (max(lo, b), hi)
                lk = axis_id(a, 1.0, *l_int)
                rk = axis_id(a, 1.0, *r_int)
            else:       # left: x_a >= b; mirrored (-x_a in (-hi, -lo]) so that the boundary goes left
                l_int, r_int = (max(lo, b), hi), (lo, min(hi, b))
                lk = axis_id(a, -1.0, -l_int[1], -l_int[0])
                rk = axis_id(a, -1.0, -r_int[1], -r_int[0])
            left_l = {**limits, a: (l_int[0], l_int[1], lk)}
            right_l = {**limits, a: (r_int[0], r_int[1], rk)}
        else:
            j = len(obl_nodes)
            obl_nodes.append(node)
            left_rest = rest + (("o", j, 0),)
            right_rest = rest + (("o", j, 1),)
        stack.append((int(R[node]), right_rest, right_l))
        stack.append((int(L[node]), left_rest, left_l))

    K = len(axis_specs)
    cols = [np.ones((n, 1)), np.zeros((n, 1))]
    if K:
        # Phi once per distinct (attribute, mirror sign, finite limit): an interval's mass is
        # Phi((hi - x)/s) - Phi((lo - x)/s) with Phi(+inf) = 1 and Phi(-inf) = 0 as constants
        bounds: dict[tuple[int, float, float], int] = {}
        lo_id = np.empty(K, dtype=np.int64)
        hi_id = np.empty(K, dtype=np.int64)
        for k, (a, sg, lo, hi) in enumerate(axis_specs):
            lo_id[k] = bounds.setdefault((a, sg, lo), len(bounds)) if math.isfinite(lo) else -2
            hi_id[k] = bounds.setdefault((a, sg, hi), len(bounds)) if math.isfinite(hi) else -1
        ba = np.array([k[0] for k in bounds], dtype=np.int64)
        bs = np.array([k[1] for k in bounds])
        bv = np.array([k[2] for k in bounds])
        xb = X[:, ba]
        xb = np.where(bs < 0, -xb, xb)
        sb = sig[ba]
        soft_b = sb > 0.0
        P = np.empty((n, len(bounds) + 2))
        P[:, -1] = 1.0                   # Phi(+inf)
        P[:, -2] = 0.0                   # Phi(-inf)
        P[:, :-2] = phi((bv - xb) / np.where(soft_b, sb, 1.0))
        m = np.clip(P[:, hi_id] - P[:, lo_id], 0.0, 1.0)
        A = np.array([k[0] for k in axis_specs], dtype=np.int64)
        soft = sig[A] > 0.0
        lo = np.array([k[2] for k in axis_specs])
        hi = np.array([k[3] for k in axis_specs])
        if not np.all(soft):             # zero width: the hard interval test
            x = X[:, A]
            x = np.where(np.array([k[1] for k in axis_specs]) < 0, -x, x)
            m = np.where(soft, m, ((x > lo) & (x <= hi)).astype(np.float64))
        m = np.where(hi <= lo, 0.0, m)
        cols.append(m)
    if obl_nodes:
        p_left = np.empty((n, len(obl_nodes)))
        for j, node in enumerate(obl_nodes):   # one column per oblique node, the recursion's operations
            w = W[node]
            proj = X @ w
            so = math.sqrt(float(np.sum((w * sig) ** 2)))
            if so > 0:
                p_left[:, j] = phi((T[node] - proj) / so)
            else:
                p_left[:, j] = (proj <= T[node]).astype(np.float64)
        cols += [p_left, 1.0 - p_left]
    F = np.concatenate(cols, axis=1)
    J = len(obl_nodes)

    def col(f) -> int:
        if f[0] == "a":
            return 2 + f[1]
        if f[0] == "z":
            return 1
        return 2 + K + f[1] + (J if f[2] else 0)

    depth = max((len(p) for p in paths), default=0)
    idx = np.zeros((len(paths), depth), dtype=np.int64)          # padded with the ones column
    for i, p in enumerate(paths):
        idx[i, :len(p)] = [col(f) for f in p]
    mass = np.ones((n, len(paths)))
    for d in range(depth):
        mass = mass * F[:, idx[:, d]]
    return np.array(leaves, dtype=np.int64), mass


def vicinal_losses(tree: Tree, X: np.ndarray, y: np.ndarray, sigma) -> np.ndarray:
    """Per-row vicinal loss: mass reaching leaves whose class is not the row's class index ``y``."""
    y = np.asarray(y, dtype=np.int64)
    leaves, mass = leaf_masses(tree, X, sigma)
    wrong = tree.leaf_class[leaves][None, :] != y[:, None]
    return np.clip(np.sum(mass * wrong, axis=1), 0.0, 1.0)


def vicinal_risk(tree: Tree, X: np.ndarray, y: np.ndarray, sigma) -> float:
    """Mean vicinal loss over the rows (0..1)."""
    return float(np.mean(vicinal_losses(tree, X, y, sigma)))


def empirical_risk(tree: Tree, X: np.ndarray, y: np.ndarray) -> float:
    """Fraction of rows the tree misclassifies."""
    return float(np.mean(tree.predict_index(X) != np.asarray(y)))


def inner_folds(y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold index of every row for the inner cross-validation of ``sigma2='auto'``: each class is
    shuffled (``PCG64(seed)``) and dealt round-robin, continuing where the previous class stopped
    (the rule of :func:`treegen.learn.cv.stratified_fold_ids`; importing it from the estimators
    would make an import cycle estimators -> cv -> estimators)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    y = np.asarray(y)
    fold_of = np.empty(y.shape[0], dtype=np.int64)
    start = 0
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        fold_of[members] = (start + np.arange(members.shape[0])) % folds
        start = (start + members.shape[0]) % folds
    return fold_of
