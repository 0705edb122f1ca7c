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
from treegen.core.limits import MAX_CLASSES, MAX_DEPTH, MAX_FEATURES, MAX_NAME, MAX_NODES, MAX_TREES
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree
from treegen.importers.reader import NamedBytes, loads_json, loads_ubjson, read_source
from treegen.importers.validate import Fields, show

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

__all__ = ["from_xgboost", "parse_xgboost", "load_xgboost_json", "check_xgboost_doc", "XGBoostBytes"]


def _require_xgboost(why: str):
    try:
        import xgboost
    except ImportError:
        raise TreegenError(f"{why} needs xgboost, which is not installed; install it with: pip install xgboost") from None
    return xgboost


class XGBoostBytes(NamedBytes):
    """The bytes of an XGBoost model file (JSON or UBJSON)."""

    name = "XGBoost model"


def _decode(raw: bytes, name: str):
    """JSON text or UBJSON (``{`` then a type marker), both decoded by treegen, bounded."""
    head = raw.lstrip()
    if head[:1] == b"{" and head[1:2] not in (b"L", b"U", b"i", b"l", b"I", b"$", b"#"):
        return loads_json(raw, name), "json"
    if raw[:1] != b"{":
        raise TreegenError(f"{name}: not an XGBoost model (neither JSON nor UBJSON)")
    return loads_ubjson(raw, name), "ubj"


def load_xgboost_json(source) -> tuple[dict, object | None, dict]:
    """The model's JSON document, an XGBoost ``Booster`` of it when xgboost is installed, and the
    document's checked fields (:func:`check_xgboost_doc`; ``"name"``: the name messages give the model).

    ``source``: an ``XGBClassifier``/``XGBRegressor``, a ``Booster``, a parsed JSON ``dict``, the bytes
    of a file (:class:`XGBoostBytes`) or a path to a ``.json`` / ``.ubj`` model file. A file is decoded
    and checked by treegen *before* xgboost loads it (a hostile index would crash XGBoost's predictor);
    a file XGBoost itself refuses is refused."""
    raw = None
    if isinstance(source, dict):
        doc, name = source, "XGBoost model"
    elif isinstance(source, (bytes, bytearray)):
        raw, name = bytes(source), getattr(source, "name", "XGBoost model")
        doc, _ = _decode(raw, name)
    elif isinstance(source, (str, Path)):
        name = str(source)
        raw = read_source(source)
        doc, _ = _decode(raw, name)
    elif hasattr(source, "get_booster") or type(source).__name__ == "Booster":
        name = "XGBoost model"
        try:
            booster = source.get_booster() if hasattr(source, "get_booster") else source
            doc = json.loads(booster.save_raw("json"))
        except Exception as exc:   # an unfitted sklearn wrapper raises NotFittedError / XGBoostError
            raise TreegenError(f"cannot read the XGBoost model: {str(exc).splitlines()[0] if str(exc) else exc}") from None
        return doc, booster, check_xgboost_doc(doc, Fields(name))
    else:
        raise TreegenError(f"cannot import {type(source).__name__} as an XGBoost model")
    checked = check_xgboost_doc(doc, Fields(name))
    return doc, _library_booster(raw if raw is not None else json.dumps(doc).encode(), name), checked


def _library_booster(raw: bytes, name: str):
    """XGBoost's own reading of the checked file (None: xgboost not installed); refused if XGBoost refuses it."""
    try:
        import xgboost as xgb
    except ImportError:
        return None
    booster = xgb.Booster()
    try:
        booster.load_model(bytearray(raw))
    except xgb.core.XGBoostError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise TreegenError(f"{name}: XGBoost refuses the file ({first[:200]})") from None
    return booster


NODE_ARRAYS = ("left_children", "right_children", "parents", "split_indices", "split_conditions", "default_left",
               "split_type", "base_weights", "loss_changes", "sum_hessian")
ROOT_PARENT = 2147483647        # XGBoost's parent of the root
F32_MAX = float(np.finfo(np.float32).max)


