"""treegen's random forest (``--algo rf``) beside scikit-learn's RandomForestClassifier.

Usage::

    python bench/forest_bench.py [--trees 50] [--datasets bcw,pid,...] [--jobs 1]
                                 [--efti-iters 1500] [--out bench/results/forest_bench]

5x2 cross-validation (five repetitions of a stratified 2-fold split, the same folds for every
learner). Per dataset and learner: mean test accuracy and its 95 % CI (Student t over the 10
folds), mean out-of-bag error, mean fit time. Both forests use the same number of trees, bootstrap
samples of |T| rows, ``max_features='sqrt'`` per split, Gini, fully grown trees. Checks:

* treegen's mean accuracy lies inside scikit-learn's 95 % CI;
* treegen's OOB error is within 1 point of its 5x2 CV error;
* fit time ratio treegen / scikit-learn (both ``n_jobs=1``, same run).

``--efti-iters N`` (> 0) adds an oblique forest (``--base efti``, features per tree, N iterations per
tree, Ko = 0.01) and a single EFTI tree (``20 * N`` iterations) to the table, with the total number
of leaves of each model as its flash proxy.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATASETS = REPO.parent / "shared" / "datasets"
DEFAULT = "bcw,pid,ion,son,gls,liv,hrts,veh"


def folds_5x2(y: np.ndarray):
    from treegen.learn.cv import stratified_fold_ids

    for r in range(5):
        fold = stratified_fold_ids(y, 2, np.random.default_rng(100 + r))
        for f in range(2):
            yield r, f, fold != f


def main(argv=None) -> int:
    from sklearn.ensemble import RandomForestClassifier

    from treegen import EFTIClassifier, RFClassifier
    from treegen.core.metrics import mean_ci95

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--datasets", default=DEFAULT)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--efti-iters", type=int, default=0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "forest_bench"))
    args = ap.parse_args(argv)
    cmd = "python bench/forest_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = []
    lines = ["| dataset | treegen rf acc | sklearn rf acc (95 % CI) | in CI | rf OOB err | rf CV err | |OOB-CV| <= 1 | "
             "fit time ratio | leaves rf / sk |" + (" efti-forest acc (leaves) | efti tree acc (leaves) |" if args.efti_iters else ""),
             "|" + "---|" * (9 + (2 if args.efti_iters else 0))]
    for name in args.datasets.split(","):
        d = np.loadtxt(DATASETS / f"{name}.csv.gz", delimiter=",", skiprows=1)
        X, y = d[:, :-1], d[:, -1].astype(np.int64)
        rec = {"dataset": name, "folds": []}
        for r, f, tr in folds_5x2(y):
            seed = 10 * r + f
            t0 = time.perf_counter()
            tg = RFClassifier(n_trees=args.trees, max_features="sqrt", random_state=seed, n_jobs=args.jobs).fit(X[tr], y[tr])
            t_tg = time.perf_counter() - t0
            t0 = time.perf_counter()
            sk = RandomForestClassifier(n_estimators=args.trees, max_features="sqrt", bootstrap=True, oob_score=True,
                                        random_state=seed, n_jobs=args.jobs).fit(X[tr], y[tr])
            t_sk = time.perf_counter() - t0
            fold = {"repeat": r, "fold": f, "tg_acc": tg.score(X[~tr], y[~tr]), "sk_acc": sk.score(X[~tr], y[~tr]),
                    "tg_oob_err": 1 - tg.oob_score_, "sk_oob_err": 1 - sk.oob_score_, "tg_s": t_tg, "sk_s": t_sk,
                    "tg_leaves": int(sum(t.n_leaves for t in tg.trees_)),
                    "sk_leaves": int(sum(e.tree_.n_leaves for e in sk.estimators_))}
            if args.efti_iters:
                ob = RFClassifier(n_trees=args.trees, base="efti", max_iter=args.efti_iters, random_state=seed,
                                  n_jobs=args.jobs).fit(X[tr], y[tr])
                single = EFTIClassifier(max_iter=20 * args.efti_iters, random_state=seed).fit(X[tr], y[tr])
                fold.update({"efti_forest_acc": ob.score(X[~tr], y[~tr]),
                             "efti_forest_leaves": int(sum(t.n_leaves for t in ob.trees_)),
                             "efti_acc": single.score(X[~tr], y[~tr]), "efti_leaves": single.tree_.n_leaves})
            rec["folds"].append(fold)
        F = rec["folds"]
        tg_acc = np.mean([v["tg_acc"] for v in F])
        sk_mean, sk_ci = mean_ci95([v["sk_acc"] for v in F])
        oob = np.mean([v["tg_oob_err"] for v in F])
        cv_err = 1 - tg_acc
        ratio = sum(v["tg_s"] for v in F) / sum(v["sk_s"] for v in F)
        rec.update({"tg_acc": tg_acc, "sk_acc": sk_mean, "sk_ci95": sk_ci, "in_ci": bool(abs(tg_acc - sk_mean) <= sk_ci),
                    "tg_oob_err": oob, "tg_cv_err": cv_err, "oob_within_1pt": bool(abs(oob - cv_err) <= 0.01),
                    "sk_oob_err": np.mean([v["sk_oob_err"] for v in F]), "fit_time_ratio": ratio})
        leaves = f"{np.mean([v['tg_leaves'] for v in F]):.0f} / {np.mean([v['sk_leaves'] for v in F]):.0f}"
        line = (f"| {name} | {100 * tg_acc:.2f} | {100 * sk_mean:.2f} ± {100 * sk_ci:.2f} | {'yes' if rec['in_ci'] else 'NO'} | "
                f"{100 * oob:.2f} | {100 * cv_err:.2f} | {'yes' if rec['oob_within_1pt'] else 'NO'} | {ratio:.2f} | {leaves} |")
        if args.efti_iters:
            line += (f" {100 * np.mean([v['efti_forest_acc'] for v in F]):.2f} ({np.mean([v['efti_forest_leaves'] for v in F]):.0f}) |"
                     f" {100 * np.mean([v['efti_acc'] for v in F]):.2f} ({np.mean([v['efti_leaves'] for v in F]):.1f}) |")
        lines.append(line)
        print(line, flush=True)
        results.append(rec)
    lines.append("")
    lines.append(f"5x2 CV, {args.trees} trees, max_features=sqrt per split, bootstrap |T|; accuracy in %; "
                 f"in CI: {sum(r['in_ci'] for r in results)}/{len(results)}; OOB within 1 point: "
                 f"{sum(r['oob_within_1pt'] for r in results)}/{len(results)}")
    lines.append(f"command: {cmd}")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text + "\n")
    out.with_suffix(".json").write_text(json.dumps({"command": cmd, "results": results}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
