"""EFTI iterations per second, with and without partial reclassification.

Usage::

    python bench/efti_speed.py [--datasets veh,seg] [--iters 20000] [--seed 1] [--json OUT]

Trains on the full dataset (all rows) of each shared dataset, once with partial
reclassification and once with full reclassification, same seed (so both runs evolve the identical
tree — checked here too). Reports iterations/s for both and their ratio measured in the same run.
Timing is wall-clock (``time.perf_counter``) on a shared machine: compare the ratio, not the
absolute figures, across machines.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from treegen.inducers.efti import EFTIParams, induce

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def load(name: str):
    data = np.loadtxt(SHARED / f"{name}.csv.gz", delimiter=",", skiprows=1, dtype=np.int64)
    y = data[:, -1]
    classes, y_idx = np.unique(y, return_inverse=True)
    return data[:, :-1] / 32768.0, y_idx.astype(np.int64), len(classes)


def run(name: str, iters: int, seed: int, partial: bool):
    X, y, C = load(name)
    t0 = time.perf_counter()
    tree, info = induce(X, y, C, EFTIParams(max_iter=iters, partial_reclassification=partial), seed=seed)
    dt = time.perf_counter() - t0
    return tree, info, iters / dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="veh,seg")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)
    rows = []
    print(f"# python bench/efti_speed.py --datasets {args.datasets} --iters {args.iters} --seed {args.seed}")
    print(f"# {platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print(f"{'dataset':8s} {'rows':>6s} {'attrs':>5s} {'leaves':>6s} {'partial it/s':>13s} {'full it/s':>10s} "
          f"{'ratio':>6s} {'rerouted':>9s} identical")
    for name in args.datasets.split(","):
        t_p, i_p, r_p = run(name, args.iters, args.seed, True)
        t_f, i_f, r_f = run(name, args.iters, args.seed, False)
        same = t_p.equals(t_f)
        X, _, _ = load(name)
        row = {"dataset": name, "rows": X.shape[0], "attributes": X.shape[1], "iterations": args.iters,
               "leaves": t_p.n_leaves, "partial_it_per_s": round(r_p), "full_it_per_s": round(r_f),
               "ratio_partial_over_full": round(r_p / r_f, 3),
               "rerouted_fraction": i_p["rerouted_fraction"], "identical_tree": same}
        rows.append(row)
        print(f"{name:8s} {X.shape[0]:6d} {X.shape[1]:5d} {t_p.n_leaves:6d} {r_p:13.0f} {r_f:10.0f} "
              f"{r_p / r_f:6.2f} {i_p['rerouted_fraction']:9.3f} {same}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"command": " ".join(sys.argv), "results": rows}, indent=1))
    return 0 if all(r["identical_tree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
