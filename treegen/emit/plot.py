"""Pictures of models and reports (matplotlib, the optional ``plot`` extra).

Each function draws one figure and saves it to ``path`` (the suffix picks the format: ``.svg``,
``.png``, ``.pdf``); text in SVG files stays text (searchable, selectable). Tests and thresholds
are shown in raw input units (:func:`treegen.emit.show.raw_test`), like ``treegen show``.

``tree``        the tree diagram: test boxes (oblique nodes show their largest weights), leaves
                coloured by class, yes/no edges; ensembles draw their first trees side by side
``partition``   the regions a model assigns to two chosen features (the thesis's 2-D figures),
                the other features held at the data's medians, with the data's points on top
``confusion``   a model's confusion matrix on labelled data
``cv``          accuracy vs leaves of ``treegen cv --json`` results (mean ± 95 % CI), one point
                per file, labelled by algorithm and dataset
``hil``         ``treegen hil --json`` reports side by side: flash, instructions per inference and
                rows/s per target
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.metrics import classification_report
from treegen.core.model import Model
from treegen.core.schema import VALUE_VOTES
from treegen.core.tree import LEAF, Tree
from treegen.emit.show import format_test

KINDS = ("tree", "partition", "confusion", "cv", "hil")
#: the most weights an oblique node's box lists (the rest are summarised as "+ k more")
TOP_WEIGHTS = 3
#: trees of an ensemble drawn side by side
MAX_TREES = 4


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise TreegenError("pictures need matplotlib: pip install 'treegen[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"     # keep text as text in SVG
    plt.rcParams["text.parse_math"] = False   # names are drawn as typed: "$x$" is not mathtext
    return plt


def _save(fig, path) -> Path:
    path = Path(path)
    try:
        fig.savefig(path, bbox_inches="tight", dpi=120)
    except (OSError, ValueError) as exc:
        raise TreegenError(f"cannot write picture {path}: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path


def _colours(n: int) -> list:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


# ---------------------------------------------------------------------- tree diagram
def node_label(model: Model, tree: Tree, node: int, digits: int = 3) -> str:
    """A test box's text in raw units; an oblique node lists its ``TOP_WEIGHTS`` largest raw weights."""
    w = np.asarray(tree.weights[node], dtype=np.float64)
    nz = np.flatnonzero(w)
    n = int(tree.class_counts[node].sum())
    if nz.size <= TOP_WEIGHTS:
        from treegen.emit.show import raw_test

        text = raw_test(w, float(tree.threshold[node]), model.scaling, model.feature_names, digits)
        return f"{text}\nn={n}"
    s = model.scaling
    c = np.where(s.scale > 0, w * s.scale, 0.0)
    big = float(np.max(np.abs(c))) or 1.0
    T = (float(tree.threshold[node]) + float(np.dot(c, s.offset))) / big
    c = c / big
    top = np.argsort(-np.abs(c), kind="stable")[:TOP_WEIGHTS]
    shown = np.zeros_like(c)
    shown[top] = c[top]
    rest = int(np.count_nonzero(c)) - TOP_WEIGHTS
    text = format_test(shown, T, model.feature_names, digits).replace(" <= ", f" + {rest} more <= ")
    return f"{text}\nn={n}"


def _layout(tree: Tree) -> dict[int, tuple[float, float]]:
    """(x, depth) of every node: leaves at consecutive x in in-order, parents centred (iterative)."""
    pos: dict[int, tuple[float, float]] = {}
    depth = {0: 0}
    next_x = 0.0
    stack = [(0, False)]
    while stack:
        node, done = stack.pop()
        if tree.left[node] == LEAF:
            pos[node] = (next_x, depth[node])
            next_x += 1.0
            continue
        if done:
            xl, xr = pos[int(tree.left[node])][0], pos[int(tree.right[node])][0]
            pos[node] = ((xl + xr) / 2, depth[node])
            continue
        stack.append((node, True))
        for child in (int(tree.right[node]), int(tree.left[node])):
            depth[child] = depth[node] + 1
            stack.append((child, False))
    return pos


