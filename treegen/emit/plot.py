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
``tune``        a ``treegen tune --json`` result (:mod:`treegen.emit.plot_tune`)
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

KINDS = ("tree", "partition", "confusion", "cv", "hil", "tune")
#: the most weights an oblique node's box lists (the rest are summarised as "+ k more")
TOP_WEIGHTS = 3
#: trees of an ensemble drawn side by side
MAX_TREES = 4
#: tree picture: inches per leaf column, the text size there, the widest canvas and the smallest text
LEAF_INCHES, FONT_POINTS, MAX_INCHES, MIN_FONT = 2.0, 9.0, 26.0, 5.0
#: leaf columns a tree picture draws by default (deeper subtrees become one box each)
MAX_COLUMNS = 12


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


def _light(colour, amount: float = 0.35) -> tuple:
    """``colour`` mixed with white, opaque (edges drawn under a box stay hidden)."""
    from matplotlib.colors import to_rgb

    return tuple(1 - amount * (1 - c) for c in to_rgb(colour))


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


def _layout(tree: Tree, max_depth: int | None = None) -> dict[int, tuple[float, float]]:
    """(x, depth) of every drawn node: leaves (and nodes cut at ``max_depth``) at consecutive x in
    in-order, parents centred (iterative)."""
    pos: dict[int, tuple[float, float]] = {}
    depth = {0: 0}
    next_x = 0.0
    stack = [(0, False)]
    while stack:
        node, done = stack.pop()
        if tree.left[node] == LEAF or (max_depth is not None and depth[node] >= max_depth):
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


def _columns(tree: Tree, max_depth: int) -> int:
    """Leaf columns of ``tree`` drawn down to ``max_depth``."""
    d = tree.node_depths()
    return int(np.count_nonzero((tree.is_leaf & (d <= max_depth)) | (d == max_depth)))


def _fitting_depth(trees: list[Tree], columns: int) -> int | None:
    """The deepest cut at which the trees' drawn columns fit ``columns`` (None: every node fits)."""
    if sum(t.n_leaves for t in trees) <= columns:
        return None
    full = max(t.depth for t in trees)
    best = 1
    for cut in range(1, full + 1):
        if sum(_columns(t, cut) for t in trees) > columns:
            break
        best = cut
    return best


def _subtree_leaves(tree: Tree, node: int) -> int:
    n, stack = 0, [node]
    while stack:
        k = stack.pop()
        if tree.left[k] == LEAF:
            n += 1
        else:
            stack += [int(tree.left[k]), int(tree.right[k])]
    return n


def plot_tree(model: Model, path, *, digits: int = 3, max_depth: int | None = None) -> Path:
    """The tree diagram. ``max_depth``: draw the tests down to that depth and each subtree below it
    as one box (its leaves, rows and majority class); default: the deepest cut whose drawing fits
    :data:`MAX_COLUMNS` leaf columns (a picture read at its own size, not a wall of 5-point text)."""
    plt = _pyplot()
    trees = model.trees[:MAX_TREES]
    colours = _colours(model.n_classes)
    value_colour = _value_colours(model) if model.vote in VALUE_VOTES else None
    cut = max_depth if max_depth is not None else _fitting_depth(trees, MAX_COLUMNS)
    if cut is not None and cut < 1:
        raise TreegenError(f"max_depth must be at least 1, got {cut}")
    layouts = [_layout(t, cut) for t in trees]
    widths = [max(x for x, _ in lay.values()) + 1 for lay in layouts]
    depth = max(max(d for _, d in lay.values()) for lay in layouts) + 1
    # a leaf column of LEAF_INCHES at FONT_POINTS; a drawing too wide for MAX_INCHES keeps the canvas and
    # shrinks the text in proportion (never below MIN_FONT)
    need = LEAF_INCHES * sum(widths) + 0.6
    width = min(MAX_INCHES, max(4.0, need))
    font = max(MIN_FONT, FONT_POINTS * min(1.0, MAX_INCHES / need))
    fig, axes = plt.subplots(1, len(trees), squeeze=False, figsize=(width, 1.05 * depth + 0.5),
                             gridspec_kw={"width_ratios": widths, "wspace": 0.05})
    collapsed_any = False
    for k, (tree, lay, ax) in enumerate(zip(trees, layouts, axes[0])):
        for node, (x, d) in lay.items():
            if tree.left[node] != LEAF and (cut is None or d < cut):
                for child, label in ((int(tree.left[node]), "yes"), (int(tree.right[node]), "no")):
                    cx, cd = lay[child]
                    ax.plot([x, cx], [-d, -cd], color="0.6", lw=1, zorder=1)
                    ax.text((x + cx) / 2, -(d + cd) / 2, label, fontsize=font - 1, color="0.35", ha="center",
                            va="center", backgroundcolor="white", zorder=2)
        for node, (x, d) in lay.items():
            rows = int(tree.class_counts[node].sum())
            if tree.left[node] != LEAF and cut is not None and d >= cut:        # a subtree drawn as one box
                collapsed_any = True
                text = f"{_subtree_leaves(tree, node)} leaves below\nn={rows}"
                if value_colour is None and rows:
                    cls = int(np.argmax(tree.class_counts[node]))
                    text += f", most class {model.classes[cls]}"
                box = {"boxstyle": "round", "facecolor": "0.93", "edgecolor": "0.5", "linestyle": "--"}
            elif tree.left[node] == LEAF and value_colour is not None:
                from treegen.emit.show import value_text

                colour = value_colour(float(tree.leaf_value[node]))
                text = f"value {value_text(tree.leaf_value[node])}\nn={rows}"
                box = {"boxstyle": "round", "facecolor": _light(colour), "edgecolor": colour}
            elif tree.left[node] == LEAF:
                cls = int(tree.leaf_class[node])
                text = f"class {model.classes[cls]}\nn={rows}"
                box = {"boxstyle": "round", "facecolor": _light(colours[cls]), "edgecolor": colours[cls]}
            else:
                text = node_label(model, tree, node, digits)
                box = {"boxstyle": "round", "facecolor": "white", "edgecolor": "0.3"}
            ax.text(x, -d, text, fontsize=font, ha="center", va="center", bbox=box, zorder=3)
        ax.set_xlim(-0.6, max(x for x, _ in lay.values()) + 0.6)
        ax.set_ylim(-depth + 0.55, 0.45)
        ax.axis("off")
        if len(model.trees) > 1:
            ax.set_title(f"tree {k}", fontsize=max(font, 9))
    more = f" (first {MAX_TREES} of {len(model.trees)} trees)" if len(model.trees) > MAX_TREES else ""
    shown = f"; drawn to depth {cut} (dashed boxes: the subtrees below)" if collapsed_any else ""
    algo = (model.metadata or {}).get("algorithm") or "model"
    fig.suptitle(f"{algo}: {sum(t.n_leaves for t in model.trees)} leaves{more}; tests in raw input units{shown}",
                 fontsize=max(font, 9))
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


