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
from treegen.core.limits import MAX_CLASSES, MAX_DEPTH, MAX_FEATURES, MAX_NODES, MAX_TREES
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree
from treegen.importers.reader import NamedBytes, read_source
from treegen.importers.validate import Fields, show

SOFTMAX_TIE_GAP = 2.0 ** -51    # double softmax: outputs further apart never round to one probability
IDENTITY_OBJECTIVES = ("regression", "regression_l2", "regression_l1", "huber", "fair", "quantile", "mape",
                       "l2", "l1", "mse", "mae")
MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2

__all__ = ["from_lightgbm", "parse_lightgbm", "load_lightgbm_text", "LightGBMBytes"]


class LightGBMBytes(NamedBytes):
    """The bytes of a LightGBM model text file."""

    name = "LightGBM model"


def load_lightgbm_text(source) -> tuple[str, str]:
    """The model text and the name messages give it, of an ``LGBMModel``, a ``Booster``, a path to a
    model text file, its bytes (:class:`LightGBMBytes`), or the text."""
    if isinstance(source, (bytes, bytearray)):
        name = getattr(source, "name", "LightGBM model")
        try:
            return bytes(source).decode("utf-8"), name
        except UnicodeDecodeError as exc:
            raise TreegenError(f"{name}: not UTF-8 text (byte {exc.start}): not a LightGBM model text file") from None
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
        return load_lightgbm_text(LightGBMBytes(read_source(source), str(source)))
    if isinstance(source, str):
        return source, "LightGBM model"
    booster = getattr(source, "booster_", None) if hasattr(source, "fit") else source
    if booster is None:
        raise TreegenError(f"{type(source).__name__} is not fitted; call fit() first")
    if not hasattr(booster, "model_to_string"):
        raise TreegenError(f"cannot import {type(source).__name__} as a LightGBM model")
    return booster.model_to_string(), "LightGBM model"


MAX_TREE_LINES = 22     # LightGBM reads at most this many key lines of a tree, up to its first blank line


def _sections(text: str, v: Fields) -> tuple[dict, list[dict]]:
    """The header and the trees (key -> value text), read as LightGBM reads them: a tree's keys are the
    lines right after ``Tree=N`` up to the first blank line (anything but blank lines after that, a line
    without ``=`` or more than MAX_TREE_LINES keys is refused: LightGBM would read it differently); at
    most MAX_TREES trees, counted while reading; a duplicated key is refused. Each tree also gets
    ``_size``: the characters of its block (what ``tree_sizes`` states)."""
    header: dict = {}
    trees: list[dict] = []
    cur, where = header, "header"
    pos, block_start, closed = 0, None, False
    for raw_line in text.splitlines(keepends=True):
        line = raw_line.strip()
        at, pos = pos, pos + len(raw_line)
        if line.startswith("end of trees"):
            if trees:
                trees[-1]["_size"] = at - block_start
            break
        if raw_line.startswith("Tree="):      # as LightGBM finds a tree: at the start of the line
            if len(trees) >= MAX_TREES:
                v.fail("Tree", f"more than {MAX_TREES} trees, the most treegen imports")
            if trees:
                trees[-1]["_size"] = at - block_start
            block_start, closed = at, False
            cur, where = {}, f"Tree={len(trees)}"
            v.int_text(line[5:], where, len(trees), len(trees), "tree number")
            trees.append(cur)
            continue
        if cur is not header:
            line = raw_line.rstrip("\r\n")
            if not line:
                closed = True
                continue
            if closed:
                v.fail(where, f"a line after the tree's blank line ({show(line)})")
            if "=" not in line:
                v.fail(where, f"a line without '=' ({show(line)})")
            if len(cur) >= MAX_TREE_LINES:
                v.fail(where, f"more than {MAX_TREE_LINES} lines")
            if line.split("=", 1)[0] != line.split("=", 1)[0].strip():
                v.fail(where, f"a key with spaces ({show(line)})")
        elif line:       # a header line, read as LightGBM reads it: no trimming, one '=' but in two keys
            line = raw_line.rstrip("\r\n")
            if line.count("=") > 1 and line.split("=", 1)[0] not in ("feature_names", "monotone_constraints"):
                v.fail("header", f"a line with several '=' ({show(line)})")
            if line.split("=", 1)[0] != line.split("=", 1)[0].strip():
                v.fail("header", f"a key with spaces ({show(line)})")
        if "=" in line:
            k, val = line.split("=", 1)
            if k in cur:
                v.fail(f"{where}.{k}", "appears twice")
            cur[k] = val
    else:
        if trees:
            v.fail("", "no 'end of trees' line (the file is cut short)")
    return header, trees


def _check_parameters(text: str, v: Fields) -> None:
    """The ``parameters:`` section after the trees: every line ``[name: value]`` up to ``end of
    parameters`` (LightGBM 4 crashes with SIGSEGV on a line cut short, ``[use_quant``)."""
    tail = text.split("\nend of trees", 1)[-1]
    if "\nparameters:" not in tail:
        return
    for i, line in enumerate(tail.split("\nparameters:", 1)[1].splitlines()):
        if line == "end of parameters":
            return
        if line and not (line.startswith("[") and line.endswith("]") and ": " in line):
            v.fail("parameters", f"line {show(line)} is not '[name: value]'")


