"""Import fitted scikit-learn trees: ``DecisionTreeClassifier`` and ``RandomForestClassifier``.

scikit-learn is optional; it is imported lazily by :func:`from_sklearn`.

What scikit-learn computes
--------------------------
A scikit-learn tree casts every input to ``float32`` and tests ``float32(x[f]) <= t`` (``t`` float64,
the midpoint of two adjacent float32 training values) -> left child. The leaf predicts
``argmax(value)`` (ties -> lowest class index).

How the thresholds are carried over (the input scaling)
-------------------------------------------------------
A treegen model tests *normalised* features on the Q15 grid, ``x = q / 32768`` with ``q`` an
integer 0..32767 (see :mod:`treegen.core.scaling`). Two routes:

``q15``   the data are already integers 0..32767 (the shared UCI sets), or ``X`` is not given.
          Scaling offset 0, scale 1/32768 (``q == x_raw``); the threshold becomes ``t / 32768``
          (exact in binary), so ``q/32768 <= t/32768  <=>  x_raw <= t``: the model predicts
          **exactly** what scikit-learn predicts for every integer input in 0..32767.
          Without ``X`` the thresholds are checked to look like integer data (multiples of 0.5
          in [0, 32767]); otherwise a :class:`TreegenError` asks for ``X``.
``minmax`` general float data (``X`` given, not all Q15 integers). Per feature, offset/scale map
          the range of ``X`` (widened to cover every threshold on that feature) onto 0..32767,
          *aligned to the thresholds* (:func:`treegen.importers.grid._aligned_affine`): the feature's first two thresholds
          (in tree order) land exactly on grid-cell boundaries, so those tests decide as
          scikit-learn does for **every** float32 input; the first boundary is a multiple of 256
          (a one-instruction compare constant on Cortex-M). Every threshold becomes an integer grid
          boundary ``Q``: the node tests ``q <= Q`` and is stored as ``(Q + 0.5) / 32768``. For the
          further thresholds of a feature ``Q`` is the grid point at or below the exact image of
          ``t``, moved if needed so that *every row of X* keeps the side scikit-learn sends it to.
          That is possible unless two values of ``X`` on opposite sides of ``t`` fall into the same
          grid cell (closer than the feature's range / 32767); such nodes are counted in
          ``metadata["unresolved_thresholds"]``. When it is 0, the model agrees with scikit-learn on
          every row of ``X``. On *other* inputs an unaligned test disagrees only where a value lies
          in the one grid cell that contains its threshold (on its far side), see
          ``metadata["sklearn_agreement_on_X"]`` and the tests for measured figures.

The source's own tests (``raw_threshold``)
------------------------------------------
Every imported node also keeps scikit-learn's threshold ``t`` itself (:attr:`Tree.raw_threshold`):
the model's float semantics (``Model.predict``) and the f32 export test ``float32(x) <= t``, i.e.
``x <= `` the largest float32 not above ``t`` -- exactly scikit-learn's decision for *every* float32
input, by construction. The Q15 grid thresholds above serve the q15 export; a node whose grid test
differs from the source test for some float32 input is counted in ``metadata["thresholds_off_grid"]``
(:func:`treegen.core.float32.grid_matches_raw`; 0 means the q15 model is exact for every float32
input too).

Input contract
--------------
``input_contract="auto"``: ``integer`` for the q15 route (integer data: the q15 raw wrapper rounds
other values to the nearest integer), ``float32`` otherwise. ``input_contract="float32"`` with integer
data takes the ``minmax`` route, so no input is ever rounded to an integer. Recorded in the model.

Leaves, counts, forests
-----------------------
* Leaf class = ``argmax`` of scikit-learn's ``value`` (ties -> lowest index, as treegen).
* ``class_counts`` = ``round(value * weighted_n_node_samples)``: the exact class counts for an
  unweighted fit; for a forest the *bootstrap* counts (rows drawn twice count twice). For fits with
  ``sample_weight`` / ``class_weight`` (non-integer weighted counts) the weighted counts times 2^20,
  rounded, so the leaf frequencies keep scikit-learn's probabilities within 2^-20.
* A forest imports with ``vote="soft"`` (the mean of the leaf count frequencies, scikit-learn's
  ``predict``; ties -> lowest index); ``vote="hard"`` gives the majority of the trees' classes.
* Missing values (NaN routing of scikit-learn >= 1.3) are not carried over: treegen rejects NaN input.
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.scaling import Q15_ONE, InputScaling
from treegen.core.tree import LEAF, Tree
from treegen.core.version import __version__
from treegen.importers.grid import _choose_scaling, _grid_threshold, f32_split  # noqa: F401 (f32_split: public)
from treegen.core.float32 import grid_matches_raw
from treegen.importers.validate import Fields

CONTRACT_CHOICES = ("auto", "float32", "integer")
WEIGHTED_COUNT_SCALE = 2.0 ** 20

__all__ = ["from_sklearn"]


def _require_sklearn():
    """Import scikit-learn lazily; a clear :class:`TreegenError` if it is not installed."""
    try:
        import sklearn
        from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
        from sklearn.tree import DecisionTreeClassifier
    except ImportError as exc:
        raise TreegenError(
            "importing scikit-learn models needs scikit-learn, which is not installed "
            f"({exc}); install it with: pip install scikit-learn") from None
    return sklearn, DecisionTreeClassifier, (RandomForestClassifier, ExtraTreesClassifier)


def from_sklearn(estimator, feature_names=None, X=None, *, vote: str | None = None,
                 input_contract: str = "auto", source_name: str = "scikit-learn model") -> Model:
    """Convert a fitted scikit-learn tree classifier into a treegen :class:`Model`.

    Parameters
    ----------
    estimator : DecisionTreeClassifier or RandomForestClassifier (or ExtraTreesClassifier)
        Fitted, single-output. Also a regressor or gradient-boosting model
        (:data:`~treegen.importers.sklearn_values.VALUE_ESTIMATORS`): imported as value trees by
        :mod:`treegen.importers.sklearn_values` (vote "mean" / "sum"; ``vote`` must be None).
    feature_names : list of str, optional
        Defaults to the estimator's ``feature_names_in_`` (fitted on a DataFrame) or ``x0, x1, ...``.
    X : array-like of shape (n_samples, n_features), optional
        Data the model will see (normally the training data). Integers 0..32767 -> ``q15`` route;
        anything else -> ``minmax`` scaling fitted on ``X`` (see the module documentation).
        Without ``X`` the data are taken to be Q15 integers.
    vote : {"soft", "hard"}, optional
        How a forest combines its trees; default ``soft`` (scikit-learn's ``predict``).
    input_contract : {"auto", "float32", "integer"}
        The raw inputs the model is made for (see the module documentation).
    source_name : str
        What messages call the estimator (``treegen import`` passes the file name).

    Returns
    -------
    Model
        One tree for a decision tree, one tree per estimator for a forest.

    Examples
    --------
    >>> from treegen.importers import from_sklearn
    >>> model = from_sklearn(DecisionTreeClassifier(max_depth=4).fit(X, y), X=X)  # doctest: +SKIP
    >>> (model.predict(X) == clf.predict(X)).all()                                  # doctest: +SKIP
    """
    sklearn, tree_cls, forest_cls = _require_sklearn()
    from treegen.importers.sklearn_checks import check_estimator
    from treegen.importers.sklearn_values import VALUE_ESTIMATORS
    check_estimator(estimator, Fields(source_name))
    if type(estimator).__name__ in VALUE_ESTIMATORS:   # regressors and gradient boosting: value trees
        from treegen.importers.sklearn_values import parse_sklearn_values
        from treegen.importers.value_model import ensemble_to_model
        if vote is not None:
            raise TreegenError(f"vote does not apply to {type(estimator).__name__} (its trees are summed/averaged)")
        if input_contract not in CONTRACT_CHOICES:
            raise TreegenError(f"unknown input contract {input_contract!r} (choose from {', '.join(CONTRACT_CHOICES)})")
        model = ensemble_to_model(parse_sklearn_values(estimator), X=X, feature_names=feature_names,
                                  algorithm=f"sklearn-{type(estimator).__name__}")
        model.metadata["params"] = {k: v for k, v in estimator.get_params().items() if _is_plain(v)}
        return model
    if isinstance(estimator, forest_cls):
        kind = "forest"
        if not hasattr(estimator, "estimators_"):
            raise TreegenError(f"{type(estimator).__name__} is not fitted; call fit() first")
        sk_trees = list(estimator.estimators_)
    elif isinstance(estimator, tree_cls):
        kind = "tree"
        if not hasattr(estimator, "tree_"):
            raise TreegenError(f"{type(estimator).__name__} is not fitted; call fit() first")
        sk_trees = [estimator]
    else:
        raise TreegenError(
            f"cannot import {type(estimator).__name__}: supported are scikit-learn DecisionTreeClassifier, "
            "RandomForestClassifier, ExtraTreesClassifier, " + ", ".join(VALUE_ESTIMATORS))
    if vote is None:
        vote = "soft" if kind == "forest" else "hard"
    if vote not in ("soft", "hard"):
        raise TreegenError(f"unknown vote {vote!r} (choose from soft, hard)")
    if input_contract not in CONTRACT_CHOICES:
        raise TreegenError(f"unknown input contract {input_contract!r} (choose from {', '.join(CONTRACT_CHOICES)})")
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise TreegenError("multi-output scikit-learn models cannot be imported (one label column only)")

    n_features = int(estimator.n_features_in_)
    classes = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(estimator.classes_).tolist()]
    n_classes = len(classes)
    if feature_names is None:
        names_in = getattr(estimator, "feature_names_in_", None)
        feature_names = list(names_in) if names_in is not None else [f"x{i}" for i in range(n_features)]
    feature_names = [str(n) for n in feature_names]
    if len(feature_names) != n_features:
        raise TreegenError(f"{len(feature_names)} feature names given for a model of {n_features} features")

    # every (feature, threshold) test of every tree
    tests = [(t.tree_.feature[t.tree_.children_left != LEAF], t.tree_.threshold[t.tree_.children_left != LEAF])
             for t in sk_trees]
    all_feat = np.concatenate([f for f, _ in tests]).astype(np.int64)
    all_thr = np.concatenate([t for _, t in tests]).astype(np.float64)
    if not np.all(np.isfinite(all_thr)):
        raise TreegenError("the scikit-learn model has non-finite thresholds")

    X_arr = _check_X(X, n_features)
    if input_contract == "float32" and X_arr is None:
        raise TreegenError("input contract float32 needs the training data (X= in Python, --data on the "
                           "command line) to fit the input scaling")
    scaling = _choose_scaling(X_arr, n_features, all_feat, all_thr, force_minmax=input_contract == "float32")
    if input_contract == "integer" and scaling.method != "q15":
        raise TreegenError("input contract integer needs integer data in 0..32767 (X has other values)")
    contract = "integer" if scaling.method == "q15" else "float32"
    Xq = scaling.to_q15(X_arr).astype(np.int64) if X_arr is not None else None
    X32 = X_arr.astype(np.float32).astype(np.float64) if X_arr is not None else None

    trees = []
    unresolved = 0
    for sk in sk_trees:
        tree, n_bad = _convert_tree(sk, kind, n_features, n_classes, scaling, Xq, X32)
        trees.append(tree)
        unresolved += n_bad

    off_grid = int(sum(np.count_nonzero(~grid_matches_raw(t, scaling)) for t in trees))
    params = {k: v for k, v in estimator.get_params().items() if _is_plain(v)}
    metadata = {
        "algorithm": f"sklearn-{type(estimator).__name__}",
        "params": params,
        "seed": params.get("random_state"),
        "source": f"scikit-learn {sklearn.__version__}",
        "treegen_version": __version__,
        "scaling_route": scaling.method,
        "unresolved_thresholds": int(unresolved),
        "thresholds_off_grid": off_grid,
        "n_thresholds": int(all_thr.size),
        "voting": (f"{vote} vote of the trees" + (" (scikit-learn's predict: mean leaf probabilities)"
                                                  if vote == "soft" else " (majority of the trees' classes)"))
        if kind == "forest" else "single tree",
        "library_decision": ("the first class of largest mean leaf probability over the trees (scikit-learn's "
                             "predict)" if kind == "forest" else
                             "the first class of largest leaf probability (scikit-learn's predict)"),
        "class_counts": "round(value * weighted_n_node_samples): exact for unweighted trees, bootstrap "
                        "counts in forests; weighted counts * 2^20, rounded, with sample/class weights",
    }
    model = Model(trees, feature_names, classes, scaling, metadata, vote=vote if kind == "forest" else "hard",
                  input_contract=contract)
    if X_arr is not None:
        # the Q15 grid model (what the q15 export computes) on the rows of X; the float model (raw
        # thresholds) equals scikit-learn on every float32 input by construction
        ours = model.predict_index_normalised(model.scaling.transform(X_arr))
        theirs = np.searchsorted(np.asarray(estimator.classes_), estimator.predict(X_arr))
        metadata["n_train"] = int(X_arr.shape[0])
        metadata["sklearn_agreement_on_X"] = float(np.mean(ours == theirs))
    return model


# ---------------------------------------------------------------------------------------------- helpers
def _check_X(X, n_features: int) -> np.ndarray | None:
    if X is None:
        return None
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TreegenError(f"X must be a numeric array: {exc}") from None
    if X.ndim != 2 or X.shape[1] != n_features or X.shape[0] == 0:
        raise TreegenError(f"X must have shape (n_samples, {n_features}), got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise TreegenError("X contains NaN or infinite values")
    return X


def _convert_tree(sk, kind: str, n_features: int, n_classes: int, scaling: InputScaling,
                  Xq: np.ndarray | None, X32: np.ndarray | None) -> tuple[Tree, int]:
    st = sk.tree_
    n_nodes = int(st.node_count)
    left = st.children_left.astype(np.int64)
    right = st.children_right.astype(np.int64)
    internal = left != LEAF

    # value columns -> model class indices (a forest's trees are fitted on encoded labels 0..K-1)
    if kind == "forest":
        col_class = np.asarray(sk.classes_, dtype=np.float64).astype(np.int64)
    else:
        col_class = np.arange(n_classes)
    value = np.asarray(st.value, dtype=np.float64)[:, 0, :]
    leaf_class = col_class[value.argmax(axis=1)]

    wn = np.asarray(st.weighted_n_node_samples, dtype=np.float64)
    sums = value.sum(axis=1)
    counts_w = value if np.allclose(sums, wn, rtol=1e-9, atol=1e-9) else value * wn[:, None]
    if not np.allclose(counts_w, np.rint(counts_w), rtol=0, atol=1e-6):   # weighted fit: keep the frequencies
        counts_w = counts_w * WEIGHTED_COUNT_SCALE
    counts = np.zeros((n_nodes, n_classes), dtype=np.int64)
    counts[:, col_class] = np.rint(counts_w).astype(np.int64)

    weights = np.zeros((n_nodes, n_features))
    threshold = np.zeros(n_nodes)
    raw = np.where(internal, np.asarray(st.threshold, dtype=np.float64), 0.0)
    unresolved = 0
    for node in np.flatnonzero(internal):
        f = int(st.feature[node])
        t = float(st.threshold[node])
        weights[node, f] = 1.0
        if scaling.method == "q15":
            threshold[node] = t / Q15_ONE  # exact: power-of-two division
        else:
            Q, ok = _grid_threshold(t, f, scaling, Xq, X32)
            unresolved += not ok
            threshold[node] = (Q + 0.5) / Q15_ONE
    tree = Tree(weights, threshold, np.where(internal, left, LEAF), np.where(internal, right, LEAF),
                leaf_class, counts, raw)
    return tree.compact(), unresolved


def _is_plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))
