"""Parse a Treelite model (a checkpoint written by ``treelite.Model.serialize(path)`` /
``serialize_bytes()``, or a ``treelite.Model``) into an :class:`~treegen.importers.ensemble.ImportedEnsemble`.

The treelite package reads the checkpoint (``treelite.Model.deserialize``) and dumps it as JSON
(``dump_as_json``); treegen parses that JSON itself, checking every index and count before use.

Mapping (Treelite 4.x):

* a ``numerical_test_node`` sends ``x op threshold`` left (``op`` ``<`` / ``<=``; ``>`` / ``>=`` are the
  negations of ``<=`` / ``<`` with the children swapped); NaN goes to ``default_left`` (swapped with
  the children); ``threshold_type`` float32 or float64 (the threshold's own precision);
* a leaf holds a scalar, or a vector over the classes (``class_id`` -1: one tree per class here);
* ``class_id`` / ``target_id`` give the output each tree adds to; ``num_target`` must be 1;
* a boosted model (``average_tree_output`` false): the sum in ``leaf_output_type`` precision, the base
  score first (the order of XGBoost and of every treegen import). Treelite's own GTIL and TL2cgen add
  ``base_scores`` last, in double, then round to float32: for a float32 model with a base score that
  is not 0 their margin can differ from XGBoost's (and treegen's) by an ulp (measured: 23 % of random
  rows of a binary XGBoost model); Treelite also recomputes XGBoost's base margin in double from the
  printed ``base_score`` (one ulp from XGBoost's float32 margin). Regression and multiclass models
  with an exact base (0, or a float32 value) are the same model as the direct import;
* an averaged model (``average_tree_output``, scikit-learn forests): a regressor is vote ``mean``
  (the float64 sum in tree order divided by the number of trees); an averaged *classifier* is refused
  (treegen imports forest classifiers as class-count trees: import the scikit-learn model itself);
* ``postprocessor`` ``sigmoid`` (binary, ``sigmoid_alpha`` 1): class 1 iff the margin exceeds the
  float sigmoid's 0.5 point (float32 sums ``0x1.8p-24`` as XGBoost, float64 ``0x1.8p-53``);
  ``softmax`` / ``identity_multiclass``: the first largest output (softmax: ``tie_gap`` of the float
  softmax); ``identity``: regression.

Refused in one line naming the field: categorical splits, ``==`` tests, multi-target models,
learning-to-rank and isolation forests, other postprocessors, averaged classifiers.
"""

from __future__ import annotations

from typing import NamedTuple

import json
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_CLASSES, MAX_FEATURES, MAX_NODES, MAX_TREES
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree
from treegen.importers.validate import Fields

F32_SIGMOID_MARGIN = 1.5 * 2.0 ** -24
F64_SIGMOID_MARGIN = 1.5 * 2.0 ** -53
TIE_GAP = {"float32": 2.0 ** -22, "float64": 2.0 ** -51}

__all__ = ["from_treelite", "parse_treelite", "load_treelite_json", "looks_like_treelite"]


#: the field checks every importer shares (types, integer ranges, finite numbers, list lengths)
_F = Fields("Treelite model")


def _fail(where: str, problem: str):
    raise TreegenError(f"Treelite model: {where}: {problem}")


def looks_like_treelite(head: bytes) -> bool:
    """A Treelite 4.x checkpoint starts with its version: three little-endian int32 (major 4)."""
    if len(head) < 12:
        return False
    major, minor, patch = (int.from_bytes(head[i:i + 4], "little") for i in (0, 4, 8))
    return major == 4 and minor < 100 and patch < 100


class TreeliteBytes(NamedTuple):
    """A checkpoint already read (``treegen import`` reads a file once: a pipe works) and its name."""
    raw: bytes
    name: str


