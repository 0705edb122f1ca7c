"""Training speed of the native C EFTI engine on the host (and, optionally, the published C
reference measured in the same run).

Usage::

    python bench/train_bench.py [--datasets veh,seg,pid] [--iters 50000] [--ko 0.01] [--seed 1]
                                [--reference /path/to/efti] [--json OUT]

For every dataset: (a) one run on the full data; (b) 5 stratified folds (80 % training rows), each
timed separately — the setting in which the published reference reports its per-fold time. Both
with the reference's defaults (oversize weight 0.01). Iterations/s = iterations / wall-clock
training seconds (the engine's one-off compilation is excluded by a warm-up run).

On-device figures (instructions per iteration on qemu-m3 / qemu-m4, RAM): bench/train_device_bench.py.

``--reference`` runs a build of the public EFTI reference implementation (github.com/bogdanvuk/efti,
``make rel``; not part of treegen) as ``efti --max_iter=N --dataset_selection=NAME --runs=1 --folds=5
--seed=S`` and reads the training time of each fold from its ``$cv_pc_run`` lines. Same machine,
same moment, so the ratio is meaningful; the absolute figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from shared_data import load_normalised as load

from treegen.learn import engine
from treegen.learn.cv import stratified_fold_ids
from treegen.learn.inducers.efti import EFTIParams


def timed(X, y, C, params, seed):
    t0 = time.perf_counter()
    tree, info = engine.induce(X, y, C, params, seed=seed)
    return tree, time.perf_counter() - t0


def reference_rates(binary: str, name: str, iters: int, seed: int) -> list[float]:
    out = subprocess.run([binary, f"--max_iter={iters}", f"--dataset_selection={name}", "--runs=1", "--folds=5",
                          f"--seed={seed}"], capture_output=True, text=True, check=True).stdout
    times = [float(m) for m in re.findall(r"\$cv_pc_run:.*?,time=([0-9.]+)", out)]
    return [iters / t for t in times]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="veh,seg,pid")
    ap.add_argument("--iters", type=int, default=50000)
    ap.add_argument("--ko", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reference", help="path to a built EFTI reference binary (optional)")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args(argv)
    cmd = f"python bench/train_bench.py --datasets {a.datasets} --iters {a.iters} --ko {a.ko} --seed {a.seed}"
    if a.reference:
        cmd += " --reference REF"
    print(f"# {cmd}")
    print(f"{'dataset':8s} {'rows':>5s} | {'full-data it/s':>14s} | {'5-fold mean it/s':>16s} | "
          f"{'reference it/s':>14s} {'ratio':>6s}")
    params = EFTIParams(max_iter=a.iters, oversize_weight=a.ko)
    results = []
    for name in a.datasets.split(","):
        X, y, C = load(name)
        engine.induce(X, y, C, EFTIParams(max_iter=1), seed=a.seed)          # warm-up (build)
        _, t_full = timed(X, y, C, params, a.seed)
        folds = stratified_fold_ids(y, 5, np.random.default_rng(a.seed))
        rates = []
        for k in range(5):
            tr = folds != k
            _, t = timed(X[tr], y[tr], C, params, a.seed + k)
            rates.append(a.iters / t)
        row = {"dataset": name, "rows": int(X.shape[0]), "iterations": a.iters,
               "native_full_it_per_s": round(a.iters / t_full), "native_fold_it_per_s": round(float(np.mean(rates)))}
        ref_txt = "-"
        ratio_txt = "-"
        if a.reference:
            ref = reference_rates(a.reference, name, a.iters, a.seed)
            row["reference_fold_it_per_s"] = round(float(np.mean(ref)))
            row["ratio_native_over_reference"] = round(float(np.mean(rates) / np.mean(ref)), 2)
            ref_txt = f"{np.mean(ref):14.0f}"
            ratio_txt = f"{row['ratio_native_over_reference']:6.2f}"
        results.append(row)
        print(f"{name:8s} {X.shape[0]:5d} | {a.iters / t_full:14.0f} | {np.mean(rates):16.0f} | {ref_txt:>14s} {ratio_txt:>6s}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"command": cmd, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
