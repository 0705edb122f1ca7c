"""Parse an ONNX-ML ``TreeEnsembleRegressor`` / ``TreeEnsembleClassifier`` (what skl2onnx and onnxmltools
write) into an :class:`~treegen.importers.ensemble.ImportedEnsemble`.

What onnxruntime computes for a float model (``nodes_values`` float32; checked bit for bit against
onnxruntime with one intra-op thread and ``post_transform`` NONE):

* the input is float32; ``BRANCH_LEQ`` sends ``x <= v`` to the true branch, ``BRANCH_LT`` ``x < v``,
  ``BRANCH_GTE`` ``x >= v``, ``BRANCH_GT`` ``x > v``; a NaN goes to the true branch where
  ``nodes_missing_value_tracks_true`` is set, else to the false branch (every comparison with NaN is
  false). Each test is stored as treegen's ``x <= t32`` with the branches swapped where needed;
* aggregate ``SUM``: each output sums the weights of the leaves reached, tree by tree in tree-id order,
  in float32 from 0, and *then* adds ``base_values`` (stored as a last one-leaf tree, so the order is
  kept); a leaf that adds to several outputs becomes one tree per output (each output's order kept);
* ``post_transform`` ``NONE`` / ``LOGISTIC`` / ``SOFTMAX`` -> link identity / logistic / softmax;
* the label (measured with onnxruntime 1.32 on hand-made models): binary (one weight column) class 1
  iff the raw score ``> 0``, or ``> 0.5`` when no class weight is negative; several classes: the first
  largest raw score (before the post transform).

With several threads and many trees onnxruntime sums partial sums per thread, so its own last bit
depends on the thread count; treegen reproduces the one-thread order. Refused: ``AVERAGE`` / ``MIN`` /
``MAX`` aggregation, ``BRANCH_EQ`` / ``BRANCH_NEQ`` and set membership tests, double ``nodes_values``
(``*_as_tensor``), other post transforms, and the opset-5 ``TreeEnsemble`` operator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_CLASSES, MAX_FEATURES, MAX_TREES
from treegen.importers.reader import NamedBytes, read_source
from treegen.importers.validate import Fields, show
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree, le_threshold

OPS = ("TreeEnsembleRegressor", "TreeEnsembleClassifier")
LINKS = {"NONE": "identity", "LOGISTIC": "logistic", "SOFTMAX": "softmax"}

__all__ = ["parse_onnx", "from_onnx", "onnx_tree_node", "OnnxBytes"]


def _require_onnx():
    try:
        import onnx
    except ImportError:
        raise TreegenError("importing ONNX models needs onnx, which is not installed; install it with: "
                           "pip install onnx") from None
    return onnx


def onnx_tree_node(model):
    """The model's one TreeEnsembleRegressor / TreeEnsembleClassifier node."""
    nodes = [n for n in model.graph.node if n.domain == "ai.onnx.ml" and n.op_type in OPS + ("TreeEnsemble",)]
    if len(nodes) != 1:
        raise TreegenError(f"the ONNX graph has {len(nodes)} tree-ensemble operators (one expected)")
    if nodes[0].op_type == "TreeEnsemble":
        raise TreegenError("the ONNX-ML opset-5 TreeEnsemble operator cannot be imported (TreeEnsembleRegressor / "
                           "TreeEnsembleClassifier only)")
    return nodes[0]


class OnnxBytes(NamedBytes):
    """The bytes of an ONNX model file."""

    name = "ONNX model"


def _load(source):
    onnx = _require_onnx()
    if isinstance(source, (str, Path)):
        source = OnnxBytes(read_source(source), str(source))
    if isinstance(source, (bytes, bytearray)):
        name = getattr(source, "name", "ONNX model")
        try:
            model = onnx.load_model_from_string(bytes(source))
        except Exception as exc:   # a protobuf decode error: not an ONNX file
            raise TreegenError(f"{name} is not an ONNX model ({type(exc).__name__})") from None
        try:    # the graph as onnxruntime needs it (outputs that exist, ...), checked by onnx itself
            onnx.checker.check_model(model)
        except Exception as exc:   # onnx.checker.ValidationError and the protobuf errors it passes on
            text = " ".join(str(exc).split())[:200]
            raise TreegenError(f"{name} is not a valid ONNX model ({text})") from None
        return model, name
    if hasattr(source, "graph"):
        return source, "ONNX model"
    raise TreegenError(f"cannot import {type(source).__name__} as an ONNX model")