def load_treelite_json(source) -> dict:
    """The JSON dump of a Treelite model: ``source`` a ``treelite.Model``, a checkpoint path, its bytes
    (or :class:`TreeliteBytes`), or the parsed dump (``dict``)."""
    if isinstance(source, dict):
        return source
    if isinstance(source, TreeliteBytes):
        try:
            return load_treelite_json(bytes(source.raw))
        except TreegenError as exc:
            raise TreegenError(str(exc).replace("the bytes", source.name, 1)) from None
    try:
        import treelite
    except ImportError:
        raise TreegenError("reading a Treelite checkpoint needs treelite, which is not installed; install it "
                           "with: pip install treelite") from None
    model = source
    if isinstance(source, (str, Path, bytes, bytearray)):
        try:
            if isinstance(source, (bytes, bytearray)):
                model = treelite.Model.deserialize_bytes(bytes(source))
            else:
                path = Path(source)
                if not path.is_file():
                    raise TreegenError(f"{path}: model file not found")
                model = treelite.Model.deserialize(str(path))
        except TreegenError:
            raise
        except Exception as exc:   # TreeliteError on a damaged checkpoint
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TreegenError(f"{source if not isinstance(source, (bytes, bytearray)) else 'the bytes'} "
                               f"is not a readable Treelite checkpoint ({first[:200]})") from None
    if not hasattr(model, "dump_as_json"):
        raise TreegenError(f"cannot import {type(model).__name__} as a Treelite model")
    try:
        return json.loads(model.dump_as_json(pretty_print=False))
    except (ValueError, RecursionError) as exc:
        raise TreegenError(f"Treelite model: its JSON dump is unreadable ({exc})") from None


def _parse_tree(t, where: str, n_features: int, n_values: int, f32_thr: bool, f32_leaf: bool):
    """(feature, threshold, op, left, right, missing_left, leaf values (n_nodes, n_values)) in node-id order."""
    if not isinstance(t, dict):
        _fail(where, "expected an object")
    if t.get("has_categorical_split"):
        _fail(f"{where}.has_categorical_split", "categorical splits cannot be imported (numeric features only)")
    nodes = _F.list(t.get("nodes"), f"{where}.nodes", 0, MAX_NODES)
    n = len(nodes)
    if n == 0 or _F.int(t.get("num_nodes", n), f"{where}.num_nodes", 1, MAX_NODES) != n:
        _fail(f"{where}.num_nodes", f"{t.get('num_nodes')} does not match the {n} nodes listed")
    feat = np.zeros(n, dtype=np.int64)
    thr = np.zeros(n)
    left = np.full(n, LEAF, dtype=np.int64)
    right = np.full(n, LEAF, dtype=np.int64)
    miss = np.zeros(n, dtype=bool)
    vals = np.zeros((n, n_values))
    ops = [""] * n
    seen = np.zeros(n, dtype=bool)
    for j, nd in enumerate(nodes):
        w = f"{where}.nodes[{j}]"
        if not isinstance(nd, dict):
            _fail(w, "expected an object")
        i = _F.int(nd.get("node_id"), f"{w}.node_id", 0, n - 1)
        if seen[i]:
            _fail(f"{w}.node_id", f"node {i} is listed twice")
        seen[i] = True
        if "leaf_value" in nd:
            v = nd["leaf_value"]
            v = v if isinstance(v, list) else [v]
            if len(v) != n_values:
                _fail(f"{w}.leaf_value", f"{len(v)} values, expected {n_values}")
            vals[i] = [_F.number(x, f"{w}.leaf_value") for x in v]
            if f32_leaf:
                vals[i] = vals[i].astype(np.float32)
            continue
        kind = nd.get("node_type")
        if kind != "numerical_test_node":
            _fail(f"{w}.node_type", f"{kind!r:.40} cannot be imported (numerical tests only)")
        op = nd.get("comparison_op")
        if op not in ("<", "<=", ">", ">="):
            _fail(f"{w}.comparison_op", f"{op!r:.10} cannot be imported (<, <=, >, >=)")
        feat[i] = _F.int(nd.get("split_feature_id"), f"{w}.split_feature_id", 0, n_features - 1, "feature index")
        t_ = _F.number(nd.get("threshold"), f"{w}.threshold")
        if f32_thr:
            if abs(t_) > float(np.finfo(np.float32).max):
                _fail(f"{w}.threshold", f"{t_!r} is outside the float32 range")
            t_ = float(np.float32(t_))
        thr[i] = t_
        lc = _F.int(nd.get("left_child"), f"{w}.left_child", 1, n - 1, "child index")
        rc = _F.int(nd.get("right_child"), f"{w}.right_child", 1, n - 1, "child index")
        dl = nd.get("default_left", False)
        if not isinstance(dl, bool):
            _fail(f"{w}.default_left", f"expected true or false, got {dl!r:.20}")
        if op in (">", ">="):       # x > t left  <=>  not (x <= t) left: the <= test with the children swapped
            lc, rc, dl = rc, lc, not dl
            op = "<=" if op == ">" else "<"
        left[i], right[i], miss[i], ops[i] = lc, rc, dl, op
    return feat, thr, ops, left, right, miss, vals


