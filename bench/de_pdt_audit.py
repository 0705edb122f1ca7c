"""DE-PDT audit against the paper (shared/seeds/004_*.txt): is a gap to its Table 2 noise or implementation?

Runs DE-PDT on the split protocol of ``bench/alternatives.py`` (the same splits: split r from numpy
PCG64 seed ``--split-seed-base + r``, ceil(0.15 n) test rows; estimator seed ``--est-seed-base + r``)
in one or more *variants* and records, per run, the test accuracy of the pruned IR tree (what
``DEPDTClassifier`` predicts), of the complete genome (what the paper evaluates: unreached leaves keep
their random class), and the training error (the paper's Table 3).

Variants (``--variants``, comma-separated ``ARITH:SELECTION``):

* ``fixed`` — treegen's integer-exact DE-PDT (Q15 inputs, int16 weights, int64 theta; mutants rounded
  to the grid and clipped to +-1 / +-attributes); identical to ``DEPDTClassifier``.
* ``float`` — the same algorithm and random stream in float64: inputs min-max scaled without
  rounding, mutants neither rounded nor clipped (an unconstrained real-valued DE, as the paper).
* ``SELECTION`` — ``better`` (the paper's "If y is better than x") or ``not-worse`` (ties accepted).

Examples::

    python bench/de_pdt_audit.py --dataset son --variants float:better,fixed:not-worse --runs 30 --jobs 2
    python bench/de_pdt_audit.py --dataset son --variants fixed:better --split-seed-base 100 \\
        --est-seed-base 3000 --runs 30 --jobs 2 --tag seeds100

Results: ``bench/results/de_pdt_audit_<dataset>[_<tag>].json`` (per-run records + summaries).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from alternatives import split_tasks  # noqa: E402
from shared_data import load_raw  # noqa: E402

from treegen.core.metrics import mean_ci95  # noqa: E402
from treegen.core.rng import Pcg32, take_u32  # noqa: E402
from treegen.core.scaling import Q15_ONE, InputScaling  # noqa: E402
from treegen.learn.inducers import de_pdt  # noqa: E402

RESULTS = HERE / "results"


class FloatPopulation(de_pdt.Population):
    """DE-PDT in float64: the same draws as :class:`de_pdt.Population`, no rounding or clipping of
    mutants (the paper's real-valued DE). Inputs are whatever the caller passes (continuous here)."""

    def trials(self):
        P, M, A, LV = self.p.population, self.M, self.A, self.LV
        G = M * (A + 1) + LV
        abc = np.array([self.pick_abc(i) for i in range(P)], dtype=np.int64)
        u = take_u32(self.rng, P * (3 + G + LV)).reshape(P, 3 + G + LV)
        F = 0.4 + 0.6 * (u[:, 0].astype(np.float64) / de_pdt.U32)
        CR = 0.9 + 0.1 * (u[:, 1].astype(np.float64) / de_pdt.U32)
        jrand = ((u[:, 2] * np.uint64(G)) >> np.uint64(32)).astype(np.int64)
        cross = (u[:, 3:3 + G].astype(np.float64) / de_pdt.U32) < CR[:, None]
        cross[np.arange(P), jrand] = True
        gate = (u[:, 3 + G:].astype(np.float64) / de_pdt.U32) < F[:, None]
        a, b, c = abc[:, 0], abc[:, 1], abc[:, 2]
        vW = self.W[a] + F[:, None, None] * (self.W[b] - self.W[c])
        vT = self.T[a] + F[:, None] * (self.T[b] - self.T[c])
        vL = de_pdt.swap_leaves(self.leaf[a], self.leaf[b], self.leaf[c], gate)
        cW = cross[:, :M * A].reshape(P, M, A)
        cT = cross[:, M * A:M * (A + 1)]
        cL = cross[:, M * (A + 1):]
        return (np.where(cW, vW, self.W), np.where(cT, vT, self.T), np.where(cL, vL, self.leaf))


def run_one(variant: str, X, y, n_classes: int, task, est_seed_base: int) -> dict:
    arith, selection = variant.split(":")
    run, train, test = task
    seed = est_seed_base + run
    scaling = InputScaling.fit(X[train], "auto")
    if arith == "fixed":
        Xtr = scaling.to_q15(X[train]).astype(np.float64)            # Q15 integers, as de_pdt.induce
        Xte = scaling.to_q15(X[test]).astype(np.float64)
        engine, cls = "native", de_pdt.Population
    else:
        Xtr = (X[train] - scaling.offset) * scaling.scale * Q15_ONE   # same units, no rounding/clipping
        Xte = (X[test] - scaling.offset) * scaling.scale * Q15_ONE
        engine, cls = "python", FloatPopulation
    params = de_pdt.DEPDTParams(engine=engine, selection=selection).validate()
    t0 = time.perf_counter()
    rng = Pcg32(seed)                                                  # as de_pdt.induce (no validation split)
    pop = cls(Xtr, y[train], n_classes, params, seed=int(rng.next_u32()))
    pop.initialise()
    for g in range(1, params.generations + 1):
        pop.step(g)
    hits, score = pop.evaluate(pop.W, pop.T, pop.leaf, pop.X, pop.y)
    best = int(np.lexsort((np.arange(params.population), -score))[0])
    W, T, leaf = pop.W[best], pop.T[best], pop.leaf[best]
    complete_pred = leaf[pop.route(W[None], T[None], Xte)[:, 0]]
    leaf_of = pop.route(W[None], T[None], pop.X)[:, 0]
    tree = de_pdt.pruned_tree(W, T, leaf, leaf_of, pop.y, n_classes)
    pruned_pred = tree.predict_index(Xte / Q15_ONE)
    return {"run": run, "variant": variant, "seconds": time.perf_counter() - t0,
            "acc_pruned": float(np.mean(pruned_pred == y[test])),
            "acc_complete": float(np.mean(complete_pred == y[test])),
            "train_error": float(pop.n - hits[best]) / pop.n, "n_test": int(test.size),
            "pruned_leaves": int(tree.n_leaves)}


def summary(recs: list[dict]) -> dict:
    out = {"n": len(recs)}
    for key in ("acc_pruned", "acc_complete", "train_error"):
        v = np.array([r[key] for r in recs])
        mean, ci = mean_ci95(v.tolist())
        out[key] = {"mean": float(mean), "std": float(v.std(ddof=1)), "ci95": float(ci),
                    "min": float(v.min()), "max": float(v.max())}
    return out


def _paired(a: list[dict], b: list[dict], key_a: str, key_b: str) -> tuple[float, float, int]:
    """Mean and 95 % CI half-width of the per-run difference b - a (runs matched by run index)."""
    ra = {r["run"]: r[key_a] for r in a}
    rb = {r["run"]: r[key_b] for r in b}
    runs = sorted(set(ra) & set(rb))
    mean, ci = mean_ci95([rb[r] - ra[r] for r in runs])
    return mean, ci, len(runs)


def _sets(path: Path, dataset: str) -> list[tuple[str, int, int, list[dict]]]:
    """(label, split seed base, estimator seed base, records) of an alternatives_split JSON (its
    de-pdt runs) or of an audit JSON (every variant)."""
    d = json.loads(path.read_text())
    if "results" in d:
        recs = [{"run": r["run"], "acc_pruned": r["accuracy"]} for r in d["results"][dataset]["de-pdt"]["records"]]
        return [(f"{path.stem} (default de-pdt)", 0, 1000, recs)]
    return [(f"{path.stem} {v}", d["split_seed_base"], d["est_seed_base"], res["records"])
            for v, res in d["variants"].items()]


def report(paths: list[Path], dataset: str) -> str:
    """Markdown: one row per set of runs; paired differences against the first set for the sets on the
    same splits (split seed base 0)."""
    sets = [s for p in paths for s in _sets(p, dataset)]
    head = ("| runs of | split seeds | estimator seeds | runs | test acc. mean ± 95 % CI (std) | min / max | "
            "complete-genome acc. | train error rate mean (std) |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for label, sb, eb, recs in sets:
        v = np.array([r["acc_pruned"] for r in recs])
        m, ci = mean_ci95(v.tolist())
        comp = (f"{np.mean([r['acc_complete'] for r in recs]):.4f}" if "acc_complete" in recs[0] else "-")
        te = (f"{np.mean([r['train_error'] for r in recs]):.4f} ({np.std([r['train_error'] for r in recs], ddof=1):.4f})"
              if "train_error" in recs[0] else "-")
        lines.append(f"| {label} | {sb} + r | {eb} + r | {v.size} | {m:.4f} ± {ci:.4f} ({v.std(ddof=1):.4f}) | "
                     f"{v.min():.4f} / {v.max():.4f} | {comp} | {te} |")
    paired = []
    ref_label, _, _, ref = sets[0]
    for label, sb, eb, recs in sets[1:]:
        if sb == 0:
            pm, pci, n = _paired(ref, recs, "acc_pruned", "acc_pruned")
            paired.append(f"- {label} minus {ref_label}, same {n} splits"
                          f"{'' if eb == 1000 else ', other estimator seeds'}: {pm:+.4f} ± {pci:.4f}")
    for label, sb, eb, recs in sets:
        if "acc_complete" in recs[0]:
            cm, cci, n = _paired(recs, recs, "acc_pruned", "acc_complete")
            paired.append(f"- {label}: complete genome minus pruned IR tree {cm:+.4f} ± {cci:.4f}")
    return "\n".join(lines) + "\n\nPaired differences of test accuracy (mean ± 95 % CI of the per-split difference):\n\n" + "\n".join(paired)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="son")
    p.add_argument("--variants", default="fixed:better,float:better")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--split-seed-base", type=int, default=0)
    p.add_argument("--est-seed-base", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--tag", default="")
    p.add_argument("--report", nargs="+", metavar="JSON",
                   help="print a markdown summary of --dataset instead of running: alternatives_split "
                        "JSONs (their de-pdt runs) and audit JSONs; paired differences against the first")
    args = p.parse_args(argv)
    if args.report:
        print(report([Path(f) for f in args.report], args.dataset))
        return 0
    command = "python bench/de_pdt_audit.py " + " ".join(argv if argv is not None else sys.argv[1:])
    Xraw, labels = load_raw(args.dataset)
    _, y = np.unique(labels, return_inverse=True)
    X = Xraw.astype(np.float64)
    C = int(y.max()) + 1
    tasks = split_tasks(y, args.runs, seed_base=args.split_seed_base)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    out = {"command": command, "dataset": args.dataset, "split_seed_base": args.split_seed_base,
           "est_seed_base": args.est_seed_base, "variants": {}}
    for v in variants:
        t0 = time.perf_counter()
        recs = Parallel(n_jobs=args.jobs)(delayed(run_one)(v, X, y, C, t, args.est_seed_base) for t in tasks)
        s = summary(recs)
        out["variants"][v] = {"records": recs, "summary": s}
        print(f"{args.dataset} {v:18s} splits {args.split_seed_base}+r seeds {args.est_seed_base}+r: "
              f"acc pruned {s['acc_pruned']['mean']:.4f} ± {s['acc_pruned']['ci95']:.4f} "
              f"(std {s['acc_pruned']['std']:.4f}), complete {s['acc_complete']['mean']:.4f}, "
              f"train error {s['train_error']['mean']:.4f} (std {s['train_error']['std']:.4f})  "
              f"wall {time.perf_counter() - t0:.0f} s", flush=True)
    RESULTS.mkdir(exist_ok=True)
    stem = f"de_pdt_audit_{args.dataset}{'_' + args.tag if args.tag else ''}"
    (RESULTS / f"{stem}.json").write_text(json.dumps(out, indent=1))
    print(f"written {RESULTS / (stem + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
