"""CART: axis-parallel classification tree with minimal cost-complexity pruning.

Classic CART (Breiman et al., 1984), built to give the same trees as scikit-learn's
``DecisionTreeClassifier`` apart from its random tie-breaking:

* **Splits.** Every feature, every boundary between two consecutive distinct values of the node's
  samples; the threshold is the midpoint ``v[p-1]/2 + v[p]/2`` (exact for values on the Q15 grid)
  and the test is ``x[f] <= threshold`` -> left. Both children must keep ``min_samples_leaf``
  samples. The split with the largest impurity decrease wins; ties go to the lowest feature index,
  then the lowest threshold. Gini decreases are compared exactly (an integer numerator over an
  integer denominator, rounded once; nodes under 200000 samples), entropy decreases within a few
  ulps of the best count as ties.
* **Stopping.** A node is a leaf when it is pure, ``depth == max_depth``, it has fewer than
  ``min_samples_split`` or ``2 * min_samples_leaf`` samples, or no feature has a valid split.
  As in scikit-learn, a valid split is taken even if it does not decrease the impurity.
* **Pruning.** Minimal cost-complexity pruning with scikit-learn's definition of ``ccp_alpha``:
  ``R(t) = n_t / n * impurity(t)`` (entropy in bits); repeatedly collapse the weakest link (lowest
  ``(R(t) - R(T_t)) / (|leaves(T_t)| - 1)``, lowest node index on ties) while its effective alpha
  is ``<= ccp_alpha``. ``ccp_alpha == 0`` prunes nothing.
* **Leaves** predict the majority class (ties -> lowest class index).

The builder is iterative (explicit stack) and keeps, for every node, its samples sorted along each
feature (one global argsort; children inherit the order by stable partitioning), so a node costs
``O(n_features * n_node * n_classes_present)`` vectorised numpy work.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree

CRITERIA = ("gini", "entropy")


# ---------------------------------------------------------------------------------------- checks
def _check_params(criterion, max_depth, min_samples_split, min_samples_leaf, ccp_alpha) -> None:
    if not isinstance(criterion, str) or criterion not in CRITERIA:
        raise TreegenError(f"unknown CART criterion {criterion!r} (choose from {', '.join(CRITERIA)})")
    if max_depth is not None and (not _is_int(max_depth) or max_depth < 1):
        raise TreegenError(f"max_depth must be an integer >= 1 or None, got {max_depth!r}")
    if not _is_int(min_samples_split) or min_samples_split < 2:
        raise TreegenError(f"min_samples_split must be an integer >= 2, got {min_samples_split!r}")
    if not _is_int(min_samples_leaf) or min_samples_leaf < 1:
        raise TreegenError(f"min_samples_leaf must be an integer >= 1, got {min_samples_leaf!r}")
    if (isinstance(ccp_alpha, bool) or not isinstance(ccp_alpha, numbers.Real)
            or not math.isfinite(ccp_alpha) or ccp_alpha < 0):
        raise TreegenError(f"ccp_alpha must be a finite number >= 0, got {ccp_alpha!r}")


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_data(X, y, n_classes) -> tuple[np.ndarray, np.ndarray, int]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise TreegenError(f"CART needs a non-empty 2-D X, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise TreegenError("CART input X contains NaN or infinite values")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise TreegenError(f"CART needs one label per row: X has {X.shape[0]} rows, y has shape {y.shape}")
    if not _is_int(n_classes) or n_classes < 1:
        raise TreegenError(f"n_classes must be an integer >= 1, got {n_classes!r}")
    if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= n_classes:
        raise TreegenError(f"CART labels must be class indices 0..{n_classes - 1}")
    return X, y.astype(np.intp), int(n_classes)


# ---------------------------------------------------------------------------------------- impurity
def _node_impurity(counts: np.ndarray, n: int, criterion: str) -> float:
    """Node impurity, computed with scikit-learn's formulas (same rounding): Gini
    ``1 - sum(c^2) / n^2``, entropy ``-sum p log2 p``."""
    if criterion == "gini":
        sq = float(np.dot(counts, counts))
        return 1.0 - sq / (float(n) * float(n))
    ent = 0.0
    ln2 = math.log(2.0)
    for c in counts.tolist():
        if c > 0:
            p = c / n
            ent -= p * (math.log(p) / ln2)
    return ent


# ---------------------------------------------------------------------------------------- split search
def _best_split(XT, y, S, counts, msl, criterion, xlogx, feats=None):
    """Best split of the node whose samples, sorted along feature ``f``, are ``S[f]``.

    ``feats``: only these features (sorted indices) are searched (random forests); ``None`` = all.
    Returns ``(feature, threshold, n_left)`` or ``None`` when no valid split exists.
    """
    if feats is not None:
        split = _best_split(XT[feats], y, S[feats], counts, msl, criterion, xlogx) if feats.size else None
        return None if split is None else (int(feats[split[0]]), split[1], split[2])
    A, n = S.shape
    lo, hi = msl, n - msl  # admissible sizes of the left child
    if lo > hi:
        return None
    Xs = np.take_along_axis(XT, S, axis=1)
    # position p (= n_left) separates Xs[:, p-1] and Xs[:, p]; valid where the values differ
    valid = Xs[:, lo - 1:hi] < Xs[:, lo:hi + 1]
    fi, pi = np.nonzero(valid)  # row-major: feature, then increasing threshold
    if fi.size == 0:
        return None
    nL = (pi + lo).astype(np.int64)
    nR = n - nL
    Y = y[S[:, :hi]]
    present = np.flatnonzero(counts)
    # cumulative left counts of every present class but the last (which is n_left - the others)
    cls_left = []
    for k in present[:-1]:
        cum = np.cumsum(Y == k, axis=1, dtype=np.int32)
        cls_left.append(cum[fi, pi + lo - 1].astype(np.int64))
    cls_left.append(nL - sum(cls_left) if cls_left else nL)
    if criterion == "gini":
        # maximise sum_k L_k^2 / nL + sum_k R_k^2 / nR = (SL*nR + SR*nL) / (nL*nR); for n < 200000
        # numerator and denominator are exact integers (< 2^53): one rounding, so exact ties stay ties
        SL = np.zeros_like(nL)
        SR = np.zeros_like(nL)
        for k, cl in zip(present, cls_left):
            cr = int(counts[k]) - cl
            SL += cl * cl
            SR += cr * cr
        if n < 200_000:
            proxy = (SL * nR + SR * nL) / (nL * nR).astype(np.float64)
        else:  # the exact numerator would exceed 2^53 (or int64): plain float arithmetic
            proxy = SL / nL.astype(np.float64) + SR / nR.astype(np.float64)
        best = int(np.argmax(proxy))
    else:
        # maximise sum_k L_k ln L_k + R_k ln R_k - nL ln nL - nR ln nR  (= -(nL H_L + nR H_R), nats)
        proxy = -(xlogx[nL] + xlogx[nR])
        for k, cl in zip(present, cls_left):
            proxy += xlogx[cl] + xlogx[int(counts[k]) - cl]
        top = proxy.max()
        tol = 8.0 * np.finfo(np.float64).eps * (2 * present.size + 2) * (xlogx[n] + 1.0)
        best = int(np.argmax(proxy >= top - tol))
    f = int(fi[best])
    p = int(pi[best]) + lo
    thr = float(Xs[f, p - 1] / 2.0 + Xs[f, p] / 2.0)
    return f, thr, p


# ---------------------------------------------------------------------------------------- growing
def _grow(X, y, n_classes, criterion, max_depth, min_samples_split, min_samples_leaf, max_features=None, rng=None):
    """Grow the full tree; node ids are in pre-order. Returns a dict of per-node arrays.

    ``max_features`` (random forests): each node searches a random subset of that many features
    drawn by ``rng`` (a ``numpy.random.Generator``); as in scikit-learn, when none of them has a
    valid split, further random features are searched until one has (or all were tried)."""
    N, A = X.shape
    XT = np.ascontiguousarray(X.T)
    xlogx = None
    if criterion == "entropy":
        r = np.arange(N + 1, dtype=np.float64)
        xlogx = np.zeros(N + 1)
        xlogx[1:] = r[1:] * np.log(r[1:])
    depth_limit = max_depth if max_depth is not None else np.iinfo(np.int64).max
    min_split = max(min_samples_split, 2 * min_samples_leaf)
    goes_left = np.zeros(N, dtype=bool)

    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    counts_l: list[np.ndarray] = []
    depth_l: list[int] = []

    root = np.argsort(XT, axis=1, kind="stable")
    stack = [(root, 0, -1, True)]
    while stack:
        S, depth, parent, is_left = stack.pop()
        node = len(feature)
        if parent >= 0:
            (left if is_left else right)[parent] = node
        n = S.shape[1]
        counts = np.bincount(y[S[0]], minlength=n_classes).astype(np.int64)
        feature.append(LEAF)
        threshold.append(0.0)
        left.append(LEAF)
        right.append(LEAF)
        counts_l.append(counts)
        depth_l.append(depth)
        if depth >= depth_limit or n < min_split or counts.max() == n:
            continue
        if max_features is not None and max_features < A:
            order = rng.permutation(A)
            split = None
            for start in range(0, A, max_features):
                split = _best_split(XT, y, S, counts, min_samples_leaf, criterion, xlogx,
                                    np.sort(order[start:start + max_features]))
                if split is not None:
                    break
        else:
            split = _best_split(XT, y, S, counts, min_samples_leaf, criterion, xlogx)
        if split is None:
            continue
        f, thr, n_left = split
        feature[node] = f
        threshold[node] = thr
        idx = S[0]
        goes_left[idx] = XT[f, idx] <= thr
        M = goes_left[S]
        SL = S[M].reshape(A, n_left)
        SR = S[~M].reshape(A, n - n_left)
        stack.append((SR, depth + 1, node, False))
        stack.append((SL, depth + 1, node, True))

    counts = np.array(counts_l, dtype=np.int64).reshape(-1, n_classes)
    n_samples = counts.sum(axis=1)
    impurity = np.array([_node_impurity(c, int(m), criterion) for c, m in zip(counts, n_samples)])
    return {
        "feature": np.array(feature, dtype=np.int64),
        "threshold": np.array(threshold, dtype=np.float64),
        "left": np.array(left, dtype=np.int64),
        "right": np.array(right, dtype=np.int64),
        "counts": counts,
        "n_samples": n_samples,
        "impurity": impurity,
        "n_features": A,
    }


# ---------------------------------------------------------------------------------------- pruning
def _prune(g: dict, ccp_alpha: float | None):
    """Minimal cost-complexity pruning of a grown tree (scikit-learn's algorithm and rounding).

    With ``ccp_alpha=None`` the whole path is walked and ``(alphas, impurities, None)`` returned;
    otherwise pruning stops at the first weakest link with alpha > ccp_alpha and the mask of nodes
    turned into leaves is returned as ``(alphas, impurities, collapsed)``.
    """
    left, right = g["left"], g["right"]
    n_nodes = left.shape[0]
    total = float(g["n_samples"][0])
    r_node = g["n_samples"].astype(np.float64) * g["impurity"] / total
    is_leaf = left == LEAF
    parent = np.full(n_nodes, -1, dtype=np.int64)
    internal = np.flatnonzero(~is_leaf)
    parent[left[internal]] = internal
    parent[right[internal]] = internal
    # pre-order: the subtree of i is the contiguous range [i, end[i])
    end = np.arange(1, n_nodes + 1, dtype=np.int64)
    for i in internal[::-1]:
        end[i] = end[right[i]]

    r_branch = np.zeros(n_nodes)
    n_leaves = np.zeros(n_nodes, dtype=np.int64)
    parent_l = parent.tolist()
    r_branch_l = [0.0] * n_nodes
    n_leaves_l = [0] * n_nodes
    for leaf in np.flatnonzero(is_leaf).tolist():  # same summation order as scikit-learn
        r = float(r_node[leaf])
        r_branch_l[leaf] = r
        i = leaf
        while i != 0:
            i = parent_l[i]
            r_branch_l[i] += r
            n_leaves_l[i] += 1
    r_branch[:] = r_branch_l
    n_leaves[:] = n_leaves_l

    alpha = np.full(n_nodes, np.inf)
    alpha[internal] = (r_node[internal] - r_branch[internal]) / (n_leaves[internal] - 1)
    candidate = ~is_leaf
    collapsed = np.zeros(n_nodes, dtype=bool)
    alphas = [0.0]
    impurities = [float(r_branch[0])]
    while candidate[0]:
        node = int(np.argmin(alpha))  # first minimum = lowest node index
        eff = float(alpha[node])
        if ccp_alpha is not None and ccp_alpha < eff:
            break
        stop = int(end[node])
        candidate[node:stop] = False
        alpha[node:stop] = np.inf
        collapsed[node + 1:stop] = False
        collapsed[node] = True
        n_pruned = int(n_leaves[node]) - 1
        n_leaves[node] = 0
        r_diff = r_node[node] - r_branch[node]
        r_branch[node] = r_node[node]
        i = int(parent[node])
        while i != -1:
            n_leaves[i] -= n_pruned
            r_branch[i] += r_diff
            alpha[i] = (r_node[i] - r_branch[i]) / (n_leaves[i] - 1)
            i = int(parent[i])
        alphas.append(eff)
        impurities.append(float(r_branch[0]))
    return np.array(alphas), np.array(impurities), collapsed


# ---------------------------------------------------------------------------------------- output
def structure(g: dict, collapsed: np.ndarray | None):
    """Grown arrays with the `collapsed` nodes made leaves -> (one-hot weights, threshold, left, right);
    shared by the classifier and the regressor (cart_reg)."""
    feature = g["feature"].copy()
    left = g["left"].copy()
    right = g["right"].copy()
    threshold = g["threshold"].copy()
    if collapsed is not None and collapsed.any():
        feature[collapsed] = LEAF
        left[collapsed] = LEAF
        right[collapsed] = LEAF
        threshold[collapsed] = 0.0
    n_nodes = feature.shape[0]
    weights = np.zeros((n_nodes, g["n_features"]))
    internal = np.flatnonzero(feature != LEAF)
    weights[internal, feature[internal]] = 1.0
    return weights, threshold, left, right


def _to_tree(g: dict, collapsed: np.ndarray | None) -> Tree:
    weights, threshold, left, right = structure(g, collapsed)
    counts = g["counts"]
    tree = Tree(weights, threshold, left, right, counts.argmax(axis=1), counts)
    return tree.compact()


def induce(X, y, n_classes, *, criterion: str = "gini", max_depth: int | None = None,
           min_samples_split: int = 2, min_samples_leaf: int = 1,
           ccp_alpha: float = 0.0, max_features: int | None = None,
           rng: np.random.Generator | None = None) -> tuple[Tree, dict]:
    """Induce a CART classification tree.

    Parameters
    ----------
    X : ndarray (n_samples, n_features)
        Normalised features (float64, Q15 grid).
    y : ndarray (n_samples,)
        Class indices ``0..n_classes-1``.
    n_classes : int
    criterion : {'gini', 'entropy'}
    max_depth : int >= 1 or None
    min_samples_split : int >= 2
    min_samples_leaf : int >= 1
    ccp_alpha : float >= 0
        Minimal cost-complexity pruning parameter (scikit-learn's definition); 0 = no pruning.
    max_features : int >= 1 or None
        Features searched per node, drawn at random by ``rng`` (random forests); None = all.
    rng : numpy.random.Generator
        Required with ``max_features``.

    Returns
    -------
    tree : Tree
        Axis-parallel tree, nodes in pre-order, ``class_counts`` filled for every node.
    info : dict
        ``{"n_leaves": int, "depth": int}``.
    """
    _check_params(criterion, max_depth, min_samples_split, min_samples_leaf, ccp_alpha)
    X, y, n_classes = _check_data(X, y, n_classes)
    if max_features is not None:
        if not _is_int(max_features) or max_features < 1:
            raise TreegenError(f"max_features must be an integer >= 1 or None, got {max_features!r}")
        if rng is None:
            raise TreegenError("max_features needs a random generator (rng)")
    g = _grow(X, y, n_classes, criterion, max_depth, min_samples_split, min_samples_leaf, max_features, rng)
    collapsed = None
    if ccp_alpha > 0:
        _, _, collapsed = _prune(g, float(ccp_alpha))
    tree = _to_tree(g, collapsed)
    return tree, {"n_leaves": tree.n_leaves, "depth": tree.depth}


def cost_complexity_pruning_path(X, y, n_classes, *, criterion: str = "gini", max_depth: int | None = None,
                                 min_samples_split: int = 2,
                                 min_samples_leaf: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Minimal cost-complexity pruning path of the fully grown tree (as scikit-learn's
    ``cost_complexity_pruning_path``).

    Returns
    -------
    ccp_alphas : ndarray
        Effective alphas of the successive weakest-link prunings, starting with 0.
    impurities : ndarray
        Total leaf impurity ``sum_t n_t/n * impurity(t)`` of the subtree after each pruning.
    """
    _check_params(criterion, max_depth, min_samples_split, min_samples_leaf, 0.0)
    X, y, n_classes = _check_data(X, y, n_classes)
    g = _grow(X, y, n_classes, criterion, max_depth, min_samples_split, min_samples_leaf)
    alphas, impurities, _ = _prune(g, None)
    return alphas, impurities
