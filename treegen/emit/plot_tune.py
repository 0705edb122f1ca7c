"""The picture of a ``treegen tune`` result: accuracy against flash and against latency, every
measured point grey, the Pareto front in colour, the chosen model ringed, the budget as lines
(matplotlib, the optional ``plot`` extra). Drawn whatever happened to single candidates: the number
of failed ones is in the title (their reasons are in the JSON and the front table), and a result
without any measured point still gives a picture saying so."""

from __future__ import annotations

from pathlib import Path

from treegen.emit.plot import _pyplot, _save


def plot_tune(result: dict, path) -> Path:
    """Draw ``result`` (:func:`treegen.device.tune.tune`'s dict, JSON-ready) into ``path`` (.svg/.png/.pdf)."""
    plt = _pyplot()
    points, front = result["points"], set(result["front"])
    chosen = result.get("chosen")
    budget = result["budget"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    clock = result.get("clock_hz")
    host = result["target"] == "native"
    panels = (("flash_bytes", "flash of the model (bytes" + (", compiled object)" if host else ", linked image)"),
               "max_flash"),
              ("latency_us", "latency per inference (µs, " + ("host wall clock)" if host or not clock else
                                                             f"instructions at {clock / 1e6:g} MHz)"),
               "max_latency_us"))
    for ax, (field, label, limit) in zip(axes, panels):
        shown = [i for i, p in enumerate(points) if p.get(field) is not None]
        xs = {i: points[i][field] for i in shown}
        ys = {i: 100 * points[i]["accuracy"] for i in shown}
        ax.scatter([xs[i] for i in shown], [ys[i] for i in shown], s=14, color="0.75", label="measured")
        if not shown:
            ax.text(0.5, 0.5, "no measured point", transform=ax.transAxes, ha="center", va="center")
        on = [i for i in shown if i in front]
        ax.scatter([xs[i] for i in on], [ys[i] for i in on], s=26, color="tab:blue", label="Pareto front")
        if chosen is not None and chosen.get(field) is not None:
            ax.scatter([chosen[field]], [100 * chosen["accuracy"]], s=120, facecolors="none", edgecolors="tab:red",
                       linewidths=2, label=f"chosen: {chosen['name']}")
        if budget.get(limit) is not None:
            ax.axvline(budget[limit], color="tab:red", linestyle="--", linewidth=1, label="budget")
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("cross-validated accuracy (%)")
    axes[1].legend(loc="lower right", fontsize=7)
    failed = len(result.get("failures") or [])
    fig.suptitle(f"treegen tune on {result['target']} (seed {result['seed']})"
                 + (f": {failed} failed candidate(s), see the JSON" if failed else ""))
    return _save(fig, path)
