"""Native C EFTI engine vs the Python (numpy) EFTI over many seeds: test accuracy and leaves.

Usage::

    python bench/engine_vs_python.py [--datasets pid,veh,irs] [--seeds 10] [--iters 20000]

For each dataset and seed: a stratified 80/20 split (split seed = run seed), both engines trained
with the same seed and parameters. Reports mean test accuracy and leaves of each engine, the
paired differences, and a paired t statistic (Student t, n - 1 degrees of freedom) — and how many
runs produced the identical tree (the engines are designed to be bit-identical, in which case every
difference is exactly 0 and the two means are equal).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from shared_data import load_normalised

from treegen.core.metrics import mean_ci95
from treegen.learn import engine
from treegen.learn.cv import stratified_fold_ids
from treegen.learn.inducers import efti
from treegen.learn.inducers.efti import EFTIParams


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="pid,veh,irs")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--ko", type=float, default=0.05)
    a = ap.parse_args(argv)
    print(f"# python bench/engine_vs_python.py --datasets {a.datasets} --seeds {a.seeds} --iters {a.iters} --ko {a.ko}")
    print(f"{'dataset':8s} {'native acc':>16s} {'python acc':>16s} {'native leaves':>14s} {'python leaves':>14s} "
          f"{'mean diff':>9s} {'identical':>9s} {'t_py/t_c':>8s}")
    for name in a.datasets.split(","):
        X, y, n_classes = load_normalised(name)
        acc = {"c": [], "py": []}
        leaves = {"c": [], "py": []}
        same = 0
        t = {"c": 0.0, "py": 0.0}
        for s in range(a.seeds):
            test = stratified_fold_ids(y, 5, np.random.default_rng(s)) == 0
            p = EFTIParams(max_iter=a.iters, oversize_weight=a.ko)
            trees = {}
            for key, fn in (("c", engine.induce), ("py", efti.induce)):
                t0 = time.perf_counter()
                tree, _ = fn(X[~test], y[~test], n_classes, p, seed=s)
                t[key] += time.perf_counter() - t0
                trees[key] = tree
                acc[key].append(100.0 * np.mean(tree.predict_index(X[test]) == y[test]))
                leaves[key].append(tree.n_leaves)
            same += trees["c"].equals(trees["py"])
        diff = np.array(acc["c"]) - np.array(acc["py"])
        mc, cc = mean_ci95(acc["c"])
        mp, cp = mean_ci95(acc["py"])
        print(f"{name:8s} {mc:7.2f} ± {cc:5.2f} {mp:7.2f} ± {cp:5.2f} {np.mean(leaves['c']):14.2f} "
              f"{np.mean(leaves['py']):14.2f} {diff.mean():9.3f} {same:4d}/{a.seeds:<4d} {t['py'] / t['c']:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
