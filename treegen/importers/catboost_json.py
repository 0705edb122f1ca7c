"""Parse a CatBoost model (``CatBoostClassifier`` / ``CatBoostRegressor`` / ``CatBoost``, a binary
``.cbm`` file, or its JSON form ``save_model(path, format="json")``) into an
:class:`~treegen.importers.ensemble.ImportedEnsemble`.

treegen reads the JSON itself; the ``catboost`` package only converts a ``.cbm`` file or a model object
to that JSON (its predictor is never used for the treegen model).

What CatBoost computes (checked bit for bit against ``predict(prediction_type="RawFormulaVal")`` on
random rows, +-64 float32 ulps around every border and the borders themselves, with NaN cells,
``tests/importers/test_import_catboost.py``):

* every input is a float32; a tree is *oblivious*: level ``i`` tests one ``(feature, border)`` and
  sets bit ``i`` of the leaf index iff ``float32(x) > border`` (``border`` a float32 value: the JSON
  prints it as a double holding a float32, rounded here to its float32); a value equal to the border
  gives bit 0;
* NaN, per feature ``nan_value_treatment``: ``AsFalse`` (``nan_mode="Min"``) -> bit 0, ``AsTrue``
  (``nan_mode="Max"``) -> bit 1, ``AsIs`` (a feature without NaN in training; ``nan_mode="Forbidden"``)
  -> ``NaN > border`` is false: bit 0;
* a leaf holds one double per output (``leaf_values[leaf * dim + k]``); the raw value of output ``k`` is
  the double sum in tree order from 0, *then* ``scale * sum + bias[k]`` (``get_scale_and_bias``; the
  multiplication skipped when the scale is 1): ``boost.scale`` / ``boost.bias`` of the treegen model;
* ``predict``: binary (``Logloss``, ``CrossEntropy``) class 1 iff raw > 0 (raw exactly 0 gives class 0,
  8.9e-16 class 1, checked); ``MultiClass``: the first largest raw value; regression: the raw value
  (identity-link losses only).

Each oblivious tree of depth ``d`` becomes a complete binary tree whose root tests level 0 and whose
depth-``i`` nodes test level ``i`` (the leaf reached is the same: the bits are independent); a
multiclass tree becomes one tree per output, in tree order.

Refused with a one-line reason naming the feature or field: categorical features, CTRs, one-hot
splits, text and embedding features, non-symmetric trees (``grow_policy`` Depthwise / Lossguide),
losses whose link is not identity / logistic / softmax (Poisson, Tweedie, MultiClassOneVsAll,
RMSEWithUncertainty, ranking), models over the size limits.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_CLASSES, MAX_FEATURES, MAX_NODES, MAX_TREES
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree
from treegen.importers.validate import Fields

MAX_DEPTH = 16                 # CatBoost's own limit for symmetric trees
CBM_MAGIC = b"CBM1"
BINARY_LOSSES = ("Logloss", "CrossEntropy")
MULTICLASS_LOSSES = ("MultiClass",)
IDENTITY_LOSSES = ("RMSE", "MAE", "Quantile", "Expectile", "MAPE", "Huber", "Lq", "LogCosh", "MultiQuantile",
                   "SurvivalAft")
NAN_BIT = {"AsFalse": False, "AsIs": False, "AsTrue": True}

__all__ = ["from_catboost", "parse_catboost", "load_catboost_json"]


#: the field checks every importer shares (types, integer ranges, finite numbers, list lengths)
_F = Fields("CatBoost model")


def _fail(where: str, problem: str):
    raise TreegenError(f"CatBoost model: {where}: {problem}")


def _require_catboost(why: str):
    try:
        import catboost
    except ImportError:
        raise TreegenError(f"{why} needs catboost, which is not installed; install it with: pip install catboost") \
            from None
    return catboost


def _json_of_catboost_object(model) -> dict:
    """The JSON of a CatBoost model object (written by catboost to a temporary file, read back here)."""
    if hasattr(model, "is_fitted") and not model.is_fitted():
        raise TreegenError(f"{type(model).__name__} is not fitted; call fit() first")
    fd, tmp = tempfile.mkstemp(suffix=".json", prefix="treegen-catboost-")
    os.close(fd)
    try:
        model.save_model(tmp, format="json")
        return _read_json(Path(tmp))
    finally:
        os.unlink(tmp)


def _read_json(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TreegenError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise TreegenError(f"{path} is not a valid CatBoost JSON model ({str(exc).splitlines()[0]})") from None


def cbm_to_json(raw: bytes, name: str) -> dict:
    """The JSON document of a CatBoost binary model given as bytes (read once by the caller: a pipe
    works); catboost only converts it, treegen parses the JSON."""
    cb = _require_catboost(f"reading the CatBoost binary model {name}")
    model = cb.CatBoost()
    try:
        model.load_model(blob=bytes(raw))
    except Exception as exc:   # CatBoostError on a damaged file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TreegenError(f"{name} is not a readable CatBoost model ({first[:200]})") from None
    return _json_of_catboost_object(model)


def load_catboost_json(source) -> dict:
    """The model's JSON document. ``source``: a CatBoost model object, a parsed ``dict``, or a path to a
    ``.cbm`` (converted to JSON with catboost) or ``.json`` model file."""
    if isinstance(source, dict):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            with open(path, "rb") as fh:
                head = fh.read(4)
        except OSError as exc:
            raise TreegenError(f"cannot read {path}: {exc.strerror or exc}") from None
        if head != CBM_MAGIC:
            return _read_json(path)
        cb = _require_catboost(f"reading the CatBoost binary model {path.name}")
        model = cb.CatBoost()
        try:
            model.load_model(str(path), format="cbm")
        except Exception as exc:   # CatBoostError on a damaged file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TreegenError(f"{path} is not a readable CatBoost model ({first})") from None
        return _json_of_catboost_object(model)
    if type(source).__module__.split(".")[0] == "catboost" and hasattr(source, "save_model"):
        return _json_of_catboost_object(source)
    raise TreegenError(f"cannot import {type(source).__name__} as a CatBoost model")


def _feature_name(f: dict, index: int) -> str:
    name = f.get("feature_id") if isinstance(f, dict) else None
    return f"{name!r} (index {index})" if name else f"index {index}"


def _features(doc: dict) -> tuple[list[str], np.ndarray]:
    """Feature names and the NaN bit of each float feature; refuses every other kind of feature."""
    info = _F.obj(doc.get("features_info"), "features_info")
    for kind, what in (("categorical_features", "categorical feature"), ("text_features", "text feature"),
                       ("embedding_features", "embedding feature")):
        feats = info.get(kind) or []
        if feats:
            f = feats[0]
            idx = f.get("flat_feature_index", f.get("feature_index", "?")) if isinstance(f, dict) else "?"
            _fail(f"features_info.{kind}", f"{what} {_feature_name(f, idx)} cannot be imported (treegen tests "
                  "numeric features only; retrain with it encoded as numbers, or without it)")
    if info.get("ctrs"):
        _fail("features_info.ctrs", "CTR features (from categorical features) cannot be imported")
    floats = _F.list(info.get("float_features"), "features_info.float_features", 0, MAX_FEATURES)
    if not floats:
        _fail("features_info.float_features", "the model has no float features")
    names, nan_bit = [], np.zeros(len(floats), dtype=bool)
    for i, f in enumerate(floats):
        where = f"features_info.float_features[{i}]"
        f = _F.obj(f, where)
        flat = _F.int(f.get("flat_feature_index", f.get("feature_index")), f"{where}.flat_feature_index", 0,
                    MAX_FEATURES - 1)
        if flat != i:
            _fail(f"{where}.flat_feature_index", f"{flat}, expected {i} (float features in input order)")
        treat = f.get("nan_value_treatment", "AsIs")
        if treat not in NAN_BIT:
            _fail(f"{where}.nan_value_treatment", f"unknown value {treat!r:.40} (AsIs, AsFalse, AsTrue)")
        nan_bit[i] = NAN_BIT[treat]
        name = f.get("feature_id") or ""
        names.append(str(name) if name else f"x{i}")
    if len(set(names)) != len(names):
        names = [f"x{i}" for i in range(len(names))]
    return names, nan_bit


def _loss(doc: dict) -> str:
    params = (doc.get("model_info") or {}).get("params")
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except json.JSONDecodeError:
            params = None
    loss = params.get("loss_function") if isinstance(params, dict) else None
    name = loss.get("type") if isinstance(loss, dict) else None
    if not isinstance(name, str):
        _fail("model_info.params.loss_function", "missing: the loss (hence the link) is unknown")
    return name


def _classes(doc: dict) -> list | None:
    cp = (doc.get("model_info") or {}).get("class_params")
    if not isinstance(cp, dict):
        return None
    names = cp.get("class_names")
    if not isinstance(names, list) or len(names) > MAX_CLASSES:
        return None
    return [c if isinstance(c, (int, str)) and not isinstance(c, bool) else str(c) for c in names]


def _oblivious_tree(t, where: str, dim: int, n_features: int, nan_bit: np.ndarray) -> list[ImportedTree]:
    t = _F.obj(t, where)
    splits = _F.list(t.get("splits", []), f"{where}.splits", 0, MAX_DEPTH)
    depth = len(splits)
    n_leaves = 1 << depth
    values = _F.list(t.get("leaf_values"), f"{where}.leaf_values", 0, n_leaves * dim)
    if len(values) != n_leaves * dim:
        _fail(f"{where}.leaf_values", f"{len(values)} values, expected {n_leaves} leaves x {dim} outputs "
              f"= {n_leaves * dim}")
    vals = np.asarray([_F.number(v, f"{where}.leaf_values[{i}]") for i, v in enumerate(values)]).reshape(n_leaves, dim)
    feat = np.zeros(depth, dtype=np.int64)
    border = np.zeros(depth)
    for i, s in enumerate(splits):
        sw = f"{where}.splits[{i}]"
        s = _F.obj(s, sw)
        kind = s.get("split_type", "FloatFeature")
        if kind != "FloatFeature":
            _fail(f"{sw}.split_type", f"{kind!r:.40} splits cannot be imported (only FloatFeature: categorical "
                  "one-hot and CTR splits need the categorical features)")
        feat[i] = _F.int(s.get("float_feature_index"), f"{sw}.float_feature_index", 0, n_features - 1,
                         "feature index")
        b = _F.number(s.get("border"), f"{sw}.border")
        if abs(b) > float(np.finfo(np.float32).max):
            _fail(f"{sw}.border", f"{b!r} is outside the float32 range")
        border[i] = float(np.float32(b))
    # complete binary tree, breadth first: node j (0-based) at depth i tests level i; its left child
    # (x <= border, bit 0) is 2j+1, its right child (bit 1) 2j+2; leaf bits: level i -> bit i
    n_inner = n_leaves - 1
    n = 2 * n_leaves - 1
    left = np.full(n, LEAF, dtype=np.int64)
    right = np.full(n, LEAF, dtype=np.int64)
    f_arr = np.zeros(n, dtype=np.int64)
    thr = np.zeros(n)
    miss = np.zeros(n, dtype=bool)
    leaf_index = np.zeros(n, dtype=np.int64)   # the CatBoost leaf index of each leaf node
    path_bits = np.zeros(n, dtype=np.int64)
    for j in range(n_inner):
        level = int(math.floor(math.log2(j + 1)))
        left[j], right[j] = 2 * j + 1, 2 * j + 2
        f_arr[j], thr[j] = feat[level], border[level]
        miss[j] = not nan_bit[feat[level]]      # NaN goes to bit 0 (left) unless the feature says AsTrue
        path_bits[2 * j + 1] = path_bits[j]
        path_bits[2 * j + 2] = path_bits[j] | (1 << level)
    leaf_index[n_inner:] = path_bits[n_inner:]
    out = []
    for k in range(dim):
        v = np.zeros(n)
        v[n_inner:] = vals[leaf_index[n_inner:], k]
        out.append(ImportedTree(f_arr, thr, left, right, v, miss, output=k))
    return out


def parse_catboost(source, classes=None) -> ImportedEnsemble:
    """Parse a CatBoost model (see the module documentation) into an :class:`ImportedEnsemble`."""
    doc = _F.obj(load_catboost_json(source), "the document")
    if classes is None and hasattr(source, "classes_") and getattr(source, "classes_", None) is not None:
        classes = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(source.classes_).tolist()]
    if "trees" in doc and "oblivious_trees" not in doc:
        _fail("trees", "non-symmetric trees (grow_policy Depthwise / Lossguide) cannot be imported; "
              "train with grow_policy='SymmetricTree' (the default)")
    if "oblivious_trees" not in doc or "features_info" not in doc:
        raise TreegenError("not a CatBoost JSON model: no 'oblivious_trees' / 'features_info'")
    names, nan_bit = _features(doc)
    n_features = len(names)
    loss = _loss(doc)
    if loss in BINARY_LOSSES:
        task, link, dim = "classification", "logistic", 1
    elif loss in MULTICLASS_LOSSES:
        task, link, dim = "classification", "softmax", 0
    elif loss in IDENTITY_LOSSES:
        task, link, dim = "regression", "identity", 1
    else:
        _fail("model_info.params.loss_function", f"loss {loss!r:.60} cannot be imported (supported: "
              f"{', '.join(BINARY_LOSSES + MULTICLASS_LOSSES + IDENTITY_LOSSES)}: links logistic, softmax, identity)")
    jtrees = _F.list(doc["oblivious_trees"], "oblivious_trees", 0, MAX_TREES)
    if not jtrees:
        _fail("oblivious_trees", "the model has no trees")
    sb = _F.list(doc.get("scale_and_bias", [1.0, [0.0]]), "scale_and_bias", 0, 2)
    if len(sb) != 2:
        _fail("scale_and_bias", f"expected [scale, [bias, ...]], got {len(sb)} entries")
    scale = _F.number(sb[0], "scale_and_bias[0]")
    bias_raw = sb[1] if isinstance(sb[1], list) else [sb[1]]
    bias = [_F.number(b, f"scale_and_bias[1][{i}]") for i, b in enumerate(_F.list(bias_raw, "scale_and_bias[1]", 0,
                                                                             MAX_CLASSES))]
    if dim == 0:   # multiclass: the dimension from the first tree's leaves
        t0 = _F.obj(jtrees[0], "oblivious_trees[0]")
        d0 = len(_F.list(t0.get("splits", []), "oblivious_trees[0].splits", 0, MAX_DEPTH))
        nv = len(_F.list(t0.get("leaf_values"), "oblivious_trees[0].leaf_values", 0, MAX_CLASSES << MAX_DEPTH))
        if nv % (1 << d0) or not 2 <= nv >> d0 <= MAX_CLASSES:
            _fail("oblivious_trees[0].leaf_values", f"{nv} values do not fit {1 << d0} leaves x 2+ classes")
        dim = nv >> d0
    if len(bias) == 1 and dim > 1:
        bias = bias * dim
    if len(bias) != dim:
        _fail("scale_and_bias[1]", f"{len(bias)} bias values for {dim} outputs")
    if len(jtrees) * dim > MAX_TREES:
        _fail("oblivious_trees", f"{len(jtrees)} trees x {dim} outputs = {len(jtrees) * dim} treegen trees, more "
              f"than the {MAX_TREES} treegen accepts")
    trees = []
    for i, t in enumerate(jtrees):
        d = len(_F.list(_F.obj(t, f"oblivious_trees[{i}]").get("splits", []), f"oblivious_trees[{i}].splits", 0,
                      MAX_DEPTH))
        if (2 << d) - 1 > MAX_NODES:
            _fail(f"oblivious_trees[{i}]", f"depth {d} is more than treegen accepts")
        trees.extend(_oblivious_tree(t, f"oblivious_trees[{i}]", dim, n_features, nan_bit))
    if task == "classification":
        n_cls = max(dim, 2)
        if classes is None:
            classes = _classes(doc)
        if classes is None or len(classes) != n_cls:
            classes = list(range(n_cls))
        classes = list(classes)
    else:
        classes = []
    meta = {"source": "CatBoost " + _version(doc), "objective": loss,
            "nan_treatment": "per feature: AsFalse/AsIs -> bit 0 (x <= border side), AsTrue -> bit 1"}
    if task == "classification" and dim == 1:
        meta["decision"] = "class 1 iff raw > 0 (CatBoostClassifier.predict)"
    return ImportedEnsemble(trees, n_features, "<=", task=task, classes=classes, n_outputs=dim, vote="sum",
                            base_score=[0.0] * dim, link=link, sum_dtype="float64", binary_rule=">",
                            decision_value=0.0, tie_gap=0.0, feature_names=names, metadata=meta,
                            scale=scale, bias=None if all(b == 0.0 for b in bias) and scale == 1.0 else bias)


def _version(doc: dict) -> str:
    text = str((doc.get("model_info") or {}).get("catboost_version_info", ""))
    for part in text.split():
        if part.startswith("tags/v"):
            return part[len("tags/v"):]
    return "?"


def from_catboost(model, X=None, feature_names=None, classes=None):
    """Import a CatBoost model as a treegen :class:`~treegen.core.model.Model` (vote "sum", double sums,
    then CatBoost's scale and bias).

    Parameters
    ----------
    model : CatBoostClassifier, CatBoostRegressor, CatBoost, dict (the JSON document) or a path (.cbm / .json)
    X : array-like, optional
        Data the model will see: fits the input scaling of the q15 export (else the borders' range).
    feature_names, classes : optional
        Default to the model's feature ids (``x0, x1, ...`` when it has none) and classes.

    Returns
    -------
    Model
        ``decision_function`` / ``predict_value`` == ``predict(prediction_type="RawFormulaVal")`` bit for
        bit for every float32 input (NaN routed by each feature's ``nan_value_treatment``); ``predict`` ==
        CatBoost's class (binary: raw > 0; multiclass: the first largest raw value).
    """
    from treegen.importers.value_model import ensemble_to_model
    ens = parse_catboost(model, classes=classes)
    return ensemble_to_model(ens, X=X, feature_names=feature_names, algorithm=f"catboost-{ens.metadata['objective']}")
