"""Parse an XGBoost model (``XGBClassifier`` / ``XGBRegressor``, a ``Booster``, or a saved JSON / UBJSON
model file) into an :class:`~treegen.importers.ensemble.ImportedEnsemble`.

What XGBoost computes (``gbtree``; checked bit for bit against ``Booster.predict(output_margin=True)``):

* every input is a float32 (``DMatrix``); a split sends ``x < split_condition`` (a float32) left, a
  missing value (NaN) to ``default_left``;
* a leaf's value is a float32 (``split_conditions`` at leaves; the learning rate is already in it);
* the margin of output ``k`` is accumulated in float32: the base margin first, then the leaf values of
  the trees of group ``k`` in tree order;
* the base margin is ``base_score`` mapped through the objective's inverse link; the JSON file prints
  ``base_score`` rounded to 7 digits, so when xgboost is installed the base margin is read from XGBoost
  itself (the model with every leaf set to 0, predicted on one row): the float32 XGBoost adds;
* ``XGBClassifier.predict``: ``binary:logistic`` -> class 1 iff ``sigmoid(margin) > 0.5`` in float32,
  i.e. iff the margin exceeds a tiny positive float32 (``decision_margin``, found by bisection with
  XGBoost's own sigmoid: ``0x1.8p-24`` = 8.94e-8 with XGBoost 3.2, checked on every float32 from 1/8 to
  8 times it); ``binary:logitraw`` -> class 1 iff the margin itself ``> 0.5`` (``predict`` compares its
  output, the margin, with 0.5); ``multi:softprob`` -> argmax of the float32 softmax (``tie_gap``
  2^-22, see :mod:`~treegen.importers.ensemble`); ``multi:softmax`` -> argmax of the margins.

Refused with a one-line reason: ``gblinear`` and ``dart`` boosters, categorical splits, multi-target
trees, and objectives whose link is not identity / logistic / softmax (``count:poisson``, ``reg:gamma``,
``reg:tweedie``, ``reg:logistic``, ranking, survival).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree

SIGMOID_MARGIN = 1.5 * 2.0 ** -24    # the largest float32 margin XGBoost 3.2's float32 sigmoid maps to 0.5
SOFTMAX_TIE_GAP = 2.0 ** -22        # float32 softmax: outputs further apart never round to one probability

# objective -> (task, link)
OBJECTIVES = {
    "binary:logistic": ("classification", "logistic"),
    "binary:logitraw": ("classification", "logistic"),
    "multi:softprob": ("classification", "softmax"),
    "multi:softmax": ("classification", "softmax"),
    "reg:squarederror": ("regression", "identity"),
    "reg:linear": ("regression", "identity"),
    "reg:absoluteerror": ("regression", "identity"),
    "reg:pseudohubererror": ("regression", "identity"),
    "reg:squaredlogerror": ("regression", "identity"),
    "reg:quantileerror": ("regression", "identity"),
}

__all__ = ["from_xgboost", "parse_xgboost", "load_xgboost_json"]


def _require_xgboost(why: str):
    try:
        import xgboost
    except ImportError:
        raise TreegenError(f"{why} needs xgboost, which is not installed; install it with: pip install xgboost") from None
    return xgboost


def load_xgboost_json(source) -> tuple[dict, object | None]:
    """The model's JSON document and, when available, an XGBoost ``Booster`` of it.

    ``source``: an ``XGBClassifier``/``XGBRegressor``, a ``Booster``, a parsed JSON ``dict``, or a path
    to a ``.json`` / ``.ubj`` model file (UBJSON is read with xgboost)."""
    booster = None
    if isinstance(source, dict):
        doc = source
    elif isinstance(source, (str, Path)):
        path = Path(source)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise TreegenError(f"cannot read {path}: {exc.strerror or exc}") from None
        if raw[:1] == b"{" and raw[1:2] != b"L":   # JSON text (UBJSON starts with '{' then a type marker)
            try:
                doc = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise TreegenError(f"{path} is not a valid XGBoost JSON model ({exc})") from None
            booster = _booster_or_none(raw)
        else:
            xgb = _require_xgboost(f"reading the UBJSON model {path.name}")
            booster = xgb.Booster()
            try:
                booster.load_model(bytearray(raw))
            except xgb.core.XGBoostError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
                raise TreegenError(f"{path} is not an XGBoost model ({first})") from None
            doc = json.loads(booster.save_raw("json"))
    elif hasattr(source, "get_booster") or type(source).__name__ == "Booster":
        booster = source.get_booster() if hasattr(source, "get_booster") else source
        try:
            doc = json.loads(booster.save_raw("json"))
        except Exception as exc:   # an unfitted sklearn wrapper raises NotFittedError / XGBoostError
            raise TreegenError(f"cannot read the XGBoost model: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    else:
        raise TreegenError(f"cannot import {type(source).__name__} as an XGBoost model")
    if not isinstance(doc, dict) or "learner" not in doc:
        raise TreegenError("not an XGBoost model: no 'learner' section")
    return doc, booster


def _booster_or_none(raw: bytes):
    try:
        import xgboost as xgb
    except ImportError:
        return None
    booster = xgb.Booster()
    try:
        booster.load_model(bytearray(raw))
    except xgb.core.XGBoostError:
        return None
    return booster


def parse_xgboost(source, classes=None) -> ImportedEnsemble:
    """Parse an XGBoost model (see the module documentation) into an :class:`ImportedEnsemble`."""
    doc, booster = load_xgboost_json(source)
    if classes is None and hasattr(source, "classes_"):
        classes = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(source.classes_).tolist()]
    try:
        learner = doc["learner"]
        objective = learner["objective"]["name"]
        params = learner["learner_model_param"]
        gb = learner["gradient_booster"]
        n_features = int(params["num_feature"])
        num_class = int(params.get("num_class", "0"))
        num_target = int(params.get("num_target", "1"))
    except (KeyError, TypeError, ValueError) as exc:
        raise TreegenError(f"not an XGBoost model: missing or bad field {exc}") from None
    booster_name = gb.get("name")
    if booster_name != "gbtree":
        raise TreegenError(f"XGBoost booster {booster_name!r} cannot be imported (only gbtree: "
                           "dart scales its trees at prediction, gblinear has no trees)")
    if objective not in OBJECTIVES:
        raise TreegenError(f"XGBoost objective {objective!r} cannot be imported (supported: "
                           f"{', '.join(OBJECTIVES)}: links identity, logistic, softmax)")
    if num_target != 1:
        raise TreegenError(f"XGBoost models with {num_target} targets cannot be imported (one target only)")
    task, link = OBJECTIVES[objective]
    n_outputs = max(num_class, 1)
    if task == "classification" and n_outputs == 1 and link != "logistic":
        raise TreegenError(f"XGBoost objective {objective!r}: unexpected single output")
    model = gb["model"]
    tree_info = [int(g) for g in model.get("tree_info", [])]
    jtrees = model.get("trees", [])
    if len(tree_info) != len(jtrees) or not jtrees:
        raise TreegenError("XGBoost model: no trees, or tree_info does not match the trees")
    trees = [_parse_tree(t, g, n_features) for t, g in zip(jtrees, tree_info)]
    if any(g >= n_outputs for g in tree_info):
        raise TreegenError("XGBoost model: a tree adds to an output the model does not have")

    base, how = _base_margin(doc, booster, objective, n_outputs, n_features)
    if task == "classification":
        classes = list(classes) if classes is not None else list(range(max(n_outputs, 2)))
        if len(classes) != max(n_outputs, 2):
            raise TreegenError(f"{len(classes)} classes given for an XGBoost model of {max(n_outputs, 2)}")
    else:
        classes = []
    names = learner.get("feature_names") or None
    if names is not None and len(names) != n_features:
        names = None
    meta = {
        "source": "XGBoost " + (".".join(map(str, doc["version"])) if isinstance(doc.get("version"), list) else "?"),
        "objective": objective,
        "base_margin": how,
    }
    ens = ImportedEnsemble(trees, n_features, "<", task=task, classes=classes, n_outputs=n_outputs, vote="sum",
                           base_score=[float(b) for b in base], link=link, sum_dtype="float32", binary_rule=">",
                           feature_names=[str(n) for n in names] if names else None, metadata=meta)
    if task == "classification" and n_outputs == 1 and objective == "binary:logistic":
        margin = _decision_margin(doc, booster, n_features)
        how = "XGBoost's own sigmoid, by bisection"
        if margin is None:
            margin, how = SIGMOID_MARGIN, "XGBoost 3.2's float32 sigmoid (xgboost not installed to check)"
        ens.decision_value = meta["decision_margin"] = margin
        meta["decision"] = f"class 1 iff float32 sigmoid(margin) > 0.5, i.e. margin > {margin!r} ({how})"
    elif task == "classification" and n_outputs == 1:   # binary:logitraw: predict() is the margin
        ens.decision_value = 0.5
        meta["decision"] = "class 1 iff margin > 0.5 (binary:logitraw: XGBClassifier.predict compares the margin)"
    elif task == "classification" and objective == "multi:softprob":
        ens.tie_gap = SOFTMAX_TIE_GAP
    return ens


def _parse_tree(t: dict, group: int, n_features: int) -> ImportedTree:
    try:
        left = np.asarray(t["left_children"], dtype=np.int64)
        right = np.asarray(t["right_children"], dtype=np.int64)
        feat = np.asarray(t["split_indices"], dtype=np.int64)
        cond = np.asarray(t["split_conditions"], dtype=np.float64)
        default_left = np.asarray(t["default_left"], dtype=bool)
        split_type = np.asarray(t.get("split_type", [0] * len(left)), dtype=np.int64)
        leaf_size = int(t.get("tree_param", {}).get("size_leaf_vector", "1"))
    except (KeyError, TypeError, ValueError) as exc:
        raise TreegenError(f"XGBoost model: bad tree ({exc})") from None
    if leaf_size > 1:
        raise TreegenError("XGBoost multi-target trees (vector leaves) cannot be imported")
    internal = left != LEAF
    if np.any(split_type[internal] != 0):
        raise TreegenError("XGBoost categorical splits cannot be imported (treegen tests numeric features only); "
                           "retrain with numeric (e.g. one-hot) features")
    # JSON numbers are printed float32 values: round each to its float32 (UBJSON holds float32 already)
    cond32 = cond.astype(np.float32).astype(np.float64)
    if np.any(~np.isfinite(cond32)):
        raise TreegenError("XGBoost model: non-finite threshold or leaf value")
    return ImportedTree(np.where(internal, feat, 0), np.where(internal, cond32, 0.0),
                        np.where(internal, left, LEAF), np.where(internal, right, LEAF),
                        np.where(internal, 0.0, cond32), np.where(internal, default_left, False), output=int(group))


def _zeroed(doc: dict) -> dict:
    """The model with every leaf value 0 (what XGBoost then predicts is its base margin)."""
    z = copy.deepcopy(doc)
    for t in z["learner"]["gradient_booster"]["model"]["trees"]:
        left = t["left_children"]
        t["split_conditions"] = [c if left[i] != -1 else 0.0 for i, c in enumerate(t["split_conditions"])]
        t["base_weights"] = [0.0] * len(t["base_weights"])
    return z


def _zero_booster(doc: dict, booster):
    if booster is None:
        return None
    import xgboost as xgb
    zb = xgb.Booster()
    zb.load_model(bytearray(json.dumps(_zeroed(doc)).encode()))
    return zb


def _base_margin(doc, booster, objective, n_outputs, n_features):
    zb = _zero_booster(doc, booster)
    if zb is not None:
        import xgboost as xgb
        m = zb.predict(xgb.DMatrix(np.zeros((1, n_features), dtype=np.float32)), output_margin=True)
        return np.asarray(m, dtype=np.float32).reshape(-1)[:n_outputs].astype(np.float64), \
            "read from XGBoost (the model with zero leaves)"
    # without xgboost: the printed base_score through the inverse link, in float32
    text = str(doc["learner"]["learner_model_param"].get("base_score", "0.5")).strip("[]")
    try:
        vals = [np.float32(float(v)) for v in text.split(",")]
    except ValueError:
        raise TreegenError(f"XGBoost model: bad base_score {text!r}") from None
    if len(vals) == 1:
        vals = vals * n_outputs
    if objective == "binary:logistic":
        vals = [np.float32(-np.log(np.float32(1) / v - np.float32(1))) for v in vals]
    return np.asarray(vals[:n_outputs], dtype=np.float64), \
        "base_score from the JSON through the inverse link in float32 (xgboost not installed: the printed " \
        "base_score is rounded to 7 digits, the margin may differ from XGBoost's by an ulp)"


def _decision_margin(doc, booster, n_features) -> float | None:
    """The largest float32 margin XGBoost's binary classifier still calls class 0 (its float32 sigmoid
    gives exactly 0.5 for margins up to about 1e-7): class 1 iff margin > this."""
    zb = _zero_booster(doc, booster)
    if zb is None:
        return None
    import xgboost as xgb

    lo, hi = 0, int(np.float32(1e-3).view(np.int32))  # bit patterns of non-negative float32 values
    while hi - lo > 1:
        bits = np.unique(np.linspace(lo, hi, 257).astype(np.int64))
        m = bits.astype(np.int32).view(np.float32)
        d = xgb.DMatrix(np.zeros((m.size, n_features), dtype=np.float32), base_margin=m)
        # base_margin replaces base_score: the prediction is sigmoid(m + 0 + ... + 0)
        p = zb.predict(d)
        above = bits[p > np.float32(0.5)]
        below = bits[p <= np.float32(0.5)]
        if above.size == 0 or below.size == 0:
            return 0.0
        lo, hi = int(below.max()), int(above.min())
    return float(np.int32(lo).view(np.float32))


def from_xgboost(model, X=None, feature_names=None, classes=None):
    """Import an XGBoost model as a treegen :class:`~treegen.core.model.Model` (vote "sum", float32 sums).

    Parameters
    ----------
    model : XGBClassifier, XGBRegressor, Booster, dict (the JSON document) or a path (.json / .ubj)
    X : array-like, optional
        Data the model will see: fits the input scaling of the q15 export (else the thresholds' range).
    feature_names, classes : optional
        Default to the model's feature names (``x0, x1, ...``) and classes (``classes_`` or ``0..K-1``).

    Returns
    -------
    Model
        ``decision_function`` == ``Booster.predict(output_margin=True)`` bit for bit for every float32
        input (NaN routed by the default directions); ``predict`` == ``XGBClassifier.predict`` (binary: the margin
        compared with ``boost.decision_threshold``; ``multi:softprob``: equal unless two margins lie within
        ``metadata["class_tie_gap"]``, see :mod:`treegen.importers.value_model`).
    """
    from treegen.importers.value_model import ensemble_to_model
    ens = parse_xgboost(model, classes=classes)
    return ensemble_to_model(ens, X=X, feature_names=feature_names, algorithm=f"xgboost-{ens.metadata['objective']}")
