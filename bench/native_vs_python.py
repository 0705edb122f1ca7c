"""Native C engines vs their Python references, per algorithm and risk: identical trees and the
speed-up per iteration (issue 26, acceptance 1).

Usage::

    python bench/native_vs_python.py [--datasets pid,veh,irs] [--seeds 10] [--efti-iters 2000]
                                     [--gp-iters 300] [--gp-population 100] [--out bench/results/native_vs_python]

For each algorithm (EFTI: ``treegen.learn.inducers.efti`` vs ``treegen.learn.engine``; GP:
``treegen.learn.inducers.gp`` vs ``treegen.learn.native_gp``), risk (empirical, vicinal with the
paper's sigma^2 = 0.1), dataset and seed, both engines fit the whole normalised dataset with the same
parameters and seed. Reported per (algorithm, risk, dataset): how many seeds gave the identical tree
(``Tree.equals``: structure, weights, thresholds, leaf classes, counts) and the identical integer
fitness / risk, the mean leaves, the wall time per iteration of each engine (total fit time /
iterations, the libraries compiled before timing) and their ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from shared_data import load_normalised

from treegen.learn import engine, native_gp
from treegen.learn.inducers import efti, gp


def _efti(native: bool, X, y, C, iters, risk, seed):
    params = efti.EFTIParams(max_iter=iters, oversize_weight=0.05)
    fn = engine.induce if native else efti.induce
    tree, info = fn(X, y, C, params, seed=seed, risk=risk)
    return tree, info["fitness_int"]


def _gp(native: bool, X, y, C, iters, risk, seed, population):
    params = gp.GPParams(max_iter=iters, population=population, risk=risk)
    fn = native_gp.induce if native else gp.induce
    tree, info = fn(X, y, C, params, seed=seed)
    return tree, info["training_risk_int"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="pid,veh,irs")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--efti-iters", type=int, default=2000)
    ap.add_argument("--gp-iters", type=int, default=300)
    ap.add_argument("--gp-population", type=int, default=100)
    ap.add_argument("--algos", default="efti,gp")
    ap.add_argument("--out", help="write OUT.json and OUT.md")
    a = ap.parse_args(argv)
    command = (f"python bench/native_vs_python.py --datasets {a.datasets} --seeds {a.seeds} "
               f"--efti-iters {a.efti_iters} --gp-iters {a.gp_iters} --gp-population {a.gp_population} "
               f"--algos {a.algos}" + (f" --out {a.out}" if a.out else ""))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or "unknown"
    lines = [f"# {command}", f"# commit {commit}",
             f"{'algo':5s} {'risk':9s} {'dataset':8s} {'identical':>9s} {'same fit':>8s} {'leaves':>7s} "
             f"{'python ms/it':>12s} {'native ms/it':>12s} {'speed-up':>8s}"]
    print("\n".join(lines), flush=True)
    rows = []
    for algo in a.algos.split(","):
        iters = a.efti_iters if algo == "efti" else a.gp_iters
        for risk in ("empirical", "vicinal"):
            for name in a.datasets.split(","):
                X, y, C = load_normalised(name)

                def run(native: bool, seed: int):
                    if algo == "efti":
                        return _efti(native, X, y, C, iters, risk, seed)
                    return _gp(native, X, y, C, iters, risk, seed, a.gp_population)

                if algo == "efti":                 # compile (or load) the library before timing
                    _efti(True, X, y, C, 1, risk, 0)
                else:
                    _gp(True, X, y, C, 1, risk, 0, 4)
                same = same_fit = 0
                leaves = []
                t = {"py": 0.0, "c": 0.0}
                for s in range(a.seeds):
                    out = {}
                    for key, native in (("c", True), ("py", False)):
                        t0 = time.perf_counter()
                        out[key] = run(native, s)
                        t[key] += time.perf_counter() - t0
                    same += out["c"][0].equals(out["py"][0])
                    same_fit += out["c"][1] == out["py"][1]
                    leaves.append(out["py"][0].n_leaves)
                total = a.seeds * iters
                row = {"algo": algo, "risk": risk, "dataset": name, "seeds": a.seeds, "iterations": iters,
                       "identical": int(same), "same_fitness": int(same_fit), "mean_leaves": float(np.mean(leaves)),
                       "python_ms_per_iter": 1e3 * t["py"] / total, "native_ms_per_iter": 1e3 * t["c"] / total,
                       "speedup": t["py"] / t["c"]}
                rows.append(row)
                line = (f"{algo:5s} {risk:9s} {name:8s} {same:4d}/{a.seeds:<4d} {same_fit:4d}/{a.seeds:<3d} "
                        f"{row['mean_leaves']:7.1f} {row['python_ms_per_iter']:12.4f} "
                        f"{row['native_ms_per_iter']:12.4f} {row['speedup']:7.1f}x")
                lines.append(line)
                print(line, flush=True)
    if a.out:
        Path(a.out + ".json").write_text(json.dumps({"command": command, "commit": commit, "rows": rows}, indent=1))
        Path(a.out + ".md").write_text("```\n" + "\n".join(lines) + "\n```\n")
    return 0 if all(r["identical"] == r["seeds"] and r["same_fitness"] == r["seeds"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
