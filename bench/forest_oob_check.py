"""Is the gap between a random forest's out-of-bag error and its cross-validated error a bug or noise?

Usage::

    python bench/forest_oob_check.py [--forest-json bench/results/forest_bench.json]
                                     [--datasets son] [--reps 25] [--trees 100]
                                     [--out bench/results/forest_oob_check]

Three parts:

1. **Bookkeeping audit** (every fit of part 3): the OOB decision function is recomputed independently
   from the bootstrap draws (the forest's per-tree generators replayed: a row is scored only by the
   trees whose sample omitted it; rows in every sample are left out), and the OOB vote is checked to
   be the same soft vote as ``predict`` (the mean of the trees' leaf frequencies, argmax, first
   class on ties): with every tree counted, that vote must equal ``Model.predict`` on every row.
2. **The 5x2 CV bench's own folds** (``--forest-json``, written by ``bench/forest_bench.py``): per dataset
   the mean paired gap ``OOB error - test error`` over the 10 folds with its standard error, for
   treegen AND for scikit-learn's RandomForestClassifier on the same folds.
3. **More repetitions** (``--reps`` R: R x 2-fold CV with fold seeds 5000 + r, which the 5x2 bench does
   not use): the mean gap and its standard error for both forests on ``--datasets``, so the gap of
   the 10 bench folds can be compared with its sampling noise. Nothing is tuned: the bench's verdict
   stays what the 5x2 run gave.

Standard errors: folds of one repetition share rows (their two halves are complementary), so the SE
is computed over the R repetition means of the gap, not over the 2R folds.
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


def audit(clf, X: np.ndarray, y: np.ndarray, seed: int) -> None:
    """Recount the OOB decision function from the bootstrap draws; check the vote equals predict."""
    from treegen.learn import forest

    Xn = clf.scaling_.transform(X)
    yi = np.searchsorted(clf.classes_, y)
    n, C = X.shape[0], clf.classes_.shape[0]
    acc = np.zeros((n, C))
    seen = np.zeros(n, dtype=np.int64)
    allp = np.zeros((n, C))
    for t, tree in enumerate(clf.trees_):
        rows = forest.draw_sample(forest.tree_rng(seed, t), n, 1.0)
        out = np.ones(n, dtype=bool)
        out[rows] = False
        p = tree.predict_proba(Xn)
        acc[out] += p[out]
        seen[out] += 1
        allp += p
    scored = seen > 0
    dec = acc[scored] / seen[scored, None]
    if not np.array_equal(np.isnan(clf.oob_decision_function_).any(axis=1), ~scored):
        raise SystemExit("audit: rows scored by the forest differ from the recount")
    if not np.allclose(clf.oob_decision_function_[scored], dec, rtol=0, atol=1e-12):
        raise SystemExit("audit: OOB decision function differs from the recount")
    if clf.oob_score_ != float(np.mean(dec.argmax(axis=1) == yi[scored])):
        raise SystemExit("audit: oob_score_ differs from the recount")
    vote = (allp / len(clf.trees_)).argmax(axis=1)
    if not np.array_equal(clf.classes_[vote], clf.predict(X)):
        raise SystemExit("audit: the soft vote of all trees differs from predict")
    if not np.allclose(clf.predict_proba(X), allp / len(clf.trees_), rtol=0, atol=1e-12):
        raise SystemExit("audit: predict_proba is not the mean of the trees' leaf frequencies")


def gap_stats(per_rep: list[float]) -> tuple[float, float]:
    a = np.asarray(per_rep, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else float("nan")


def main(argv=None) -> int:
    from sklearn.ensemble import RandomForestClassifier

    from treegen import RFClassifier
    from treegen.learn.cv import stratified_fold_ids

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forest-json", default=str(REPO / "bench" / "results" / "forest_bench.json"))
    ap.add_argument("--datasets", default="son")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "forest_oob_check"))
    args = ap.parse_args(argv)
    cmd = "python bench/forest_oob_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
    t_start = time.perf_counter()
    lines = ["## 2. The 5x2 CV bench's folds (gap = OOB error - test error, points; mean ± SE over the 5 repetitions)",
             "", "| dataset | treegen OOB | treegen CV | treegen gap | sklearn OOB | sklearn CV | sklearn gap |",
             "|---|---|---|---|---|---|---|"]
    bench = json.loads(Path(args.forest_json).read_text())
    part2 = []
    for r in bench["results"]:
        F = r["folds"]
        reps = sorted({v["repeat"] for v in F})
        tg = [np.mean([v["tg_oob_err"] - (1 - v["tg_acc"]) for v in F if v["repeat"] == k]) for k in reps]
        sk = [np.mean([v["sk_oob_err"] - (1 - v["sk_acc"]) for v in F if v["repeat"] == k]) for k in reps]
        (tgm, tgs), (skm, sks) = gap_stats(tg), gap_stats(sk)
        sk_cv = 1 - np.mean([v["sk_acc"] for v in F])
        part2.append({"dataset": r["dataset"], "tg_gap": tgm, "tg_gap_se": tgs, "sk_gap": skm, "sk_gap_se": sks,
                      "tg_oob": r["tg_oob_err"], "tg_cv": r["tg_cv_err"], "sk_oob": r["sk_oob_err"], "sk_cv": sk_cv})
        lines.append(f"| {r['dataset']} | {100 * r['tg_oob_err']:.2f} | {100 * r['tg_cv_err']:.2f} | "
                     f"{100 * tgm:+.2f} ± {100 * tgs:.2f} | {100 * r['sk_oob_err']:.2f} | {100 * sk_cv:.2f} | "
                     f"{100 * skm:+.2f} ± {100 * sks:.2f} |")
    n_sk_out = sum(abs(p["sk_oob"] - p["sk_cv"]) > 0.01 for p in part2)
    lines += ["", f"scikit-learn's own OOB error is more than 1 point from its CV error on {n_sk_out} of {len(part2)} "
              "datasets (same folds, same number of trees).", ""]

    lines += [f"## 3. {args.reps} x 2-fold CV (fold seeds 5000 + r), {args.trees} trees; bookkeeping audit on every fit",
              "", "| dataset | folds | treegen OOB | treegen CV | treegen gap | sklearn OOB | sklearn CV | sklearn gap | "
              "SE of one 5x2 CV error | audits passed |", "|---|---|---|---|---|---|---|---|---|---|"]
    part3 = []
    for name in args.datasets.split(","):
        d = np.loadtxt(DATASETS / f"{name}.csv.gz", delimiter=",", skiprows=1)
        X, y = d[:, :-1], d[:, -1].astype(np.int64)
        folds, audits = [], 0
        for r in range(args.reps):
            fold = stratified_fold_ids(y, 2, np.random.default_rng(5000 + r))
            for f in range(2):
                tr = fold != f
                seed = 10 * r + f
                tg = RFClassifier(n_trees=args.trees, max_features="sqrt", random_state=seed).fit(X[tr], y[tr])
                audit(tg, X[tr], y[tr], seed)
                audits += 1
                sk = RandomForestClassifier(n_estimators=args.trees, max_features="sqrt", bootstrap=True,
                                            oob_score=True, random_state=seed, n_jobs=1).fit(X[tr], y[tr])
                folds.append({"rep": r, "fold": f, "tg_oob": 1 - tg.oob_score_, "tg_err": 1 - tg.score(X[~tr], y[~tr]),
                              "sk_oob": 1 - sk.oob_score_, "sk_err": 1 - sk.score(X[~tr], y[~tr])})
        def per_rep(key_a, key_b):
            return [np.mean([v[key_a] - v[key_b] for v in folds if v["rep"] == k]) for k in range(args.reps)]
        (tgm, tgs), (skm, sks) = gap_stats(per_rep("tg_oob", "tg_err")), gap_stats(per_rep("sk_oob", "sk_err"))
        rep_err = [np.mean([v["tg_err"] for v in folds if v["rep"] == k]) for k in range(args.reps)]
        se_5x2 = float(np.std(rep_err, ddof=1) / np.sqrt(5))      # SE of a mean over 5 repetitions
        m = {k: float(np.mean([v[k] for v in folds])) for k in ("tg_oob", "tg_err", "sk_oob", "sk_err")}
        part3.append({"dataset": name, "folds": folds, "tg_gap": tgm, "tg_gap_se": tgs, "sk_gap": skm,
                      "sk_gap_se": sks, "se_5x2_cv_error": se_5x2, "audits_passed": audits, **m})
        lines.append(f"| {name} | {len(folds)} | {100 * m['tg_oob']:.2f} | {100 * m['tg_err']:.2f} | {100 * tgm:+.2f} ± "
                     f"{100 * tgs:.2f} | {100 * m['sk_oob']:.2f} | {100 * m['sk_err']:.2f} | {100 * skm:+.2f} ± "
                     f"{100 * sks:.2f} | {100 * se_5x2:.2f} | {audits}/{len(folds)} |")
        print(lines[-1], flush=True)
    lines += ["", "gap = OOB error - test error in points (mean ± standard error over the repetitions); "
              "'SE of one 5x2 CV error' = the spread of treegen's CV error between repetitions / sqrt(5).",
              f"wall time {time.perf_counter() - t_start:.0f} s; command: {cmd}"]
    text = ("# Random-forest OOB error vs CV error\n\n## 1. Bookkeeping audit: see the last column of part 3 "
            "(recount from the bootstrap draws; OOB vote = predict's soft vote)\n\n" + "\n".join(lines))
    print(text)
    out = Path(args.out)
    out.with_suffix(".md").write_text(text + "\n")
    out.with_suffix(".json").write_text(json.dumps({"command": cmd, "bench_folds": part2, "repetitions": part3},
                                                   indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
