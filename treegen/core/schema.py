"""Checking a decoded model file field by field, before any of it is used.

:func:`check_model_dict` walks the JSON object of a model file and raises
:class:`~treegen.core.errors.ModelFileError` with the message ``<field>: <problem>`` (for example
``trees[0].left[3]: child index 1.5 is not an integer``) at the first field whose type, size or
range is wrong. Everything is checked iteratively with bounded sizes, so a hostile file cannot make
the loader overflow a fixed-width integer, allocate without limit or recurse deeply: after this
check, building the numpy arrays of :class:`~treegen.core.tree.Tree` cannot fail or wrap.

The bounds (:mod:`treegen.core.limits`, shared with the writer) are far above any tree treegen builds or imports, and well inside what the
exporters, the device protocol and int64 class counts can represent.
"""

from __future__ import annotations

import math
import struct

from treegen.core.errors import ModelFileError
from treegen.core.limits import (MAX_ABS_VALUE, MAX_CELLS, MAX_CLASSES, MAX_COUNT, MAX_DEPTH,  # noqa: F401
                                  MAX_FEATURES, MAX_LABEL_INT, MAX_META_DEPTH, MAX_NAME, MAX_NODES, MAX_TREES)

FORMAT = "treegen-model"
FORMAT_VERSION = 1
SCALING_METHODS = ("q15", "minmax")
MODEL_FIELDS = ("format", "format_version", "feature_names", "classes", "scaling", "trees", "metadata", "vote",
                "input_contract", "task", "boost")
TREE_FIELDS = ("n_features", "n_classes", "weights", "threshold", "left", "right", "leaf_class", "class_counts",
               "raw_threshold", "leaf_value", "missing_left")
VOTES = ("hard", "soft", "mean", "sum")            # optional model field "vote" (default hard)
CLASS_VOTES = ("hard", "soft")                     # votes over classification trees (leaf classes)
VALUE_VOTES = ("mean", "sum")                      # votes over value trees (leaf_value)
CONTRACTS = ("float32", "integer", "q15")          # optional model field "input_contract" (null: derived)
TASKS = ("classification", "regression")           # optional model field "task" (default classification)
BOOST_FIELDS = ("base_score", "tree_output", "link", "sum_dtype")
BOOST_OPTIONAL = ("decision_threshold", "scale", "bias")   # decision_threshold (one output; absent: raw > 0);
#                                                  scale / bias: raw = scale * sum + bias after the trees
DECISION_FIELDS = ("value", "rule")
DECISION_RULES = (">", ">=")                       # boost.decision_threshold.rule
FLT_MAX = 3.4028234663852886e38
LINKS = ("identity", "logistic", "softmax")        # boost.link
SUM_DTYPES = ("float32", "float64")                # boost.sum_dtype


def _fail(field: str, problem: str):
    raise ModelFileError(f"{field}: {problem}")


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _int(value, field: str, lo: int, hi: int, what: str = "value") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and math.isfinite(value):
            _fail(field, f"{what} {value!r} is not an integer")
        _fail(field, f"{what} must be an integer, got {_kind(value)}")
    if not lo <= value <= hi:
        shown = value if abs(value) < 10**30 else f"of {len(str(abs(value)))} digits"
        _fail(field, f"{what} {shown} " + (f"does not match the model ({lo})" if lo == hi
                                            else f"is out of range {lo}..{hi}"))
    return value


def _number(value, field: str, what: str = "value") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(field, f"{what} must be a number, got {_kind(value)}")
    if isinstance(value, int):
        if abs(value) > MAX_ABS_VALUE:
            _fail(field, f"{what} is too large (more than {MAX_ABS_VALUE:g} in magnitude)")
        return float(value)
    if not math.isfinite(value):
        _fail(field, f"{what} {value!r} is not finite")
    if abs(value) > MAX_ABS_VALUE:
        _fail(field, f"{what} {value!r} is too large (more than {MAX_ABS_VALUE:g} in magnitude)")
    return value


def _list(value, field: str, lo: int, hi: int) -> list:
    if not isinstance(value, list):
        _fail(field, f"must be a list, got {_kind(value)}")
    if not lo <= len(value) <= hi:
        _fail(field, f"has {len(value)} entries, expected " + (f"{lo} (does not match the model)" if lo == hi
                                                              else f"{lo}..{hi}"))
    return value


def _dict(value, field: str) -> dict:
    if not isinstance(value, dict):
        _fail(field, f"must be an object, got {_kind(value)}")
    return value


def _known(d: dict, keys: tuple, field: str) -> None:
    for key in d:
        if key not in keys:
            _fail(f"{field}.{key}" if field else str(key), "unknown field")