def parse_lightgbm(source, classes=None) -> ImportedEnsemble:
    """Parse a LightGBM model (see the module documentation) into an :class:`ImportedEnsemble`."""
    text, name = load_lightgbm_text(source)
    v = Fields(name)
    if classes is None and hasattr(source, "classes_"):
        classes = [c.item() if isinstance(c, np.generic) else c for c in np.asarray(source.classes_).tolist()]
    if not text.lstrip().startswith("tree"):
        v.fail("", "not a LightGBM model text (no 'tree' header)")
    header, jtrees = _sections(text, v)
    _check_parameters(text, v)
    n_features = v.int_text(v.get(header, "max_feature_idx", ""), "max_feature_idx", 0, MAX_FEATURES - 1,
                            "feature index") + 1
    num_class = v.int_text(v.get(header, "num_class", ""), "num_class", 1, MAX_CLASSES, "class count")
    per_iter = v.int_text(header.get("num_tree_per_iteration", str(num_class)), "num_tree_per_iteration", 1,
                          MAX_CLASSES, "trees per iteration")
    v.int_text(v.get(header, "label_index", ""), "label_index", 0, MAX_FEATURES, "label index")
    names = v.tokens(v.get(header, "feature_names", ""), "feature_names", n_features)
    v.tokens(v.get(header, "feature_infos", ""), "feature_infos", n_features)
    if "monotone_constraints" in header:
        v.int_tokens(header["monotone_constraints"], "monotone_constraints", n_features, -1, 1, "constraint")
    objective = v.text(header.get("objective", ""), "objective").split()
    if "average_output" in text.split("Tree=", 1)[0]:
        raise TreegenError(f"{name}: LightGBM rf (averaged output) models cannot be imported (boosted gbdt/goss only)")
    if not objective:
        v.fail("objective", "missing")
    obj_name = objective[0]
    opts = {}
    for o in objective[1:]:
        if ":" in o:
            k, val = o.split(":", 1)
            if k in opts:
                v.fail("objective", f"option {show(k)} appears twice")
            opts[k] = val
    if obj_name in ("binary", "cross_entropy", "xentropy"):
        sigmoid = v.number_text(opts.get("sigmoid", "1"), "objective", "sigmoid")
        if sigmoid != 1.0:
            raise TreegenError(f"{name}: LightGBM binary objective with sigmoid:{opts['sigmoid']} cannot be imported "
                               "(sigmoid 1 only)")
        task, link, n_outputs = "classification", "logistic", 1
    elif obj_name in ("multiclass", "softmax"):
        task, link, n_outputs = "classification", "softmax", num_class
        if num_class < 2:
            v.fail("num_class", f"class count {num_class} for a multiclass objective")
        v.int_text(v.get(opts, "num_class", "objective"), "objective", num_class, num_class, "num_class")
    elif obj_name in IDENTITY_OBJECTIVES:
        if "sqrt" in objective:
            raise TreegenError(f"{name}: LightGBM regression with reg_sqrt cannot be imported (the output is squared)")
        task, link, n_outputs = "regression", "identity", 1
    else:
        raise TreegenError(f"{name}: LightGBM objective {show(obj_name)} cannot be imported (supported: binary, "
                           "multiclass and identity-link regression)")
    if link != "softmax" and num_class != 1:
        v.fail("num_class", f"class count {num_class} for objective {obj_name} (one output)")
    if per_iter != n_outputs:
        raise TreegenError(f"{name}: LightGBM model: {per_iter} trees per iteration for {n_outputs} outputs")
    if not jtrees:
        raise TreegenError(f"{name}: LightGBM model: no trees")
    if len(jtrees) % per_iter:
        v.fail("Tree", f"{len(jtrees)} trees, not a multiple of the {per_iter} trees per iteration")
    if "tree_sizes" in header:
        sizes = v.int_tokens(header["tree_sizes"], "tree_sizes", len(jtrees), 0, len(text), "size")
        for i, (size, t) in enumerate(zip(sizes.tolist(), jtrees)):
            if size != t["_size"]:
                v.fail(f"tree_sizes[{i}]", f"size {size}, but Tree={i} has {t['_size']} characters")
    trees = [_parse_tree(t, i % per_iter, n_features, f"Tree={i}", v) for i, t in enumerate(jtrees)]
    if task == "classification":
        classes = list(classes) if classes is not None else list(range(max(n_outputs, 2)))
        if len(classes) != max(n_outputs, 2):
            raise TreegenError(f"{len(classes)} classes given for a LightGBM model of {max(n_outputs, 2)}")
    else:
        classes = []
    meta = {"source": f"LightGBM model text {header.get('version', '?')[:20]}", "objective": " ".join(objective)}
    ens = ImportedEnsemble(trees, n_features, "<=", task=task, classes=classes, n_outputs=n_outputs, vote="sum",
                           base_score=[0.0] * n_outputs, link=link, sum_dtype="float64", binary_rule=">",
                           feature_names=names, metadata=meta)
    if task == "classification" and n_outputs == 1:
        ens.decision_value = meta["decision_margin"] = sigmoid_decision_margin()
        meta["decision"] = ("argmax([1 - p, p]), p = 1 / (1 + exp(-raw)) in double: class 1 iff raw > "
                            f"{meta['decision_margin']!r}")
    elif task == "classification":
        ens.tie_gap = SOFTMAX_TIE_GAP
    return ens


