"""EFTI (and treegen's CART) beside the published EFTI and OC1 results.

Usage::

    python bench/paper_table.py [--iters 100000] [--ko 0.05] [--repeats 2] [--jobs 2]
                                [--datasets bcw,irs,...] [--out bench/results/paper_table]
                                [--scheduler tcp://HOST:PORT] [--results FILE]

A thin caller of ``treegen compare`` (the real command line, as a user would run it)::

    treegen compare bcw irs ... --data-dir ../shared/datasets --algos efti,cart --params OUT.params.json
        --folds 5 --repeats R --seed S --workers J --json OUT.compare.json --markdown OUT.compare.md

with ``OUT.params.json`` = ``{"efti": {"max_iter": N, "oversize_weight": KO, "dipole": D},
"cart": {"ccp_alpha": A}}``: every (dataset, algorithm, fold) is one task on a local Dask cluster of
``--jobs`` workers (or on ``--scheduler``), finished tasks are kept in ``OUT.tasks.jsonl`` (or
``--results``) and skipped when the script runs again. The per-dataset cells are then printed as a
Markdown table beside the paper's EFTI and OC1 columns (``shared/reference/efti_paper_{accuracy,size}.csv``:
mean +- 95 % CI of 5x5-fold CV); ``OUT.compare.md`` has compare's own summary with the average
ranks, Friedman / Iman-Davenport, Nemenyi, Holm and Wilcoxon. The targets checked per dataset: EFTI
accuracy >= paper EFTI - 2 points, and mean leaves <= paper EFTI leaves + 1. Writes ``OUT.md`` and
``OUT.json``.

``--reference BIN`` adds the public EFTI reference implementation (github.com/bogdanvuk/efti) run
the same way (``BIN --max_iter=N --oversize_w=KO --folds=5 --runs=R --seed=S --dataset_selection=D``;
its own fold assignment, its own 15-bit copies of the datasets) and checks the same targets for it.
Build BIN with ``bash bench/build_efti_reference.sh GIT_DIR OUT --test-fold-fix``: the reference's
cross-validation otherwise scores train + test rows as its fold "accuracy" (see that script).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DEFAULT_DATASETS = "bcw,irs,pid,gls,veh,hrts,lym,son,ion,liv"


def read_reference(name: str) -> dict:
    with open(SHARED / "reference" / name) as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    out = {}
    for row in rows[1:]:
        cells = {}
        for col, cell in zip(header[1:], row[1:]):
            mean, _, ci = cell.partition("±")
            cells[col] = (float(mean), float(ci or 0))
        out[row[0]] = cells
    return out


def run_compare(datasets: list[str], params: dict, a, out: Path) -> dict:
    """``treegen compare`` on the datasets; returns its JSON result."""
    params_file = Path(f"{out}.params.json")
    params_file.write_text(json.dumps(params, indent=1) + "\n")
    # the datasets folder relative to where the bench runs, so the recorded command names no machine path
    cmd = [sys.executable, "-m", "treegen", "compare", *datasets, "--data-dir", os.path.relpath(SHARED / "datasets"),
           "--algos", ",".join(params), "--params", str(params_file), "--folds", str(a.folds),
           "--repeats", str(a.repeats), "--seed", str(a.seed), "--json", f"{out}.compare.json",
           "--markdown", f"{out}.compare.md", "--results", a.results or f"{out}.tasks.jsonl"]
    cmd += ["--scheduler", a.scheduler] if a.scheduler else ["--workers", str(a.jobs)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(Path(f"{out}.compare.json").read_text())


def cell(result: dict, dataset: str, method: str) -> dict:
    """One (dataset, method) cell of a compare result, in the shape of a ``treegen cv`` result (accuracy
    in percent, like the paper's columns)."""
    c = result["summary"]["cells"][dataset][method]
    folds = [r for r in result["records"] if r["dataset"] == dataset and r["method"] == method]
    # compare's JSON holds fractions (treegen's units rule); this table and the paper use percent
    accuracy = {k: 100.0 * v for k, v in c["accuracy"].items()}
    return {"accuracy": accuracy, "leaves": c["leaves"], "depth": c["depth"],
            "params": result["methods"][method]["params"], "folds": folds}


def targets_met(result: dict, paper_acc: float, paper_leaves: float) -> tuple[bool, bool]:
    """(accuracy >= paper - 2 points, mean leaves <= paper + 1) of a cross-validation result."""
    return result["accuracy"]["mean"] >= paper_acc - 2.0, result["leaves"]["mean"] <= paper_leaves + 1.0


def run_reference(binary: str, dataset: str, iters: int, ko: float, folds: int, repeats: int, seed: int) -> dict:
    """The EFTI reference's own cross-validation: mean test accuracy (%) and leaves with 95 % CIs."""
    from treegen.core.metrics import summary

    cmd = [binary, f"--max_iter={iters}", f"--oversize_w={ko}", f"--folds={folds}", f"--runs={repeats}",
           f"--seed={seed}", f"--dataset_selection={dataset}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    folds_found = [(100.0 * float(m.group(1)), int(m.group(2)))
                   for m in re.finditer(r"\$cv_pc_run:.*?accuracy=([0-9.]+),leaves=(\d+)", out)]
    if len(folds_found) != folds * repeats:
        raise SystemExit(f"paper_table: the reference printed {len(folds_found)} folds for {dataset}, "
                         f"expected {folds * repeats}")
    acc = [a for a, _ in folds_found]
    leaves = [n for _, n in folds_found]
    return {"command": " ".join(["REF", *cmd[1:]]), "accuracy": summary(acc), "leaves": summary(leaves),
            "folds": [{"accuracy": a, "leaves": n} for a, n in folds_found]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=DEFAULT_DATASETS)
    ap.add_argument("--iters", type=int, default=100_000)
    ap.add_argument("--ko", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--ccp-alpha", type=float, default=0.01, help="CART pruning strength")
    ap.add_argument("--dipole", choices=("global", "node"), default="global",
                    help="EFTI: where new nodes' mixed dipoles are drawn from")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="workers of the local Dask cluster")
    ap.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run the tasks on this Dask cluster instead")
    ap.add_argument("--results", metavar="FILE", help="treegen compare's results file (default OUT.tasks.jsonl)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "paper_table"))
    ap.add_argument("--reference", metavar="BIN",
                    help="also run this build of the public EFTI reference (see bench/build_efti_reference.sh)")
    ap.add_argument("--reference-unfixed", action="store_true",
                    help="BIN was built without --test-fold-fix (its fold 'accuracy' scores train + test rows)")
    a = ap.parse_args(argv)

    acc_ref = read_reference("efti_paper_accuracy.csv")
    size_ref = read_reference("efti_paper_size.csv")
    params = {"efti": {"max_iter": a.iters, "oversize_weight": a.ko, "dipole": a.dipole},
              "cart": {"ccp_alpha": a.ccp_alpha}}
    datasets = a.datasets.split(",")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    rows, results = [], []
    t0 = time.time()
    compared = run_compare(datasets, params, a, out)
    for ds in datasets:
        efti, cart = cell(compared, ds, "efti"), cell(compared, ds, "cart")
        pe_acc, pe_acc_ci = acc_ref[ds]["EFTI"]
        pe_size, pe_size_ci = size_ref[ds]["EFTI"]
        acc_ok, size_ok = targets_met(efti, pe_acc, pe_size)
        ref_cells = ""
        ref = None
        if a.reference:
            ref = run_reference(a.reference, ds, a.iters, a.ko, a.folds, a.repeats, a.seed)
            ref["accuracy_ok"], ref["leaves_ok"] = targets_met(ref, pe_acc, pe_size)
            ref_cells = (f" {ref['accuracy']['mean']:.2f} ± {ref['accuracy']['ci95']:.2f} "
                         f"| {ref['leaves']['mean']:.2f} ± {ref['leaves']['ci95']:.2f} "
                         f"| {'yes' if ref['accuracy_ok'] and ref['leaves_ok'] else 'NO'} |")
        results.append({"dataset": ds, "efti": efti, "cart": cart, "reference": ref,
                        "paper_efti": {"accuracy": pe_acc, "leaves": pe_size},
                        "paper_oc1": {"accuracy": acc_ref[ds]["OC1"][0], "leaves": size_ref[ds]["OC1"][0]},
                        "accuracy_ok": acc_ok, "leaves_ok": size_ok})
        rows.append(
            f"| {ds} | {efti['accuracy']['mean']:.2f} ± {efti['accuracy']['ci95']:.2f} "
            f"| {efti['leaves']['mean']:.2f} ± {efti['leaves']['ci95']:.2f} "
            f"| {pe_acc:.2f} ± {pe_acc_ci:.2f} | {pe_size:.2f} ± {pe_size_ci:.2f} "
            f"| {acc_ref[ds]['OC1'][0]:.2f} | {size_ref[ds]['OC1'][0]:.2f} "
            f"| {cart['accuracy']['mean']:.2f} ± {cart['accuracy']['ci95']:.2f} "
            f"| {cart['leaves']['mean']:.2f} "
            f"| {'yes' if acc_ok else 'NO'} | {'yes' if size_ok else 'NO'} |" + ref_cells)
        print(rows[-1], flush=True)
    both = sum(r["accuracy_ok"] and r["leaves_ok"] for r in results)
    ref_both = sum(r["reference"]["accuracy_ok"] and r["reference"]["leaves_ok"] for r in results) if a.reference else None
    elapsed = time.time() - t0
    ds_opt = f" --datasets {a.datasets}" if a.datasets != DEFAULT_DATASETS else ""
    ds_opt += f" --scheduler {a.scheduler}" if a.scheduler else ""
    ds_opt += f" --results {a.results}" if a.results else ""
    ref_opt = (" --reference REF" + (" --reference-unfixed" if a.reference_unfixed else "")) if a.reference else ""
    ref_head = " reference acc | reference leaves | reference meets both |" if a.reference else ""
    ref_rule = "---|---|---|" if a.reference else ""
    header = [
        f"# EFTI vs the published EFTI/OC1 results ({a.folds}-fold CV x {a.repeats} repeats)",
        "",
        f"Command: `python bench/paper_table.py{ds_opt} --iters {a.iters} --ko {a.ko} --dipole {a.dipole} "
        f"--repeats {a.repeats} --jobs {a.jobs} --ccp-alpha {a.ccp_alpha} --seed {a.seed}{ref_opt}`  ({elapsed:.0f} s; "
        f"{compared['n_tasks_run']} of {compared['n_tasks']} tasks run now, the rest from the results file)",
        "",
        f"It runs `{compared['command'].replace(str(SHARED), '../shared').replace(str(REPO) + '/', '')}`; average "
        f"ranks and tests in `{out.name}.compare.md`.",
        "",
        f"treegen EFTI: {a.iters} iterations, oversize weight Ko = {a.ko}, dipole {a.dipole}; treegen CART: gini, "
        f"ccp_alpha = {a.ccp_alpha}. Paper: 5x5-fold CV, EFTI 500k iterations. Accuracy in %, mean ± 95 % CI.",
        "",
        "| set | EFTI acc | EFTI leaves | paper EFTI acc | paper EFTI leaves | paper OC1 acc | paper OC1 leaves "
        "| CART acc | CART leaves | acc >= paper-2 | leaves <= paper+1 |" + ref_head,
        "|---|---|---|---|---|---|---|---|---|---|---|" + ref_rule,
    ]
    if a.reference:
        header[6:6] = [
            ("Reference: REF = github.com/bogdanvuk/efti built by `bash bench/build_efti_reference.sh GIT_DIR OUT` "
             "**without** the test-fold fix: its fold 'accuracy' scores the training + test rows (not a test accuracy)"
             if a.reference_unfixed else
             "Reference: REF = github.com/bogdanvuk/efti built by `bash bench/build_efti_reference.sh GIT_DIR OUT "
             "--test-fold-fix` (fold accuracy measured on the test fold only)")
            + ", run with the same iterations, Ko, folds and repetitions (its own fold assignment); command per "
            "dataset in OUT.json.", ""]
    summary = f"\nBoth targets met on {both} of {len(results)} datasets."
    if a.reference:
        summary += f" The reference implementation meets both on {ref_both} of {len(results)}."
    text = "\n".join(header + rows) + "\n" + summary + "\n"
    Path(f"{out}.md").write_text(text)
    Path(f"{out}.json").write_text(json.dumps(
        {"iters": a.iters, "ko": a.ko, "reference_unfixed": bool(a.reference_unfixed), "dipole": a.dipole,
         "repeats": a.repeats, "folds": a.folds, "ccp_alpha": a.ccp_alpha,
         "seed": a.seed, "elapsed_s": round(elapsed, 1), "met_both": both, "reference_met_both": ref_both,
         "compare_command": compared["command"], "friedman": compared["summary"]["friedman"],
         "wilcoxon": compared["summary"]["wilcoxon"], "results": results}, indent=1))
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