def _get(d: dict, key: str, field: str):
    if key not in d:
        _fail(f"{field}.{key}" if field else key, "missing")
    return d[key]


def _name(value, field: str, what: str) -> str:
    if not isinstance(value, str):
        _fail(field, f"{what} must be a string, got {_kind(value)}")
    if len(value) > MAX_NAME:
        _fail(field, f"{what} is longer than {MAX_NAME} characters")
    return value


def check_metadata(meta, field: str = "metadata") -> None:
    """Free-form JSON, bounded in nesting; the keys treegen reads have their expected types."""
    _dict(meta, field)
    stack = [(meta, field, 1)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_META_DEPTH:
            _fail(where, f"nested deeper than {MAX_META_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_LABEL_INT:
            _fail(where, "integer is out of the 64-bit range")
    for key in ("algorithm", "dataset", "label_column", "treegen_version", "target_name"):
        if meta.get(key) is not None:
            _name(meta[key], f"{field}.{key}", key)
    acc = meta.get("train_accuracy")
    if acc is not None:
        acc = _number(acc, f"{field}.train_accuracy", "accuracy")
        if not 0.0 <= acc <= 1.0:
            _fail(f"{field}.train_accuracy", f"accuracy {acc!r} is not a fraction in 0..1")
    if meta.get("n_train") is not None:
        _int(meta["n_train"], f"{field}.n_train", 0, 1 << 40, "row count")
    for key in ("params", "efti_params"):
        if meta.get(key) is not None:
            _dict(meta[key], f"{field}.{key}")


def check_scaling(d, n_features: int, field: str = "scaling") -> None:
    d = _dict(d, field)
    _known(d, ("method", "offset", "scale"), field)
    method = d.get("method", "minmax")
    if method not in SCALING_METHODS:
        _fail(f"{field}.method", f"unknown scaling method {method!r} (expected one of {', '.join(SCALING_METHODS)})")
    offset = _list(_get(d, "offset", field), f"{field}.offset", n_features, n_features)
    scale = _list(_get(d, "scale", field), f"{field}.scale", n_features, n_features)
    for j in range(n_features):
        _number(offset[j], f"{field}.offset[{j}]", "offset")
        s = _number(scale[j], f"{field}.scale[{j}]", "scale")
        # a zero scale is how 'minmax' encodes a constant feature (always 0 after scaling)
        if s < 0 or (s == 0 and method != "minmax"):
            _fail(f"{field}.scale[{j}]", f"scale {s!r} must be > 0" + (
                "" if method != "minmax" else " (or 0 for a constant feature)"))


def check_tree(t, n_features: int, n_classes: int, field: str, value: bool = False) -> None:
    """One tree; ``value``: a value tree (``leaf_value`` required, one count column, leaf_class 0)."""
    t = _dict(t, field)
    _known(t, TREE_FIELDS, field)
    if value:
        n_classes = 1
    elif t.get("leaf_value") is not None:
        _fail(f"{field}.leaf_value", "only the trees of a model with vote 'mean' or 'sum' have leaf values")
    _int(_get(t, "n_features", field), f"{field}.n_features", n_features, n_features, "feature count")
    _int(_get(t, "n_classes", field), f"{field}.n_classes", n_classes, n_classes, "class count")
    left = _list(_get(t, "left", field), f"{field}.left", 1, MAX_NODES)
    n = len(left)
    if n * max(n_features, n_classes) > MAX_CELLS:
        _fail(field, f"{n} nodes x {max(n_features, n_classes)} columns is more than {MAX_CELLS} cells")
    right = _list(_get(t, "right", field), f"{field}.right", n, n)
    threshold = _list(_get(t, "threshold", field), f"{field}.threshold", n, n)
    leaf_class = _list(_get(t, "leaf_class", field), f"{field}.leaf_class", n, n)
    weights = _list(_get(t, "weights", field), f"{field}.weights", n, n)
    counts = _list(_get(t, "class_counts", field), f"{field}.class_counts", n, n)
    raw = t.get("raw_threshold")                   # optional: an imported model's source thresholds
    if raw is not None:
        raw = _list(raw, f"{field}.raw_threshold", n, n)
        for i in range(n):   # "inf" / "-inf": a library's every-value-left test (JSON has no infinity)
            if raw[i] not in ("inf", "-inf"):
                _number(raw[i], f"{field}.raw_threshold[{i}]", "raw threshold")
    if value:
        values = _list(_get(t, "leaf_value", field), f"{field}.leaf_value", n, n)
        for i in range(n):
            _number(values[i], f"{field}.leaf_value[{i}]", "leaf value")
    missing = t.get("missing_left")                # optional: where a NaN input goes at each node
    if missing is not None:
        missing = _list(missing, f"{field}.missing_left", n, n)
        for i in range(n):
            if not isinstance(missing[i], bool):
                _fail(f"{field}.missing_left[{i}]", f"must be true or false, got {_kind(missing[i])}")
    for i in range(n):
        lo = _int(left[i], f"{field}.left[{i}]", -1, n - 1, "child index")
        ro = _int(right[i], f"{field}.right[{i}]", -1, n - 1, "child index")
        if (lo == -1) != (ro == -1):
            _fail(f"{field}.left[{i}]", "node has exactly one child")
        if lo == 0 or ro == 0:
            _fail(f"{field}.{'left' if lo == 0 else 'right'}[{i}]", "child index 0 is the root")
        if missing is not None and lo == -1 and missing[i]:
            _fail(f"{field}.missing_left[{i}]", "a leaf routes no missing values (must be false)")
        _number(threshold[i], f"{field}.threshold[{i}]", "threshold")
        if value:
            if _int(leaf_class[i], f"{field}.leaf_class[{i}]", 0, MAX_CLASSES, "class index") != 0:
                _fail(f"{field}.leaf_class[{i}]", "a value tree has leaf_class 0 at every node")
        else:
            _int(leaf_class[i], f"{field}.leaf_class[{i}]", 0, n_classes - 1, "class index")
        row = _list(weights[i], f"{field}.weights[{i}]", n_features, n_features)
        for j in range(n_features):
            _number(row[j], f"{field}.weights[{i}][{j}]", "weight")
        row = _list(counts[i], f"{field}.class_counts[{i}]", n_classes, n_classes)
        for j in range(n_classes):
            _int(row[j], f"{field}.class_counts[{i}][{j}]", 0, MAX_COUNT, "count")
    # structure: every node reached exactly once from the root, depth bounded (iterative walk)
    seen = bytearray(n)
    stack = [(0, 0)]
    while stack:
        node, depth = stack.pop()
        if seen[node]:
            _fail(field, f"node {node} is reached twice (cycle or shared child)")
        seen[node] = 1
        if left[node] != -1:
            if depth + 1 > MAX_DEPTH:
                _fail(field, f"deeper than {MAX_DEPTH} levels")
            stack.append((left[node], depth + 1))
            stack.append((right[node], depth + 1))
    if not all(seen):
        _fail(field, f"node {seen.index(0)} is not reachable from the root")


def check_boost(boost, n_trees: int, task: str, n_classes: int, field: str = "boost") -> None:
    """The ``boost`` object of a model with vote ``sum`` (see :mod:`treegen.core.model`)."""
    boost = _dict(boost, field)
    _known(boost, BOOST_FIELDS + BOOST_OPTIONAL, field)
    for key in BOOST_FIELDS:
        _get(boost, key, field)
    base = _list(boost["base_score"], f"{field}.base_score", 1, MAX_CLASSES)
    n_out = len(base)
    for k in range(n_out):
        _number(base[k], f"{field}.base_score[{k}]", "base score")
    if task == "regression" and n_out != 1:
        _fail(f"{field}.base_score", f"a regression model has one output, not {n_out}")
    if task == "classification" and n_out == 1 and n_classes != 2:
        _fail(f"{field}.base_score", f"one output (binary) needs 2 classes, the model has {n_classes}")
    if task == "classification" and n_out > 1 and n_out != n_classes:
        _fail(f"{field}.base_score", f"{n_out} outputs for {n_classes} classes (one output per class, or one "
                                     f"for 2 classes)")
    outputs = _list(boost["tree_output"], f"{field}.tree_output", n_trees, n_trees)
    for k in range(n_trees):
        out = _int(outputs[k], f"{field}.tree_output[{k}]", 0, MAX_CLASSES, "output index")
        if out >= n_out:
            _fail(f"{field}.tree_output[{k}]", f"output index {out} is out of range 0..{n_out - 1}")
    if boost["link"] not in LINKS:
        _fail(f"{field}.link", f"must be one of {', '.join(LINKS)}, got {boost['link']!r}")
    if task == "regression" and boost["link"] != "identity":
        _fail(f"{field}.link", f"a regression model's link is identity, not {boost['link']!r}")
    if boost["link"] == "softmax" and n_out < 2:
        _fail(f"{field}.link", "softmax needs two or more outputs")
    if boost["sum_dtype"] not in SUM_DTYPES:
        _fail(f"{field}.sum_dtype", f"must be one of {', '.join(SUM_DTYPES)}, got {boost['sum_dtype']!r}")
    if "scale" in boost:
        _number(boost["scale"], f"{field}.scale", "scale")
    if "bias" in boost:
        bias = _list(boost["bias"], f"{field}.bias", n_out, n_out)
        for k in range(n_out):
            _number(bias[k], f"{field}.bias[{k}]", "bias")
    if "decision_threshold" in boost:
        check_decision_threshold(boost["decision_threshold"], boost["sum_dtype"], task, n_out,
                                 f"{field}.decision_threshold")


def check_decision_threshold(dt, sum_dtype: str, task: str, n_out: int, field: str) -> None:
    """``boost.decision_threshold`` ``{"value": v, "rule": ">" | ">="}``: a binary classifier says class 1
    iff ``raw[0] rule v``; ``v`` is a value of the sum precision (a float32 sum is compared with a float32)."""
    dt = _dict(dt, field)
    _known(dt, DECISION_FIELDS, field)
    for key in DECISION_FIELDS:
        _get(dt, key, field)
    if task != "classification" or n_out != 1:
        _fail(field, "only a binary classifier (one output) has a decision threshold")
    value = _number(dt["value"], f"{field}.value", "threshold")
    if sum_dtype == "float32" and (abs(value) > FLT_MAX or struct.unpack("<f", struct.pack("<f", value))[0] != value):
        _fail(f"{field}.value", f"threshold {value!r} is not a float32 value (the sums are float32)")
    if dt["rule"] not in DECISION_RULES:
        _fail(f"{field}.rule", f"must be one of {', '.join(DECISION_RULES)}, got {dt['rule']!r}")


def check_task_vote(task, vote: str, has_boost: bool) -> None:
    """The combinations of ``task``, ``vote`` and ``boost`` a model may have."""
    if task not in TASKS:
        _fail("task", f"must be one of {', '.join(TASKS)}, got {task!r}")
    if vote not in VOTES:
        _fail("vote", f"must be one of {', '.join(VOTES)}, got {vote!r}")
    if task == "regression" and vote not in VALUE_VOTES:
        _fail("vote", f"a regression model combines its trees by 'mean' or 'sum', not {vote!r}")
    if task == "classification" and vote == "mean":
        _fail("vote", "'mean' combines regression trees (a classification model votes hard, soft or sum)")
    if vote == "sum" and not has_boost:
        _fail("boost", "missing (a model with vote 'sum' needs its base scores, tree outputs, link and sum dtype)")
    if vote != "sum" and has_boost:
        _fail("boost", f"only a model with vote 'sum' has boost parameters (this one votes {vote!r})")


def check_model_dict(d) -> None:
    """Raise :class:`ModelFileError` ``<field>: <problem>`` at the first invalid field of a model file."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ModelFileError("not a treegen model file")
    version = d.get("format_version")
    if isinstance(version, bool) or version != FORMAT_VERSION:
        raise ModelFileError(
            f"unsupported model format version {version!r} (this treegen reads version {FORMAT_VERSION})")
    _known(d, MODEL_FIELDS, "")
    task = d.get("task", "classification")
    vote = d.get("vote", "hard")
    check_task_vote(task, vote, d.get("boost") is not None)
    if d.get("input_contract") is not None and d["input_contract"] not in CONTRACTS:
        _fail("input_contract", f"must be one of {', '.join(CONTRACTS)} or null, got {d['input_contract']!r}")
    names = _list(_get(d, "feature_names", ""), "feature_names", 1, MAX_FEATURES)
    for j, name in enumerate(names):
        _name(name, f"feature_names[{j}]", "feature name")
    if task == "regression":
        classes = _list(_get(d, "classes", ""), "classes", 0, MAX_CLASSES)
        if classes:
            _fail("classes", f"a regression model has no class labels, got {len(classes)}")
    else:
        classes = _list(_get(d, "classes", ""), "classes", 1, MAX_CLASSES)
    seen = set()
    for i, c in enumerate(classes):
        where = f"classes[{i}]"
        if isinstance(c, str):
            _name(c, where, "class label")
        elif isinstance(c, int) and not isinstance(c, bool):
            _int(c, where, -MAX_LABEL_INT - 1, MAX_LABEL_INT, "class label")
        elif isinstance(c, float):
            _number(c, where, "class label")
        else:
            _fail(where, f"class label must be an integer, a number or a string, got {_kind(c)}")
        key = repr(c)
        if key in seen:
            _fail(where, f"class label {c!r} is not unique")
        seen.add(key)
    check_scaling(_get(d, "scaling", ""), len(names))
    trees = _list(_get(d, "trees", ""), "trees", 1, MAX_TREES)
    for k, t in enumerate(trees):
        check_tree(t, len(names), len(classes), f"trees[{k}]", value=vote in VALUE_VOTES)
    if vote == "sum":
        check_boost(d["boost"], len(trees), task, len(classes))
    if d.get("metadata") is not None:
        check_metadata(d["metadata"])
