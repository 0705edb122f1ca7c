"""Human-readable renderings of a :class:`~treegen.core.model.Model`: indented text and Graphviz DOT.

Tests are shown on the model's *normalised* features (``[0, 1)``, see :mod:`treegen.core.scaling`),
using the feature names: an oblique test reads ``0.31*x1 - 0.2*x4 <= 0.113``, an axis-parallel one
``petal_len <= 0.45`` (a negative single coefficient flips the comparison: ``-2*x <= 0.5`` is shown
as ``x >= -0.25``). The left child is taken when the test holds ("yes"). Both renderers walk the
tree with an explicit stack, so arbitrarily deep trees render without recursion.
"""

from __future__ import annotations

import numpy as np

from treegen.core.model import Model
from treegen.core.tree import LEAF, Tree


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


def _counts_text(counts: np.ndarray, classes: list) -> str:
    return ", ".join(f"{c}: {int(n)}" for c, n in zip(classes, counts))


def _leaf_text(tree: Tree, node: int, classes: list) -> str:
    counts = tree.class_counts[node]
    return f"class {classes[int(tree.leaf_class[node])]}  (n={int(counts.sum())}; {_counts_text(counts, classes)})"


def header(model: Model) -> str:
    meta = model.metadata or {}
    algo = meta.get("algorithm") or "unknown algorithm"
    leaves = sum(t.n_leaves for t in model.trees)
    depth = max(t.depth for t in model.trees)
    kind = "1 tree" if len(model.trees) == 1 else f"{len(model.trees)} trees (majority vote)"
    classes = ", ".join(map(str, model.classes))
    lines = [
        f"model: {algo}, {kind}, {leaves} leaves, depth {depth}",
        f"features ({model.n_features}, normalised to [0, 1) by {model.scaling.method} scaling): "
        + ", ".join(model.feature_names),
        f"classes ({model.n_classes}): {classes}",
    ]
    if meta.get("train_accuracy") is not None:
        lines.append(f"train accuracy: {100.0 * float(meta['train_accuracy']):.2f} %")
    return "\n".join(lines)


def render_tree_text(tree: Tree, feature_names: list[str], classes: list, digits: int = 4) -> str:
    """One tree as an indented outline (box-drawing connectors), iteratively."""
    lines: list[str] = []
    # stack items: (node, prefix for this line, prefix for the children, branch label)
    stack: list[tuple[int, str, str, str]] = [(0, "", "", "")]
    while stack:
        node, prefix, child_prefix, branch = stack.pop()
        if tree.left[node] == LEAF:
            lines.append(f"{prefix}{branch}{_leaf_text(tree, node, classes)}")
            continue
        test = format_test(tree.weights[node], float(tree.threshold[node]), feature_names, digits)
        lines.append(f"{prefix}{branch}{test}  (n={int(tree.class_counts[node].sum())})")
        # right is pushed first so that the left ("yes") branch is printed first
        stack.append((int(tree.right[node]), child_prefix + "└── ", child_prefix + "    ", "no:  "))
        stack.append((int(tree.left[node]), child_prefix + "├── ", child_prefix + "│   ", "yes: "))
    return "\n".join(lines)


def render_text(model: Model, digits: int = 4) -> str:
    """Header plus every tree of the model."""
    out = [header(model), ""]
    for k, tree in enumerate(model.trees):
        if len(model.trees) > 1:
            out.append(f"tree {k}:")
        out.append(render_tree_text(tree, model.feature_names, model.classes, digits))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_dot(model: Model, digits: int = 4) -> str:
    """Graphviz DOT source (``dot -Tpng``): boxes for tests, filled boxes for leaves."""
    lines = [
        "digraph treegen {",
        '  node [shape=box, style="rounded", fontname="Helvetica"];',
        '  edge [fontname="Helvetica"];',
    ]
    names, classes = model.feature_names, model.classes
    for k, tree in enumerate(model.trees):
        indent = "  "
        if len(model.trees) > 1:
            lines.append(f"  subgraph cluster_{k} {{")
            lines.append(f'    label="tree {k}";')
            indent = "    "
        for node in tree.preorder():
            nid = f"t{k}n{node}"
            counts = tree.class_counts[node]
            if tree.left[node] == LEAF:
                label = (f"class {classes[int(tree.leaf_class[node])]}\n"
                         f"n={int(counts.sum())}: [{', '.join(str(int(c)) for c in counts)}]")
                lines.append(f'{indent}{nid} [label="{_dot_escape(label)}", style="rounded,filled", '
                             f'fillcolor="#e8f0fe"];')
            else:
                label = format_test(tree.weights[node], float(tree.threshold[node]), names, digits)
                label += f"\nn={int(counts.sum())}"
                lines.append(f'{indent}{nid} [label="{_dot_escape(label)}"];')
                lines.append(f'{indent}{nid} -> t{k}n{int(tree.left[node])} [label="yes"];')
                lines.append(f'{indent}{nid} -> t{k}n{int(tree.right[node])} [label="no"];')
        if len(model.trees) > 1:
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