def check_xgboost_doc(doc, v: Fields) -> dict:
    """Check the fields of an XGBoost JSON document that treegen or XGBoost's predictor reads, before
    either uses them (types, integers, ranges, every index against its array, equal node-array lengths,
    finite float32 thresholds, the limits of :mod:`treegen.core.limits`). Returns the checked
    parameters: ``n_features``, ``num_class``, ``objective``, ``tree_info``, ``trees`` (per tree a dict
    of int64 / float64 node arrays)."""
    v.obj(doc, "")
    if "learner" not in doc:
        v.fail("", "not an XGBoost model: no 'learner' section")
    learner = v.obj(doc["learner"], "learner")
    obj = v.obj(v.get(learner, "objective", "learner"), "learner.objective")
    objective = v.text(v.get(obj, "name", "learner.objective"), "learner.objective.name", 200)
    P = "learner.learner_model_param"
    params = v.obj(v.get(learner, "learner_model_param", "learner"), P)
    n_features = v.int_text(v.get(params, "num_feature", P), f"{P}.num_feature", 1, MAX_FEATURES, "feature count")
    num_class = v.int_text(params.get("num_class", "0"), f"{P}.num_class", 0, MAX_CLASSES, "class count")
    num_target = v.int_text(params.get("num_target", "1"), f"{P}.num_target", 0, MAX_CLASSES, "target count")
    base_text = v.text(params.get("base_score", "0.5"), f"{P}.base_score", 1 << 20)
    base = [v.number_text(b, f"{P}.base_score", "base score") for b in base_text.strip().strip("[]").split(",")]
    if "feature_names" in learner:
        names = v.list(learner["feature_names"], "learner.feature_names", 0, MAX_FEATURES)
        for i, n in enumerate(names):
            v.text(n, f"learner.feature_names[{i}]", MAX_NAME)
    if "feature_types" in learner:
        types = v.list(learner["feature_types"], "learner.feature_types", 0, MAX_FEATURES)
        for i, t in enumerate(types):
            if v.text(t, f"learner.feature_types[{i}]", 16) == "c":
                raise TreegenError(f"{v.source}: XGBoost categorical features cannot be imported (treegen tests "
                                   "numeric features only); retrain with numeric (e.g. one-hot) features")
    G = "learner.gradient_booster"
    gb = v.obj(v.get(learner, "gradient_booster", "learner"), G)
    booster_name = gb.get("name")
    if booster_name != "gbtree":
        raise TreegenError(f"{v.source}: XGBoost booster {show(booster_name)} cannot be imported (only gbtree: "
                           "dart scales its trees at prediction, gblinear has no trees)")
    if objective not in OBJECTIVES:
        raise TreegenError(f"{v.source}: XGBoost objective {show(objective)} cannot be imported (supported: "
                           f"{', '.join(OBJECTIVES)}: links identity, logistic, softmax)")
    if num_target != 1:
        raise TreegenError(f"{v.source}: XGBoost models with {num_target} targets cannot be imported (one target only)")
    task, link = OBJECTIVES[objective]
    if link == "softmax" and num_class < 2:
        v.fail(f"{P}.num_class", f"class count {num_class} for objective {objective} (at least 2)")
    if link != "softmax" and num_class > 1:
        v.fail(f"{P}.num_class", f"class count {num_class} for objective {objective} (one output)")
    n_outputs = max(num_class, 1)
    if len(base) not in (1, n_outputs):
        v.fail(f"{P}.base_score", f"{len(base)} values for {n_outputs} outputs")
    if objective == "binary:logistic" and not all(0.0 < b < 1.0 for b in base):
        v.fail(f"{P}.base_score", f"base score {base_text!r} is not a probability in (0, 1)")
    M = f"{G}.model"
    model = v.obj(v.get(gb, "model", G), M)
    jtrees = v.list(v.get(model, "trees", M), f"{M}.trees", 1, MAX_TREES)
    tree_info = v.ints(v.get(model, "tree_info", M), f"{M}.tree_info", 0, n_outputs - 1, "output", n=len(jtrees))
    if "gbtree_model_param" in model:
        gp = v.obj(model["gbtree_model_param"], f"{M}.gbtree_model_param")
        if "num_trees" in gp:
            v.int_text(gp["num_trees"], f"{M}.gbtree_model_param.num_trees", len(jtrees), len(jtrees), "tree count")
        if "num_parallel_tree" in gp:
            v.int_text(gp["num_parallel_tree"], f"{M}.gbtree_model_param.num_parallel_tree", 1, MAX_TREES,
                       "parallel tree count")
    if "iteration_indptr" in model:
        ptr = v.ints(model["iteration_indptr"], f"{M}.iteration_indptr", 0, len(jtrees), "tree index")
        if ptr.size < 2 or ptr[0] != 0 or ptr[-1] != len(jtrees) or np.any(np.diff(ptr) < 0):
            v.fail(f"{M}.iteration_indptr", f"must rise from 0 to the {len(jtrees)} trees")
    if "cats" in model:
        cats = v.obj(model["cats"], f"{M}.cats")
        for key, val in cats.items():
            if v.list(val, f"{M}.cats.{key}"):
                raise TreegenError(f"{v.source}: XGBoost categorical features cannot be imported (treegen tests "
                                   "numeric features only); retrain with numeric (e.g. one-hot) features")
    trees = [_check_tree(t, i, f"{M}.trees[{i}]", n_features, v) for i, t in enumerate(jtrees)]
    return {"name": v.source, "n_features": n_features, "num_class": num_class, "objective": objective, "tree_info": tree_info,
            "trees": trees, "task": task, "link": link, "n_outputs": n_outputs, "base": base}


