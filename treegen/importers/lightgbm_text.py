"""Parse a LightGBM model (``LGBMClassifier`` / ``LGBMRegressor``, a ``Booster``, or a saved model text
file) into an :class:`~treegen.importers.ensemble.ImportedEnsemble`.

What LightGBM computes (checked bit for bit against ``Booster.predict(raw_score=True)``):

* the input is a double (a float32 input converted exactly); a numerical split sends
  ``x <= threshold`` (a double, printed with 17 digits in the model text) left;
* missing values (``decision_type`` bits 2-3): type ``NaN`` sends NaN to the default side
  (``decision_type`` bit 1); type ``None`` treats NaN as 0.0 (so NaN goes where 0.0 goes); type
  ``Zero`` (``zero_as_missing``: every value within 1e-35 of 0 is missing) is refused;
* leaf values are doubles, the raw score of output ``k`` is their double sum in tree order starting at
  0 (``boost_from_average`` folds the initial score into the first tree's leaves: base 0);
* trees are interleaved by class (tree ``i`` adds to class ``i % num_tree_per_iteration``);
* ``LGBMClassifier.predict``: binary -> argmax of ``[1 - p, p]`` with ``p = 1 / (1 + exp(-raw))`` in
  double: class 1 iff raw exceeds a tiny positive double (``decision_margin``, by bisection with the C
  library's ``exp``, which LightGBM calls: ``0x1.8p-53``, checked with LightGBM on its neighbours);
  multiclass -> argmax of the double softmax (``tie_gap`` 2^-51, see
  :mod:`~treegen.importers.ensemble`).

Refused with a one-line reason: categorical splits, linear trees, ``zero_as_missing``, the ``rf``
boosting mode (averaged output), ``multiclassova``, a sigmoid parameter other than 1 and objectives
whose link is not identity / logistic / softmax (poisson, gamma, tweedie, ...).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree

SOFTMAX_TIE_GAP = 2.0 ** -51    # double softmax: outputs further apart never round to one probability
IDENTITY_OBJECTIVES = ("regression", "regression_l2", "regression_l1", "huber", "fair", "quantile", "mape",
                       "l2", "l1", "mse", "mae")
MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2

__all__ = ["from_lightgbm", "parse_lightgbm", "load_lightgbm_text"]


def load_lightgbm_text(source) -> str:
    """The model text of an ``LGBMModel``, a ``Booster``, a path to a model text file, or the text."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
        path = Path(source)
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise TreegenError(f"{path} is not a LightGBM model text file") from None
        except OSError as exc:
            raise TreegenError(f"cannot read {path}: {exc.strerror or exc}") from None
    if isinstance(source, str):
        return source
    booster = getattr(source, "booster_", None) if hasattr(source, "fit") else source
    if booster is None:
        raise TreegenError(f"{type(source).__name__} is not fitted; call fit() first")
    if not hasattr(booster, "model_to_string"):
        raise TreegenError(f"cannot import {type(source).__name__} as a LightGBM model")
    return booster.model_to_string()


def _sections(text: str) -> tuple[dict, list[dict]]:
    header: dict = {}
    trees: list[dict] = []
    cur = header
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("end of trees"):
            break
        if line.startswith("Tree="):
            cur = {}
            trees.append(cur)
            continue
        if "=" in line:
            k, v = line.split("=", 1)
            cur[k] = v
    return header, trees


