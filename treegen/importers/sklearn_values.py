"""Parse scikit-learn value-tree models into an :class:`~treegen.importers.ensemble.ImportedEnsemble`:
``DecisionTreeRegressor``, ``RandomForestRegressor``, ``ExtraTreesRegressor`` (vote "mean"),
``GradientBoostingClassifier/Regressor`` and ``HistGradientBoostingClassifier/Regressor`` (vote "sum").

What scikit-learn computes (checked bit for bit against ``predict`` / ``decision_function``):

* trees and forests, gradient boosting: the input is cast to float32, a split sends
  ``float32(x) <= t`` (``t`` a double) left; NaN goes where ``missing_go_to_left`` says (trees and
  forests of scikit-learn >= 1.3; gradient boosting refuses NaN);
* regression forests: the double sum of the trees' leaf values in tree order, from 0, divided by the
  number of trees (``n_jobs`` unset: sequential accumulation); a single tree: its leaf value;
* ``GradientBoosting*``: ``raw = init`` (the prior / mean, ``_raw_predict_init``) then, stage by
  stage and class by class, ``raw[k] += learning_rate * value`` (the product rounded to double: the
  leaf value stored here); binary ``predict``: class 1 iff ``raw >= 0`` (``binary_rule`` ">=");
* ``HistGradientBoosting*``: the input stays a double (a float32 input exactly), ``x <= t`` with
  ``t`` a double, NaN -> ``missing_go_to_left``; leaf values already carry the learning rate;
  ``raw = baseline`` then each iteration's tree per class, in double; binary: class 1 iff ``raw > 0``.
  A split whose threshold is ``+inf`` (every finite value left) is stored with the largest float32
  (:meth:`ImportedEnsemble.le_thresholds`): only an input of exactly ``+inf`` would go the other way.

Refused: custom ``init`` estimators, the ``exponential`` loss, log-link losses (poisson, gamma),
categorical features of HistGradientBoosting, multi-output models.
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree

__all__ = ["parse_sklearn_values", "VALUE_ESTIMATORS"]

VALUE_ESTIMATORS = ("DecisionTreeRegressor", "ExtraTreeRegressor", "RandomForestRegressor", "ExtraTreesRegressor",
                    "GradientBoostingClassifier", "GradientBoostingRegressor",
                    "HistGradientBoostingClassifier", "HistGradientBoostingRegressor")
IDENTITY_LOSSES = ("squared_error", "absolute_error", "huber", "quantile")


def _classes(est):
    return [c.item() if isinstance(c, np.generic) else c for c in np.asarray(est.classes_).tolist()]


def _fitted(est, attr):
    if not hasattr(est, attr):
        raise TreegenError(f"{type(est).__name__} is not fitted; call fit() first")


def parse_sklearn_values(est) -> ImportedEnsemble:
    """Parse one of :data:`VALUE_ESTIMATORS` (see the module documentation)."""
    name = type(est).__name__
    if name not in VALUE_ESTIMATORS:
        raise TreegenError(f"cannot import {name} as a scikit-learn value-tree model")
    if getattr(est, "n_outputs_", 1) != 1:
        raise TreegenError("multi-output scikit-learn models cannot be imported (one target column only)")
    n_features = int(getattr(est, "n_features_in_", 0)) or None
    names_in = getattr(est, "feature_names_in_", None)
    names = [str(n) for n in names_in] if names_in is not None else None
    meta = {"source": f"scikit-learn {_sk_version()}", "estimator": name}
    if name.startswith("Hist"):
        _fitted(est, "_predictors")
        return _hist(est, n_features, names, meta)
    if name.startswith("GradientBoosting"):
        _fitted(est, "estimators_")
        return _gb(est, n_features, names, meta)
    if name in ("DecisionTreeRegressor", "ExtraTreeRegressor"):
        _fitted(est, "tree_")
        sk_trees = [est]
    else:
        _fitted(est, "estimators_")
        sk_trees = list(est.estimators_)
    trees = [_tree(t.tree_, 1.0) for t in sk_trees]
    return ImportedEnsemble(trees, n_features, "<=", task="regression", vote="mean", base_score=[0.0],
                            link="identity", sum_dtype="float64", feature_names=names, metadata=meta)


def _sk_version() -> str:
    import sklearn
    return sklearn.__version__


def _tree(st, scale: float | None, output: int = 0, nan: bool = True) -> ImportedTree:
    """A fitted ``tree_`` (``Tree`` object); leaf value ``scale * value`` (double product) or the value."""
    left = st.children_left.astype(np.int64)
    right = st.children_right.astype(np.int64)
    internal = left != LEAF
    value = np.asarray(st.value, dtype=np.float64)[:, 0, 0]
    if scale is not None and scale != 1.0:
        value = np.float64(scale) * value
    miss = getattr(st, "missing_go_to_left", None)
    missing_left = None
    if nan and miss is not None:
        missing_left = np.where(internal, np.asarray(miss, dtype=bool), False)
    return ImportedTree(np.where(internal, st.feature, 0), np.where(internal, st.threshold, 0.0),
                        np.where(internal, left, LEAF), np.where(internal, right, LEAF),
                        np.where(internal, 0.0, value), missing_left, output=output)


def _gb(est, n_features, names, meta) -> ImportedEnsemble:
    init = est.init
    if init not in (None, "zero"):
        raise TreegenError("GradientBoosting with a custom init estimator cannot be imported (its prediction is "
                           "not a constant)")
    loss = getattr(est, "loss", "")
    classifier = hasattr(est, "classes_")
    if classifier and loss == "exponential":
        raise TreegenError("GradientBoostingClassifier with loss='exponential' cannot be imported (link exp(2 raw))")
    if not classifier and loss not in IDENTITY_LOSSES:
        raise TreegenError(f"GradientBoostingRegressor with loss={loss!r} cannot be imported")
    stages = est.estimators_
    K = stages.shape[1]
    base = np.asarray(est._raw_predict_init(np.zeros((1, n_features), dtype=np.float32)),
                      dtype=np.float64).reshape(-1)
    trees = [_tree(stages[i, k].tree_, est.learning_rate, output=k, nan=False)
             for i in range(stages.shape[0]) for k in range(K)]
    meta["learning_rate"] = float(est.learning_rate)
    if classifier:
        classes = _classes(est)
        return ImportedEnsemble(trees, n_features, "<=", task="classification", classes=classes, n_outputs=K,
                                vote="sum", base_score=base.tolist(), link="logistic" if K == 1 else "softmax",
                                sum_dtype="float64", binary_rule=">=", feature_names=names, metadata=meta)
    return ImportedEnsemble(trees, n_features, "<=", task="regression", vote="sum", base_score=base.tolist(),
                            link="identity", sum_dtype="float64", feature_names=names, metadata=meta)


def _hist(est, n_features, names, meta) -> ImportedEnsemble:
    classifier = hasattr(est, "classes_")
    loss = est.loss if isinstance(est.loss, str) else type(est.loss).__name__
    if not classifier and loss not in IDENTITY_LOSSES:
        raise TreegenError(f"HistGradientBoostingRegressor with loss={loss!r} cannot be imported (links identity, "
                           "logistic, softmax only)")
    if getattr(est, "is_categorical_", None) is not None and np.any(est.is_categorical_):
        raise TreegenError("HistGradientBoosting categorical features cannot be imported (treegen tests numeric "
                           "features only)")
    base = np.asarray(est._baseline_prediction, dtype=np.float64).reshape(-1)
    K = base.size
    trees = []
    for iteration in est._predictors:
        for k, pred in enumerate(iteration):
            nodes = pred.nodes
            leaf = nodes["is_leaf"].astype(bool)
            thr = nodes["num_threshold"].astype(np.float64)
            if np.any(nodes["is_categorical"][~leaf]):
                raise TreegenError("HistGradientBoosting categorical splits cannot be imported")
            left = nodes["left"].astype(np.int64)
            right = nodes["right"].astype(np.int64)
            trees.append(ImportedTree(np.where(leaf, 0, nodes["feature_idx"].astype(np.int64)), np.where(leaf, 0.0, thr),
                                      np.where(leaf, LEAF, left), np.where(leaf, LEAF, right),
                                      np.where(leaf, nodes["value"], 0.0),
                                      np.where(leaf, False, nodes["missing_go_to_left"].astype(bool)), output=k))
    meta["learning_rate"] = float(est.learning_rate)
    if classifier:
        return ImportedEnsemble(trees, n_features, "<=", task="classification", classes=_classes(est), n_outputs=K,
                                vote="sum", base_score=base.tolist(), link="logistic" if K == 1 else "softmax",
                                sum_dtype="float64", binary_rule=">", feature_names=names, metadata=meta)
    return ImportedEnsemble(trees, n_features, "<=", task="regression", vote="sum", base_score=base.tolist(),
                            link="identity", sum_dtype="float64", feature_names=names, metadata=meta)
