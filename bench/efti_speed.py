"""EFTI iterations per second: Python (numpy) and native C engines, with and without partial
reclassification.

Usage::

    python bench/efti_speed.py [--datasets veh,seg] [--iters 20000] [--native-iters 200000]
                               [--seed 1] [--json OUT]

Trains on the full dataset (all rows) of each shared dataset, same seed in every run, so all four
runs evolve the identical tree (checked here too; the native runs use ``--native-iters`` and are
compared with each other). Reports iterations/s and the partial/full ratio measured in the same
run. Timing is wall-clock (``time.perf_counter``) on a shared machine: compare ratios, not absolute
figures, across machines. The native engine's one-off compilation is excluded (warm-up run).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from shared_data import load_normalised as load

from treegen.learn import engine
from treegen.learn.inducers.efti import EFTIParams, induce


def run(name: str, iters: int, seed: int, partial: bool, native: bool = False):
    X, y, C = load(name)
    fn = engine.induce if native else induce
    if native:  # warm-up: builds (or loads) the cached shared library
        fn(X, y, C, EFTIParams(max_iter=1, partial_reclassification=partial), seed=seed)
    t0 = time.perf_counter()
    tree, info = fn(X, y, C, EFTIParams(max_iter=iters, partial_reclassification=partial), seed=seed)
    dt = time.perf_counter() - t0
    return tree, info, iters / dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="veh,seg")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--native-iters", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)
    rows = []
    print(f"# python bench/efti_speed.py --datasets {args.datasets} --iters {args.iters} "
          f"--native-iters {args.native_iters} --seed {args.seed}")
    print(f"# {platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print(f"{'dataset':8s} {'rows':>5s} {'attrs':>5s} {'leaves':>6s} | {'py partial':>10s} {'py full':>8s} "
          f"{'ratio':>5s} | {'C partial':>10s} {'C full':>8s} {'ratio':>5s} | {'rerouted':>8s} identical")
    for name in args.datasets.split(","):
        t_p, i_p, r_p = run(name, args.iters, args.seed, True)
        t_f, i_f, r_f = run(name, args.iters, args.seed, False)
        t_cs, _, _ = run(name, args.iters, args.seed, True, native=True)
        t_cp, i_cp, r_cp = run(name, args.native_iters, args.seed, True, native=True)
        t_cf, i_cf, r_cf = run(name, args.native_iters, args.seed, False, native=True)
        same = t_p.equals(t_f) and t_p.equals(t_cs) and t_cp.equals(t_cf)
        X, _, _ = load(name)
        row = {"dataset": name, "rows": X.shape[0], "attributes": X.shape[1], "iterations": args.iters,
               "native_iterations": args.native_iters, "leaves": t_p.n_leaves,
               "python_partial_it_per_s": round(r_p), "python_full_it_per_s": round(r_f),
               "python_ratio_partial_over_full": round(r_p / r_f, 3),
               "native_partial_it_per_s": round(r_cp), "native_full_it_per_s": round(r_cf),
               "native_ratio_partial_over_full": round(r_cp / r_cf, 3),
               "rerouted_fraction_native": i_cp["rerouted_fraction"], "identical_tree": same}
        rows.append(row)
        print(f"{name:8s} {X.shape[0]:5d} {X.shape[1]:5d} {t_p.n_leaves:6d} | {r_p:10.0f} {r_f:8.0f} "
              f"{r_p / r_f:5.2f} | {r_cp:10.0f} {r_cf:8.0f} {r_cp / r_cf:5.2f} | "
              f"{i_cp['rerouted_fraction']:8.3f} {same}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"command": " ".join(sys.argv), "results": rows}, indent=1))
    return 0 if all(r["identical_tree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