def plot_tree(model: Model, path, *, digits: int = 3) -> Path:
    plt = _pyplot()
    trees = model.trees[:MAX_TREES]
    colours = _colours(model.n_classes)
    value_colour = _value_colours(model) if model.vote in VALUE_VOTES else None
    layouts = [_layout(t) for t in trees]
    widths = [max(x for x, _ in lay.values()) + 1 for lay in layouts]
    depth = max(max(d for _, d in lay.values()) for lay in layouts) + 1
    fig, axes = plt.subplots(1, len(trees), squeeze=False,
                             figsize=(min(40, 2.4 * sum(widths) + 1), 1.6 * depth + 1),
                             gridspec_kw={"width_ratios": widths})
    for k, (tree, lay, ax) in enumerate(zip(trees, layouts, axes[0])):
        for node, (x, d) in lay.items():
            if tree.left[node] != LEAF:
                for child, label in ((int(tree.left[node]), "yes"), (int(tree.right[node]), "no")):
                    cx, cd = lay[child]
                    ax.plot([x, cx], [-d, -cd], color="0.6", lw=1, zorder=1)
                    ax.text((x + cx) / 2, -(d + cd) / 2, label, fontsize=7, color="0.35", ha="center",
                            va="center", backgroundcolor="white", zorder=2)
        for node, (x, d) in lay.items():
            if tree.left[node] == LEAF and value_colour is not None:
                from treegen.emit.show import value_text

                colour = value_colour(float(tree.leaf_value[node]))
                text = f"value {value_text(tree.leaf_value[node])}\nn={int(tree.class_counts[node].sum())}"
                box = {"boxstyle": "round", "facecolor": colour, "alpha": 0.35, "edgecolor": colour}
            elif tree.left[node] == LEAF:
                cls = int(tree.leaf_class[node])
                text = f"class {model.classes[cls]}\nn={int(tree.class_counts[node].sum())}"
                box = {"boxstyle": "round", "facecolor": colours[cls], "alpha": 0.35, "edgecolor": colours[cls]}
            else:
                text = node_label(model, tree, node, digits)
                box = {"boxstyle": "round", "facecolor": "white", "edgecolor": "0.3"}
            ax.text(x, -d, text, fontsize=7, ha="center", va="center", bbox=box, zorder=3)
        ax.set_xlim(-0.8, max(x for x, _ in lay.values()) + 0.8)
        ax.set_ylim(-depth + 0.4, 0.6)
        ax.axis("off")
        if len(model.trees) > 1:
            ax.set_title(f"tree {k}", fontsize=9)
    more = f" (first {MAX_TREES} of {len(model.trees)} trees)" if len(model.trees) > MAX_TREES else ""
    algo = (model.metadata or {}).get("algorithm") or "model"
    fig.suptitle(f"{algo}: {sum(t.n_leaves for t in model.trees)} leaves{more}; tests in raw input units",
                 fontsize=9)
    return _save(fig, path)


def _value_colours(model: Model):
    """Leaf value -> colour (viridis over the range of the model's leaf values)."""
    plt = _pyplot()
    values = np.concatenate([t.leaf_value[t.is_leaf] for t in model.trees])
    lo, hi = float(values.min()), float(values.max())
    cmap = plt.get_cmap("viridis")
    return lambda v: cmap(0.5 if hi == lo else (v - lo) / (hi - lo))


# ---------------------------------------------------------------------- partition
def _feature_index(model: Model, name: str) -> int:
    if name in model.feature_names:
        return model.feature_names.index(name)
    raise TreegenError(f"unknown feature {name!r} (the model's features: {', '.join(model.feature_names)})")