def _hil_row_name(source: str, r: dict) -> str:
    """A bar's name: the report file, the model (algorithm, size, hash) and where it ran."""
    m = r.get("model_summary") if isinstance(r.get("model_summary"), dict) else {}
    what = ", ".join(str(x) for x in (m.get("algorithm"), m.get("size")) if x)
    model = Path(str(r["model"])).name if isinstance(r.get("model"), str) else "model"
    where = f"{r['target']} {r.get('layout') or ''}/{r.get('variant') or ''}".rstrip("/ ")
    what = f" ({what})" if what else ""
    return f"{model}{what} {str(r.get('model_hash') or '')[:8]}\non {where}  [{source}]"


def _count_text(v: float, unit: str) -> str:
    if unit == "bytes":
        return f"{v:,.0f} B" + (f" ({v / 1024:.1f} KiB)" if v >= 1024 else "")
    text = f"{v:,.0f}" if v >= 10_000 else f"{v:,.1f}" if v >= 100 else f"{v:.3g}"
    return text if unit == "count" else f"{text} {unit}"


def plot_hil(reports: list[tuple[str, dict]], path) -> Path:
    """``reports``: (source name, ``treegen hil --json`` content) pairs, one bar per report in each panel
    (horizontal bars, so that every bar's name stays readable)."""
    plt = _pyplot()
    if not reports:
        raise TreegenError("no hil reports to plot")
    for source, r in reports:
        _require(r, ("target", "flash_bytes", "rows_per_s"), "'treegen hil --json'", source)
    names = [_hil_row_name(source, r) for source, r in reports]
    units = sorted({str(r.get("counter_unit")) for _, r in reports if r.get("insn_per_inference") is not None})
    panels = (("flash of the firmware", "bytes", [r.get("flash_bytes") for _, r in reports]),
              ("per inference" + (f" ({', '.join(units)})" if units else ""), "count",
               [r.get("insn_per_inference") for _, r in reports]),
              ("rows/s over the serial link", "count", [r.get("rows_per_s") for _, r in reports]))
    n = len(reports)
    fig, axes = plt.subplots(1, 3, figsize=(13, 1.2 + 0.62 * n), sharey=True)
    colours = ["tab:green" if r.get("ok") else "tab:red" for _, r in reports]
    bar_units = [str(r.get("counter_unit") or "count") for _, r in reports]
    for ax, (title, unit, values) in zip(axes, panels):
        v = [float(x) if x is not None else 0.0 for x in values]
        bars = ax.barh(range(n), v, color=colours, alpha=0.75)
        top = max(v) if any(v) else 1.0
        for k, (b, x) in enumerate(zip(bars, values)):
            # the per-inference counts are instructions on one target, cycles or ns on another: each says which
            u = bar_units[k] if title.startswith("per inference") else unit
            ax.text(b.get_width() + 0.01 * top, b.get_y() + b.get_height() / 2,
                    "n/a" if x is None else _count_text(float(x), u), va="center", fontsize=8)
        ax.set_xlim(0, top * 1.45)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_formatter(_plain_formatter())
        ax.xaxis.set_major_locator(_few_ticks())
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(n), names, fontsize=8)
    axes[0].invert_yaxis()
    ok = all(r.get("ok") for _, r in reports)
    fig.suptitle("hardware in the loop: " + ("every check passed (green)" if ok else
                                             "SOME CHECKS FAILED (red bars)"), fontsize=10)
    return _save(fig, path)


def _plain_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 100 else f"{v:g}")


def _few_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=4)