def _check_tree(t, index: int, field: str, n_features: int, v: Fields) -> dict:
    t = v.obj(t, field)
    tp = v.obj(v.get(t, "tree_param", field), f"{field}.tree_param")
    n = v.int_text(v.get(tp, "num_nodes", f"{field}.tree_param"), f"{field}.tree_param.num_nodes", 1, MAX_NODES,
                   "node count")
    v.int_text(tp.get("num_feature", str(n_features)), f"{field}.tree_param.num_feature", 0, n_features,
               "feature count")
    leaf_size = v.int_text(tp.get("size_leaf_vector", "1"), f"{field}.tree_param.size_leaf_vector", 0, MAX_CLASSES,
                           "leaf vector size")
    if leaf_size > 1:
        raise TreegenError(f"{v.source}: XGBoost multi-target trees (vector leaves) cannot be imported")
    if "num_deleted" in tp:
        v.int_text(tp["num_deleted"], f"{field}.tree_param.num_deleted", 0, n, "deleted node count")
    if v.int(v.get(t, "id", field), f"{field}.id", 0, MAX_TREES, "tree id") != index:
        v.fail(f"{field}.id", f"tree id {t['id']} at position {index} (XGBoost places each tree by its id)")
    arrays = {k: v.get(t, k, field) for k in NODE_ARRAYS if k in t or k not in ("split_type",)}
    for k, a in arrays.items():
        v.list(a, f"{field}.{k}")
    v.same_length(arrays, field, n)
    left = v.ints(arrays["left_children"], f"{field}.left_children", -1, n - 1, "child index")
    right = v.ints(arrays["right_children"], f"{field}.right_children", -1, n - 1, "child index")
    parents = v.ints(arrays["parents"], f"{field}.parents", -1, ROOT_PARENT, "parent index")
    feat = v.ints(arrays["split_indices"], f"{field}.split_indices", 0, n_features - 1, "feature index")
    cond = v.numbers(arrays["split_conditions"], f"{field}.split_conditions", "threshold or leaf value")
    big = np.flatnonzero(np.abs(cond) > F32_MAX)
    if big.size:
        v.fail(f"{field}.split_conditions[{big[0]}]", f"value {float(cond[big[0]])!r} is beyond the float32 range")
    default_left = v.ints(arrays["default_left"], f"{field}.default_left", 0, 1, "flag")
    split_type = (v.ints(arrays["split_type"], f"{field}.split_type", 0, 1, "split type")
                  if "split_type" in arrays else np.zeros(n, dtype=np.int64))
    for k in ("base_weights", "loss_changes", "sum_hessian"):
        w = v.numbers(arrays[k], f"{field}.{k}", finite=False)
        big = np.flatnonzero(np.abs(w) > F32_MAX)
        if big.size and np.isfinite(w[big[0]]):
            v.fail(f"{field}.{k}[{big[0]}]", f"value {float(w[big[0]])!r} is beyond the float32 range")
    for k in ("categories", "categories_nodes", "categories_segments", "categories_sizes"):
        if k in t and v.list(t[k], f"{field}.{k}"):
            raise TreegenError(f"{v.source}: XGBoost categorical splits cannot be imported (treegen tests numeric "
                               "features only); retrain with numeric (e.g. one-hot) features")
    internal = left != LEAF
    bad = np.flatnonzero(internal != (right != LEAF))
    if bad.size:
        v.fail(f"{field}.right_children[{bad[0]}]", f"child index {int(right[bad[0]])} where the left child is "
                                                   f"{int(left[bad[0]])} (a node has two children or none)")
    if np.any(split_type != 0):     # XGBoost checks a categorical node's categories even at a leaf
        raise TreegenError(f"{v.source}: XGBoost categorical splits cannot be imported (treegen tests numeric "
                           "features only); retrain with numeric (e.g. one-hot) features")
    if parents[0] != ROOT_PARENT and parents[0] != -1:
        v.fail(f"{field}.parents[0]", f"parent {int(parents[0])} of the root (expected {ROOT_PARENT})")
    seen = np.zeros(n, dtype=bool)
    for side, kids in (("left_children", left), ("right_children", right)):
        for node in np.flatnonzero(internal):
            c = int(kids[node])
            if c == 0 or seen[c]:
                v.fail(f"{field}.{side}[{node}]", f"child index {c} is the root or another node's child")
            seen[c] = True
            if parents[c] != node:
                v.fail(f"{field}.parents[{c}]", f"parent {int(parents[c])}, but node {node} names it as its child")
    _check_depth(left, right, field, v)
    return {"left": left, "right": right, "feature": feat, "cond": cond, "default_left": default_left != 0,
            "internal": internal}