def parse_treelite(source, classes=None) -> ImportedEnsemble:
    """Parse a Treelite model (see the module documentation) into an :class:`ImportedEnsemble`."""
    d = load_treelite_json(source)
    if not isinstance(d, dict) or "trees" not in d or "task_type" not in d:
        raise TreegenError("not a Treelite model dump: no 'trees' / 'task_type'")
    n_features = _F.int(d.get("num_feature"), "num_feature", 1, MAX_FEATURES)
    if _F.int(d.get("num_target", 1), "num_target", 1, MAX_CLASSES) != 1:
        _fail("num_target", f"{d.get('num_target')} targets: multi-target models cannot be imported")
    task_type = d["task_type"]
    num_class = _F.list(d.get("num_class", [1]), "num_class", 0, 1)
    n_class = _F.int(num_class[0] if num_class else 1, "num_class[0]", 1, MAX_CLASSES)
    post = d.get("postprocessor")
    thr_type, leaf_type = d.get("threshold_type"), d.get("leaf_output_type")
    for key, v in (("threshold_type", thr_type), ("leaf_output_type", leaf_type)):
        if v not in ("float32", "float64"):
            _fail(key, f"{v!r:.20} (float32 or float64)")
    averaged = d.get("average_tree_output") is True
    if task_type == "kRegressor" and post == "identity":
        task, link, n_out = "regression", "identity", 1
    elif task_type == "kBinaryClf" and post == "sigmoid" and n_class == 1:
        task, link, n_out = "classification", "logistic", 1
    elif task_type == "kMultiClf" and post in ("softmax", "identity_multiclass") and n_class >= 2:
        task, link, n_out = "classification", "softmax", n_class
    else:
        _fail("task_type", f"{task_type!r:.30} with postprocessor {post!r:.30} and {n_class} classes cannot be "
              "imported (regressors: identity; binary: sigmoid; multiclass: softmax / identity_multiclass)")
    if post == "sigmoid" and d.get("sigmoid_alpha", 1.0) != 1.0:
        _fail("sigmoid_alpha", f"{d.get('sigmoid_alpha')!r:.20}: only 1 (the plain logistic) can be imported")
    if averaged and task != "regression":
        _fail("average_tree_output", "an averaged (forest) classifier cannot be imported from Treelite: treegen "
              "imports forest classifiers as class-count trees, import the scikit-learn model itself")
    jtrees = _F.list(d["trees"], "trees", 0, MAX_TREES)
    if not jtrees:
        _fail("trees", "the model has no trees")
    shape = _F.list(d.get("leaf_vector_shape", [1, 1]), "leaf_vector_shape", 0, 2)
    if len(shape) != 2 or shape[0] != 1:
        _fail("leaf_vector_shape", f"{shape!r:.40}: one target only")
    n_values = _F.int(shape[1], "leaf_vector_shape[1]", 1, MAX_CLASSES)
    class_id = _F.list(d.get("class_id", [0] * len(jtrees)), "class_id", 0, MAX_TREES)
    if len(class_id) != len(jtrees):
        _fail("class_id", f"{len(class_id)} entries for {len(jtrees)} trees")
    base = [_F.number(b, f"base_scores[{k}]") for k, b in
            enumerate(_F.list(d.get("base_scores", [0.0] * n_out), "base_scores", 0, MAX_CLASSES))]
    if len(base) != n_out:
        _fail("base_scores", f"{len(base)} values for {n_out} outputs")
    if averaged and any(base):
        _fail("base_scores", "an averaged model with a base score cannot be imported")
    f32_thr, f32_leaf = thr_type == "float32", leaf_type == "float32"
    if f32_thr != f32_leaf:
        _fail("threshold_type", f"{thr_type} thresholds with {leaf_type} leaves cannot be imported (one precision)")
    trees, ops = [], set()
    for i, t in enumerate(jtrees):
        w = f"trees[{i}]"
        cid = _F.int(class_id[i], f"class_id[{i}]", -1, n_out - 1)
        if (cid == -1) != (n_values > 1) or (n_values > 1 and n_values != n_out):
            _fail(f"class_id[{i}]", f"{cid} with leaves of {n_values} values for {n_out} outputs")
        feat, thr, tops, left, right, miss, vals = _parse_tree(t, w, n_features, n_values, f32_thr, f32_leaf)
        ops.update(o for o in tops if o)
        outs = range(n_out) if cid == -1 else [cid]
        for col, k in enumerate(outs):
            trees.append(ImportedTree(feat, thr, left, right, np.where(left == LEAF, vals[:, col], 0.0), miss,
                                      output=int(k)))
    if len(ops) > 1:
        _fail("comparison_op", f"the trees mix the tests {sorted(ops)}: one comparison per model only")
    op = ops.pop() if ops else "<="
    if len(trees) > MAX_TREES:
        _fail("trees", f"{len(trees)} trees (one per class), more than the {MAX_TREES} treegen accepts")
    sum_dtype = "float32" if f32_leaf else "float64"
    if task == "classification":
        n_cls = max(n_out, 2)
        classes = list(classes) if classes is not None else list(range(n_cls))
        if len(classes) != n_cls:
            raise TreegenError(f"{len(classes)} classes given for a Treelite model of {n_cls}")
    else:
        classes = []
    if f32_leaf:   # the base score in the sum precision (Treelite stores a double)
        base = [float(np.float32(b)) for b in base]
    meta = {"source": "Treelite checkpoint", "objective": f"{task_type}/{post}",
            "base_order": "base score first in the sum precision (Treelite's GTIL / TL2cgen add it last, in "
                          "double: see treegen.importers.treelite_json)"}
    ens = ImportedEnsemble(trees, n_features, op, task=task, classes=classes, n_outputs=n_out,
                           vote="mean" if averaged else "sum", base_score=base, link=link, sum_dtype=sum_dtype,
                           binary_rule=">", metadata=meta)
    if task == "classification" and n_out == 1:
        ens.decision_value = F32_SIGMOID_MARGIN if f32_leaf else F64_SIGMOID_MARGIN
        meta["decision"] = f"class 1 iff {sum_dtype} sigmoid(margin) > 0.5, i.e. margin > {ens.decision_value!r}"
    elif task == "classification" and post == "softmax":
        ens.tie_gap = TIE_GAP[sum_dtype]
    return ens


def from_treelite(model, X=None, feature_names=None, classes=None):
    """Import a Treelite model (a ``treelite.Model``, a checkpoint path or bytes) as a treegen
    :class:`~treegen.core.model.Model` (see the module documentation for the mapping)."""
    from treegen.importers.value_model import ensemble_to_model
    ens = parse_treelite(model, classes=classes)
    return ensemble_to_model(ens, X=X, feature_names=feature_names, algorithm=f"treelite-{ens.metadata['objective']}")