def plot_partition(model: Model, X: np.ndarray, labels, path, *, features: tuple[str, str] | None = None,
                   resolution: int = 300) -> Path:
    plt = _pyplot()
    X = np.asarray(X, dtype=np.float64)
    if model.n_features < 2:
        raise TreegenError("a partition picture needs a model with at least two features")
    names = features or tuple(model.feature_names[:2])
    i, j = (_feature_index(model, n) for n in names)
    if i == j:
        raise TreegenError("the two partition features must differ")
    lo = X[:, [i, j]].min(axis=0)
    hi = X[:, [i, j]].max(axis=0)
    pad = np.where(hi > lo, 0.03 * (hi - lo), 1.0)
    gx = np.linspace(lo[0] - pad[0], hi[0] + pad[0], resolution)
    gy = np.linspace(lo[1] - pad[1], hi[1] + pad[1], resolution)
    xx, yy = np.meshgrid(gx, gy)
    grid = np.tile(np.median(X, axis=0), (xx.size, 1))
    grid[:, i] = xx.ravel()
    grid[:, j] = yy.ravel()
    if model.is_regression:
        return _value_partition(model, X, labels, path, grid, xx, (gx, gy), (i, j), names)
    regions = model.predict_index(grid).reshape(xx.shape)
    colours = _colours(model.n_classes)
    from matplotlib.colors import ListedColormap

    fig, ax = plt.subplots(figsize=(6, 5))
    ax.imshow(regions, origin="lower", extent=(gx[0], gx[-1], gy[0], gy[-1]), aspect="auto",
              cmap=ListedColormap(colours), vmin=-0.5, vmax=model.n_classes - 0.5, alpha=0.3,
              interpolation="nearest")     # one raster (small SVGs), not 90,000 cells
    if labels is not None and len(labels):
        index = {c: k for k, c in enumerate(model.classes)}
        y = np.array([index.get(v, -1) for v in labels])
        for k, name in enumerate(model.classes):
            m = y == k
            if m.any():
                ax.scatter(X[m, i], X[m, j], s=8, color=colours[k], edgecolor="k", linewidth=0.2, label=str(name))
        ax.legend(title="class", fontsize=7, title_fontsize=8, loc="best")
    else:
        ax.scatter(X[:, i], X[:, j], s=6, color="k")
    others = model.n_features - 2
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_title("regions of the model" + (f" ({others} other features at their medians)" if others else ""),
                 fontsize=9)
    return _save(fig, path)


def _value_partition(model: Model, X, labels, path, grid, xx, axes, columns, names) -> Path:
    """A regression model's predicted value over two features (viridis), the rows coloured by their
    true values on the same scale."""
    plt = _pyplot()
    gx, gy = axes
    i, j = columns
    values = model.predict_value(grid).reshape(xx.shape)
    lo, hi = float(values.min()), float(values.max())
    y = None
    if labels is not None and len(labels):
        try:
            y = np.asarray(list(labels), dtype=np.float64)
        except (TypeError, ValueError):
            raise TreegenError("a regression model's partition needs numeric target values") from None
        lo, hi = min(lo, float(y.min())), max(hi, float(y.max()))
    fig, ax = plt.subplots(figsize=(6.5, 5))
    image = ax.imshow(values, origin="lower", extent=(gx[0], gx[-1], gy[0], gy[-1]), aspect="auto",
                      cmap="viridis", vmin=lo, vmax=hi, alpha=0.45, interpolation="nearest")
    if y is not None:
        ax.scatter(X[:, i], X[:, j], s=8, c=y, cmap="viridis", vmin=lo, vmax=hi, edgecolor="k", linewidth=0.2)
    else:
        ax.scatter(X[:, i], X[:, j], s=6, color="k")
    target = (model.metadata or {}).get("target_name") or "value"
    fig.colorbar(image, ax=ax, label=f"{target} (regions: predicted; points: true)")
    others = model.n_features - 2
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_title("predicted value" + (f" ({others} other features at their medians)" if others else ""), fontsize=9)
    return _save(fig, path)


# ---------------------------------------------------------------------- confusion matrix
def plot_confusion(model: Model, X: np.ndarray, labels, path) -> Path:
    plt = _pyplot()
    if model.is_regression:
        raise TreegenError("a confusion matrix needs a classification model (plot partition shows a regression "
                           "model's values)")
    if labels is None or len(labels) == 0:
        raise TreegenError("a confusion matrix needs labelled data")
    pred = model.predict(np.asarray(X, dtype=np.float64))
    known = list(model.classes)
    extra = sorted({v for v in list(labels) if v not in set(known)}, key=str)
    rep = classification_report(np.asarray(labels, dtype=object), pred, labels=known + extra)
    cm = np.asarray(rep["confusion_matrix"])
    names = [str(c) for c in known + extra]
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * len(names), 1.0 + 0.6 * len(names)))
    ax.imshow(cm, cmap="Blues")
    for (r, c), v in np.ndenumerate(cm):
        ax.text(c, r, str(int(v)), ha="center", va="center", fontsize=8,
                color="white" if v > cm.max() / 2 else "black")
    ax.set_xticks(range(len(names)), names)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.set_title(f"accuracy {100 * rep['accuracy']:.2f} % ({rep['correct']}/{rep['n']})", fontsize=9)
    return _save(fig, path)