def _check_depth(left, right, field: str, v: Fields) -> None:
    depth = {0: 0}
    stack = [0]
    while stack:
        node = stack.pop()
        if left[node] == LEAF:
            continue
        d = depth[node] + 1
        if d > MAX_DEPTH:
            v.fail(field, f"deeper than {MAX_DEPTH} levels")
        for c in (int(left[node]), int(right[node])):
            depth[c] = d
            stack.append(c)


def parse_xgboost(source, classes=None) -> ImportedEnsemble:
    """Parse an XGBoost model (see the module documentation) into an :class:`ImportedEnsemble`."""
    doc, booster, c = load_xgboost_json(source)
    if classes is None and hasattr(source, "classes_"):
        classes = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(source.classes_).tolist()]
    learner = doc["learner"]
    objective, n_features, n_outputs, task, link = c["objective"], c["n_features"], c["n_outputs"], c["task"], c["link"]
    trees = [_tree(t, int(g)) for t, g in zip(c["trees"], c["tree_info"])]
    base, how = _base_margin(doc, booster, objective, n_outputs, n_features, c["base"])
    if task == "classification":
        classes = list(classes) if classes is not None else list(range(max(n_outputs, 2)))
        if len(classes) != max(n_outputs, 2):
            raise TreegenError(f"{len(classes)} classes given for an XGBoost model of {max(n_outputs, 2)}")
    else:
        classes = []
    names = learner.get("feature_names") or None
    if names is not None and len(names) != n_features:
        names = None
    version = doc.get("version")
    meta = {
        "source": "XGBoost " + (".".join(str(x) for x in version[:3]) if isinstance(version, list)
                                and all(type(x) is int for x in version[:3]) else "?"),
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


def _tree(t: dict, group: int) -> ImportedTree:
    internal = t["internal"]
    # JSON numbers are printed float32 values: round each to its float32 (UBJSON holds float32 already)
    cond32 = t["cond"].astype(np.float32).astype(np.float64)
    return ImportedTree(np.where(internal, t["feature"], 0), np.where(internal, cond32, 0.0),
                        np.where(internal, t["left"], LEAF), np.where(internal, t["right"], LEAF),
                        np.where(internal, 0.0, cond32), np.where(internal, t["default_left"], False),
                        output=int(group))


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


def _base_margin(doc, booster, objective, n_outputs, n_features, base):
    zb = _zero_booster(doc, booster)
    if zb is not None:
        import xgboost as xgb
        m = zb.predict(xgb.DMatrix(np.zeros((1, n_features), dtype=np.float32)), output_margin=True)
        return np.asarray(m, dtype=np.float32).reshape(-1)[:n_outputs].astype(np.float64), \
            "read from XGBoost (the model with zero leaves)"
    # without xgboost: the printed base_score through the inverse link, in float32
    vals = [np.float32(b) for b in base]
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
