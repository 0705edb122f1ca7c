"""How well ``treegen farm`` spreads a matrix over a labgrid farm's places: the same 12-cell matrix (12 models
x the qemu-m4 target) on one place and on two places, measured in one run on one emulated farm.

Usage::

    python bench/farm_bench.py [--models 12] [--rows 699] [--bench-iters 1000] [--repeats 2]
                               [--out bench/results/farm_bench]

The farm (:mod:`treegen.device.farm_lab`): a real ``labgrid-coordinator`` and two ``labgrid-exporter``
processes on 127.0.0.1, each with one qemu-m4 place (``qemu-m4-1`` on hostA, ``qemu-m4-2`` on hostB). The
models: CART trees on bcw (``max_depth`` 2..7, two seeds of the row order), all rows of bcw as the HIL data.
Firmware is built once (the first run; the others reuse the builds), and the figure is the matrix's wall
time after the builds (``report["seconds"]["matrix"]``: acquiring, QEMU start per cell, HIL, release).
The one-place and two-place runs alternate ``--repeats`` times (1, 2, 1, 2, ...) so that a change of the
machine's load hits both; the ratio is median(one place) / median(two places): 2.0 would be a perfect
spread, and every cell must PASS in every run (else exit 1).

Output: ``<out>.md`` and ``<out>.json``, with the command, the commit and the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from treegen import save                                           # noqa: E402
from treegen.core.version import __version__                       # noqa: E402
from treegen.device.farm import Coordinator                        # noqa: E402
from treegen.device.farm_lab import EmulatedLab, specs             # noqa: E402
from treegen.device.farm_matrix import build_all, run_matrix      # noqa: E402

DATASETS = REPO.parent / "shared" / "datasets"


def _git_commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def _models(n: int, work: Path):
    import numpy as np

    from treegen.core.model import load
    from treegen.learn.estimators import CARTClassifier

    data = np.loadtxt(DATASETS / "bcw.csv.gz", delimiter=",", skiprows=1, dtype=np.int64)
    X, y = data[:, :-1], data[:, -1]
    out = []
    for i in range(n):
        depth, seed = 2 + i % 6, i // 6
        order = np.random.default_rng(seed).permutation(X.shape[0])
        model = CARTClassifier(max_depth=depth, random_state=seed).fit(X[order], y[order]).model_
        path = save(model, work / f"cart-d{depth}-s{seed}.json")
        out.append((str(path), load(path)))
    return out, X, y


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, default=12)
    p.add_argument("--rows", type=int, default=699)
    p.add_argument("--bench-iters", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=str(REPO / "bench" / "results" / "farm_bench"))
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # stop the farm (the with blocks) on SIGTERM
    command = "python bench/farm_bench.py" + ("" if argv is None and len(sys.argv) == 1 else
                                              " " + shlex.join(sys.argv[1:] if argv is None else argv))
    runs = []
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
        work = Path(tmp)
        models, X, y = _models(args.models, work)
        data = (X[:args.rows], y[:args.rows])
        with EmulatedLab(work / "lab", specs(["qemu-m4@hostA", "qemu-m4@hostB"])) as lab, \
                Coordinator(lab.address) as coord:
            fws = build_all(models, ["qemu-m4"], work / "builds", layout=None, variant=None)
            for rep in range(args.repeats):
                for places in ({"qemu-m4-1": "qemu-m4"}, {"qemu-m4-1": "qemu-m4", "qemu-m4-2": "qemu-m4"}):
                    r = run_matrix(coord, models, places, data=data, build_root=work / "builds", firmwares=fws,
                                   hil_kw={"bench_iters": args.bench_iters, "timeout": 30.0})
                    per_place = {pl: sum(c["place"] == pl for c in r["cells"]) for pl in places}
                    runs.append({"places": len(places), "repeat": rep, "seconds": r["seconds"]["matrix"],
                                 "cells": len(r["cells"]), "passed": r["passed"], "cells_per_place": per_place,
                                 "load": os.getloadavg()[0]})
                    runs[-1]["not_passed"] = [f"{Path(c['model']).name} on {c['place']}: {c['result']} {c['error']}"
                                              for c in r["cells"] if c["result"] != "PASS"]
                    print(f"{len(places)} place(s), repeat {rep}: {r['seconds']['matrix']:.1f} s, "
                          f"{r['passed']}/{len(r['cells'])} PASS, cells per place {per_place}", flush=True)
                    for line in runs[-1]["not_passed"]:
                        print(f"  {line}", flush=True)
    one = [r["seconds"] for r in runs if r["places"] == 1]
    two = [r["seconds"] for r in runs if r["places"] == 2]
    ratio = statistics.median(one) / statistics.median(two)
    ok = all(r["passed"] == r["cells"] == args.models for r in runs)
    env = {"treegen": __version__, "commit": _git_commit(), "python": platform.python_version(),
           "cpus": os.cpu_count()}
    result = {"command": command, "env": env, "models": args.models, "rows": int(data[0].shape[0]),
              "bench_iters": args.bench_iters, "runs": runs, "median_one_place_s": statistics.median(one),
              "median_two_places_s": statistics.median(two), "speedup": ratio, "all_pass": ok}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# treegen farm: one place vs two places",
        "",
        f"Command: `{command}`  ",
        f"treegen {env['treegen']} (commit {env['commit']}), Python {env['python']}, {env['cpus']} CPUs "
        f"(shared with other work: load average per run below).",
        "",
        f"{args.models} cells (CART models on bcw x qemu-m4), {result['rows']} rows each, BENCH {args.bench_iters} "
        "calls x 8 rows; a real labgrid-coordinator and two labgrid-exporters on 127.0.0.1, one qemu-m4 place "
        "each. Wall time of the matrix after the builds (acquire, QEMU per cell, HIL, release).",
        "",
        "| places | repeat | matrix wall time (s) | cells PASS | cells per place | load avg |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for r in runs:
        lines.append(f"| {r['places']} | {r['repeat']} | {r['seconds']:.1f} | {r['passed']}/{r['cells']} | "
                     f"{', '.join(f'{k} {v}' for k, v in r['cells_per_place'].items())} | {r['load']:.1f} |")
    lines += ["", f"Median: one place {statistics.median(one):.1f} s, two places {statistics.median(two):.1f} s: "
              f"**{ratio:.2f}x** faster on two places (2.00x = a perfect spread). Every cell PASS in every run: "
              f"{'yes' if ok else 'NO'}.", ""]
    out.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines[-2:]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