# attribute -> (ONNX attribute type, what); every other attribute of the node is refused
_INTS, _FLOATS, _STRINGS, _INT, _STRING = 7, 6, 8, 2, 3
ATTRIBUTES = {
    "nodes_treeids": _INTS, "nodes_nodeids": _INTS, "nodes_featureids": _INTS, "nodes_values": _FLOATS,
    "nodes_modes": _STRINGS, "nodes_truenodeids": _INTS, "nodes_falsenodeids": _INTS,
    "nodes_missing_value_tracks_true": _INTS, "nodes_hitrates": _FLOATS,
    "class_treeids": _INTS, "class_nodeids": _INTS, "class_ids": _INTS, "class_weights": _FLOATS,
    "target_treeids": _INTS, "target_nodeids": _INTS, "target_ids": _INTS, "target_weights": _FLOATS,
    "classlabels_int64s": _INTS, "classlabels_strings": _STRINGS, "base_values": _FLOATS, "n_targets": _INT,
    "post_transform": _STRING, "aggregate_function": _STRING,
}
_TYPE_NAMES = {_INTS: "a list of integers", _FLOATS: "a list of floats", _STRINGS: "a list of strings",
               _INT: "an integer", _STRING: "a string"}
MAX_ONNX_NODES = MAX_TREES * 4096


def _attributes(node, v: Fields) -> dict:
    """The node's attributes, each of its expected type; tensor forms (double thresholds) refused."""
    a = {}
    for x in node.attribute:
        name = v.text(x.name, "attribute name", 256)
        if name in a:
            v.fail(name, "appears twice")
        if name.endswith("_as_tensor"):
            raise TreegenError(f"{v.source}: ONNX tree ensembles with double (tensor) thresholds cannot be imported")
        want = ATTRIBUTES.get(name)
        if want is None:
            v.fail(name, "unknown attribute of a tree ensemble")
        if x.type != want:
            v.fail(name, f"must be {_TYPE_NAMES[want]} (attribute type {x.type})")
        if want == _INTS:
            a[name] = v.list(list(x.ints), name, 0, MAX_ONNX_NODES)
        elif want == _FLOATS:
            a[name] = v.list(list(x.floats), name, 0, MAX_ONNX_NODES)
        elif want == _STRINGS:
            a[name] = [v.text(t, f"{name}[{i}]", 256) for i, t in enumerate(x.strings)]
        elif want == _INT:
            a[name] = int(x.i)
        else:
            a[name] = v.text(x.s, name, 64)
    return a


