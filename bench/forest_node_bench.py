"""Oblique (EFTI) forests: attribute sampling per node vs per tree, beside scikit-learn's forest (issue 26).

Usage::

    python bench/forest_node_bench.py [--trees 100] [--iters 2000] [--max-features sqrt]
                                      [--datasets ger,thy,bcw,...] [--target cortex-m4]
                                      [--out bench/results/forest_node_bench] [--resume]

5x2 cross-validation, the folds of ``bench/forest_bench.py`` (five stratified 2-fold splits, seeds
100..104; fold seed ``10 * repeat + fold``). Three forests per fold, the same number of trees and
bootstrap samples of |T| rows, ``max_features`` features (default ``sqrt``):

* ``node``: ``RFClassifier(base='efti', feature_bagging='node')``: every node of every EFTI tree draws
  its own attributes (``EFTIParams.node_features``);
* ``tree``: ``RFClassifier(base='efti', feature_bagging='tree')``: one attribute subset per tree
  (today's oblique forest, the default of ``base='efti'``);
* ``sk``: scikit-learn's ``RandomForestClassifier`` (per split, fully grown trees);
* ``all`` (only with ``--methods``): bagged EFTI trees on every attribute (``feature_bagging='tree'``,
  ``max_features='all'``), no attribute sampling at all.

``--methods`` picks and orders the forests (default ``node,tree,sk``); the comparisons under the table
are the first forest against each of the others.

Both EFTI forests run ``--iters`` iterations per tree with the native engine (Ko = 0.01, the rest of
the EFTI defaults). Per dataset and forest: mean test accuracy over the 10 folds with its 95 % CI
(Student t), the total leaves of the forest (mean over folds) and, on the first fold, the flash of the
exported C library (``treegen.emit.export``: q15, table layout, the object compiled for ``--target``
with its size tool; scikit-learn's forest through ``from_sklearn``); ``majority`` is the accuracy of
predicting the training majority class. The per-fold wins of ``node`` over ``tree`` and a
Wilcoxon signed-rank test over the (dataset-mean) pairs are printed under the table.

Writes ``OUT.md`` and ``OUT.json`` (after every dataset; ``--resume`` skips the datasets already in
``OUT.json``), stamped with the command and commit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
DATASETS = REPO.parent / "shared" / "datasets"
DEFAULT = "ger,thy,bcw,pid,ion,son,gls,liv,hrts,veh"
METHODS = ("node", "tree", "sk", "all")
LABELS = {"node": "per-node EFTI forest", "tree": "per-tree EFTI forest", "sk": "sklearn RF",
          "all": "bagged EFTI (all attributes)"}


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def flash_bytes(model, target: str) -> int | None:
    from treegen.emit.export import export_model

    with tempfile.TemporaryDirectory(prefix="tg-forest-node-") as tmp:
        rep = export_model(model, tmp, target=target, layout="table", dtype="q15", name="forest", link=False)
    return rep.flash_bytes


def fit_fold(name: str, X: np.ndarray, y: np.ndarray, tr: np.ndarray, seed: int, args, measure: bool) -> dict:
    from sklearn.ensemble import RandomForestClassifier

    from treegen import RFClassifier
    from treegen.importers.sklearn import from_sklearn

    values, counts = np.unique(y[tr], return_counts=True)
    out = {"seed": seed, "majority": float(np.mean(y[~tr] == values[counts.argmax()]))}
    for m in args.methods:
        t0 = time.perf_counter()
        if m == "sk":
            est = RandomForestClassifier(n_estimators=args.trees, max_features=args.max_features, bootstrap=True,
                                         random_state=seed, n_jobs=1).fit(X[tr], y[tr])
            leaves = int(sum(e.tree_.n_leaves for e in est.estimators_))
        else:
            bagging, k = ("tree", "all") if m == "all" else (m, args.max_features)
            est = RFClassifier(n_trees=args.trees, base="efti", feature_bagging=bagging, max_features=k,
                               max_iter=args.iters, random_state=seed, n_jobs=1).fit(X[tr], y[tr])
            leaves = int(sum(t.n_leaves for t in est.trees_))
        fit_s = time.perf_counter() - t0
        out[m] = {"acc": float(est.score(X[~tr], y[~tr])), "leaves": leaves, "fit_s": round(fit_s, 3)}
        if measure:
            model = from_sklearn(est, X=X[tr]) if m == "sk" else est.model_
            out[m]["flash"] = flash_bytes(model, args.target)
    return out


def summarise(rec: dict, methods) -> dict:
    from treegen.core.metrics import mean_ci95

    F = rec["folds"]
    s = {"majority": float(np.mean([f["majority"] for f in F]))}
    for m in methods:
        mean, ci = mean_ci95([f[m]["acc"] for f in F])
        s[m] = {"acc": mean, "ci95": ci, "leaves": float(np.mean([f[m]["leaves"] for f in F])),
                "flash": F[0][m].get("flash"), "fit_s": float(np.sum([f[m]["fit_s"] for f in F]))}
    a, b = methods[0], methods[1]
    s["first_wins"] = int(sum(f[a]["acc"] > f[b]["acc"] for f in F))
    s["first_losses"] = int(sum(f[a]["acc"] < f[b]["acc"] for f in F))
    for m in methods:            # equal means must compare equal (float sums of the same folds in another order)
        s[m]["acc"] = round(s[m]["acc"], 12)
    return s


def table(results: list, args, cmd: str, rev: str) -> str:
    ms = args.methods
    short = " / ".join(ms)
    lines = ["| dataset | majority | " + " | ".join(LABELS[m] for m in ms) + f" | {ms[0]} vs {ms[1]} folds "
             f"(won-lost) | leaves {short} | flash B {short} | fit s {short} |",
             "|" + "---|" * (len(ms) + 6)]
    for rec in results:
        s = rec["summary"]
        fl = " / ".join("-" if s[m]["flash"] is None else str(s[m]["flash"]) for m in ms)
        lines.append(f"| {rec['dataset']} | {100 * s['majority']:.2f} | "
                     + " | ".join(f"{100 * s[m]['acc']:.2f} ± {100 * s[m]['ci95']:.2f}" for m in ms)
                     + f" | {s['first_wins']}-{s['first_losses']} | "
                     + " / ".join(f"{s[m]['leaves']:.0f}" for m in ms) + f" | {fl} | "
                     + " / ".join(f"{s[m]['fit_s']:.0f}" for m in ms) + " |")
    lines.append("")
    if len(results) >= 5:
        from scipy.stats import wilcoxon

        a = [r["summary"][ms[0]]["acc"] for r in results]
        parts = []
        for m in ms[1:]:
            b = [r["summary"][m]["acc"] for r in results]
            wins = sum(x > y for x, y in zip(a, b))
            losses = sum(x < y for x, y in zip(a, b))
            parts.append(f"{LABELS[ms[0]]} vs {LABELS[m]} over {len(results)} datasets: {wins} wins / "
                         f"{len(results) - wins - losses} ties / {losses} losses, Wilcoxon signed-rank p = "
                         f"{wilcoxon(a, b).pvalue:.4f}")
        lines.append("; ".join(parts))
    lines.append(f"5x2 CV (folds of bench/forest_bench.py), {args.trees} trees per forest, max_features="
                 f"{args.max_features} (per node / per tree / per split), bootstrap |T|, EFTI {args.iters} iterations "
                 f"per tree (native engine, Ko 0.01); accuracy in % (mean ± 95 % CI over the 10 folds); leaves: "
                 f"total per forest, mean over folds; flash: the exported C library (q15, table layout) compiled for "
                 f"{args.target}, first fold; fit s: summed over the folds (1 worker, nice 10, shared machine)")
    lines.append(f"command: {cmd}")
    lines.append(f"commit: {rev}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from forest_bench import folds_5x2

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--max-features", default="sqrt")
    ap.add_argument("--datasets", default=DEFAULT)
    ap.add_argument("--target", default="cortex-m4")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "forest_node_bench"))
    ap.add_argument("--methods", default="node,tree,sk")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    args.methods = args.methods.split(",")
    if len(args.methods) < 2 or any(m not in METHODS for m in args.methods):
        ap.error(f"--methods: two or more of {', '.join(METHODS)}")
    if args.max_features not in ("sqrt", "log2"):
        args.max_features = int(args.max_features)
    cmd = "python bench/forest_node_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    rev = commit()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    if args.resume and out.with_suffix(".json").exists():
        results = json.loads(out.with_suffix(".json").read_text())["results"]
    done = {r["dataset"] for r in results}
    for name in args.datasets.split(","):
        if name in done:
            continue
        d = np.loadtxt(DATASETS / f"{name}.csv.gz", delimiter=",", skiprows=1)
        X, y = d[:, :-1], d[:, -1].astype(np.int64)
        rec = {"dataset": name, "folds": []}
        for r, f, tr in folds_5x2(y):
            fold = fit_fold(name, X, y, tr, 10 * r + f, args, measure=(r == 0 and f == 0))
            rec["folds"].append(fold)
            print(name, r, f, {m: round(fold[m]["acc"], 4) for m in args.methods}, flush=True)
        rec["summary"] = summarise(rec, args.methods)
        results.append(rec)
        text = table(results, args, cmd, rev)
        print(text.splitlines()[len(results) + 1], flush=True)
        out.with_suffix(".md").write_text(text + "\n")
        out.with_suffix(".json").write_text(json.dumps({"command": cmd, "commit": rev, "results": results},
                                                       indent=1, default=float))
    print(table(results, args, cmd, rev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
