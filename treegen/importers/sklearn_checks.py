"""Checks of a fitted scikit-learn estimator (typically just unpickled) before treegen or scikit-learn's
own predictor reads its trees: the :mod:`~treegen.importers.validate` rules applied to the estimator's
attributes and to each ``tree_`` / ``TreePredictor`` node array (types, counts against
:mod:`treegen.core.limits`, child and feature indices against the arrays they index, finite
thresholds and values, the links forming one tree)."""

from __future__ import annotations

import numpy as np

from treegen.core.limits import MAX_CLASSES, MAX_DEPTH, MAX_FEATURES, MAX_NODES, MAX_TREES
from treegen.importers.validate import Fields

__all__ = ["check_estimator"]

LEAF = -1


def check_estimator(est, v: Fields) -> None:
    """Refuse (one line) an estimator whose fitted attributes are malformed; no-op for unfitted ones
    (the importers say "not fitted" themselves)."""
    name = type(est).__name__
    if hasattr(est, "n_features_in_"):
        v.int(est.n_features_in_, f"{name}.n_features_in_", 1, MAX_FEATURES, "feature count")
    n_features = int(getattr(est, "n_features_in_", MAX_FEATURES))
    if hasattr(est, "n_outputs_"):
        if v.int(est.n_outputs_, f"{name}.n_outputs_", 1, MAX_CLASSES, "output count") != 1:
            return      # the importers refuse multi-output models with their own message
    if hasattr(est, "classes_"):
        classes = est.classes_
        if not isinstance(classes, np.ndarray) or classes.ndim != 1:
            v.fail(f"{name}.classes_", "must be a one-dimensional array")
        v.list(classes.tolist(), f"{name}.classes_", 1, MAX_CLASSES)
    if name.startswith("Hist"):
        _check_hist(est, n_features, name, v)
        return
    # the value columns of a tree: one per class for a tree / forest classifier, one for regressors and the
    # regression trees of gradient boosting
    classifier = hasattr(est, "classes_") and not name.startswith("GradientBoosting")
    columns = len(est.classes_) if classifier else 1
    if hasattr(est, "tree_"):
        _check_tree(est.tree_, n_features, f"{name}.tree_", v, columns, classifier)
    if hasattr(est, "estimators_"):
        stages = est.estimators_
        if isinstance(stages, np.ndarray):           # gradient boosting: (n_stages, K)
            if stages.ndim != 2 or stages.size == 0:
                v.fail(f"{name}.estimators_", f"holds no trees (shape {stages.shape})")
            if stages.size > MAX_TREES:
                v.fail(f"{name}.estimators_", f"{stages.size} trees, more than {MAX_TREES}")
            items = [(f"{name}.estimators_[{i}, {k}]", stages[i, k]) for i in range(stages.shape[0])
                     for k in range(stages.shape[1])]
        else:
            stages = v.list(stages, f"{name}.estimators_", 1, MAX_TREES)
            items = [(f"{name}.estimators_[{i}]", t) for i, t in enumerate(stages)]
        for field, t in items:
            if not hasattr(t, "tree_"):
                v.fail(field, f"is a {type(t).__name__}, not a fitted tree")
            _check_tree(t.tree_, n_features, f"{field}.tree_", v, columns, classifier)
    if hasattr(est, "learning_rate"):
        v.number(est.learning_rate, f"{name}.learning_rate", "learning rate")


def _check_tree(st, n_features: int, field: str, v: Fields, columns: int, classifier: bool = False) -> None:
    try:
        from sklearn.tree._tree import Tree
    except ImportError:       # pragma: no cover - scikit-learn is what pickled the object
        Tree = None
    if Tree is not None and not isinstance(st, Tree):
        v.fail(field, f"is a {type(st).__name__}, not a scikit-learn Tree")
    n = v.int(int(st.node_count), f"{field}.node_count", 1, MAX_NODES, "node count")
    left = _array(st.children_left, n, f"{field}.children_left", v)
    right = _array(st.children_right, n, f"{field}.children_right", v)
    feature = _array(st.feature, n, f"{field}.feature", v)
    threshold = np.asarray(st.threshold, dtype=np.float64)
    internal = left != LEAF
    check_links(left, right, field, v)
    bad = np.flatnonzero(internal & ((feature < 0) | (feature >= n_features)))
    if bad.size:
        v.fail(f"{field}.feature[{bad[0]}]", f"feature index {int(feature[bad[0]])} is out of range "
                                            f"0..{n_features - 1}")
    bad = np.flatnonzero(internal & ~np.isfinite(threshold))
    if bad.size:
        v.fail(f"{field}.threshold[{bad[0]}]", f"threshold {threshold[bad[0]]!r} is not finite")
    value = np.asarray(st.value, dtype=np.float64)
    if value.shape != (n, 1, columns):
        v.fail(f"{field}.value", f"has shape {value.shape}, expected ({n}, 1, {columns})")
    if not np.all(np.isfinite(value)):
        v.fail(f"{field}.value", "holds a value that is not finite")
    if classifier:      # class weights / fractions: a leaf with a negative or no weight predicts otherwise
        leaf = ~internal
        bad = np.flatnonzero(leaf & ((value[:, 0, :] < 0).any(axis=1) | (value[:, 0, :].sum(axis=1) <= 0)))
        if bad.size:
            v.fail(f"{field}.value[{bad[0]}]", f"leaf class weights {value[bad[0], 0].tolist()} (a negative "
                                              "weight, or none at all)")


