"""How close can ONE tree get to the 100-tree forest by distillation, whatever its size? (issue #38)

For each dataset: 5-fold stratified CV (seed 1, the folds of ``treegen compare --seed 1``'s first
repetition) of an unpruned CART tree on the rows, the same tree distilled from the forest with 5 and
20 pseudo-samples per row (``--teacher rf --teacher-samples K``: the teacher trained inside each fold),
and the forest itself: mean test accuracy, mean leaves, linked Q15 flash is not needed for the ceiling
(a tree with hundreds of leaves is far beyond 1/20 of nothing). An unlimited distilled tree bounds what
a small distilled tree can reach.

    python bench/distill_ceiling.py vow gls [--data-dir ../shared/datasets] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from treegen.core.data import load_csv  # noqa: E402
from treegen.learn.cv import cross_validate  # noqa: E402

METHODS = [("cart-unpruned", "cart", {}),
           ("cart-teacher-s5", "cart", {"teacher": "rf", "teacher_samples": 5}),
           ("cart-teacher-s20", "cart", {"teacher": "rf", "teacher_samples": 20}),
           ("rf", "rf", {"n_trees": 100})]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("datasets", nargs="+")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {"command": "python bench/distill_ceiling.py " + " ".join(sys.argv[1:]),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=Path(__file__).parent).stdout.strip(), "results": {}}
    for ds in args.datasets:
        d = load_csv(Path(args.data_dir) / f"{ds}.csv.gz")
        for name, algo, params in METHODS:
            t = time.time()
            r = cross_validate(d.X, d.labels, algo, params, folds=5, repeats=1, seed=1, jobs=1)
            acc = 100 * float(np.mean([f["accuracy"] for f in r["folds"]]))
            leaves = float(np.mean([f["leaves"] for f in r["folds"]]))
            out["results"].setdefault(ds, {})[name] = {"accuracy": acc, "leaves": leaves}
            print(f"{ds} {name} {acc:.2f} % leaves {leaves:.1f} ({time.time() - t:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