def _parse_tree(t: dict, output: int, n_features: int, field: str, v: Fields) -> ImportedTree:
    n_leaves = v.int_text(v.get(t, "num_leaves", field), f"{field}.num_leaves", 1, MAX_NODES // 2, "leaf count")
    n_cat = v.int_text(v.get(t, "num_cat", field), f"{field}.num_cat", 0, MAX_NODES, "categorical split count")
    if n_cat:
        raise TreegenError(f"{v.source}: LightGBM categorical splits cannot be imported (treegen tests numeric "
                           "features only)")
    if v.int_text(t.get("is_linear", "0"), f"{field}.is_linear", 0, 1, "flag"):
        raise TreegenError(f"{v.source}: LightGBM linear trees cannot be imported (constant leaves only)")
    if "shrinkage" in t:
        v.number_text(t["shrinkage"], f"{field}.shrinkage", "shrinkage")
    leaf_value = v.number_tokens(v.get(t, "leaf_value", field), f"{field}.leaf_value", n_leaves, "leaf value")
    for key in ("leaf_weight",):
        if key in t:
            v.number_tokens(t[key], f"{field}.{key}", n_leaves, key.replace("_", " "))
    if "leaf_count" in t:
        v.int_tokens(t["leaf_count"], f"{field}.leaf_count", n_leaves, 0, 1 << 62, "count")
    if n_leaves == 1:
        return ImportedTree([0], [0.0], [LEAF], [LEAF], leaf_value, np.zeros(1, dtype=bool), output=output)
    n_int = n_leaves - 1
    for key in ("split_gain", "internal_value", "internal_weight"):
        if key in t:
            v.number_tokens(t[key], f"{field}.{key}", n_int, key.replace("_", " "))
    if "internal_count" in t:
        v.int_tokens(t["internal_count"], f"{field}.internal_count", n_int, 0, 1 << 62, "count")
    feat = v.int_tokens(v.get(t, "split_feature", field), f"{field}.split_feature", n_int, 0, n_features - 1,
                        "feature index")
    # LightGBM writes +-inf thresholds for "every finite value to one side": kept (see le_thresholds)
    thr = v.number_tokens(v.get(t, "threshold", field), f"{field}.threshold", n_int, "threshold", finite=False)
    dtype = v.int_tokens(v.get(t, "decision_type", field), f"{field}.decision_type", n_int, 0, 15, "decision type")
    lc = v.int_tokens(v.get(t, "left_child", field), f"{field}.left_child", n_int, -n_leaves, n_int - 1, "child")
    rc = v.int_tokens(v.get(t, "right_child", field), f"{field}.right_child", n_int, -n_leaves, n_int - 1, "child")
    if np.any(dtype & 1):
        raise TreegenError(f"{v.source}: LightGBM categorical splits cannot be imported (treegen tests numeric "
                           "features only)")
    missing = (dtype >> 2) & 3
    if np.any(missing == 3):
        i = int(np.flatnonzero(missing == 3)[0])
        v.fail(f"{field}.decision_type[{i}]", f"decision type {int(dtype[i])}: unknown missing-value type 3")
    if np.any(missing == MISSING_ZERO):
        raise TreegenError(f"{v.source}: LightGBM models trained with zero_as_missing cannot be imported "
                           "(values near 0 take the default branch)")
    seen_node = np.zeros(n_int, dtype=bool)
    seen_leaf = np.zeros(n_leaves, dtype=bool)
    for side, kids in (("left_child", lc), ("right_child", rc)):
        for i, c in enumerate(kids.tolist()):
            if c == 0 or (c > 0 and seen_node[c]) or (c < 0 and seen_leaf[~c]):
                v.fail(f"{field}.{side}[{i}]", f"child {c} is the root or already another node's child")
            if c > 0:
                seen_node[c] = True
            else:
                seen_leaf[~c] = True
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
    _check_depth(left, right, field, v)
    return ImportedTree(feature, threshold, left, right, value, miss, output=output)


def _check_depth(left, right, field: str, v: Fields) -> None:
    depth = np.zeros(left.shape[0], dtype=np.int64)
    stack = [0]
    while stack:
        node = stack.pop()
        if left[node] == LEAF:
            continue
        if depth[node] >= MAX_DEPTH:
            v.fail(field, f"deeper than {MAX_DEPTH} levels")
        for c in (int(left[node]), int(right[node])):
            depth[c] = depth[node] + 1
            stack.append(c)


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
