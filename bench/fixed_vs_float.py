"""Float model vs fixed-point (Q15) model agreement on held-out rows, EFTI and CART.

Usage::

    python bench/fixed_vs_float.py [--datasets bcw,irs,pid,veh,seg,son] [--iters 50000] [--seed 1]

For each dataset and each of 5 stratified folds: fit EFTI (native engine, --iters iterations,
oversize weight 0.05) and CART (gini, ccp_alpha 0.005) on the other folds, quantise the tree
(treegen.emit.quantize, no data: what `treegen export` generates) and compare the Python fixed-point
model — bit-identical to the generated C (tests/emit/test_export_agreement.py, hil/) — with the float
model on every row of the held-out fold. Prints the exact counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from shared_data import load_raw

from treegen import CARTClassifier, EFTIClassifier
from treegen.emit.quantize import predict_q15, quantize_tree
from treegen.learn.cv import stratified_fold_ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="bcw,irs,pid,veh,seg,son")
    ap.add_argument("--iters", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args(argv)
    print(f"# python bench/fixed_vs_float.py --datasets {a.datasets} --iters {a.iters} --seed {a.seed}")
    print(f"{'dataset':8s} {'algo':5s} {'test rows':>9s} {'agree':>7s} {'agree %':>8s} {'axis-parallel':>13s}")
    total = {"efti": [0, 0], "cart": [0, 0]}
    rows = []
    for name in a.datasets.split(","):
        X, y = load_raw(name)
        folds = stratified_fold_ids(y, 5, np.random.default_rng(a.seed))
        for algo, make in (("efti", lambda k: EFTIClassifier(max_iter=a.iters, oversize_weight=0.05,
                                                               random_state=a.seed + k)),
                           ("cart", lambda k: CARTClassifier(ccp_alpha=0.005))):
            agree = n = 0
            axis = True
            for k in range(5):
                tr, te = folds != k, folds == k
                clf = make(k).fit(X[tr], y[tr])
                qt = quantize_tree(clf.tree_)
                Xq = clf.scaling_.to_q15(X[te])
                fixed = predict_q15(qt, Xq)
                flt = clf.tree_.predict_index(Xq / 32768.0)
                agree += int(np.sum(fixed == flt))
                n += int(te.sum())
                axis &= clf.tree_.is_axis_parallel()
            total[algo][0] += agree
            total[algo][1] += n
            rows.append({"dataset": name, "algorithm": algo, "test_rows": n, "agree": agree,
                         "agree_pct": 100.0 * agree / n, "axis_parallel": axis})
            print(f"{name:8s} {algo:5s} {n:9d} {agree:7d} {100.0 * agree / n:8.3f} {str(axis):>13s}")
    for algo, (ag, n) in total.items():
        print(f"overall  {algo:5s} {n:9d} {ag:7d} {100.0 * ag / n:8.3f}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"rows": rows, "total": total}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
