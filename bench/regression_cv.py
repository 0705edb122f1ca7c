"""Regression (issue #25, acceptance 3): the one-line hint of ``treegen fit diab.csv --algo cart``, the
``--task regression`` fit, and cross-validated RMSE / MAE / R² of treegen's CART and random-forest
regressors beside scikit-learn's ``DecisionTreeRegressor`` / ``RandomForestRegressor`` on the same folds.

Usage::

    python bench/regression_cv.py [--folds 5] [--repeats 2] [--trees 50] [--out bench/results/regression_cv]
    python bench/regression_cv.py --efti [--iters 20000] --out bench/results/regression_efti

``--efti``: the oblique EFTI regressor (squared-error fitness, ``target_leaves`` 4 and 8) beside
treegen's CART at depths 2..4 on the same folds (no scikit-learn, no command-line part): is it more
accurate at a smaller size?

Datasets (offline): ``diab`` -- scikit-learn's bundled diabetes data in its original units
(``load_diabetes(scaled=False)``: 442 rows, 10 features, integer target 25..346, 214 distinct
values), written to a temporary ``diab.csv`` for the command-line part; ``friedman1`` --
``make_friedman1(n_samples=1000, noise=1.0, random_state=0)`` (10 features, 5 informative).

Folds: treegen's regression cross-validation (:func:`treegen.learn.cv.cross_validate` with
``task="regression"``: repetition r deals the rows of ``permutation(PCG64(seed + r))`` round-robin,
:func:`treegen.learn.cv.kfold_ids`); scikit-learn's estimators are fitted on exactly those folds, on
the raw features (treegen fits the Q15-scaled ones). Per setting: mean ± 95 % CI (Student t over the
folds x repeats) of both, and "in CI": treegen's mean inside scikit-learn's interval. Measured, never
asserted. Writes ``OUT.md`` and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from treegen.core.metrics import mean_ci95, regression_scores  # noqa: E402
from treegen.learn.cv import cross_validate, kfold_ids  # noqa: E402

METRICS = ("rmse", "mae", "r2")


def datasets() -> dict:
    d = load_diabetes(scaled=False)
    X, y = make_friedman1(n_samples=1000, noise=1.0, random_state=0)
    return {"diab": (d.data, d.target.astype(np.float64), d.feature_names), "friedman1": (X, y, None)}


def write_csv(path: Path, X, y, names) -> None:
    rows = [",".join(list(names) + ["target"])]
    rows += [",".join(f"{v:g}" for v in r) + f",{int(t)}" for r, t in zip(X, y)]
    path.write_text("\n".join(rows) + "\n")


def cli(*args) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "treegen", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def sklearn_on_folds(make, X, y, folds: int, repeats: int, seed: int) -> dict:
    per = {m: [] for m in METRICS}
    for r in range(repeats):
        fold_of = kfold_ids(X.shape[0], folds, np.random.default_rng(seed + r))
        for f in range(folds):
            test = fold_of == f
            pred = make(r, f).fit(X[~test], y[~test]).predict(X[test])
            for k, v in regression_scores(y[test], pred).items():
                if k in per:
                    per[k].append(v)
    return per


def summarise(values) -> dict:
    mean, ci = mean_ci95(values)
    return {"mean": mean, "ci95": ci}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--trees", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "bench/results/regression_cv"))
    p.add_argument("--efti", action="store_true", help="EFTI regression beside CART (see the docstring)")
    p.add_argument("--iters", type=int, default=20000, help="--efti: EFTI iterations per fold")
    args = p.parse_args(argv)
    if args.efti:
        return efti_vs_cart(args, argv)
    data = datasets()
    result = {"command": "python bench/regression_cv.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip(),
              "folds": args.folds, "repeats": args.repeats, "seed": args.seed, "cli": {}, "rows": []}

    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "diab.csv"
        X, y, names = data["diab"]
        write_csv(csv, X, y, names)
        for key, cmd in (("hint", ["fit", csv, "--algo", "cart", "-o", Path(tmp) / "m.json"]),
                         ("fit", ["fit", csv, "--algo", "cart", "--task", "regression", "-o", Path(tmp) / "m.json"]),
                         ("cv", ["cv", csv, "--algo", "cart", "--task", "regression", "--folds", args.folds,
                                 "--repeats", args.repeats, "-q"])):
            code, text = cli(*cmd)
            shown = [str(c).replace(tmp, "$TMP") for c in cmd]
            result["cli"][key] = {"command": "treegen " + " ".join(shown), "exit": code,
                                  "output": text.replace(tmp, "$TMP")}

    settings = [
        ("cart", {}, lambda r, f: DecisionTreeRegressor(random_state=0)),
        ("cart", {"max_depth": 4}, lambda r, f: DecisionTreeRegressor(max_depth=4, random_state=0)),
        ("cart", {"min_samples_leaf": 10}, lambda r, f: DecisionTreeRegressor(min_samples_leaf=10, random_state=0)),
        ("rf", {"n_trees": args.trees}, lambda r, f: RandomForestRegressor(n_estimators=args.trees,
                                                                            random_state=1000 * r + f)),
    ]
    for name, (X, y, _) in data.items():
        for algo, params, make in settings:
            tg = cross_validate(X, y, algo, params, folds=args.folds, repeats=args.repeats, seed=args.seed,
                                task="regression", jobs=1)
            sk = sklearn_on_folds(make, X, y, args.folds, args.repeats, args.seed)
            row = {"dataset": name, "algorithm": algo, "params": params,
                   "treegen": {m: tg[m] for m in METRICS}, "sklearn": {m: summarise(sk[m]) for m in METRICS},
                   "leaves": tg["leaves"]}
            row["in_ci"] = {m: abs(row["treegen"][m]["mean"] - row["sklearn"][m]["mean"])
                            <= row["sklearn"][m]["ci95"] for m in METRICS}
            result["rows"].append(row)
            print(f"{name:10} {algo:4} {json.dumps(params):28} RMSE {row['treegen']['rmse']['mean']:.3f} vs "
                  f"{row['sklearn']['rmse']['mean']:.3f} ± {row['sklearn']['rmse']['ci95']:.3f}  R2 "
                  f"{row['treegen']['r2']['mean']:.4f} vs {row['sklearn']['r2']['mean']:.4f}", flush=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Regression: treegen beside scikit-learn on the same folds", "",
             f"`{result['command']}` at commit {result['commit']}; {args.folds}-fold x {args.repeats} repetitions, "
             f"seed {args.seed}; mean ± 95 % CI over the folds; in CI = treegen's mean inside scikit-learn's CI.", "",
             "| dataset | algorithm | params | treegen RMSE | sklearn RMSE | treegen MAE | sklearn MAE | treegen R² | "
             "sklearn R² | in CI (RMSE/MAE/R²) | leaves |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        t, s = r["treegen"], r["sklearn"]
        cells = [r["dataset"], r["algorithm"], json.dumps(r["params"]) if r["params"] else "defaults"]
        for m, fmt in (("rmse", ".3f"), ("mae", ".3f"), ("r2", ".4f")):
            cells += [f"{t[m]['mean']:{fmt}} ± {t[m]['ci95']:{fmt}}", f"{s[m]['mean']:{fmt}} ± {s[m]['ci95']:{fmt}}"]
        cells += ["/".join("yes" if r["in_ci"][m] else "NO" for m in METRICS), f"{r['leaves']['mean']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    n_in = sum(all(r["in_ci"].values()) for r in result["rows"])
    lines += ["", f"all three figures in scikit-learn's CI: {n_in}/{len(result['rows'])} settings", "",
              "## The command line on diab.csv", ""]
    for key in ("hint", "fit", "cv"):
        c = result["cli"][key]
        lines += [f"`{c['command']}` (exit {c['exit']})", "", "```", c["output"], "```", ""]
    out.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")
    return 0


def efti_vs_cart(args, argv) -> int:
    data = datasets()
    settings = [("efti", {"max_iter": args.iters, "target_leaves": k}) for k in (4, 8)]
    settings += [("cart", {"max_depth": d}) for d in (2, 3, 4)]
    result = {"command": "python bench/regression_cv.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip(),
              "folds": args.folds, "repeats": args.repeats, "seed": args.seed, "rows": []}
    for name, (X, y, _) in data.items():
        for algo, params in settings:
            res = cross_validate(X, y, algo, params, folds=args.folds, repeats=args.repeats, seed=args.seed,
                                 task="regression", jobs=1)
            row = {"dataset": name, "algorithm": algo, "params": params, "train_seconds": res["train_seconds"],
                   **{m: res[m] for m in (*METRICS, "leaves", "depth")}}
            result["rows"].append(row)
            print(f"{name:10} {algo:4} {json.dumps(params):40} RMSE {row['rmse']['mean']:.3f} ± {row['rmse']['ci95']:.3f} "
                  f"R2 {row['r2']['mean']:.4f} leaves {row['leaves']['mean']:.1f}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Regression: the oblique EFTI regressor beside CART", "",
             f"`{result['command']}` at commit {result['commit']}; {args.folds}-fold x {args.repeats} repetitions, "
             f"seed {args.seed}, the same folds for every row; mean ± 95 % CI over the folds.", "",
             "| dataset | algorithm | params | RMSE | MAE | R² | leaves | depth | training s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['dataset']} | {r['algorithm']} | {json.dumps(r['params'])} | "
                     f"{r['rmse']['mean']:.3f} ± {r['rmse']['ci95']:.3f} | {r['mae']['mean']:.3f} ± {r['mae']['ci95']:.3f} | "
                     f"{r['r2']['mean']:.4f} ± {r['r2']['ci95']:.4f} | {r['leaves']['mean']:.1f} | "
                     f"{r['depth']['mean']:.1f} | {r['train_seconds']:.1f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
