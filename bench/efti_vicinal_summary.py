"""Confidence intervals for ``bench/efti_vicinal_bench.py`` results (reads its JSON, runs nothing).

Usage::

    python bench/efti_vicinal_summary.py [--json bench/results/efti_vicinal_bench.json]
                                         [--out bench/results/efti_vicinal_bench_ci]

Per dataset: mean test accuracy ± 95 % CI (Student t over the folds) of EFTI with the empirical
and the vicinal risk and of the public reference, and the paired difference vicinal - empirical
(same folds, same seeds). A "win" is a difference whose 95 % CI excludes 0: paired against
treegen's empirical risk, and against the reference by non-overlapping CIs (the reference's folds
are its own, so no pairing is possible).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    from treegen.core.metrics import summary

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=str(REPO / "bench" / "results" / "efti_vicinal_bench.json"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "efti_vicinal_bench_ci"))
    args = ap.parse_args(argv)
    cmd = "python bench/efti_vicinal_summary.py " + " ".join(argv if argv is not None else sys.argv[1:])
    d = json.loads(Path(args.json).read_text())
    refs = d.get("reference", {})
    lines = ["| dataset | empirical | vicinal | reference | vicinal - empirical (paired) | vicinal vs empirical | "
             "vicinal vs reference |", "|---|---|---|---|---|---|---|"]
    names = list(dict.fromkeys(r["dataset"] for r in d["runs"]))
    wins = {"emp": [0, 0], "ref": [0, 0]}
    for name in names:
        runs = {k: sorted((r for r in d["runs"] if r["dataset"] == name and r["risk"] == k), key=lambda r: r["fold"])
                for k in ("empirical", "vicinal")}
        e = np.array([100 * r["accuracy"] for r in runs["empirical"]])
        v = np.array([100 * r["accuracy"] for r in runs["vicinal"]])
        se, sv, sd = summary(e), summary(v), summary(v - e)
        if sd["mean"] - sd["ci95"] > 0:
            ve = "vicinal wins"
            wins["emp"][0] += 1
        elif sd["mean"] + sd["ci95"] < 0:
            ve = "empirical wins"
            wins["emp"][1] += 1
        else:
            ve = "within noise"
        ref_cell, vr = "-", "-"
        if name in refs:
            ra = refs[name]["accuracy"]
            ref_cell = f"{ra['mean']:.2f} ± {ra['ci95']:.2f}"
            if sv["mean"] - sv["ci95"] > ra["mean"] + ra["ci95"]:
                vr = "vicinal wins"
                wins["ref"][0] += 1
            elif sv["mean"] + sv["ci95"] < ra["mean"] - ra["ci95"]:
                vr = "reference wins"
                wins["ref"][1] += 1
            else:
                vr = "CIs overlap"
        lines.append(f"| {name} | {se['mean']:.2f} ± {se['ci95']:.2f} | {sv['mean']:.2f} ± {sv['ci95']:.2f} | {ref_cell} | "
                     f"{sd['mean']:+.2f} ± {sd['ci95']:.2f} | {ve} | {vr} |")
    lines += ["", f"accuracy in %, mean ± 95 % CI over the folds; vicinal wins / loses against empirical (paired CI "
              f"excludes 0): {wins['emp'][0]} / {wins['emp'][1]} of {len(names)}; against the reference (CIs apart): "
              f"{wins['ref'][0]} / {wins['ref'][1]}", f"source: {d['command']}", f"command: {cmd}"]
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
