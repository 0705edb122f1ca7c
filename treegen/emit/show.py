"""Human-readable renderings of a :class:`~treegen.core.model.Model`: indented text and Graphviz DOT.

Tests are shown with the feature names, by default in the *raw* units of the input (what a user
feeds the model and what scikit-learn's ``export_text`` shows), or with ``units="normalised"`` on the
features the tree computes with (``[0, 1)`` on the Q15 grid, see :mod:`treegen.core.scaling`).

Normalised: an oblique test reads ``0.31*x1 - 0.2*x4 <= 0.113``, an axis-parallel one
``petal_len <= 0.45`` (a negative single coefficient flips the comparison: ``-2*x <= 0.5`` is shown
as ``x >= -0.25``).

Raw (:func:`raw_test`): an axis-parallel test is the exact boundary of the raw value: a raw input
``r`` becomes ``q = rint((r - offset) * scale * 32768)`` and the test ``q <= Q`` holds exactly when
``r < offset + (Q + 1/2) / (scale * 32768)`` (ties at the boundary itself follow round-half-even) — shown
as ``r <= Q`` for 15-bit integer data (``q15`` scaling), where it is exact, and ``r < b`` otherwise. An
oblique test ``sum w_j x_j <= t`` becomes ``sum c_j r_j <= T`` with ``c_j = w_j * scale_j`` and
``T = t + sum c_j * offset_j``, divided by ``max |c_j|`` so the largest coefficient reads 1 (the
same half-plane; the Q15 rounding of each input moves it by at most half a grid step per feature).

The left child is taken when the test holds ("yes"). Both renderers walk the tree with an explicit
stack, so arbitrarily deep trees render without recursion.
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.scaling import Q15_ONE, InputScaling
from treegen.core.tree import LEAF, Tree

UNITS = ("raw", "normalised")


def _num(v: float, digits: int) -> str:
    text = f"{float(v):.{digits}g}"
    return "0" if text == "-0" else text


def format_test(weights: np.ndarray, threshold: float, names: list[str], digits: int = 4) -> str:
    """The test ``w . x <= threshold`` of one internal node as text."""
    nz = np.flatnonzero(weights)
    if nz.size == 0:
        return f"0 <= {_num(threshold, digits)}"
    if nz.size == 1:
        j = int(nz[0])
        w = float(weights[j])
        if w == 1.0:
            return f"{names[j]} <= {_num(threshold, digits)}"
        op = "<=" if w > 0 else ">="
        return f"{names[j]} {op} {_num(threshold / w, digits)}"
    parts = []
    for k, j in enumerate(nz):
        w = float(weights[j])
        mag = abs(w)
        term = names[j] if mag == 1.0 else f"{_num(mag, digits)}*{names[j]}"
        if k == 0:
            parts.append(("-" if w < 0 else "") + term)
        else:
            parts.append((" - " if w < 0 else " + ") + term)
    return f"{''.join(parts)} <= {_num(threshold, digits)}"


def raw_test(weights: np.ndarray, threshold: float, scaling: InputScaling, names: list[str],
             digits: int = 4) -> str:
    """The test ``w . x <= threshold`` (normalised features) written on the raw inputs (module docstring)."""
    w = np.asarray(weights, dtype=np.float64)
    nz = np.flatnonzero(w)
    if nz.size == 0 or np.any(scaling.scale[nz] <= 0):
        # a constant feature (scale 0) is 0 after scaling: the normalised text is the truth
        return format_test(w, threshold, names, digits)
    if nz.size == 1:
        j = int(nz[0])
        o, s = float(scaling.offset[j]), float(scaling.scale[j])
        cut = threshold / float(w[j]) * Q15_ONE          # the test on the grid value q
        integer = scaling.method == "q15"
        if w[j] > 0:                                     # q <= floor(cut)
            q = float(np.floor(cut))
            if integer:
                return f"{names[j]} <= {int(q)}"
            return f"{names[j]} < {_num(o + (q + 0.5) / (s * Q15_ONE), digits)}"
        q = float(np.ceil(cut))                          # q >= ceil(cut)
        if integer:
            return f"{names[j]} >= {int(q)}"
        return f"{names[j]} >= {_num(o + (q - 0.5) / (s * Q15_ONE), digits)}"
    c = np.zeros_like(w)
    c[nz] = w[nz] * scaling.scale[nz]
    big = float(np.max(np.abs(c[nz])))
    T = (threshold + float(np.dot(c[nz], scaling.offset[nz]))) / big
    return format_test(c / big, T, names, digits)


def node_test(model: Model, tree: Tree, node: int, units: str, digits: int = 4) -> str:
    """One internal node's test as text, in ``units`` (``raw`` or ``normalised``)."""
    if units == "raw":
        return raw_test(tree.weights[node], float(tree.threshold[node]), model.scaling, model.feature_names, digits)
    if units == "normalised":
        return format_test(tree.weights[node], float(tree.threshold[node]), model.feature_names, digits)
    raise TreegenError(f"unknown units {units!r} (choose from {', '.join(UNITS)})")


def _counts_text(counts: np.ndarray, classes: list) -> str:
    return ", ".join(f"{c}: {int(n)}" for c, n in zip(classes, counts))


def value_text(v: float) -> str:
    """A leaf value as shown (6 significant digits)."""
    return _num(v, 6)