def parse_lightgbm(source, classes=None) -> ImportedEnsemble:
    """Parse a LightGBM model (see the module documentation) into an :class:`ImportedEnsemble`."""
    text = load_lightgbm_text(source)
    if classes is None and hasattr(source, "classes_"):
        classes = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(source.classes_).tolist()]
    header, jtrees = _sections(text)
    if not text.lstrip().startswith("tree") or "max_feature_idx" not in header:
        raise TreegenError("not a LightGBM model text (no 'tree' header / max_feature_idx)")
    try:
        n_features = int(header["max_feature_idx"]) + 1
        num_class = int(header.get("num_class", "1"))
        per_iter = int(header.get("num_tree_per_iteration", "1"))
        objective = header.get("objective", "").split()
    except ValueError as exc:
        raise TreegenError(f"LightGBM model: bad header field ({exc})") from None
    if "average_output" in text.split("Tree=", 1)[0]:
        raise TreegenError("LightGBM rf (averaged output) models cannot be imported (boosted gbdt/goss only)")
    if not objective:
        raise TreegenError("LightGBM model: no objective")
    name = objective[0]
    opts = dict(o.split(":", 1) for o in objective[1:] if ":" in o)
    if name in ("binary", "cross_entropy", "xentropy"):
        if float(opts.get("sigmoid", "1")) != 1.0:
            raise TreegenError(f"LightGBM binary objective with sigmoid:{opts['sigmoid']} cannot be imported "
                               "(sigmoid 1 only)")
        task, link, n_outputs = "classification", "logistic", 1
    elif name in ("multiclass", "softmax"):
        task, link, n_outputs = "classification", "softmax", num_class
    elif name in IDENTITY_OBJECTIVES:
        if "sqrt" in objective:
            raise TreegenError("LightGBM regression with reg_sqrt cannot be imported (the output is squared)")
        task, link, n_outputs = "regression", "identity", 1
    else:
        raise TreegenError(f"LightGBM objective {name!r} cannot be imported (supported: binary, multiclass and "
                           "identity-link regression)")
    if per_iter != n_outputs:
        raise TreegenError(f"LightGBM model: {per_iter} trees per iteration for {n_outputs} outputs")
    if not jtrees:
        raise TreegenError("LightGBM model: no trees")
    trees = [_parse_tree(t, i % per_iter) for i, t in enumerate(jtrees)]
    if task == "classification":
        classes = list(classes) if classes is not None else list(range(max(n_outputs, 2)))
        if len(classes) != max(n_outputs, 2):
            raise TreegenError(f"{len(classes)} classes given for a LightGBM model of {max(n_outputs, 2)}")
    else:
        classes = []
    names = header.get("feature_names", "").split() or None
    meta = {"source": f"LightGBM model text {header.get('version', '?')}", "objective": " ".join(objective)}
    ens = ImportedEnsemble(trees, n_features, "<=", task=task, classes=classes, n_outputs=n_outputs, vote="sum",
                           base_score=[0.0] * n_outputs, link=link, sum_dtype="float64", binary_rule=">",
                           feature_names=names if names and len(names) == n_features else None, metadata=meta)
    if task == "classification" and n_outputs == 1:
        ens.decision_value = meta["decision_margin"] = sigmoid_decision_margin()
        meta["decision"] = ("argmax([1 - p, p]), p = 1 / (1 + exp(-raw)) in double: class 1 iff raw > "
                            f"{meta['decision_margin']!r}")
    elif task == "classification":
        ens.tie_gap = SOFTMAX_TIE_GAP
    return ens


def _floats(tree: dict, key: str, n: int, dtype=float) -> np.ndarray:
    vals = tree.get(key, "").split()
    if len(vals) != n:
        raise TreegenError(f"LightGBM model: {key} has {len(vals)} values, expected {n}")
    try:
        return np.asarray([dtype(v) for v in vals])
    except ValueError as exc:
        raise TreegenError(f"LightGBM model: bad {key} ({exc})") from None


