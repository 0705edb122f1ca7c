"""``treegen fit | predict | eval | cv | show``: inducing, applying and inspecting models."""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np

from treegen.cli.common import int_at_least, int_range, job_count, nonneg_float, params_text, pct, table
from treegen.core.data import load_csv, load_for_model
from treegen.core.errors import DataError, TreegenError
from treegen.core.metrics import classification_report
from treegen.core.model import load, save
from treegen.core.output import check_output, write_json, write_text
from treegen.core.progress import enabled as progress_enabled
from treegen.core.progress import progress_bar
from treegen.core.scaling import METHODS as SCALING_METHODS
from treegen.emit.show import render_dot, render_text
from treegen.learn.cv import cross_validate
from treegen.learn.estimators import ALGORITHMS, make_estimator
from treegen.learn.inducers.efti import MAX_ITER, MAX_SEED

# option dest -> estimator parameter name (applicability is checked against the estimator class)
ALGO_OPTIONS = {
    "max_iter": ("--max-iter", "max_iter"),
    "oversize_weight": ("--oversize-weight", "oversize_weight"),
    "missing_weight": ("--missing-weight", "missing_weight"),
    "engine": ("--engine", "engine"),
    "dipole": ("--dipole", "dipole"),
    "scaling": ("--scaling", "scaling"),
    "criterion": ("--criterion", "criterion"),
    "max_depth": ("--max-depth", "max_depth"),
    "min_samples_leaf": ("--min-samples-leaf", "min_samples_leaf"),
    "ccp_alpha": ("--ccp-alpha", "ccp_alpha"),
}


def _add_algo_options(p: argparse.ArgumentParser) -> None:
    algos = list(ALGORITHMS)
    p.add_argument("--algo", required=True, metavar="{" + ",".join(algos) + "}",
                   help="induction algorithm")
    g = p.add_argument_group("algorithm options (each applies only to some algorithms)")
    g.add_argument("--max-iter", type=int_range(0, MAX_ITER), metavar="N",
                   help="efti: number of evolution iterations")
    g.add_argument("--oversize-weight", type=nonneg_float, metavar="KO",
                   help="efti: weight of the squared relative oversize in the fitness")
    g.add_argument("--missing-weight", type=nonneg_float, metavar="KM",
                   help="efti: weight of the fraction of classes no leaf predicts")
    g.add_argument("--engine", choices=("auto", "python", "native"),
                   help="efti: native = the C engine compiled for the host (same result, faster); "
                        "default auto (native when a C compiler exists)")
    g.add_argument("--dipole", choices=("global", "node"),
                   help="efti: draw new nodes' dipoles from the whole set (default) or the leaf's rows")
    g.add_argument("--scaling", choices=SCALING_METHODS, help="input scaling (default auto)")
    g.add_argument("--criterion", choices=("gini", "entropy"), help="cart: split criterion")
    g.add_argument("--max-depth", type=int_at_least(1, "an integer"), metavar="D", help="maximum tree depth")
    g.add_argument("--min-samples-leaf", type=int_at_least(1, "an integer"), metavar="N",
                   help="cart: minimum training rows in a leaf")
    g.add_argument("--ccp-alpha", type=nonneg_float, metavar="A",
                   help="cart: cost-complexity pruning parameter")
    p.add_argument("--seed", type=int_range(0, MAX_SEED), metavar="S", help="random seed (default 0)")
    p.add_argument("--label", metavar="NAME", help="label column (default: the last column)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _algo_params(args: argparse.Namespace) -> tuple[str, dict]:
    """Algorithm name and the estimator parameters given on the command line (seed excluded)."""
    algo = args.algo
    if algo not in ALGORITHMS:
        raise TreegenError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGORITHMS)})")
    valid = ALGORITHMS[algo]._param_names()
    params = {}
    for dest, (flag, param) in ALGO_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if param not in valid:
            raise TreegenError(f"option {flag} does not apply to --algo {algo}")
        params[param] = value
    return algo, params


