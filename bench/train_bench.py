"""Training speed of the native C EFTI engine on the host (and, optionally, the published C
reference measured in the same run).

Usage::

    python bench/train_bench.py [--datasets veh,seg,pid] [--iters 50000] [--ko 0.01] [--seed 1]
                                [--reference /path/to/efti] [--repeats 3] [--json OUT] [--md OUT]

For every dataset: (a) one run on the full data; (b) 5 stratified folds (80 % training rows), each
timed separately — the setting in which the published reference reports its per-fold time. Both
with the reference's defaults (oversize weight 0.01). Iterations/s = iterations / training time
(the engine's one-off compilation is excluded by a warm-up run).

Time is the process's **user CPU time** (getrusage(RUSAGE_SELF).ru_utime around the training call),
the clock the reference itself reports (its ``efti()`` is timed with getrusage ru_utime), so both
sides are measured the same way and the ratio does not depend on how many other processes share the
cores. The wall-clock rate of the native engine is reported beside it. With ``--repeats N`` the
native folds and the reference run alternate N times and each fold keeps its best (fastest) of the N
measurements, for both sides alike (the noise of a shared machine only ever slows a run down).

On-device figures (instructions per iteration on qemu-m3 / qemu-m4, RAM): bench/train_device_bench.py.

``--reference`` runs a build of the public EFTI reference implementation (github.com/bogdanvuk/efti,
``bash bench/build_efti_reference.sh``; not part of treegen) as ``efti --max_iter=N
--dataset_selection=NAME --runs=1 --folds=5 --seed=S`` and reads the training time of each fold from
its ``$cv_pc_run`` lines. Same machine, same moment, same clock, so the ratio is meaningful; the
absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from shared_data import load_normalised as load

from treegen.learn import engine
from treegen.learn.cv import stratified_fold_ids
from treegen.learn.inducers.efti import EFTIParams


def user_cpu() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def timed(X, y, C, params, seed):
    """(tree, user CPU seconds, wall seconds) of one native training run."""
    c0, t0 = user_cpu(), time.perf_counter()
    tree, _ = engine.induce(X, y, C, params, seed=seed)
    return tree, user_cpu() - c0, time.perf_counter() - t0


def reference_rates(binary: str, name: str, iters: int, seed: int) -> list[float]:
    out = subprocess.run([binary, f"--max_iter={iters}", f"--dataset_selection={name}", "--runs=1", "--folds=5",
                          f"--seed={seed}"], capture_output=True, text=True, check=True).stdout
    runs = re.findall(r"\$cv_pc_run:.*?,time=([0-9.]+),.*?iters=([0-9]+)", out)
    if len(runs) != 5 or any(int(n) != iters for _, n in runs):
        raise SystemExit(f"train_bench: unexpected reference output for {name}: {len(runs)} folds")
    return [iters / float(t) for t, _ in runs]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="veh,seg,pid")
    ap.add_argument("--iters", type=int, default=50000)
    ap.add_argument("--ko", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reference", help="path to a built EFTI reference binary (optional)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="alternate native and reference runs N times, best of N per fold (default 3)")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--md", dest="md_out", help="also write the table as markdown")
    a = ap.parse_args(argv)
    cmd = (f"python bench/train_bench.py --datasets {a.datasets} --iters {a.iters} --ko {a.ko} --seed {a.seed} "
           f"--repeats {a.repeats}")
    if a.reference:
        cmd += " --reference REF"
    print(f"# {cmd}")
    head = (f"{'dataset':8s} {'rows':>5s} | {'full-data it/s':>14s} | {'5-fold mean it/s':>16s} "
            f"{'(wall)':>8s} | {'reference it/s':>14s} {'ratio':>6s}")
    print(head)
    params = EFTIParams(max_iter=a.iters, oversize_weight=a.ko)
    results = []
    for name in a.datasets.split(","):
        X, y, C = load(name)
        engine.induce(X, y, C, EFTIParams(max_iter=1), seed=a.seed)          # warm-up (build)
        folds = stratified_fold_ids(y, 5, np.random.default_rng(a.seed))
        full, rates, walls, ref = 0.0, [0.0] * 5, [0.0] * 5, [0.0] * 5
        for _ in range(a.repeats):
            _, c_full, _ = timed(X, y, C, params, a.seed)
            full = max(full, a.iters / c_full)
            for k in range(5):
                tr = folds != k
                _, c, w = timed(X[tr], y[tr], C, params, a.seed + k)
                rates[k] = max(rates[k], a.iters / c)
                walls[k] = max(walls[k], a.iters / w)
            if a.reference:
                ref = [max(r, q) for r, q in zip(ref, reference_rates(a.reference, name, a.iters, a.seed))]
        row = {"dataset": name, "rows": int(X.shape[0]), "iterations": a.iters, "repeats": a.repeats,
               "native_full_it_per_s": round(full), "native_fold_it_per_s": round(float(np.mean(rates))),
               "native_fold_wall_it_per_s": round(float(np.mean(walls)))}
        ref_txt = "-"
        ratio_txt = "-"
        if a.reference:
            row["reference_fold_it_per_s"] = round(float(np.mean(ref)))
            row["ratio_native_over_reference"] = round(float(np.mean(rates) / np.mean(ref)), 2)
            ref_txt = f"{np.mean(ref):14.0f}"
            ratio_txt = f"{row['ratio_native_over_reference']:6.2f}"
        results.append(row)
        print(f"{name:8s} {X.shape[0]:5d} | {full:14.0f} | {np.mean(rates):16.0f} {np.mean(walls):8.0f} | "
              f"{ref_txt:>14s} {ratio_txt:>6s}", flush=True)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"command": cmd, "clock": "user CPU time (getrusage ru_utime)",
                                                "results": results}, indent=1) + "\n")
    if a.md_out:
        lines = [f"`{cmd}`", "",
                 ("Iterations/s from user CPU time (getrusage ru_utime, the clock the reference reports), "
                  f"best of {a.repeats} alternating runs per fold; wall = the native engine's wall-clock rate."), "",
                 "| dataset | rows | full-data it/s | 5-fold mean it/s | (wall) | reference it/s | ratio |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for r in results:
            lines.append(f"| {r['dataset']} | {r['rows']} | {r['native_full_it_per_s']} | {r['native_fold_it_per_s']} | "
                         f"{r['native_fold_wall_it_per_s']} | {r.get('reference_fold_it_per_s', '-')} | "
                         f"{r.get('ratio_native_over_reference', '-')} |")
        Path(a.md_out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
