"""`treegen tune` against the best default-settings model of each single algorithm, under the same budget.

Usage::

    python bench/tune_bench.py [--datasets veh,pid,seg] [--algos cart,efti,id3,de-pdt,rf] [--candidates 4]
                               [--seed 0] [--workers 2] [--out bench/results/tune_bench] [--keep DIR]

For every dataset and budget -- ``qemu-m4`` with 1 KiB flash / 2 µs and with 8 KiB / 20 µs, and the
Cortex-M0 ``qemu-microbit`` with 2 KiB flash -- :func:`treegen.device.tune.tune` searches the
algorithms' size knobs (its candidates: each algorithm's defaults + ``--candidates``-1 sampled
settings), measures the finalists on the emulated target and HIL-confirms the chosen model on every
row. The reference: each algorithm with its **default settings**, cross-validated on the same
2 x 5 folds as tune's last rung (compare's tasks, the same results file), fitted on all rows with the
same seed and measured on the same target with every layout and variant (HIL runs, the same cost
cache); the best of those that fit the budget. The CV tasks of a dataset are shared by its three
budgets (same seed, same search), and the costs of a target by its budgets.

Output: ``<out>.md`` and ``<out>.json`` (the command and the commit in the header), and one front
plot per (dataset, budget) in ``<out>/``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import provenance

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"

from treegen import __version__  # noqa: E402
from treegen.core import targets as tg_targets  # noqa: E402
from treegen.core.data import load_csv  # noqa: E402
from treegen.core.limits import bytes_text  # noqa: E402
from treegen.device.tune import LAYOUTS, _fit_full, tune  # noqa: E402
from treegen.device.tune_cost import CostCache, CostMeter, fits, variants_for  # noqa: E402
from treegen.emit.plot_tune import plot_tune  # noqa: E402
from treegen.learn import compare as C  # noqa: E402
from treegen.learn import tune as T  # noqa: E402

#: (target, max flash bytes, max latency µs or None)
BUDGETS = (("qemu-m4", 1024, 2.0), ("qemu-m4", 8192, 20.0), ("qemu-microbit", 2048, None))


def defaults(data, algos, seed, results, target, budget, costs, work, workers) -> dict:
    """Each algorithm's default setting: CV on tune's last rung's folds, costs on the target, the best that fits."""
    methods = [C.Method(T.default_label(a), a, {}) for a in algos]
    repeats, folds = T.RUNGS[-1]
    assert folds == tuple(range(T.FOLDS))
    run = C.run_comparison([data], methods, folds=T.FOLDS, repeats=repeats, seed=seed, results=results,
                           workers=workers)
    acc = {m: run["summary"]["cells"][data.name][m]["accuracy"]["mean"] for m in run["summary"]["methods"]}
    meter = CostMeter(target, work_dir=work, cache=CostCache(costs))
    rows = []
    try:
        for m in methods:
            model = _fit_full(m, data, seed)
            for layout in LAYOUTS:
                for variant in variants_for(tg_targets.get(target)):
                    cost = meter(model, data.X, layout, variant)
                    rows.append({"name": m.name, "accuracy": acc[m.name], **cost,
                                 "fits": not fits(cost, budget)})
    finally:
        meter.close()
    fitting = [r for r in rows if r["fits"]]
    best = max(fitting, key=lambda r: (r["accuracy"], -r["flash_bytes"], -r["latency_us"])) if fitting else None
    return {"points": rows, "best": best, "hil_runs": meter.measured}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="veh,pid,seg")
    ap.add_argument("--algos", default="cart,efti,id3,de-pdt,rf")
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "tune_bench"))
    ap.add_argument("--keep", help="folder for the results files and cost caches (default: a temporary one)")
    args = ap.parse_args()
    command = "python bench/tune_bench.py " + shlex.join(sys.argv[1:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    algos = args.algos.split(",")
    tmp = tempfile.TemporaryDirectory(prefix="tune-bench-")
    keep = Path(args.keep or tmp.name)
    keep.mkdir(parents=True, exist_ok=True)
    rows, t0 = [], time.time()
    for name in args.datasets.split(","):
        ds = load_csv(DATASETS / f"{name}.csv.gz")
        data = C.CompareData(name, ds.X, ds.labels)
        results = keep / f"{name}.tasks.jsonl"
        for target, flash, us in BUDGETS:
            budget = {"max_flash": flash, "max_ram": None, "max_latency_us": us, "max_instructions": None}
            costs = keep / f"{target}.costs.jsonl"
            t1 = time.time()
            r = tune(ds.X, ds.labels, target, max_flash=flash, max_latency_us=us, algos=algos,
                     per_algo=args.candidates, seed=args.seed, results=results, costs=costs, workers=args.workers,
                     dataset=name, work_dir=keep / "build")
            chosen = r["chosen"]
            if chosen is not None:
                chosen.pop("model")
            label = f"{name}-{target}-{flash}"
            plot_tune(r, out / f"{label}.svg")
            d = defaults(data, algos, args.seed, results, target, budget, costs, keep / "build", args.workers)
            row = {"dataset": name, "target": target, "budget": budget, "chosen": chosen,
                   "confirmation": r["confirmation"], "message": r["message"], "front": [r["points"][i] for i in r["front"]],
                   "n_points": len(r["points"]), "cut_by_budget": r["search"]["cut_by_budget"],
                   "default_best": d["best"], "default_points": d["points"],
                   "seconds": round(time.time() - t1, 1), "plot": f"{out.name}/{label}.svg"}
            da = None if d["best"] is None else d["best"]["accuracy"]
            row["verdict"] = ("no model fits" if chosen is None and da is None else
                              "tune finds none, a default fits (FAIL)" if chosen is None else
                              "HIL confirmation failed (FAIL)" if not r["confirmation"]["ok"] else
                              "ok" if da is None or chosen["accuracy"] >= da - 1e-12 else "below the default (FAIL)")
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("dataset", "target", "message", "verdict", "seconds")}), flush=True)
    wall = time.time() - t0
    header = (f"Command: `{command}` (commit {provenance.commit_of(REPO)}, treegen {__version__}); seed {args.seed}; "
              f"algorithms {','.join(algos)}, {args.candidates} candidates each (defaults + sampled); "
              f"local Dask cluster of {args.workers} workers on a 2-core machine shared with other jobs -- modest "
              f"budgets; wall time {wall / 60:.1f} min.")
    (out.parent / f"{out.name}.json").write_text(json.dumps({"command": command, "commit": provenance.commit_of(REPO), "rows": rows},
                                                            indent=2) + "\n")
    md = ["# treegen tune vs the best default-settings single algorithm, same budget", "", header, "",
          "CV accuracy: 2 x 5-fold stratified CV (tune's last rung; the defaults on the same folds). Flash/RAM: the "
          "model's share of the linked firmware (over a one-leaf firmware); instructions: HIL BENCH on the emulated "
          "core; µs = instructions / clock. Confirmation: one HIL run of the chosen model on every row.", "",
          "| dataset | target | budget | tune's choice | CV acc % | flash | insn | µs | HIL confirm | best default "
          "under budget | its CV acc % | flash | µs | verdict |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["budget"]
        budget = bytes_text(b["max_flash"]) + (f" / {b['max_latency_us']:g} µs" if b["max_latency_us"] else "")
        c, conf, d = r["chosen"], r["confirmation"], r["default_best"]
        if c is None:
            tune_cells = [f"none: {r['message']}", "", "", "", "", ""]
        else:
            tune_cells = [f"{c['name']} {c['layout']}/{c['variant']}", f"{100 * c['accuracy']:.2f}",
                          f"{c['flash_bytes']} B", f"{c['instructions']:.1f}", f"{c['latency_us']:.2f}",
                          (f"FAIL: {conf['error']}" if conf.get("error") else
                           f"{'PASS' if conf['ok'] else 'FAIL'}: {conf['rows']} rows, {conf['mismatches']} mismatches, "
                           f"{conf['flash_bytes']} B, {conf['insn_per_inference']:g} insn")]
        d_cells = (["none fits", "", "", ""] if d is None else
                   [f"{d['name']} {d['layout']}/{d['variant']}", f"{100 * d['accuracy']:.2f}", f"{d['flash_bytes']} B",
                    f"{d['latency_us']:.2f}"])
        md.append(f"| {r['dataset']} | {r['target']} | {budget} | " + " | ".join(tune_cells + d_cells)
                  + f" | {r['verdict']} |")
    md += ["", "Front plots: " + ", ".join(f"[{r['dataset']} {r['target']} {bytes_text(r['budget']['max_flash'])}]"
                                            f"({r['plot']})" for r in rows), ""]
    for r in rows:
        md += [f"## {r['dataset']} on {r['target']}, {bytes_text(r['budget']['max_flash'])}"
               + (f" / {r['budget']['max_latency_us']:g} µs" if r["budget"]["max_latency_us"] else "")
               + f": the front ({len(r['front'])} of {r['n_points']} measured points)", "",
               "| model | layout | variant | CV acc % | flash B | insn | µs | fits |", "|---|---|---|---|---|---|---|---|"]
        for p in sorted(r["front"], key=lambda p: -p["accuracy"]):
            md.append(f"| {p['name']} | {p['layout']} | {p['variant']} | {100 * p['accuracy']:.2f} | {p['flash_bytes']} | "
                      f"{p['instructions']:.1f} | {p['latency_us']:.2f} | {'yes' if p['fits'] else 'no'} |")
        md.append("")
    (out.parent / f"{out.name}.md").write_text("\n".join(md))
    tmp.cleanup()
    return 1 if any("FAIL" in r["verdict"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