def _array(a, n: int, field: str, v: Fields) -> np.ndarray:
    a = np.asarray(a)
    if a.shape != (n,) or a.dtype.kind not in "iu":
        v.fail(field, f"must be {n} integers, got shape {a.shape} of {a.dtype}")
    return a.astype(np.int64)


def check_links(left: np.ndarray, right: np.ndarray, field: str, v: Fields) -> None:
    """Children -1 (leaf) or a node index, both or neither; every node reached from node 0 exactly once,
    at most MAX_DEPTH levels down."""
    n = left.shape[0]
    for side, kids in (("children_left", left), ("children_right", right)):
        bad = np.flatnonzero((kids < LEAF) | (kids >= n) | (kids == 0))
        if bad.size:
            v.fail(f"{field}.{side}[{bad[0]}]", f"child index {int(kids[bad[0]])} is out of range 1..{n - 1}")
    bad = np.flatnonzero((left == LEAF) != (right == LEAF))
    if bad.size:
        v.fail(f"{field}.children_right[{bad[0]}]", "a node has exactly one child")
    seen = np.zeros(n, dtype=bool)
    stack = [(0, 0)]
    while stack:
        node, depth = stack.pop()
        if seen[node]:
            v.fail(field, f"node {node} is reached twice (the links do not form a tree)")
        seen[node] = True
        if left[node] != LEAF:
            if depth >= MAX_DEPTH:
                v.fail(field, f"deeper than {MAX_DEPTH} levels")
            stack.extend(((int(left[node]), depth + 1), (int(right[node]), depth + 1)))
    if not seen.all():
        v.fail(field, f"{int((~seen).sum())} nodes are not reached from the root")


def _check_hist(est, n_features: int, name: str, v: Fields) -> None:
    preds = getattr(est, "_predictors", None)
    if preds is None:
        return
    preds = v.list(preds, f"{name}._predictors", 1, MAX_TREES)
    total = 0
    for i, it in enumerate(preds):
        it = v.list(it, f"{name}._predictors[{i}]", 1, MAX_CLASSES)
        total += len(it)
        if total > MAX_TREES:
            v.fail(f"{name}._predictors", f"more than {MAX_TREES} trees")
        for k, pred in enumerate(it):
            field = f"{name}._predictors[{i}][{k}].nodes"
            nodes = getattr(pred, "nodes", None)
            if not isinstance(nodes, np.ndarray) or nodes.dtype.names is None or nodes.ndim != 1:
                v.fail(field, "must be a structured node array")
            for key in ("left", "right", "feature_idx", "num_threshold", "is_leaf", "value", "missing_go_to_left",
                        "is_categorical"):
                if key not in nodes.dtype.names:
                    v.fail(f"{field}.{key}", "missing")
            v.int(len(nodes), f"{field}", 1, MAX_NODES, "node count")
            leaf = nodes["is_leaf"].astype(bool)
            left = np.where(leaf, LEAF, nodes["left"].astype(np.int64))
            right = np.where(leaf, LEAF, nodes["right"].astype(np.int64))
            check_links(left, right, field, v)
            feat = nodes["feature_idx"].astype(np.int64)
            bad = np.flatnonzero(~leaf & ((feat < 0) | (feat >= n_features)))
            if bad.size:
                v.fail(f"{field}.feature_idx[{bad[0]}]", f"feature index {int(feat[bad[0]])} is out of range "
                                                        f"0..{n_features - 1}")
            thr = nodes["num_threshold"].astype(np.float64)
            bad = np.flatnonzero(~leaf & np.isnan(thr))
            if bad.size:
                v.fail(f"{field}.num_threshold[{bad[0]}]", "threshold nan is not a number")
            val = nodes["value"].astype(np.float64)
            if not np.all(np.isfinite(val[leaf])):
                v.fail(f"{field}.value", "holds a leaf value that is not finite")
    base = np.asarray(getattr(est, "_baseline_prediction", 0.0), dtype=np.float64)
    if not np.all(np.isfinite(base)):
        v.fail(f"{name}._baseline_prediction", "is not finite")
