"""An :class:`~treegen.importers.ensemble.ImportedEnsemble` -> a treegen :class:`~treegen.core.model.Model`
of value trees (vote "sum" with ``boost``, or vote "mean"), following the shared representation:

* each library test becomes ``float32(x) <= raw_threshold`` (:func:`le_threshold`: exact for every
  float32 input), NaN goes where ``missing_left`` says (libraries that route missing values);
* ``leaf_value`` holds the library's leaf values (float32 values for XGBoost), ``boost`` its base
  score, the output of each tree, the link and the precision of the sum;
* ``threshold`` holds each test on the Q15 grid of an input scaling (the q15 export): min-max over
  ``X`` when given (aligned to the thresholds as for scikit-learn trees), else over the range of the
  thresholds of each feature.

The model's ``predict`` / ``decision_function`` / ``predict_value`` then equal the library's raw score
bit for bit, and its binary class the library's: ``boost.decision_threshold`` holds the library's own
rule (:class:`ImportedEnsemble` ``binary_rule`` / ``decision_value``): XGBoost class 1 iff
raw > 0x1.8p-24 (8.94e-8: its float32 sigmoid rounds to 0.5 below), LightGBM iff raw > 0x1.8p-53
(1.67e-16, double sigmoid), scikit-learn's GradientBoostingClassifier iff raw >= 0,
HistGradientBoostingClassifier iff raw > 0, onnxruntime iff raw > 0 (> 0.5 when no weight is
negative). Multiclass: the first largest raw score; XGBoost's and LightGBM's argmax of a rounded
softmax can pick a lower index whose raw score is smaller by less than ``metadata["class_tie_gap"]``
(the only rows where the class can differ; see :mod:`treegen.importers.ensemble`).
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.scaling import Q15_MAX, Q15_ONE, InputScaling
from treegen.core.tree import LEAF, Tree
from treegen.core.version import __version__
from treegen.importers.ensemble import ImportedEnsemble
from treegen.importers.grid import _choose_scaling, _grid_threshold

__all__ = ["ensemble_to_model", "library_decision"]


def library_decision(ens: ImportedEnsemble) -> str:
    """The library's own binary rule, in words (for ``metadata["library_decision"]``)."""
    if ens.task != "classification":
        return "regression: the raw score"
    if ens.n_outputs > 1:
        if ens.tie_gap:
            return (f"argmax of the rounded softmax = the first largest raw score unless a lower output is within "
                    f"{ens.tie_gap:.3g} of it (then the library may take the lower)")
        return "the first largest raw score"
    return f"class 1 iff raw {ens.binary_rule} {ens.decision_value!r}"


def _scaling(ens: ImportedEnsemble, les: list[np.ndarray], X) -> tuple[InputScaling, np.ndarray | None]:
    feats = np.concatenate([t.feature[t.left != LEAF] for t in ens.trees])
    thr = np.concatenate([le[t.left != LEAF] for t, le in zip(ens.trees, les)])
    keep = np.abs(thr) < np.finfo(np.float32).max   # HistGradientBoosting's "every finite value left"
    feats, thr = feats[keep], thr[keep]
    if X is not None:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != ens.n_features or X.shape[0] == 0:
            raise TreegenError(f"X must have shape (n_samples, {ens.n_features}), got {X.shape}")
        ok = np.isfinite(X)
        fill = np.array([X[ok[:, j], j].min() if ok[:, j].any() else 0.0 for j in range(X.shape[1])])
        X = np.where(ok, X, fill)   # missing / infinite cells do not shape the scaling
        X = X.astype(np.float32).astype(np.float64)
        return _choose_scaling(X, ens.n_features, feats, thr), X
    # no data: each feature's range is that of its thresholds (plus a margin), a float32 contract
    lo = np.zeros(ens.n_features)
    hi = np.ones(ens.n_features)
    for f in range(ens.n_features):
        t = thr[feats == f]
        if t.size:
            span = max(float(t.max() - t.min()), abs(float(t.max())) * 1e-3, 1e-6)
            lo[f], hi[f] = t.min() - span / 16, t.max() + span / 16
    X = np.vstack([lo, hi]).astype(np.float32).astype(np.float64)
    return _choose_scaling(X, ens.n_features, feats, thr, force_minmax=True), X