def register(sub) -> None:
    """Add fit, predict, eval, cv and show to the subcommands ``sub``."""
    p = sub.add_parser("fit", help="induce a tree from a CSV dataset and save the model")
    p.add_argument("data", metavar="DATA", help="training CSV (header row; gzip allowed)")
    _add_algo_options(p)
    p.add_argument("-o", "--output", required=True, metavar="MODEL.json", help="model file to write")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("predict", help="predict a label for every row of a CSV file")
    p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)")
    p.add_argument("data", metavar="DATA", help="CSV with the model's features (label column optional)")
    p.add_argument("--label", metavar="NAME", help="label column to ignore (default: last, if present)")
    p.add_argument("-o", "--output", metavar="OUT.csv", help="write predictions here instead of stdout")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("eval", help="accuracy, confusion matrix and per-class scores on labelled data")
    p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)")
    p.add_argument("data", metavar="DATA", help="labelled CSV")
    p.add_argument("--label", metavar="NAME", help="label column (default: the last column)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("cv", help="repeated stratified K-fold cross-validation")
    p.add_argument("data", metavar="DATA", help="labelled CSV")
    _add_algo_options(p)
    p.add_argument("--folds", type=int_at_least(2, "an integer"), default=5, metavar="K",
                   help="number of folds (default 5)")
    p.add_argument("--repeats", type=int_at_least(1, "an integer"), default=1, metavar="R",
                   help="number of repetitions (default 1)")
    p.add_argument("--jobs", type=job_count, default=1, metavar="J",
                   help="parallel jobs (joblib n_jobs; -1 = all cores; default 1)")
    p.add_argument("--json", metavar="FILE", help="also write the figures (and every fold) as JSON")
    p.set_defaults(func=cmd_cv)

    p = sub.add_parser("show", help="print a model's tree")
    p.add_argument("model", metavar="MODEL", help="model file")
    p.add_argument("--dot", action="store_true", help="Graphviz DOT instead of text")
    p.set_defaults(func=cmd_show)


def _load_training(args) -> tuple:
    ds = load_csv(args.data, label=args.label)
    classes = np.unique(ds.labels)
    if classes.shape[0] < 2:
        raise DataError(f"{args.data} has a single class ({classes[0]!r}); at least two are needed")
    return ds, classes


# ---------------------------------------------------------------------- commands
def cmd_fit(args) -> int:
    algo, params = _algo_params(args)
    check_output(args.output, "model file", inputs=[args.data])
    check_output(args.json, "JSON file", inputs=[args.data, args.output])
    ds, classes = _load_training(args)
    seed = 0 if args.seed is None else args.seed
    est = make_estimator(algo, **params)
    if "random_state" in est._param_names():
        est.set_params(random_state=seed)

    show_bar = progress_enabled(args.quiet)
    total = getattr(est, "max_iter", None) if "callback" in est._param_names() else None
    bar = progress_bar(total=total, desc=f"{algo} fit", quiet=args.quiet or total is None)
    if show_bar and total is not None:
        def callback(iteration, fitness, leaves, accuracy):
            bar.set_postfix(fitness=f"{fitness:.4f}", leaves=leaves, acc=f"{100 * accuracy:.1f}%", refresh=False)
            bar.update(max(0, min(int(iteration), total) - bar.n))
        est.set_params(callback=callback)

    t0 = time.perf_counter()
    try:
        est.fit(ds.X, ds.labels, feature_names=ds.feature_names)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0

    model = est.model_
    model.metadata["params"].pop("callback", None)
    model.metadata["dataset"] = Path(args.data).name
    model.metadata["label_column"] = ds.label_name
    model.metadata["train_seconds"] = seconds
    save(model, args.output)

    tree = est.tree_
    train_acc = pct(model.metadata["train_accuracy"])
    shown = {k: v for k, v in model.metadata["params"].items() if k in params or k == "random_state"}
    print(f"dataset         {Path(args.data).name}  ({ds.n_rows} rows, {ds.n_features} features, "
          f"{classes.shape[0]} classes)")
    print(f"algorithm       {algo}  ({params_text(shown)})")
    print(f"train accuracy  {train_acc:.2f} %")
    print(f"leaves          {tree.n_leaves}")
    print(f"depth           {tree.depth}")
    print(f"time            {seconds:.3f} s")
    print(f"model           {args.output}")
    write_json(args.json, {
        "command": "fit", "dataset": Path(args.data).name, "algorithm": algo,
        "params": model.metadata["params"], "seed": seed,
        "n_rows": ds.n_rows, "n_features": ds.n_features, "n_classes": int(classes.shape[0]),
        "train_accuracy": train_acc, "leaves": tree.n_leaves, "depth": tree.depth,
        "train_seconds": seconds, "model": str(args.output),
        "info": {k: v for k, v in est.fit_info_.items()},
    })
    return 0


def cmd_predict(args) -> int:
    check_output(args.output, "output file", inputs=[args.model, args.data])
    model = load(args.model)
    ds = load_for_model(args.data, model.n_features, label=args.label)
    pred = model.predict(ds.X)
    if args.output is None:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["prediction"])
        writer.writerows([p] for p in pred.tolist())
        sys.stdout.flush()
    else:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["prediction"])
        writer.writerows([p] for p in pred.tolist())
        write_text(args.output, buf.getvalue(), "output file")
    return 0