def _parse_tree(t: dict, output: int) -> ImportedTree:
    try:
        n_leaves = int(t["num_leaves"])
        n_cat = int(t.get("num_cat", "0"))
    except (KeyError, ValueError) as exc:
        raise TreegenError(f"LightGBM model: bad tree ({exc})") from None
    if n_cat:
        raise TreegenError("LightGBM categorical splits cannot be imported (treegen tests numeric features only)")
    if t.get("is_linear", "0") != "0":
        raise TreegenError("LightGBM linear trees cannot be imported (constant leaves only)")
    leaf_value = _floats(t, "leaf_value", n_leaves)
    if n_leaves == 1:
        return ImportedTree([0], [0.0], [LEAF], [LEAF], leaf_value, np.zeros(1, dtype=bool), output=output)
    n_int = n_leaves - 1
    feat = _floats(t, "split_feature", n_int, int)
    thr = _floats(t, "threshold", n_int)
    dtype = _floats(t, "decision_type", n_int, int)
    lc = _floats(t, "left_child", n_int, int)
    rc = _floats(t, "right_child", n_int, int)
    if np.any(dtype & 1):
        raise TreegenError("LightGBM categorical splits cannot be imported (treegen tests numeric features only)")
    missing = (dtype >> 2) & 3
    if np.any(missing == MISSING_ZERO):
        raise TreegenError("LightGBM models trained with zero_as_missing cannot be imported "
                           "(values near 0 take the default branch)")
    default_left = (dtype & 2) != 0
    # NaN: type NaN -> default side; type None -> treated as 0.0
    nan_left = np.where(missing == MISSING_NAN, default_left, 0.0 <= thr)

    def node(c):  # LightGBM child: >= 0 internal node, < 0 leaf ~c
        return np.where(c >= 0, c, n_int + (~c))

    n = n_int + n_leaves
    feature = np.zeros(n, dtype=np.int64)
    threshold = np.zeros(n)
    left = np.full(n, LEAF)
    right = np.full(n, LEAF)
    value = np.zeros(n)
    miss = np.zeros(n, dtype=bool)
    feature[:n_int], threshold[:n_int], miss[:n_int] = feat, thr, nan_left
    left[:n_int], right[:n_int] = node(lc), node(rc)
    value[n_int:] = leaf_value
    if not np.all(np.isfinite(value)) or np.any(np.isnan(threshold)):
        raise TreegenError("LightGBM model: non-finite leaf value or NaN threshold")
    return ImportedTree(feature, threshold, left, right, value, miss, output=output)


def sigmoid_decision_margin() -> float:
    """The largest double ``r`` with ``p = 1 / (1 + exp(-r))`` (C library ``exp``, as LightGBM and SciPy's
    ``expit`` compute it) not above ``1 - p``: a binary classifier taking argmax([1 - p, p]) says class 1
    iff raw > this."""
    def class1(r: float) -> bool:
        p = 1.0 / (1.0 + math.exp(-r))
        return p > 1.0 - p

    lo, hi = 0, int(np.float64(1e-10).view(np.int64))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if class1(float(np.int64(mid).view(np.float64))):
            hi = mid
        else:
            lo = mid
    return float(np.int64(lo).view(np.float64))


def from_lightgbm(model, X=None, feature_names=None, classes=None):
    """Import a LightGBM model as a treegen :class:`~treegen.core.model.Model` (vote "sum", double sums).

    Parameters
    ----------
    model : LGBMClassifier, LGBMRegressor, Booster, a path to a model text file, or the model text
    X : array-like, optional
        Data the model will see: fits the input scaling of the q15 export (else the thresholds' range).
    feature_names, classes : optional
        Default to the model's feature names and classes (``classes_`` or ``0..K-1``).

    Returns
    -------
    Model
        ``decision_function`` == ``Booster.predict(raw_score=True)`` bit for bit for every float32
        input; ``predict`` == ``LGBMClassifier.predict`` (binary: the raw score compared with
        ``boost.decision_threshold``; multiclass: equal unless two raw scores lie within
        ``metadata["class_tie_gap"]``, see :mod:`treegen.importers.value_model`).
    """
    from treegen.importers.value_model import ensemble_to_model
    ens = parse_lightgbm(model, classes=classes)
    return ensemble_to_model(ens, X=X, feature_names=feature_names,
                             algorithm=f"lightgbm-{ens.metadata['objective'].split()[0]}")