def ensemble_to_model(ens: ImportedEnsemble, X=None, feature_names=None, algorithm: str = "imported") -> Model:
    """The treegen model of a parsed ensemble (see the module documentation)."""
    names = list(feature_names) if feature_names is not None else list(ens.feature_names)
    if len(names) != ens.n_features:
        raise TreegenError(f"{len(names)} feature names given for a model of {ens.n_features} features")
    les = [ens.le_thresholds(t) for t in ens.trees]
    scaling, Xs = _scaling(ens, les, X)
    Xq = scaling.to_q15(Xs).astype(np.int64)
    trees = []
    for t, le in zip(ens.trees, les):
        n = t.n_nodes
        internal = t.left != LEAF
        weights = np.zeros((n, ens.n_features))
        threshold = np.zeros(n)
        for node in np.flatnonzero(internal):
            f = int(t.feature[node])
            weights[node, f] = 1.0
            if np.isinf(le[node]):     # +inf: every value left (the Q15 grid's last cell too); -inf: none
                threshold[node] = (Q15_MAX + 0.5 if le[node] > 0 else -0.5) / Q15_ONE
            elif scaling.method == "q15":
                threshold[node] = le[node] / Q15_ONE
            else:
                with np.errstate(over="ignore"):   # a FLT_MAX threshold: its float32 neighbour is inf
                    Q, _ = _grid_threshold(float(le[node]), f, scaling, Xq, Xs)
                threshold[node] = (Q + 0.5) / Q15_ONE
        missing = None
        if ens.routes_missing:
            missing = np.where(internal, t.missing_left, False)
        trees.append(Tree(weights, threshold, np.where(internal, t.left, LEAF), np.where(internal, t.right, LEAF),
                          np.zeros(n, dtype=np.int32), np.zeros((n, 1), dtype=np.int64), np.where(internal, le, 0.0),
                          np.where(internal, 0.0, t.value), missing).compact())
    metadata = {
        "algorithm": algorithm,
        "source": ens.metadata.get("source", "?"),
        "treegen_version": __version__,
        "scaling_route": scaling.method,
        "n_thresholds": int(sum(int(np.count_nonzero(t.left != LEAF)) for t in ens.trees)),
        "library_decision": library_decision(ens),
    } | {k: v for k, v in ens.metadata.items() if k not in ("source",)} | {
        # the library's own tests and sums: the reference HIL checks a device against
        # (treegen.device.library_ref), independent of the conversion to the tree IR above
        "library_reference": ens.to_dict()}
    boost = None
    if ens.vote == "sum":
        boost = {"base_score": [float(b) for b in ens.base_score], "tree_output": [int(t.output) for t in ens.trees],
                 "link": ens.link, "sum_dtype": ens.sum_dtype}
        if ens.scale != 1.0:
            boost["scale"] = float(ens.scale)
        if ens.bias is not None:
            boost["bias"] = [float(b) for b in ens.bias]
        if ens.task == "classification" and ens.n_outputs == 1:
            boost["decision_threshold"] = {"value": float(ens.decision_value), "rule": ens.binary_rule}
    if ens.task == "classification" and ens.n_outputs > 1:
        metadata["class_tie_gap"] = float(ens.tie_gap)
    contract = "integer" if scaling.method == "q15" else "float32"
    return Model(trees, [str(n) for n in names], list(ens.classes) if ens.task == "classification" else [], scaling,
                 metadata, vote=ens.vote, input_contract=contract, task=ens.task, boost=boost)