# ---------------------------------------------------------------------- reports
def _require(report: dict, keys: tuple, what: str, source: str) -> None:
    missing = [k for k in keys if k not in report]
    if missing:
        raise TreegenError(f"{source}: not a {what} report (missing {', '.join(missing)})")


def plot_cv(reports: list[tuple[str, dict]], path) -> Path:
    """``reports``: (source name, ``treegen cv --json`` content) pairs."""
    plt = _pyplot()
    if not reports:
        raise TreegenError("no cv results to plot")
    fig, ax = plt.subplots(figsize=(6, 4.5))
    algos = sorted({r.get("algorithm", "?") for _, r in reports})
    colours = dict(zip(algos, _colours(len(algos))))
    regression = [r.get("task") == "regression" for _, r in reports]
    if any(regression) and not all(regression):
        raise TreegenError("cv reports of classification (accuracy) and regression (R²) cannot share one plot")
    score = "r2" if all(regression) else "accuracy"
    scale = 1.0 if score == "r2" else 100.0
    for source, r in reports:
        _require(r, (score, "leaves"), "'treegen cv --json'", source)
        acc, leaves = {k: v / 100.0 * scale for k, v in r[score].items()}, r["leaves"]
        algo = r.get("algorithm", "?")
        # JSON holds fractions (the units rule); the axis shows percent
        ax.errorbar(leaves["mean"], 100 * acc["mean"], xerr=leaves.get("ci95", 0), yerr=100 * acc.get("ci95", 0),
                    fmt="o", color=colours[algo], capsize=3, label=algo)
        ax.annotate(str(r.get("dataset", source)), (leaves["mean"], 100 * acc["mean"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8)
    ax.set_xlabel("leaves (mean ± 95 % CI)")
    ax.set_ylabel("test R² (mean ± 95 % CI)" if score == "r2" else "test accuracy % (mean ± 95 % CI)")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_hil(reports: list[tuple[str, dict]], path) -> Path:
    """``reports``: (source name, ``treegen hil --json`` content) pairs, one bar group per report."""
    plt = _pyplot()
    if not reports:
        raise TreegenError("no hil reports to plot")
    for source, r in reports:
        _require(r, ("target", "flash_bytes", "rows_per_s"), "'treegen hil --json'", source)
    names = [f"{r['target']}\n{r.get('variant') or ''}" for _, r in reports]
    panels = (("flash bytes", [r.get("flash_bytes") for _, r in reports]),
              ("per inference", [r.get("insn_per_inference") for _, r in reports]),
              ("rows/s over the link", [r.get("rows_per_s") for _, r in reports]))
    units = sorted({str(r.get("counter_unit")) for _, r in reports if r.get("insn_per_inference") is not None})
    fig, axes = plt.subplots(1, 3, figsize=(4 + 1.6 * len(reports), 3.6))
    for ax, (title, values) in zip(axes, panels):
        v = [float(x) if x is not None else 0.0 for x in values]
        bars = ax.bar(range(len(v)), v, color=_colours(len(v)))
        for b, x in zip(bars, values):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), "n/a" if x is None else f"{float(x):.4g}",
                    ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(v)), names, fontsize=7)
        ax.set_title(title + (f" ({', '.join(units)})" if title == "per inference" and units else ""), fontsize=9)
    ok = all(r.get("ok") for _, r in reports)
    fig.suptitle("hardware in the loop: " + ("all checks passed" if ok else "SOME CHECKS FAILED"), fontsize=9)
    return _save(fig, path)
