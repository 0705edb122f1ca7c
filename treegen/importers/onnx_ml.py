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
from treegen.importers.ensemble import LEAF, ImportedEnsemble, ImportedTree, le_threshold

OPS = ("TreeEnsembleRegressor", "TreeEnsembleClassifier")
LINKS = {"NONE": "identity", "LOGISTIC": "logistic", "SOFTMAX": "softmax"}

__all__ = ["parse_onnx", "from_onnx", "onnx_tree_node"]


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


def _load(source):
    onnx = _require_onnx()
    if isinstance(source, (str, Path)):
        try:
            return onnx.load(str(source))
        except FileNotFoundError:
            raise TreegenError(f"{source}: model file not found") from None
        except Exception as exc:   # a protobuf decode error: not an ONNX file
            raise TreegenError(f"{source} is not an ONNX model ({type(exc).__name__})") from None
    if hasattr(source, "graph"):
        return source
    raise TreegenError(f"cannot import {type(source).__name__} as an ONNX model")


def parse_onnx(source) -> ImportedEnsemble:
    """Parse an ONNX-ML tree ensemble (see the module documentation)."""
    onnx = _require_onnx()
    model = _load(source)
    node = onnx_tree_node(model)
    a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
    if "nodes_values_as_tensor" in a or "nodes_modes" not in a:
        raise TreegenError("ONNX tree ensembles with double (tensor) thresholds cannot be imported")
    agg = a.get("aggregate_function", b"SUM")
    agg = agg.decode() if isinstance(agg, bytes) else str(agg)
    if agg != "SUM":
        raise TreegenError(f"ONNX aggregate_function {agg} cannot be imported (SUM only)")
    post = a.get("post_transform", b"NONE")
    post = post.decode() if isinstance(post, bytes) else str(post)
    if post not in LINKS:
        raise TreegenError(f"ONNX post_transform {post} cannot be imported (NONE, LOGISTIC, SOFTMAX)")
    classifier = node.op_type == "TreeEnsembleClassifier"
    pre = "class" if classifier else "target"
    if classifier:
        labels = list(a.get("classlabels_int64s") or []) or [s.decode() for s in a.get("classlabels_strings", [])]
        n_outputs = len(labels)
    else:
        labels = []
        n_outputs = int(a.get("n_targets", 1))
        if n_outputs != 1:
            raise TreegenError(f"ONNX regressors with {n_outputs} targets cannot be imported (one target only)")
    modes = [m.decode() if isinstance(m, bytes) else str(m) for m in a["nodes_modes"]]
    tid = np.asarray(a["nodes_treeids"], dtype=np.int64)
    nid = np.asarray(a["nodes_nodeids"], dtype=np.int64)
    feat = np.asarray(a["nodes_featureids"], dtype=np.int64)
    vals = np.asarray(a["nodes_values"], dtype=np.float32).astype(np.float64)
    tru = np.asarray(a["nodes_truenodeids"], dtype=np.int64)
    fal = np.asarray(a["nodes_falsenodeids"], dtype=np.int64)
    miss = np.asarray(a.get("nodes_missing_value_tracks_true", [0] * len(modes)), dtype=bool)
    w_tree = np.asarray(a[f"{pre}_treeids"], dtype=np.int64)
    w_node = np.asarray(a[f"{pre}_nodeids"], dtype=np.int64)
    w_out = np.asarray(a[f"{pre}_ids"], dtype=np.int64)
    w_val = np.asarray(a[f"{pre}_weights"], dtype=np.float32).astype(np.float64)
    base = [float(np.float32(b)) for b in (a.get("base_values") or [])]
    bad = sorted({m for m in modes if m not in ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "LEAF")})
    if bad:
        raise TreegenError(f"ONNX node mode {bad[0]} cannot be imported (LEQ, LT, GTE, GT comparisons only)")
    binary_one_column = classifier and n_outputs == 2 and len(set(w_out.tolist())) == 1
    if classifier and n_outputs == 2 and not binary_one_column:
        raise TreegenError("ONNX binary classifiers with weights for both classes cannot be imported")
    k_outputs = 1 if binary_one_column else n_outputs
    n_features = int(feat.max()) + 1 if feat.size else 1
    inputs = model.graph.input
    if inputs and inputs[0].type.tensor_type.shape.dim and len(inputs[0].type.tensor_type.shape.dim) == 2:
        dim = inputs[0].type.tensor_type.shape.dim[1]
        if dim.dim_value:
            n_features = int(dim.dim_value)
    trees = []
    for t in sorted(set(tid.tolist())):
        sel = np.flatnonzero(tid == t)
        ids = nid[sel]
        index = {int(i): k for k, i in enumerate(ids)}
        if 0 not in index:
            raise TreegenError(f"ONNX tree {t} has no node 0")
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
                raise TreegenError(f"ONNX tree {t}: a child id does not exist") from None
            v = float(vals[s])
            if mode in ("BRANCH_LEQ", "BRANCH_LT"):        # true branch = x <= t32 -> left
                thr[k] = le_threshold(v, "<=" if mode == "BRANCH_LEQ" else "<")
                left[k], right[k], ml[k] = tnode, fnode, bool(miss[s])
            else:                                          # x >= v  <=>  not (x < v): the false branch is left
                thr[k] = le_threshold(v, "<" if mode == "BRANCH_GTE" else "<=")
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
        wsel = np.flatnonzero(w_tree == t)
        outs = sorted(set(w_out[wsel].tolist()))
        for out in outs:
            value = np.zeros(n)
            for s in wsel[w_out[wsel] == out]:
                if int(w_node[s]) not in index:
                    raise TreegenError(f"ONNX tree {t}: a weight names a node that does not exist")
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


def from_onnx(model, X=None, feature_names=None):
    """Import an ONNX-ML tree ensemble (a path or an ``onnx.ModelProto``) as a treegen ``Model``: its
    raw scores (``post_transform`` NONE) equal onnxruntime's (one thread) bit for bit, see the module
    documentation."""
    from treegen.importers.value_model import ensemble_to_model
    ens = parse_onnx(model)
    return ensemble_to_model(ens, X=X, feature_names=feature_names, algorithm="onnx-" + ens.metadata["objective"]
                             .split()[0])
