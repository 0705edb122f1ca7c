"""The one tree representation shared by every inducer, exporter, model file and HIL check.

A binary decision tree is stored as flat node arrays (node 0 is the root):

``weights``      float64 ``(n_nodes, n_features)``: the test coefficients of internal nodes
                 (all zero for leaves). An axis-parallel test has exactly one non-zero weight.
``threshold``    float64 ``(n_nodes,)``: internal node test threshold (0 for leaves).
``left, right``  int32 ``(n_nodes,)``: child indices, ``-1`` for leaves.
``leaf_class``   int32 ``(n_nodes,)``: class *index* (into the model's class list) predicted
                 by a leaf; for internal nodes the majority class of the node (informative only).
``class_counts`` int64 ``(n_nodes, n_classes)``: training instances of each class that reached
                 the node. A leaf's class probabilities (soft voting, ``predict_proba``) are its
                 count frequencies ``class_counts[leaf] / class_counts[leaf].sum()`` (one-hot of
                 ``leaf_class`` for an empty leaf).
``raw_threshold`` optional float64 ``(n_nodes,)`` (``None`` for trees induced by treegen): the
                 *source* threshold of each axis test in the model's raw input units, for trees
                 imported from a float32 model (scikit-learn): the test is then defined as
                 ``float32(x_raw[f]) <= raw_threshold`` (0 for leaves). ``threshold`` still holds its
                 image on the normalised Q15 grid (what the q15 export compares).
``leaf_value``   optional float64 ``(n_nodes,)`` (``None`` for classification trees): the output of
                 each leaf of a *value tree* (regression: the mean target of the training rows at the
                 node; an imported boosted tree: its additive leaf value, learning rate folded in);
                 informative on internal nodes. A value tree has ``class_counts`` of shape
                 ``(n_nodes, 1)`` (training rows reaching the node; zeros for an imported tree without
                 counts) and ``leaf_class`` all 0.
``missing_left`` optional bool ``(n_nodes,)`` (``None``: a NaN input is an error): where a NaN input
                 goes at each internal node (an imported model whose library routes missing values:
                 XGBoost, LightGBM, HistGradientBoosting default directions); ``False`` on leaves.

The test of an internal node is ``w . x <= threshold`` -> left child, otherwise right child
(the scikit-learn convention). Inputs ``x`` are the model's *normalised* features in [0, 1)
(see :mod:`treegen.core.scaling`). With ``missing_left``, a row whose test features (the non-zero
weights of the node) include a NaN goes left where ``missing_left`` is true, else right.

A library's ``x < t`` on float32 ``x`` is stored exactly as ``x <= nextafter(float32(t), -inf)``; a
double threshold ``t`` compared with float32 ``x`` as ``x <= float32-round-down(t)``
(:func:`float32_below`, :func:`float32_floor`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from treegen.core.errors import TreegenError

LEAF = -1


@dataclass(eq=False)
class Tree:
    weights: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf_class: np.ndarray
    class_counts: np.ndarray
    raw_threshold: np.ndarray | None = None
    leaf_value: np.ndarray | None = None
    missing_left: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.weights = np.ascontiguousarray(self.weights, dtype=np.float64)
        self.threshold = np.ascontiguousarray(self.threshold, dtype=np.float64)
        self.left = np.ascontiguousarray(self.left, dtype=np.int32)
        self.right = np.ascontiguousarray(self.right, dtype=np.int32)
        self.leaf_class = np.ascontiguousarray(self.leaf_class, dtype=np.int32)
        self.class_counts = np.ascontiguousarray(self.class_counts, dtype=np.int64)
        if self.raw_threshold is not None:
            self.raw_threshold = np.ascontiguousarray(self.raw_threshold, dtype=np.float64)
        if self.leaf_value is not None:
            self.leaf_value = np.ascontiguousarray(self.leaf_value, dtype=np.float64)
        if self.missing_left is not None:
            self.missing_left = np.ascontiguousarray(self.missing_left, dtype=bool)

    # ------------------------------------------------------------------ construction
    @classmethod
    def leaf_only(cls, n_features: int, n_classes: int, leaf_class: int = 0) -> "Tree":
        """A tree with a single leaf."""
        return cls(
            weights=np.zeros((1, n_features)),
            threshold=np.zeros(1),
            left=np.full(1, LEAF),
            right=np.full(1, LEAF),
            leaf_class=np.array([leaf_class]),
            class_counts=np.zeros((1, n_classes), dtype=np.int64),
        )

    @classmethod
    def value_leaf(cls, n_features: int, value: float, count: int = 0) -> "Tree":
        """A value tree with a single leaf of output ``value`` (``count`` training rows)."""
        return cls(
            weights=np.zeros((1, n_features)),
            threshold=np.zeros(1),
            left=np.full(1, LEAF),
            right=np.full(1, LEAF),
            leaf_class=np.zeros(1),
            class_counts=np.array([[count]], dtype=np.int64),
            leaf_value=np.array([value], dtype=np.float64),
        )

    # ------------------------------------------------------------------ shape
    @property
    def is_value_tree(self) -> bool:
        """The tree outputs a number per leaf (``leaf_value``), not a class."""
        return self.leaf_value is not None

    @property
    def n_nodes(self) -> int:
        return int(self.left.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.weights.shape[1])

    @property
    def n_classes(self) -> int:
        return int(self.class_counts.shape[1])

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left == LEAF

    @property
    def n_leaves(self) -> int:
        return int(np.count_nonzero(self.is_leaf))

    @property
    def n_internal(self) -> int:
        return self.n_nodes - self.n_leaves

    def node_depths(self) -> np.ndarray:
        """Depth of every node (root = 0), computed iteratively (no recursion)."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for node in self.preorder():
            if self.left[node] != LEAF:
                depth[self.left[node]] = depth[node] + 1
                depth[self.right[node]] = depth[node] + 1
        return depth

    @property
    def depth(self) -> int:
        """Number of tests on the longest root-to-leaf path."""
        return int(self.node_depths().max()) if self.n_nodes else 0

    def preorder(self) -> list[int]:
        """Node indices in depth-first pre-order (root, left subtree, right subtree)."""
        order: list[int] = []
        stack = [0]
        while stack:
            node = stack.pop()
            order.append(node)
            if self.left[node] != LEAF:
                stack.append(int(self.right[node]))
                stack.append(int(self.left[node]))
        return order

    def is_axis_parallel(self) -> bool:
        internal = ~self.is_leaf
        return bool(np.all(np.count_nonzero(self.weights[internal], axis=1) <= 1))

    def leaves(self) -> np.ndarray:
        return np.flatnonzero(self.is_leaf)

    # ------------------------------------------------------------------ invariants
    def validate(self) -> "Tree":
        """Check every structural invariant; raise :class:`TreegenError` naming the first broken one."""
        n = self.left.shape[0]
        if n == 0:
            raise TreegenError("tree has no nodes")
        for name, arr, shape in (
            ("threshold", self.threshold, (n,)),
            ("right", self.right, (n,)),
            ("leaf_class", self.leaf_class, (n,)),
        ):
            if arr.shape != shape:
                raise TreegenError(f"tree array {name} has shape {arr.shape}, expected {shape}")
        if self.weights.ndim != 2 or self.weights.shape[0] != n:
            raise TreegenError(f"tree weights have shape {self.weights.shape}, expected ({n}, n_features)")
        if self.class_counts.ndim != 2 or self.class_counts.shape[0] != n or self.class_counts.shape[1] < 1:
            raise TreegenError(f"tree class_counts have shape {self.class_counts.shape}, expected ({n}, n_classes)")
        if not (np.all(np.isfinite(self.weights)) and np.all(np.isfinite(self.threshold))):
            raise TreegenError("tree has non-finite weights or thresholds")
        if np.any(self.class_counts < 0):
            raise TreegenError("tree has negative class counts")
        leaf_l = self.left == LEAF
        leaf_r = self.right == LEAF
        if np.any(leaf_l != leaf_r):
            raise TreegenError("a node has exactly one child")
        for name, child in (("left", self.left), ("right", self.right)):
            bad = (child != LEAF) & ((child <= 0) | (child >= n))
            if np.any(bad):
                raise TreegenError(f"{name} child index out of range at node {int(np.flatnonzero(bad)[0])}")
        # every node reachable exactly once from the root, no cycles
        seen = np.zeros(n, dtype=bool)
        stack = [0]
        while stack:
            node = stack.pop()
            if seen[node]:
                raise TreegenError(f"node {node} is reached twice (cycle or shared child)")
            seen[node] = True
            if self.left[node] != LEAF:
                stack.append(int(self.left[node]))
                stack.append(int(self.right[node]))
        if not np.all(seen):
            raise TreegenError(f"node {int(np.flatnonzero(~seen)[0])} is not reachable from the root")
        if np.any(self.weights[leaf_l] != 0) or np.any(self.threshold[leaf_l] != 0):
            raise TreegenError("a leaf has non-zero test coefficients")
        if self.leaf_value is not None and np.any(self.leaf_class != 0):
            raise TreegenError("a value tree has leaf_class 0 at every node")
        if np.any((self.leaf_class < 0) | (self.leaf_class >= self.n_classes)):
            raise TreegenError("leaf class index out of range")
        if self.raw_threshold is not None:
            if self.raw_threshold.shape != (n,):
                raise TreegenError(f"tree array raw_threshold has shape {self.raw_threshold.shape}, expected ({n},)")
            if np.any(np.isnan(self.raw_threshold)):   # +-inf: a library's "every value left" test
                raise TreegenError("tree has NaN raw thresholds")
            internal = ~leaf_l
            w = self.weights[internal]
            if np.any(np.count_nonzero(w, axis=1) != 1) or np.any(w.sum(axis=1) <= 0):
                raise TreegenError("raw thresholds need axis tests with one positive weight")
        if self.leaf_value is not None:
            if self.leaf_value.shape != (n,):
                raise TreegenError(f"tree array leaf_value has shape {self.leaf_value.shape}, expected ({n},)")
            if not np.all(np.isfinite(self.leaf_value)):
                raise TreegenError("tree has non-finite leaf values")
            if self.class_counts.shape[1] != 1:
                raise TreegenError(f"a value tree has one count column (rows per node), not "
                                   f"{self.class_counts.shape[1]}")
        if self.missing_left is not None:
            if self.missing_left.shape != (n,):
                raise TreegenError(f"tree array missing_left has shape {self.missing_left.shape}, expected ({n},)")
            if np.any(self.missing_left[leaf_l]):
                raise TreegenError("a leaf has missing_left set (only internal nodes route missing values)")
        return self

    # ------------------------------------------------------------------ inference
    def apply(self, X: np.ndarray) -> np.ndarray:
        """Index of the leaf reached by every row of ``X`` (normalised features)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise TreegenError(f"expected {self.n_features} features, got array of shape {X.shape}")
        node = np.zeros(X.shape[0], dtype=np.int64)
        active = np.flatnonzero(self.left[node] != LEAF)
        routed = self.missing_left is not None
        while active.size:
            cur = node[active]
            if routed:
                Xa = X[active]
                missing = np.isnan(Xa)
                missing_row = np.any(missing & (self.weights[cur] != 0), axis=1)
                go_left = np.einsum("ij,ij->i", np.where(missing, 0.0, Xa), self.weights[cur]) <= self.threshold[cur]
                go_left = np.where(missing_row, self.missing_left[cur], go_left)
            else:
                go_left = np.einsum("ij,ij->i", X[active], self.weights[cur]) <= self.threshold[cur]
            node[active] = np.where(go_left, self.left[cur], self.right[cur])
            active = active[self.left[node[active]] != LEAF]
        return node

    def predict_index(self, X: np.ndarray) -> np.ndarray:
        """Class index predicted for every row of ``X``."""
        return self.leaf_class[self.apply(X)].astype(np.int64)

    @property
    def has_raw_thresholds(self) -> bool:
        return self.raw_threshold is not None

    def test_feature(self) -> np.ndarray:
        """Feature of every axis test (argmax of ``|weights|``; 0 for leaves)."""
        return np.abs(self.weights).argmax(axis=1).astype(np.int64)

    def apply_raw(self, X_raw: np.ndarray) -> np.ndarray:
        """Leaf reached by every row of *raw* inputs under the source semantics of
        ``raw_threshold``: ``float32(x[f]) <= raw_threshold`` -> left (scikit-learn's test); a NaN
        ``x[f]`` goes where ``missing_left`` says (right when the tree has no ``missing_left``)."""
        if self.raw_threshold is None:
            raise TreegenError("tree has no raw thresholds")
        X = np.asarray(X_raw, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise TreegenError(f"expected {self.n_features} features, got array of shape {X.shape}")
        with np.errstate(over="ignore"):
            X = X.astype(np.float32).astype(np.float64)
        feat = self.test_feature()
        node = np.zeros(X.shape[0], dtype=np.int64)
        active = np.flatnonzero(self.left[node] != LEAF)
        while active.size:
            cur = node[active]
            xf = X[active, feat[cur]]
            go_left = xf <= self.raw_threshold[cur]
            if self.missing_left is not None:
                go_left = np.where(np.isnan(xf), self.missing_left[cur], go_left)
            node[active] = np.where(go_left, self.left[cur], self.right[cur])
            active = active[self.left[node[active]] != LEAF]
        return node

    def predict_value(self, X: np.ndarray) -> np.ndarray:
        """Leaf value (float64) of the leaf every row of normalised inputs ``X`` reaches (a value tree)."""
        return self._values()[self.apply(X)]

    def _values(self) -> np.ndarray:
        if self.leaf_value is None:
            raise TreegenError("a classification tree has no leaf values")
        return self.leaf_value

    def leaf_probabilities(self) -> np.ndarray:
        """Class probabilities of every node: count frequencies (float64), one-hot of ``leaf_class``
        where a node has no counts (scikit-learn's ``predict_proba`` of a leaf)."""
        counts = self.class_counts.astype(np.float64)
        total = counts.sum(axis=1)
        proba = np.zeros_like(counts)
        nz = total > 0
        proba[nz] = counts[nz] / total[nz, None]
        proba[~nz, self.leaf_class[~nz]] = 1.0
        return proba

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """``(n_rows, n_classes)`` class probabilities of the leaves normalised inputs ``X`` reach
        (:meth:`leaf_probabilities`)."""
        return self.leaf_probabilities()[self.apply(X)]

    def feature_importances(self, criterion: str = "gini") -> np.ndarray:
        """Impurity-based feature importances, ``(n_features,)`` summing to 1 (zeros for a single leaf
        or a tree without class counts).

        Each internal node ``t`` contributes its weighted impurity decrease
        ``N_t*i(t) - N_left*i(left) - N_right*i(right)`` (``N`` = training rows reaching the node,
        ``i`` = Gini or entropy of its class counts; for a value tree always the squared error, whose
        decrease is ``N_left*(v_left - v_t)**2 + N_right*(v_right - v_t)**2`` with ``v`` the nodes' mean
        values ``leaf_value``: scikit-learn's ``squared_error`` importances), shared among the features in proportion to
        ``|w_a|`` of its test (on the normalised inputs the tree computes with). An axis-parallel test has
        one non-zero weight, so the whole decrease goes to its feature: scikit-learn's
        ``feature_importances_`` (mean decrease in impurity). For an oblique test the share of a
        feature is its normalised absolute weight ``|w_a| / sum_b |w_b|``.
        """
        if criterion not in ("gini", "entropy"):
            raise TreegenError(f"unknown impurity criterion {criterion!r} (gini or entropy)")
        if self.leaf_value is not None:
            return self._value_importances()
        counts = self.class_counts.astype(np.float64)
        n = counts.sum(axis=1)
        p = np.divide(counts, n[:, None], out=np.zeros_like(counts), where=n[:, None] > 0)
        if criterion == "gini":
            impurity = 1.0 - np.sum(p * p, axis=1)
        else:
            impurity = -np.sum(p * np.log2(p, out=np.zeros_like(p), where=p > 0), axis=1)
        out = np.zeros(self.n_features)
        for t in np.flatnonzero(self.left != LEAF):
            l, r = self.left[t], self.right[t]
            decrease = n[t] * impurity[t] - n[l] * impurity[l] - n[r] * impurity[r]
            w = np.abs(self.weights[t])
            if w.sum() > 0:
                out += decrease * w / w.sum()
        total = out.sum()
        return out / total if total > 0 else out

    def _value_importances(self) -> np.ndarray:
        n = self.class_counts[:, 0].astype(np.float64)
        v = self.leaf_value
        out = np.zeros(self.n_features)
        for t in np.flatnonzero(self.left != LEAF):
            l, r = self.left[t], self.right[t]
            decrease = n[l] * (v[l] - v[t]) ** 2 + n[r] * (v[r] - v[t]) ** 2
            w = np.abs(self.weights[t])
            if w.sum() > 0:
                out += decrease * w / w.sum()
        total = out.sum()
        return out / total if total > 0 else out

    @property
    def has_class_counts(self) -> bool:
        """The tree carries training class counts (its root saw rows)."""
        return int(self.class_counts[0].sum()) > 0

    # ------------------------------------------------------------------ transforms
    def copy(self) -> "Tree":
        return Tree(
            self.weights.copy(), self.threshold.copy(), self.left.copy(), self.right.copy(),
            self.leaf_class.copy(), self.class_counts.copy(),
            None if self.raw_threshold is None else self.raw_threshold.copy(),
            None if self.leaf_value is None else self.leaf_value.copy(),
            None if self.missing_left is None else self.missing_left.copy(),
        )

    def compact(self) -> "Tree":
        """Renumber nodes in pre-order (root 0, left subtree first) and drop unreachable nodes."""
        order = self.preorder()
        new_index = np.full(self.n_nodes, LEAF, dtype=np.int64)
        new_index[order] = np.arange(len(order))
        left = np.where(self.left[order] == LEAF, LEAF, new_index[np.maximum(self.left[order], 0)])
        right = np.where(self.right[order] == LEAF, LEAF, new_index[np.maximum(self.right[order], 0)])
        return Tree(
            self.weights[order], self.threshold[order], left, right,
            self.leaf_class[order], self.class_counts[order],
            None if self.raw_threshold is None else self.raw_threshold[order],
            None if self.leaf_value is None else self.leaf_value[order],
            None if self.missing_left is None else self.missing_left[order],
        ).validate()

    def refit_counts(self, X: np.ndarray, y: np.ndarray, relabel: bool = True) -> "Tree":
        """Recompute ``class_counts`` from data; optionally set leaf classes to the majority.

        Ties go to the lowest class index; an empty leaf keeps its class. A value tree: use
        :meth:`refit_values`.
        """
        if self.leaf_value is not None:
            raise TreegenError("a value tree is refitted with refit_values, not refit_counts")
        counts = np.zeros_like(self.class_counts)
        leaves = self.apply(X)
        np.add.at(counts, (leaves, np.asarray(y, dtype=np.int64)), 1)
        for node in reversed(self.preorder()):
            if self.left[node] != LEAF:
                counts[node] = counts[self.left[node]] + counts[self.right[node]]
        self.class_counts = counts
        if relabel:
            nonempty = counts.sum(axis=1) > 0
            self.leaf_class = np.where(nonempty, counts.argmax(axis=1), self.leaf_class).astype(np.int32)
        return self

    def refit_values(self, X: np.ndarray, y: np.ndarray) -> "Tree":
        """Recompute a value tree's row counts and node values from data: every node's value becomes
        the float64 mean (``np.mean``) of the targets ``y`` of the rows reaching it, in row order; a
        node no row reaches keeps its value."""
        values = self._values().copy()
        y = np.asarray(y, dtype=np.float64)
        leaves = self.apply(X)
        order = np.argsort(leaves, kind="stable")
        bounds = np.searchsorted(leaves[order], np.arange(self.n_nodes + 1))
        rows = [order[bounds[node]:bounds[node + 1]] for node in range(self.n_nodes)]
        for node in reversed(self.preorder()):
            if self.left[node] != LEAF:
                rows[node] = np.sort(np.concatenate([rows[self.left[node]], rows[self.right[node]]]))
        for node in range(self.n_nodes):
            if rows[node].size:
                values[node] = float(np.mean(y[rows[node]]))
        self.class_counts = np.array([[r.size] for r in rows], dtype=np.int64)
        self.leaf_value = values
        return self

    # ------------------------------------------------------------------ comparison / serialisation
    def equals(self, other: "Tree") -> bool:
        """Exact equality of structure, coefficients, thresholds, classes and counts."""
        return (
            self.n_nodes == other.n_nodes
            and np.array_equal(self.weights, other.weights)
            and np.array_equal(self.threshold, other.threshold)
            and np.array_equal(self.left, other.left)
            and np.array_equal(self.right, other.right)
            and np.array_equal(self.leaf_class, other.leaf_class)
            and np.array_equal(self.class_counts, other.class_counts)
            and (self.raw_threshold is None) == (other.raw_threshold is None)
            and (self.raw_threshold is None or np.array_equal(self.raw_threshold, other.raw_threshold))
            and _same_optional(self.leaf_value, other.leaf_value)
            and _same_optional(self.missing_left, other.missing_left)
        )

    def to_dict(self) -> dict:
        """JSON-ready dict. Floats are written with ``repr`` precision, so the round trip is exact.
        ``raw_threshold``, ``leaf_value`` and ``missing_left`` are written only when present (older
        files and their hashes are unchanged)."""
        d = {
            "n_features": self.n_features,
            "n_classes": self.n_classes,
            "weights": self.weights.tolist(),
            "threshold": self.threshold.tolist(),
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "leaf_class": self.leaf_class.tolist(),
            "class_counts": self.class_counts.tolist(),
        }
        if self.raw_threshold is not None:
            d["raw_threshold"] = [v if math.isfinite(v) else ("inf" if v > 0 else "-inf")   # JSON has no inf
                                  for v in self.raw_threshold.tolist()]
        if self.leaf_value is not None:
            d["leaf_value"] = self.leaf_value.tolist()
        if self.missing_left is not None:
            d["missing_left"] = self.missing_left.tolist()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Tree":
        try:
            n_features = int(d["n_features"])
            n_classes = int(d["n_classes"])
            weights = np.array(d["weights"], dtype=np.float64).reshape(-1, n_features)
            counts = np.array(d["class_counts"], dtype=np.int64).reshape(-1, n_classes)
            tree = cls(
                weights=weights,
                threshold=np.array(d["threshold"], dtype=np.float64),
                left=np.array(d["left"], dtype=np.int32),
                right=np.array(d["right"], dtype=np.int32),
                leaf_class=np.array(d["leaf_class"], dtype=np.int32),
                class_counts=counts,
                raw_threshold=(None if d.get("raw_threshold") is None
                               else np.array(d["raw_threshold"], dtype=np.float64)),
                leaf_value=(None if d.get("leaf_value") is None
                            else np.array(d["leaf_value"], dtype=np.float64)),
                missing_left=(None if d.get("missing_left") is None
                              else np.array(d["missing_left"], dtype=bool)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TreegenError(f"malformed tree: {exc}") from None
        return tree.validate()


def _same_optional(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return (a is None) == (b is None) and (a is None or np.array_equal(a, b))


def float32_below(t: float) -> float:
    """The float32 threshold ``t'`` with ``x <= t'`` == ``x < float32(t)`` for every float32 ``x``
    (a library's strict test, stored in treegen's ``<=`` convention): ``nextafter(float32(t), -inf)``."""
    with np.errstate(over="ignore"):
        t32 = np.float32(t)
    return float(np.nextafter(t32, np.float32(-np.inf)))


def float32_floor(t: float) -> float:
    """The largest float32 ``<= t`` (a double threshold compared with float32 inputs: ``x <= t`` ==
    ``x <= float32_floor(t)`` for every float32 ``x``)."""
    with np.errstate(over="ignore"):
        t32 = np.float32(t)
    if float(t32) > t:
        t32 = np.nextafter(t32, np.float32(-np.inf))
    return float(t32)