def cmd_eval(args) -> int:
    check_output(args.json, "JSON file", inputs=[args.model, args.data])
    model = load(args.model)
    ds = load_for_model(args.data, model.n_features, label=args.label)
    if ds.labels.shape[0] == 0:
        raise DataError(f"{args.data} has no label column ({model.n_features} columns = the model's features); "
                        "eval needs the true labels")
    pred = model.predict(ds.X)
    known = set(model.classes)
    extra = sorted({v for v in ds.labels.tolist() if v not in known}, key=lambda v: (isinstance(v, str), str(v)))
    labels = list(model.classes) + extra
    rep = classification_report(ds.labels, pred, labels=labels)

    names = [str(c) for c in labels]
    print(f"model     {args.model}")
    print(f"data      {args.data}  ({ds.n_rows} rows)")
    print(f"accuracy  {pct(rep['accuracy']):.2f} %  ({rep['correct']}/{rep['n']})")
    if extra:
        print(f"note      classes not known to the model: {', '.join(map(str, extra))}")
    print()
    print("confusion matrix (rows: true class, columns: predicted class)")
    rows = [["true\\pred"] + names]
    for i, name in enumerate(names):
        rows.append([name] + [str(v) for v in rep["confusion_matrix"][i]])
    print(table(rows))
    print()
    rows = [["class", "precision", "recall", "f1", "support"]]
    for pc in rep["per_class"]:
        rows.append([str(pc["class"]), f"{pc['precision']:.4f}", f"{pc['recall']:.4f}", f"{pc['f1']:.4f}",
                     str(pc["support"])])
    for name, key in (("macro avg", "macro_avg"), ("weighted avg", "weighted_avg")):
        avg = rep[key]
        rows.append([name, f"{avg['precision']:.4f}", f"{avg['recall']:.4f}", f"{avg['f1']:.4f}", str(rep["n"])])
    print(table(rows))
    write_json(args.json, {
        "command": "eval", "model": str(args.model), "dataset": Path(args.data).name, "n_rows": ds.n_rows,
        "accuracy": pct(rep["accuracy"]), "correct": rep["correct"], "classes": labels,
        "confusion_matrix": rep["confusion_matrix"], "per_class": rep["per_class"],
        "macro_avg": rep["macro_avg"], "weighted_avg": rep["weighted_avg"],
    })
    return 0


def cmd_cv(args) -> int:
    algo, params = _algo_params(args)
    check_output(args.json, "JSON file", inputs=[args.data])
    ds, classes = _load_training(args)
    if args.folds > ds.n_rows:
        raise TreegenError(f"--folds {args.folds} exceeds the number of rows ({ds.n_rows})")
    seed = 0 if args.seed is None else args.seed
    total = args.folds * args.repeats
    with progress_bar(total=total, desc=f"{algo} cv", quiet=args.quiet, unit="fold") as bar:
        result = cross_validate(ds.X, ds.labels, algo, params, folds=args.folds, repeats=args.repeats,
                                seed=seed, jobs=args.jobs, dataset=Path(args.data).name,
                                on_fold=lambda rec: bar.update(1))
    acc, leaves, depth = result["accuracy"], result["leaves"], result["depth"]
    print(f"dataset    {result['dataset']}  ({ds.n_rows} rows, {ds.n_features} features, "
          f"{classes.shape[0]} classes)")
    print(f"algorithm  {algo}  ({params_text(result['params'])})")
    print(f"folds      {args.folds} x {args.repeats} repetition(s), seed {seed}")
    print(f"accuracy   {acc['mean']:.2f} ± {acc['ci95']:.2f} %")
    print(f"leaves     {leaves['mean']:.2f} ± {leaves['ci95']:.2f}")
    print(f"depth      {depth['mean']:.2f} ± {depth['ci95']:.2f}")
    print(f"time       {result['train_seconds']:.3f} s (total training)")
    write_json(args.json, {"command": "cv", **result})
    return 0


def cmd_show(args) -> int:
    model = load(args.model)
    sys.stdout.write(render_dot(model) if args.dot else render_text(model))
    return 0