def _leaf_text(tree: Tree, node: int, classes: list) -> str:
    counts = tree.class_counts[node]
    if tree.is_value_tree:
        return f"value {value_text(tree.leaf_value[node])}  (n={int(counts.sum())})"
    return f"class {classes[int(tree.leaf_class[node])]}  (n={int(counts.sum())}; {_counts_text(counts, classes)})"


def header(model: Model, units: str = "raw") -> str:
    meta = model.metadata or {}
    algo = meta.get("algorithm") or "unknown algorithm"
    leaves = sum(t.n_leaves for t in model.trees)
    depth = max(t.depth for t in model.trees)
    vote = {"hard": "majority vote", "soft": "majority vote", "mean": "mean of the trees' values",
            "sum": "sum of the trees' values"}[model.vote]
    kind = "1 tree" if len(model.trees) == 1 else f"{len(model.trees)} trees ({vote})"
    lines = [
        f"model: {algo}, {kind}, {leaves} leaves, depth {depth}",
        f"features ({model.n_features}; tests in "
        + ("raw input units" if units == "raw" else f"normalised units, [0, 1) by {model.scaling.method} scaling")
        + "): " + ", ".join(model.feature_names),
    ]
    if model.is_regression:
        target = meta.get("target_name") or meta.get("label_column")
        lines.append("regression" + (f" of {target}" if target else "") + ": leaves show the predicted value")
    else:
        lines.append(f"classes ({model.n_classes}): {', '.join(map(str, model.classes))}")
    if meta.get("train_accuracy") is not None:
        lines.append(f"train accuracy: {100.0 * float(meta['train_accuracy']):.2f} %")
    if meta.get("train_rmse") is not None and meta.get("train_r2") is not None:
        lines.append(f"train RMSE: {_num(meta['train_rmse'], 6)}, R²: {float(meta['train_r2']):.4f}")
    return "\n".join(lines)


def render_tree_text(tree: Tree, feature_names: list[str], classes: list, digits: int = 4,
                     test=None) -> str:
    """One tree as an indented outline (box-drawing connectors), iteratively. ``test(node)`` gives a
    node's test text (default: normalised units)."""
    lines: list[str] = []
    # stack items: (node, prefix for this line, prefix for the children, branch label)
    stack: list[tuple[int, str, str, str]] = [(0, "", "", "")]
    while stack:
        node, prefix, child_prefix, branch = stack.pop()
        if tree.left[node] == LEAF:
            lines.append(f"{prefix}{branch}{_leaf_text(tree, node, classes)}")
            continue
        text = test(node) if test is not None else \
            format_test(tree.weights[node], float(tree.threshold[node]), feature_names, digits)
        lines.append(f"{prefix}{branch}{text}  (n={int(tree.class_counts[node].sum())})")
        # right is pushed first so that the left ("yes") branch is printed first
        stack.append((int(tree.right[node]), child_prefix + "└── ", child_prefix + "    ", "no:  "))
        stack.append((int(tree.left[node]), child_prefix + "├── ", child_prefix + "│   ", "yes: "))
    return "\n".join(lines)


def render_text(model: Model, digits: int = 4, units: str = "raw") -> str:
    """Header plus every tree of the model, tests in ``units`` (``raw`` or ``normalised``)."""
    out = [header(model, units), ""]
    for k, tree in enumerate(model.trees):
        if len(model.trees) > 1:
            out.append(f"tree {k}:")
        out.append(render_tree_text(tree, model.feature_names, model.classes, digits,
                                    test=lambda node, tree=tree: node_test(model, tree, node, units, digits)))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_dot(model: Model, digits: int = 4, units: str = "raw") -> str:
    """Graphviz DOT source (``dot -Tpng``): boxes for tests, filled boxes for leaves."""
    lines = [
        "digraph treegen {",
        '  node [shape=box, style="rounded", fontname="Helvetica"];',
        '  edge [fontname="Helvetica"];',
    ]
    classes = model.classes
    for k, tree in enumerate(model.trees):
        indent = "  "
        if len(model.trees) > 1:
            lines.append(f"  subgraph cluster_{k} {{")
            lines.append(f'    label="tree {k}";')
            indent = "    "
        for node in tree.preorder():
            nid = f"t{k}n{node}"
            counts = tree.class_counts[node]
            if tree.left[node] == LEAF and tree.is_value_tree:
                label = f"value {value_text(tree.leaf_value[node])}\nn={int(counts.sum())}"
                lines.append(f'{indent}{nid} [label="{_dot_escape(label)}", style="rounded,filled", '
                             f'fillcolor="#e8f0fe"];')
            elif tree.left[node] == LEAF:
                label = (f"class {classes[int(tree.leaf_class[node])]}\n"
                         f"n={int(counts.sum())}: [{', '.join(str(int(c)) for c in counts)}]")
                lines.append(f'{indent}{nid} [label="{_dot_escape(label)}", style="rounded,filled", '
                             f'fillcolor="#e8f0fe"];')
            else:
                label = node_test(model, tree, node, units, digits)
                label += f"\nn={int(counts.sum())}"
                lines.append(f'{indent}{nid} [label="{_dot_escape(label)}"];')
                lines.append(f'{indent}{nid} -> t{k}n{int(tree.left[node])} [label="yes"];')
                lines.append(f'{indent}{nid} -> t{k}n{int(tree.right[node])} [label="no"];')
        if len(model.trees) > 1:
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
