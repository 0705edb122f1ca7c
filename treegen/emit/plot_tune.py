"""The picture of a ``treegen tune`` result: accuracy against flash and against latency, every
measured point numbered and named in a key below the panels, the Pareto front in colour, the chosen
model ringed, the budget as lines; axes logarithmic where the values span a decade or more
(matplotlib, the optional ``plot`` extra). ``treegen plot tune TUNE.json`` redraws it from ``--json``.
Drawn whatever happened to single candidates: each failed one is listed in the key with its stage
and reason, and a result without any measured point still gives a picture saying so."""

from __future__ import annotations

from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.emit.plot import _pyplot, _save

#: a panel's axis turns logarithmic when its largest value is at least this many times its smallest
LOG_SPAN = 10.0


def _bytes_text(v: float) -> str:
    if v >= 1024 and v % 1024 == 0:
        return f"{v / 1024:g} KiB"
    return f"{v / 1024:.3g} KiB" if v >= 1024 else f"{v:g} B"


def _axis(ax, values, field: str, limit) -> None:
    """Log scale when the values (and the budget line) span a decade; tick labels that do not collide."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

    vals = [v for v in list(values) + [limit] if v is not None and v > 0]
    log = bool(vals) and max(vals) / min(vals) >= LOG_SPAN
    if log:
        ax.set_xscale("log", base=2 if field == "flash_bytes" else 10)
        if field == "flash_bytes":
            ax.xaxis.set_major_locator(LogLocator(base=2, numticks=8))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    if field == "flash_bytes":
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _bytes_text(v)))
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _key_line(k: int, p: dict, chosen_index, on_front: bool) -> str:
    mark = "*" if p.get("index", k - 1) == chosen_index else ("+" if on_front else " ")
    lat = "n/a" if p.get("latency_us") is None else f"{p['latency_us']:.3g} µs"
    flash = "n/a" if p.get("flash_bytes") is None else f"{p['flash_bytes']} B"
    return (f"{mark}{k:>3}  {100 * p['accuracy']:6.2f} %  {flash:>8}  {lat:>9}  "
            f"{p.get('layout') or ''}/{p.get('variant') or ''}  {p['name']}")


def plot_tune(result: dict, path) -> Path:
    """Draw ``result`` (:func:`treegen.device.tune.tune`'s dict, JSON-ready) into ``path`` (.svg/.png/.pdf)."""
    plt = _pyplot()
    try:
        points, front = list(result["points"]), set(result["front"])
        budget, target = result["budget"], result["target"]
    except (KeyError, TypeError):
        raise TreegenError("not a 'treegen tune --json' result (it needs points, front, budget and target)") from None
    chosen = result.get("chosen")
    chosen_index = None if chosen is None else chosen.get("index")
    measured = [i for i, p in enumerate(points) if p.get("flash_bytes") is not None and p.get("latency_us") is not None]
    failed = list(result.get("failures") or [])
    key = ["  #    CV acc     flash    latency  layout/variant  model   (* chosen, + Pareto front)"]
    key += [_key_line(k + 1, dict(points[i], index=i), chosen_index, i in front) for k, i in enumerate(measured)]
    for f in failed:
        where = "/".join(x for x in (f.get("layout"), f.get("variant")) if x)
        key.append(f"   x  failed ({f.get('stage', '?')}{', ' + where if where else ''}): {f.get('name', '?')}: "
                   f"{f.get('reason', '?')}"[:170])
    fig_h = 4.0 + 0.16 * len(key)
    fig = plt.figure(figsize=(11.5, fig_h))
    top = 1 - 0.55 / fig_h
    bottom = (0.45 + 0.16 * len(key)) / fig_h
    axes = fig.subplots(1, 2, sharey=True, gridspec_kw={"left": 0.07, "right": 0.98, "top": top - 0.04,
                                                        "bottom": bottom + 0.6 / fig_h, "wspace": 0.06})
    clock = result.get("clock_hz")
    host = target == "native"
    unit = result.get("counter_unit") or next((p["counter_unit"] for p in points if p.get("counter_unit")), None)
    how = ("host wall clock" if host or not clock else
           f"{unit or 'instructions'} at {clock / 1e6:g} MHz")
    panels = (("flash_bytes", "flash of the model (" + ("compiled object)" if host else "linked image)"), "max_flash"),
              ("latency_us", f"latency per inference (µs, {how})", "max_latency_us"))
    for ax, (field, label, limit) in zip(axes, panels):
        xs = [points[i][field] for i in measured]
        ys = [100 * points[i]["accuracy"] for i in measured]
        off = [k for k, i in enumerate(measured) if i not in front]
        on = [k for k, i in enumerate(measured) if i in front]
        ax.scatter([xs[k] for k in off], [ys[k] for k in off], s=22, color="0.7", label="measured", zorder=2)
        ax.scatter([xs[k] for k in on], [ys[k] for k in on], s=34, color="tab:blue", label="Pareto front", zorder=3)
        for k, (x, y) in enumerate(zip(xs, ys)):
            ax.annotate(str(k + 1), (x, y), xytext=(4, 3 + 7 * (k % 2)), textcoords="offset points", fontsize=8,
                        color="tab:blue" if measured[k] in front else "0.35", zorder=4)
        if chosen is not None and chosen.get(field) is not None:
            ax.scatter([chosen[field]], [100 * chosen["accuracy"]], s=150, facecolors="none", edgecolors="tab:red",
                       linewidths=2, label="chosen", zorder=5)
        if budget.get(limit) is not None:
            ax.axvline(budget[limit], color="tab:red", linestyle="--", linewidth=1, label="budget")
        if not measured:
            ax.text(0.5, 0.5, "no measured point", transform=ax.transAxes, ha="center", va="center")
        _axis(ax, xs, field, budget.get(limit))
        ax.set_xlabel(label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("cross-validated accuracy (%)", fontsize=9)
    axes[1].legend(loc="lower right", fontsize=8)
    what = f"{len(measured)} measured point(s)" + (f", {len(failed)} failed candidate(s)" if failed else "")
    fig.suptitle(f"treegen tune on {target} (seed {result.get('seed')}): {what}", fontsize=11, y=1 - 0.12 / fig_h)
    fig.text(0.07, bottom - 0.05 / fig_h, "\n".join(key), family="monospace", fontsize=7.5, va="top")
    return _save(fig, path)
