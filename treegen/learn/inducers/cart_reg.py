"""CART regression: axis-parallel value tree grown by squared error, with cost-complexity pruning.

The regression twin of :mod:`treegen.learn.inducers.cart`, built to give the trees of
scikit-learn's ``DecisionTreeRegressor(criterion="squared_error")`` apart from its random
tie-breaking:

* **Splits.** Every feature, every boundary between two consecutive distinct values of the node's
  samples, threshold the midpoint ``v[p-1]/2 + v[p]/2``, test ``x[f] <= threshold`` -> left; both
  children keep ``min_samples_leaf`` rows. The split with the largest squared-error decrease wins,
  found by scikit-learn's proxy ``S_L**2 / n_L + S_R**2 / n_R`` (``S``: sums of the targets, running
  sums along each feature's sorted order); ties go to the lowest feature index, then the lowest
  threshold.
* **Stopping.** A node is a leaf when its targets are constant (variance ``<= eps``),
  ``depth == max_depth``, it has fewer than ``min_samples_split`` or ``2 * min_samples_leaf`` rows,
  or no feature has a valid split.
* **Pruning.** Minimal cost-complexity pruning with ``R(t) = n_t / n * MSE(t)`` (scikit-learn's
  ``ccp_alpha``), the weakest-link walk of :func:`treegen.learn.inducers.cart._prune`.
* **Leaves** output the mean target of their training rows (``Tree.leaf_value``; every node holds
  its mean, ``class_counts[:, 0]`` its row count).
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree
from treegen.learn.inducers import cart

EPS = float(np.finfo(np.float64).eps)


def _check_data(X, y) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise TreegenError(f"CART needs a non-empty 2-D X, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise TreegenError("CART input X contains NaN or infinite values")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise TreegenError(f"CART needs one target per row: X has {X.shape[0]} rows, y has shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise TreegenError("CART regression targets contain NaN or infinite values")
    return X, y


def _best_split(XT, y, S, total, msl, feats=None):
    """Best split of the node whose rows, sorted along feature ``f``, are ``S[f]``: ``(feature,
    threshold, n_left)`` or ``None``. ``feats``: only these (sorted) features are searched."""
    if feats is not None:
        split = _best_split(XT[feats], y, S[feats], total, msl) if feats.size else None
        return None if split is None else (int(feats[split[0]]), split[1], split[2])
    A, n = S.shape
    lo, hi = msl, n - msl
    if lo > hi:
        return None
    Xs = np.take_along_axis(XT, S, axis=1)
    valid = Xs[:, lo - 1:hi] < Xs[:, lo:hi + 1]
    fi, pi = np.nonzero(valid)
    if fi.size == 0:
        return None
    nL = (pi + lo).astype(np.float64)
    nR = n - nL
    cum = np.cumsum(y[S[:, :hi]], axis=1)
    SL = cum[fi, pi + lo - 1]
    SR = total - SL
    proxy = SL * SL / nL + SR * SR / nR
    best = int(np.argmax(proxy))
    f = int(fi[best])
    p = int(pi[best]) + lo
    return f, float(Xs[f, p - 1] / 2.0 + Xs[f, p] / 2.0), p


def _grow(X, y, max_depth, min_samples_split, min_samples_leaf, max_features=None, rng=None) -> dict:
    """The fully grown tree, nodes in pre-order (per-node arrays, as :func:`cart._grow`)."""
    N, A = X.shape
    XT = np.ascontiguousarray(X.T)
    depth_limit = max_depth if max_depth is not None else np.iinfo(np.int64).max
    min_split = max(min_samples_split, 2 * min_samples_leaf)
    goes_left = np.zeros(N, dtype=bool)
    feature, threshold, left, right, n_samples, mean, impurity = [], [], [], [], [], [], []
    stack = [(np.argsort(XT, axis=1, kind="stable"), 0, -1, True)]
    while stack:
        S, depth, parent, is_left = stack.pop()
        node = len(feature)
        if parent >= 0:
            (left if is_left else right)[parent] = node
        n = S.shape[1]
        yn = y[S[0]]
        total = float(np.sum(yn))
        mse = float(np.var(yn))
        feature.append(LEAF)
        threshold.append(0.0)
        left.append(LEAF)
        right.append(LEAF)
        n_samples.append(n)
        mean.append(float(np.mean(yn)))
        impurity.append(mse)
        if depth >= depth_limit or n < min_split or mse <= EPS or np.all(yn == yn[0]):
            continue
        if max_features is not None and max_features < A:
            order = rng.permutation(A)
            split = None
            for start in range(0, A, max_features):
                split = _best_split(XT, y, S, total, min_samples_leaf, np.sort(order[start:start + max_features]))
                if split is not None:
                    break
        else:
            split = _best_split(XT, y, S, total, min_samples_leaf)
        if split is None:
            continue
        f, thr, n_left = split
        feature[node] = f
        threshold[node] = thr
        idx = S[0]
        goes_left[idx] = XT[f, idx] <= thr
        M = goes_left[S]
        stack.append((S[~M].reshape(A, n - n_left), depth + 1, node, False))
        stack.append((S[M].reshape(A, n_left), depth + 1, node, True))
    return {
        "feature": np.array(feature, dtype=np.int64), "threshold": np.array(threshold, dtype=np.float64),
        "left": np.array(left, dtype=np.int64), "right": np.array(right, dtype=np.int64),
        "n_samples": np.array(n_samples, dtype=np.int64), "mean": np.array(mean, dtype=np.float64),
        "impurity": np.array(impurity, dtype=np.float64), "n_features": A,
    }


def _to_tree(g: dict, collapsed: np.ndarray | None) -> Tree:
    weights, threshold, left, right = cart.structure(g, collapsed)
    n_nodes = weights.shape[0]
    tree = Tree(weights, threshold, left, right, np.zeros(n_nodes, dtype=np.int32), g["n_samples"][:, None],
                leaf_value=g["mean"])
    return tree.compact()


def induce(X, y, *, max_depth: int | None = None, min_samples_split: int = 2, min_samples_leaf: int = 1,
           ccp_alpha: float = 0.0, max_features: int | None = None,
           rng: np.random.Generator | None = None) -> tuple[Tree, dict]:
    """Induce a CART regression tree.

    Parameters
    ----------
    X : ndarray (n_samples, n_features)
        Normalised features (float64, Q15 grid).
    y : ndarray (n_samples,)
        Finite targets.
    max_depth, min_samples_split, min_samples_leaf, ccp_alpha :
        As :func:`treegen.learn.inducers.cart.induce` (``ccp_alpha`` on the mean squared error).
    max_features : int >= 1 or None
        Features searched per node, drawn by ``rng`` (random forests); None = all.

    Returns
    -------
    tree : Tree
        A value tree (``leaf_value`` = node means, ``class_counts`` = rows per node), pre-order.
    info : dict
        ``{"n_leaves": int, "depth": int}``.
    """
    cart._check_params("gini", max_depth, min_samples_split, min_samples_leaf, ccp_alpha)
    X, y = _check_data(X, y)
    if max_features is not None:
        if not cart._is_int(max_features) or max_features < 1:
            raise TreegenError(f"max_features must be an integer >= 1 or None, got {max_features!r}")
        if rng is None:
            raise TreegenError("max_features needs a random generator (rng)")
    g = _grow(X, y, max_depth, min_samples_split, min_samples_leaf, max_features, rng)
    collapsed = None
    if ccp_alpha > 0:
        _, _, collapsed = cart._prune(g, float(ccp_alpha))
    tree = _to_tree(g, collapsed)
    return tree, {"n_leaves": tree.n_leaves, "depth": tree.depth}
