"""EFTI with vicinal risk in its fitness (``--risk vicinal``) beside EFTI with the empirical risk.

Usage::

    python bench/efti_vicinal_bench.py [--iters 5000] [--folds 5] [--ko 0.05] [--sigma2 0.1]
                                       [--datasets irs,gls,hrts,...] [--jobs 1]
                                       [--reference BIN [--ref-seed S]]
                                       [--out bench/results/efti_vicinal_bench]

Stratified K-fold CV (the folds of ``treegen.learn.cv``, seed 1), the SAME fold and seed for both
risks, both on the Python engine (results recorded before the integer vicinal recursion of
``treegen.learn.vicinal_q16`` used the float64 risk; the native engine now gives the same trees). Reports
mean test accuracy and leaves per dataset and risk, and how many folds each risk wins. The
datasets default to the ten of ``bench/paper_table.py``.

``--reference BIN`` adds the public EFTI reference implementation (github.com/bogdanvuk/efti, empirical
fitness only; build BIN with ``bash bench/build_efti_reference.sh GIT_DIR OUT --test-fold-fix``) run the
same way: the same iterations, Ko and number of folds, one run (``BIN --max_iter=N --oversize_w=KO
--folds=K --runs=1 --seed=S --dataset_selection=D``). Its folds are its own (it assigns them itself, on
its own 15-bit copies of the datasets), so its column is compared by mean accuracy, not fold by fold.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
DATASETS = REPO.parent / "shared" / "datasets"
DEFAULT = "bcw,irs,pid,gls,veh,hrts,lym,son,ion,liv"


def run(name: str, fold: int, folds: int, risk: str, iters: int, ko: float, sigma2: float) -> dict:
    from treegen import EFTIClassifier
    from treegen.learn.cv import fold_seed, stratified_fold_ids

    d = np.loadtxt(DATASETS / f"{name}.csv.gz", delimiter=",", skiprows=1)
    X, y = d[:, :-1], d[:, -1].astype(np.int64)
    test = stratified_fold_ids(y, folds, np.random.Generator(np.random.PCG64(1))) == fold
    t0 = time.perf_counter()
    est = EFTIClassifier(max_iter=iters, oversize_weight=ko, engine="python", risk=risk, vicinity_sigma2=sigma2,
                         random_state=fold_seed(1, 0, fold)).fit(X[~test], y[~test])
    return {"dataset": name, "fold": fold, "risk": risk, "accuracy": est.score(X[test], y[test]),
            "leaves": est.tree_.n_leaves, "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--ko", type=float, default=0.05)
    ap.add_argument("--sigma2", type=float, default=0.1)
    ap.add_argument("--datasets", default=DEFAULT)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--reference", metavar="BIN", help="also run this build of the public EFTI reference")
    ap.add_argument("--ref-seed", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "efti_vicinal_bench"))
    args = ap.parse_args(argv)
    if args.reference:
        from paper_table import run_reference
    cmd = "python bench/efti_vicinal_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.reference:
        cmd = cmd.replace(args.reference, "REF")
    ref_head = " acc reference | leaves reference | vicinal vs reference |" if args.reference else ""
    lines = ["| dataset | acc empirical | acc vicinal | leaves empirical | leaves vicinal | folds won (emp/vic/tie) |" + ref_head,
             "|---|---|---|---|---|---|" + ("---|---|---|" if args.reference else "")]
    rows = []
    refs = {}
    for name in args.datasets.split(","):
        rows += Parallel(n_jobs=args.jobs)(delayed(run)(name, f, args.folds, r, args.iters, args.ko, args.sigma2)
                                           for f in range(args.folds) for r in ("empirical", "vicinal"))
        R = {r: sorted((x for x in rows if x["dataset"] == name and x["risk"] == r), key=lambda x: x["fold"])
             for r in ("empirical", "vicinal")}
        ae = np.array([x["accuracy"] for x in R["empirical"]])
        av = np.array([x["accuracy"] for x in R["vicinal"]])
        lines.append(f"| {name} | {100 * ae.mean():.2f} | {100 * av.mean():.2f} | "
                     f"{np.mean([x['leaves'] for x in R['empirical']]):.1f} | {np.mean([x['leaves'] for x in R['vicinal']]):.1f} | "
                     f"{int(np.sum(ae > av))}/{int(np.sum(av > ae))}/{int(np.sum(av == ae))} |")
        if args.reference:
            ref = run_reference(args.reference, name, args.iters, args.ko, args.folds, 1, args.ref_seed)
            refs[name] = ref
            ra = ref["accuracy"]["mean"]
            lines[-1] += (f" {ra:.2f} | {ref['leaves']['mean']:.1f} | "
                          f"{'vicinal higher' if 100 * av.mean() > ra else 'reference higher' if 100 * av.mean() < ra else 'equal'} "
                          f"({100 * av.mean() - ra:+.2f}) |")
        text = "\n".join(lines + ["", f"{args.folds}-fold CV, {args.iters} iterations, Ko={args.ko}, sigma2={args.sigma2}, "
                                  "Python engine for both; accuracy in %"
                                  + (f"; reference: github.com/bogdanvuk/efti built with --test-fold-fix, {args.iters} "
                                     f"iterations, oversize_w={args.ko}, {args.folds} folds of its own, 1 run, seed "
                                     f"{args.ref_seed} (empirical fitness)" if args.reference else ""), f"command: {cmd}"])
        print(lines[-1], flush=True)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text + "\n")
        out.with_suffix(".json").write_text(json.dumps({"command": cmd, "runs": rows, "reference": refs}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