def parse_onnx(source) -> ImportedEnsemble:
    """Parse an ONNX-ML tree ensemble (see the module documentation)."""
    model, name = _load(source)
    v = Fields(name)
    node = onnx_tree_node(model)
    a = _attributes(node, v)
    if "nodes_modes" not in a:
        v.fail("nodes_modes", "missing")
    agg = a.get("aggregate_function", "SUM")
    if agg != "SUM":
        raise TreegenError(f"{name}: ONNX aggregate_function {show(agg)} cannot be imported (SUM only)")
    post = a.get("post_transform", "NONE")
    if post not in LINKS:
        raise TreegenError(f"{name}: ONNX post_transform {show(post)} cannot be imported (NONE, LOGISTIC, SOFTMAX)")
    classifier = node.op_type == "TreeEnsembleClassifier"
    pre = "class" if classifier else "target"
    if classifier:
        if "classlabels_int64s" in a and "classlabels_strings" in a:
            v.fail("classlabels_strings", "given with classlabels_int64s (one label list expected)")
        labels = list(a.get("classlabels_int64s") or []) or list(a.get("classlabels_strings") or [])
        v.list(labels, "classlabels_int64s" if "classlabels_int64s" in a else "classlabels_strings", 2, MAX_CLASSES)
        if len(set(labels)) != len(labels):
            v.fail("classlabels", "a class label appears twice")
        n_outputs = len(labels)
    else:
        labels = []
        n_outputs = v.int(v.get(a, "n_targets", ""), "n_targets", 1, MAX_CLASSES, "target count")  # ORT needs it
        if n_outputs != 1:
            raise TreegenError(f"{name}: ONNX regressors with {n_outputs} targets cannot be imported (one target only)")
    # the input's width: the feature count (or, unknown, the largest feature id + 1, at most MAX_FEATURES)
    n_features = None
    inputs = model.graph.input
    if inputs and inputs[0].type.tensor_type.shape.dim and len(inputs[0].type.tensor_type.shape.dim) == 2:
        dim = inputs[0].type.tensor_type.shape.dim[1]
        if dim.dim_value:
            n_features = v.int(int(dim.dim_value), "graph.input[0].shape[1]", 1, MAX_FEATURES, "feature count")
    node_keys = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                 "nodes_truenodeids", "nodes_falsenodeids")
    for k in node_keys + (f"{pre}_treeids", f"{pre}_nodeids", f"{pre}_ids", f"{pre}_weights"):
        v.get(a, k, "")
    n_nodes = v.same_length({k: a[k] for k in node_keys + tuple(
        k for k in ("nodes_missing_value_tracks_true", "nodes_hitrates") if a.get(k))}, "")
    if n_nodes == 0:
        v.fail("nodes_treeids", "no nodes")
    v.same_length({k: a[f"{pre}_{k}"] for k in ("treeids", "nodeids", "ids", "weights")}, "")
    modes = a["nodes_modes"]
    tid = v.ints(a["nodes_treeids"], "nodes_treeids", 0, MAX_ONNX_NODES, "tree id")
    nid = v.ints(a["nodes_nodeids"], "nodes_nodeids", 0, MAX_ONNX_NODES, "node id")
    feat = v.ints(a["nodes_featureids"], "nodes_featureids", 0,
                  (n_features or MAX_FEATURES) - 1, "feature id")
    if n_features is None:
        n_features = int(feat.max()) + 1
    vals = v.numbers(a["nodes_values"], "nodes_values", "threshold")
    tru = v.ints(a["nodes_truenodeids"], "nodes_truenodeids", 0, MAX_ONNX_NODES, "node id")
    fal = v.ints(a["nodes_falsenodeids"], "nodes_falsenodeids", 0, MAX_ONNX_NODES, "node id")
    miss = v.ints(a.get("nodes_missing_value_tracks_true") or [0] * n_nodes, "nodes_missing_value_tracks_true",
                  0, 1, "flag").astype(bool)
    w_tree = v.ints(a[f"{pre}_treeids"], f"{pre}_treeids", 0, MAX_ONNX_NODES, "tree id")
    w_node = v.ints(a[f"{pre}_nodeids"], f"{pre}_nodeids", 0, MAX_ONNX_NODES, "node id")
    w_out = v.ints(a[f"{pre}_ids"], f"{pre}_ids", 0, n_outputs - 1, "output")
    w_val = v.numbers(a[f"{pre}_weights"], f"{pre}_weights", "weight")
    base = [float(np.float32(b)) for b in v.numbers(a.get("base_values") or [], "base_values", "base value")]
    if base and len(base) != n_outputs and not (n_outputs == 2 and len(base) == 1):
        v.fail("base_values", f"has {len(base)} entries for {n_outputs} outputs")
    if len(set(tid.tolist())) > MAX_TREES:
        v.fail("nodes_treeids", f"more than {MAX_TREES} trees, the most treegen imports")
    pairs = tid * (MAX_ONNX_NODES + 1) + nid
    if np.unique(pairs).size != pairs.size:
        i = int(np.flatnonzero(np.bincount(np.unique(pairs, return_inverse=True)[1]) > 1)[0])
        dup = int(np.unique(pairs)[i] % (MAX_ONNX_NODES + 1))
        v.fail("nodes_nodeids", f"node id {dup} appears twice in one tree")
    triples = (w_tree * (MAX_ONNX_NODES + 1) + w_node) * (MAX_CLASSES + 1) + w_out
    if np.unique(triples).size != triples.size:     # onnxruntime's float32 order of two weights is its own
        v.fail(f"{pre}_nodeids", "a leaf has two weights for one output")
    wt = set(tid.tolist())
    for i, t in enumerate(w_tree.tolist()):
        if t not in wt:
            v.fail(f"{pre}_treeids[{i}]", f"tree id {t} has no nodes")
    bad = sorted({m for m in modes if m not in ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "LEAF")})
    if bad:
        raise TreegenError(f"{name}: ONNX node mode {show(bad[0])} cannot be imported (LEQ, LT, GTE, GT "
                           "comparisons only)")
    binary_one_column = classifier and n_outputs == 2 and len(set(w_out.tolist())) == 1
    if classifier and n_outputs == 2 and not binary_one_column:
        raise TreegenError(f"{name}: ONNX binary classifiers with weights for both classes cannot be imported")
    k_outputs = 1 if binary_one_column else n_outputs
    trees = []
    for t in sorted(set(tid.tolist())):
        sel = np.flatnonzero(tid == t)
        ids = nid[sel]
        index = {int(i): k for k, i in enumerate(ids)}
        if 0 not in index:
            v.fail("nodes_nodeids", f"tree {t} has no node 0")
        n = len(sel)
        f = np.zeros(n, dtype=np.int64)
        thr = np.zeros(n)
        left = np.full(n, LEAF)
        right = np.full(n, LEAF)
        ml = np.zeros(n, dtype=bool)
        for k, s in enumerate(sel):
            mode = modes[s]
            if mode == "LEAF":
                continue
            try:
                tnode, fnode = index[int(tru[s])], index[int(fal[s])]
            except KeyError:
                v.fail(f"nodes_truenodeids[{s}]", f"tree {t}: child id {int(tru[s])} or {int(fal[s])} does not exist")
            val = float(vals[s])
            if mode in ("BRANCH_LEQ", "BRANCH_LT"):        # true branch = x <= t32 -> left
                thr[k] = le_threshold(val, "<=" if mode == "BRANCH_LEQ" else "<")
                left[k], right[k], ml[k] = tnode, fnode, bool(miss[s])
            else:                                          # x >= v  <=>  not (x < v): the false branch is left
                thr[k] = le_threshold(val, "<" if mode == "BRANCH_GTE" else "<=")
                left[k], right[k], ml[k] = fnode, tnode, not bool(miss[s])
            f[k] = feat[s]
        # root first: renumber so that node 0 is ONNX node 0
        order = [index[0]] + [k for k in range(n) if k != index[0]]
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)

        def remap(c):
            return np.where(c == LEAF, LEAF, pos[np.maximum(c, 0)])
        f, thr, ml = f[order], thr[order], ml[order]
        left, right = remap(left[order]), remap(right[order])
        _check_reachable(left, right, t, v)
        wsel = np.flatnonzero(w_tree == t)
        outs = sorted(set(w_out[wsel].tolist()))
        for out in outs:
            value = np.zeros(n)
            for s in wsel[w_out[wsel] == out]:
                if int(w_node[s]) not in index:
                    v.fail(f"{pre}_nodeids[{s}]", f"tree {t}: node id {int(w_node[s])} does not exist")
                if left[pos[index[int(w_node[s])]]] != LEAF:
                    v.fail(f"{pre}_nodeids[{s}]", f"tree {t}: node id {int(w_node[s])} is a branch, not a leaf")
                value[pos[index[int(w_node[s])]]] += w_val[s]   # several weights on one leaf: summed
            trees.append(ImportedTree(f, thr, left, right, np.where(left == LEAF, value, 0.0),
                                      np.where(left == LEAF, False, ml), output=0 if binary_one_column else out))
    if base and any(b != 0.0 for b in base):
        base_k = base[1:] if binary_one_column and len(base) == 2 else base
        for k, b in enumerate(base_k[:k_outputs]):   # onnxruntime adds the base after the trees
            trees.append(ImportedTree([0], [0.0], [LEAF], [LEAF], [b], [False], output=k))
    meta = {"source": "ONNX-ML " + node.op_type + (f" ({model.producer_name} {model.producer_version})"
                                                   if model.producer_name else ""),
            "objective": f"{node.op_type} {post}", "onnx_order": "tree-id order, base values last, one thread"}
    # onnxruntime's binary label: score > 0, or score > 0.5 when no class weight is negative (it then
    # takes the scores for probabilities); several classes: the first largest score
    decision = 0.0 if bool(np.any(w_val < 0)) else 0.5
    if binary_one_column:
        meta["decision"] = f"class 1 iff raw > {decision} (onnxruntime's binary label" + (
            ", every class weight >= 0)" if decision else ")")
    return ImportedEnsemble(trees, n_features, "<=", task="classification" if classifier else "regression",
                            classes=labels, n_outputs=k_outputs, vote="sum", base_score=[0.0] * k_outputs,
                            link=LINKS[post], sum_dtype="float32", binary_rule=">",
                            decision_value=decision if binary_one_column else 0.0, metadata=meta)


def _check_reachable(left, right, t: int, v: Fields) -> None:
    """Every node of the tree is reached from the root exactly once (no cycle, no stray node)."""
    seen = np.zeros(left.shape[0], dtype=bool)
    stack = [0]
    while stack:
        node = stack.pop()
        if seen[node]:
            v.fail("nodes_truenodeids", f"tree {t}: a node is reached twice (the links do not form a tree)")
        seen[node] = True
        if left[node] != LEAF:
            stack.extend((int(left[node]), int(right[node])))
    if not seen.all():
        v.fail("nodes_nodeids", f"tree {t}: {int((~seen).sum())} nodes are not reached from the root")


def from_onnx(model, X=None, feature_names=None):
    """Import an ONNX-ML tree ensemble (a path or an ``onnx.ModelProto``) as a treegen ``Model``: its
    raw scores (``post_transform`` NONE) equal onnxruntime's (one thread) bit for bit, see the module
    documentation."""
    from treegen.importers.value_model import ensemble_to_model
    ens = parse_onnx(model)
    return ensemble_to_model(ens, X=X, feature_names=feature_names, algorithm="onnx-" + ens.metadata["objective"]
                             .split()[0])
