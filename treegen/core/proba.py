"""Class probabilities of a model: leaf class frequencies, averaged over the trees.

A leaf's probabilities are the class counts of the training rows that reached it, normalised; a
leaf that no training row reached predicts its own class with probability 1. An ensemble averages
its trees' probabilities (soft vote). The exported C votes by majority over the trees' classes; the
probabilities serve evaluation (ROC AUC in ``treegen eval``) on the host.
"""

from __future__ import annotations

import numpy as np

from treegen.core.model import Model
from treegen.core.tree import Tree


def tree_proba(tree: Tree, X: np.ndarray) -> np.ndarray:
    """``(n_rows, n_classes)`` leaf class frequencies of one tree for normalised inputs ``X``."""
    leaves = tree.apply(X)
    counts = tree.class_counts[leaves].astype(np.float64)
    total = counts.sum(axis=1, keepdims=True)
    onehot = np.zeros_like(counts)
    onehot[np.arange(leaves.size), tree.leaf_class[leaves]] = 1.0
    return np.where(total > 0, counts / np.where(total > 0, total, 1.0), onehot)


def has_counts(model: Model) -> bool:
    """Every tree carries training class counts (its root saw rows)."""
    return all(int(t.class_counts[0].sum()) > 0 for t in model.trees)


def predict_proba_normalised(model: Model, X: np.ndarray) -> np.ndarray:
    return sum(tree_proba(t, X) for t in model.trees) / len(model.trees)


def predict_proba(model: Model, X_raw: np.ndarray) -> np.ndarray:
    """Class probabilities (columns in the order of ``model.classes``) for raw inputs."""
    X_raw = np.asarray(X_raw, dtype=np.float64)
    return predict_proba_normalised(model, model.scaling.transform(X_raw))
