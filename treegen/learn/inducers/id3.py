"""ID3: entropy / information-gain trees, numeric attributes by threshold, categorical ones multiway.

Quinlan's ID3 (shared/seeds/003_*.txt; the exhaustive baseline of seed 001) with the usual C4.5
extensions the seed plans:

* **Split choice**: the attribute with the largest information gain
  ``IG = H(S) - sum_v |S_v|/|S| H(S_v)`` (entropy in bits). A *numeric* attribute is split in two by
  the threshold with the largest gain among the midpoints between consecutive distinct values
  (``x <= t`` left; it can be split again further down). A *categorical* attribute (``categorical``)
  is split multiway, one branch per value present at the node, and is not used again below (as in
  ID3). Ties: the lowest attribute index, then the lowest threshold. A split needs a positive gain and
  ``min_samples_leaf`` rows in every branch.
* **Stopping**: pure node, ``max_depth``, fewer than ``min_samples_split`` rows, or no admissible
  split with positive gain. Leaves predict the majority class (ties: lowest class index).
* **Pessimistic pruning** (optional, ``pruning="pessimistic"``): C4.5's error-based pruning without
  subtree raising. The estimated errors of a node with ``n`` rows and ``e`` training errors are
  ``n * U_CF(e, n)``, ``U_CF`` the upper limit of the binomial confidence interval at confidence
  ``CF`` (default 0.25: the ``p`` with ``P(X <= e | n, p) = CF``). Bottom-up, a subtree becomes a leaf
  when the leaf's estimate is not above the sum of its leaves' estimates.
* **Lowering into the binary IR**: a multiway node on values ``v_1 < ... < v_k`` becomes a chain of
  ``k - 1`` threshold tests ``x <= (v_i + v_{i+1})/2`` (left: branch ``i``; right: the rest of the
  chain, the last right child is branch ``k``). Every value seen at the node takes its own branch; a
  value not seen there goes to the branch of the nearest seen value by those midpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree
from treegen.learn.inducers import cart

PRUNING = ("none", "pessimistic")


@dataclass(frozen=True)
class ID3Params:
    max_depth: int | None = None
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    categorical: tuple = ()
    pruning: str = "none"
    confidence: float = 0.25

    def validate(self, n_features: int) -> "ID3Params":
        cart._check_params("entropy", self.max_depth, self.min_samples_split, self.min_samples_leaf, 0.0)
        if self.pruning not in PRUNING:
            raise TreegenError(f"unknown ID3 pruning {self.pruning!r} (choose from {', '.join(PRUNING)})")
        if not (0 < self.confidence < 1):
            raise TreegenError(f"ID3 confidence must be in (0, 1), got {self.confidence!r}")
        for c in self.categorical:
            if not cart._is_int(c) or not 0 <= c < n_features:
                raise TreegenError(f"categorical column {c!r} out of range 0..{n_features - 1}")
        return self


def entropy(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of every row of class counts."""
    counts = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    n = counts.sum(axis=1, keepdims=True)
    p = counts / np.maximum(n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.where(p > 0, np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return -np.sum(p * lg, axis=1)


def information_gain(parent: np.ndarray, branches: np.ndarray) -> float:
    """IG of splitting ``parent`` counts into ``branches`` (rows of class counts)."""
    parent = np.asarray(parent, dtype=np.float64)
    branches = np.asarray(branches, dtype=np.float64)
    n = parent.sum()
    return float(entropy(parent)[0] - np.sum(branches.sum(axis=1) / n * entropy(branches)))


def binomial_upper(e: int, n: int, cf: float) -> float:
    """C4.5's ``U_CF(e, n)``: the ``p`` with ``P(X <= e | n, p) = cf`` (bisection on the exact CDF)."""
    if n <= 0:
        return 0.0
    if e >= n:
        return 1.0
    if e == 0:
        return 1.0 - cf ** (1.0 / n)

    def cdf(p: float) -> float:
        lp, lq = math.log(p), math.log1p(-p)
        return sum(math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)
                   for k in range(e + 1))

    lo, hi = e / n, 1.0 - 1e-15
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if cdf(mid) > cf:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


# ---------------------------------------------------------------------------------------- growing
class _Node:
    __slots__ = ("counts", "feature", "threshold", "values", "children")

    def __init__(self, counts):
        self.counts = counts
        self.feature = LEAF
        self.threshold = 0.0
        self.values: list[float] = []       # categorical: the branch values (sorted)
        self.children: list["_Node"] = []


def _best_numeric(x: np.ndarray, y: np.ndarray, n_classes: int, msl: int):
    order = np.argsort(x, kind="stable")
    v = x[order]
    n = v.shape[0]
    lo, hi = max(msl, 1), min(n - msl, n - 1)
    if lo > hi:
        return None
    onehot = np.zeros((n, n_classes))
    onehot[np.arange(n), y[order]] = 1.0
    cum = np.cumsum(onehot, axis=0)
    p = np.arange(lo, hi + 1)
    p = p[v[p - 1] < v[p]]
    if p.size == 0:
        return None
    left = cum[p - 1]
    right = cum[-1] - left
    child = (p * entropy(left) + (n - p) * entropy(right)) / n
    gain = entropy(cum[-1])[0] - child
    top = gain.max()
    k = int(np.argmax(gain >= top - 1e-12))
    return float(gain[k]), float(v[p[k] - 1] / 2.0 + v[p[k]] / 2.0)


def _categorical_gain(x: np.ndarray, y: np.ndarray, n_classes: int, msl: int):
    values, inv = np.unique(x, return_inverse=True)
    if values.size < 2:
        return None
    branches = np.zeros((values.size, n_classes))
    np.add.at(branches, (inv, y), 1.0)
    if branches.sum(axis=1).min() < msl:
        return None
    return information_gain(branches.sum(axis=0), branches), values


def _grow(X, y, n_classes, p: ID3Params) -> _Node:
    N, A = X.shape
    categorical = set(p.categorical)
    depth_limit = p.max_depth if p.max_depth is not None else np.iinfo(np.int64).max
    root = _Node(np.bincount(y, minlength=n_classes))
    stack = [(root, np.arange(N), 0, frozenset())]
    while stack:
        node, rows, depth, used = stack.pop()
        n = rows.shape[0]
        if depth >= depth_limit or n < p.min_samples_split or node.counts.max() == n:
            continue
        Xr, yr = X[rows], y[rows]
        best = None                                  # (gain, feature, threshold or values)
        for f in range(A):
            if f in categorical:
                if f in used:
                    continue
                r = _categorical_gain(Xr[:, f], yr, n_classes, p.min_samples_leaf)
            else:
                r = _best_numeric(Xr[:, f], yr, n_classes, p.min_samples_leaf)
            if r is not None and r[0] > 1e-12 and (best is None or r[0] > best[0] + 1e-12):
                best = (r[0], f, r[1])
        if best is None:
            continue
        _, f, how = best
        node.feature = f
        if f in categorical:
            node.values = [float(v) for v in how]
            groups = [rows[Xr[:, f] == v] for v in how]
            child_used = used | {f}
        else:
            node.threshold = how
            mask = Xr[:, f] <= how
            groups = [rows[mask], rows[~mask]]
            child_used = used
        node.children = [_Node(np.bincount(y[g], minlength=n_classes)) for g in groups]
        for child, g in zip(node.children, groups):
            stack.append((child, g, depth + 1, child_used))
    return root


def _prune(root: _Node, cf: float) -> int:
    """C4.5 pessimistic (error-based) pruning in place; returns the number of subtrees collapsed."""
    collapsed = 0

    def estimate(counts) -> float:
        n = int(counts.sum())
        e = n - int(counts.max())
        return n * binomial_upper(e, n, cf)

    # post-order without recursion
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    subtree: dict[int, float] = {}
    for node in reversed(order):
        if not node.children:
            subtree[id(node)] = estimate(node.counts)
            continue
        below = sum(subtree[id(c)] for c in node.children)
        here = estimate(node.counts)
        if here <= below + 1e-12:
            node.children, node.values, node.feature, node.threshold = [], [], LEAF, 0.0
            subtree[id(node)] = here
            collapsed += 1
        else:
            subtree[id(node)] = below
    return collapsed


def _lower(root: _Node, n_features: int, n_classes: int) -> Tree:
    """n-ary tree -> binary IR (pre-order); a multiway node becomes a chain of threshold tests."""
    W, T, L, R, cls, counts = [], [], [], [], [], []

    def new(weights_f, thr, counts_row, leaf_cls) -> int:
        w = np.zeros(n_features)
        if weights_f >= 0:
            w[weights_f] = 1.0
        W.append(w)
        T.append(thr)
        L.append(LEAF)
        R.append(LEAF)
        cls.append(leaf_cls)
        counts.append(counts_row)
        return len(W) - 1

    # work items: (node, parent index, side) — a chain item is (("chain", node, i), ...)
    stack = [(("node", root, 0), -1, 0)]
    while stack:
        (kind, node, i), parent, side = stack.pop()
        if kind == "node" and not node.children:
            idx = new(-1, 0.0, node.counts, int(np.argmax(node.counts)))
        elif kind == "node" and not node.values:
            idx = new(node.feature, node.threshold, node.counts, int(np.argmax(node.counts)))
            stack.append((("node", node.children[1], 0), idx, 1))
            stack.append((("node", node.children[0], 0), idx, 0))
        else:
            # chain position i of a multiway node: tests v_i | v_{i+1}
            vals, kids = node.values, node.children
            rest = sum((k.counts for k in kids[i:]), np.zeros(n_classes, dtype=np.int64))
            idx = new(node.feature, vals[i] / 2.0 + vals[i + 1] / 2.0, rest, int(np.argmax(rest)))
            nxt = ("chain", node, i + 1) if i + 2 < len(vals) else ("node", kids[-1], 0)
            stack.append((nxt, idx, 1))
            stack.append((("node", kids[i], 0), idx, 0))
        if parent >= 0:
            (L if side == 0 else R)[parent] = idx
    tree = Tree(np.array(W).reshape(-1, n_features), np.array(T), np.array(L), np.array(R), np.array(cls),
                np.array(counts, dtype=np.int64).reshape(-1, n_classes))
    return tree.validate()


def induce(X, y, n_classes, params: ID3Params | None = None) -> tuple[Tree, dict]:
    """Induce an ID3 tree (see the module docstring).

    Returns
    -------
    tree, info : binary IR tree and ``{"n_leaves", "depth", "multiway_nodes", "pruned_subtrees"}``.
    """
    X, y, n_classes = cart._check_data(X, y, n_classes)
    p = (params or ID3Params()).validate(X.shape[1])
    root = _grow(X, y, n_classes, p)
    pruned = _prune(root, p.confidence) if p.pruning == "pessimistic" else 0
    stack, multi = [root], 0
    while stack:
        node = stack.pop()
        if node.values:
            multi += 1
        stack.extend(node.children)
    tree = _lower(root, X.shape[1], n_classes)
    return tree, {"n_leaves": tree.n_leaves, "depth": tree.depth, "multiway_nodes": multi,
                  "pruned_subtrees": pruned}

