"""``treegen fit | predict | eval | cv | show``: inducing, applying and inspecting models."""

from __future__ import annotations

import argparse
import inspect
import contextlib
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np

from treegen.cli.commands import add_command
from treegen.cli.common import (add_csv_options, add_ignore_names, csv_options, int_range, job_count,
                                model_names, nonneg_float, params_text, pct, positive_float, scheduler_address, table)
from treegen.cli.paths import input_, output
from treegen.core.data import load_csv, load_for_model
from treegen.core.errors import DataError, TreegenError
from treegen.core.limits import MAX_DEPTH, MAX_FEATURES, MAX_FOLDS, MAX_POPULATION, MAX_REPEATS, MAX_ROWS, MAX_TREES, MAX_U32
from treegen.core.model import load, save
from treegen.core.output import STDOUT, write_json, write_text
from treegen.core.progress import enabled as progress_enabled
from treegen.core.progress import progress_bar
from treegen.core.scaling import METHODS as SCALING_METHODS
from treegen.emit.show import UNITS as SHOW_UNITS
from treegen.learn.estimators import ALGORITHMS, make_estimator
from treegen.learn.inducers.efti import MAX_ITER, MAX_SEED
from treegen.learn.regressors import REGRESSORS, make_regressor
from treegen.learn.validation import label_kind

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
    "population": ("--population", "population"),
    "generations": ("--generations", "generations"),
    "height": ("--height", "height"),
    "replacement": ("--replacement", "replacement"),
    "validation_fraction": ("--validation-fraction", "validation_fraction"),
    "categorical": ("--categorical", "categorical"),
    "pruning": ("--pruning", "pruning"),
    "confidence": ("--confidence", "confidence"),
    # gp / vicinal risk / random forests
    "risk": ("--risk", "risk"),
    "vicinity_sigma2": ("--vicinity-sigma2", "vicinity_sigma2"),
    "n_trees": ("--n-trees", "n_trees"),
    "base": ("--base", "base"),
    "max_features": ("--max-features", "max_features"),
    "feature_bagging": ("--feature-bagging", "feature_bagging"),
    "sample_fraction": ("--sample-fraction", "sample_fraction"),
    "target_leaves": ("--target-leaves", "target_leaves"),
    # distillation (efti, cart)
    "teacher": ("--teacher", "teacher"),
    "teacher_samples": ("--teacher-samples", "teacher_samples"),
}


def _sigma2_value(text: str):
    """``--vicinity-sigma2``: a number > 0 or ``auto``."""
    if text == "auto":
        return text
    return positive_float(text)


def _max_features_value(text: str):
    """``--max-features``: sqrt, log2, all, or an integer >= 1."""
    if text in ("sqrt", "log2", "all"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"sqrt, log2, all or an integer expected, got {text!r}") from None
    if not 1 <= value <= MAX_FEATURES:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_FEATURES}, got {value}")
    return value


def _add_forest_options(g) -> None:
    """Options of gp (vicinal risk) and rf; added to the algorithm option group."""
    g.add_argument("--risk", choices=("empirical", "vicinal"),
                   help="gp, efti: training risk (vicinal = Gaussian-kernel probability of misclassification; "
                        "gp default vicinal, efti default empirical)")
    g.add_argument("--vicinity-sigma2", type=_sigma2_value, metavar="S|auto",
                   help="gp, efti --risk vicinal: kernel variance per attribute variance (default 0.1); "
                        "auto = 3-fold inner cross-validation")
    g.add_argument("--n-trees", type=int_range(1, MAX_TREES), metavar="N", help="rf: number of trees (default 100)")
    g.add_argument("--base", metavar="LEARNER",
                   help="rf: base tree learner: cart (default), efti (oblique forest), gp")
    g.add_argument("--max-features", type=_max_features_value, metavar="sqrt|log2|all|N",
                   help="rf: features sampled per split, tree or node (default sqrt); efti: attributes "
                        "drawn per node test (default all)")
    g.add_argument("--feature-bagging", choices=("auto", "split", "tree", "node"),
                   help="rf: sample features per split (cart), per tree, or per node test (efti); default auto")
    g.add_argument("--sample-fraction", type=positive_float, metavar="F",
                   help="rf: bootstrap sample size / training rows (default 1.0; the seed's 2/3 = 0.6667)")
    input_(g.add_argument("--teacher", metavar="rf|MODEL.json",
                          help="efti, cart: distillation: also learn from pseudo-samples around the rows labelled by "
                               "a teacher: rf (a 100-tree forest trained on the same rows) or a model file"), "model")
    g.add_argument("--teacher-samples", type=nonneg_float, metavar="K",
                   help="efti, cart --teacher: pseudo-samples per training row (default 2, at most 20)")


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
    g.add_argument("--engine", choices=("auto", "python", "native", "device"),
                   help="efti, gp: native = the C engine compiled for the host (same result, faster); "
                        "device = train on --target (emulated targets start by themselves, or --port), "
                        "checked against the host engine; default auto (native when a C compiler exists)")
    input_(g.add_argument("--target", metavar="T", help="--engine device: the target to train on (treegen targets)"),
           "target")
    g.add_argument("--port", metavar="URL", help="--engine device: a running device (serial port or "
                   "socket://host:port) instead of building and starting the firmware")
    g.add_argument("--dipole", choices=("global", "node"),
                   help="efti: draw new nodes' dipoles from the whole set (default) or the leaf's rows")
    g.add_argument("--scaling", choices=SCALING_METHODS, help="input scaling (default auto)")
    g.add_argument("--criterion", choices=("gini", "entropy"), help="cart: split criterion")
    g.add_argument("--target-leaves", type=int_range(2, 1 << 20), metavar="K",
                   help="efti --task regression: the leaf count the size penalty does not penalise (default 8)")
    g.add_argument("--max-depth", type=int_range(1, MAX_DEPTH), metavar="D", help="maximum tree depth")
    g.add_argument("--min-samples-leaf", type=int_range(1, MAX_ROWS), metavar="N",
                   help="cart: minimum training rows in a leaf")
    g.add_argument("--ccp-alpha", type=nonneg_float, metavar="A",
                   help="cart: cost-complexity pruning parameter")
    _add_alternative_options(p.add_argument_group(
        "differential-evolution and ID3 options (de-pdt, de-cart, de-id3, id3; the CART options "
        "--max-depth, --min-samples-leaf and --ccp-alpha apply to de-cart and de-id3 too, "
        "--max-depth and --min-samples-leaf to id3, --oversize-weight and --engine to de-pdt)"))
    _add_forest_options(g)
    _show_defaults(p)
    p.add_argument("--seed", type=_seed_value, metavar="S|random",
                   help="random seed (default 0); 'random' draws a fresh one (printed, and kept in the model)")
    p.add_argument("--label", metavar="NAME", help="label column (default: the last column)")
    p.add_argument("--task", choices=("classification", "regression"),
                   help="classification (class labels) or regression (a numeric target; --algo "
                        + ", ".join(REGRESSORS) + "); default classification, refused with a hint when the "
                        "label column looks continuous")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _seed_value(text: str):
    """``--seed``: an integer 0..2^64-1, or ``random`` (random_state=None: a seed drawn from the OS)."""
    if text == "random":
        return text
    return int_range(0, MAX_SEED)(text)


def _seed_of(args):
    """The estimator's random_state for ``--seed`` (default 0; ``random`` -> None)."""
    return 0 if args.seed is None else (None if args.seed == "random" else args.seed)


def _default_text(value) -> str:
    if value is None:
        return "none"
    if callable(value):
        return "auto"
    return str(value)


def _show_defaults(p: argparse.ArgumentParser) -> None:
    """Append to the help of every algorithm option whose help names no default the defaults of the
    estimators it applies to, read from their signatures (so --help cannot drift from the code):
    ``(defaults: efti 8, cart none, ...)``."""
    by_dest = {a.dest: a for a in p._actions}
    for dest, (_flag, param) in ALGO_OPTIONS.items():
        action = by_dest.get(dest)
        if action is None or action.help is None or "default" in action.help:
            continue
        defaults = []
        for name, cls in ALGORITHMS.items():
            sig = inspect.signature(cls.__init__).parameters
            if param in sig and sig[param].default is not inspect.Parameter.empty:
                defaults.append(f"{name} {_default_text(sig[param].default)}")
        if defaults:
            action.help += f" (default{'s' if len(defaults) > 1 else ''}: {', '.join(defaults)})"


def _fraction(text: str) -> float:
    value = nonneg_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text!r}")
    return value


def _open_fraction(text: str) -> float:
    value = _fraction(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text!r}")
    return value


def _add_alternative_options(g) -> None:
    """Options of the DE-PDT, DE-split and ID3 algorithms (defaults shown; see README)."""
    g.add_argument("--population", type=int_range(4, MAX_POPULATION), metavar="P",
                   help="de-pdt: population size (default 50); de-cart/de-id3: population of each "
                        "node's threshold DE (default 20); gp: population size (default 100)")
    g.add_argument("--generations", type=int_range(0, MAX_U32), metavar="G",
                   help="de-pdt: generations (default 2000); de-cart/de-id3: generations of each "
                        "node's threshold DE (default 30)")
    g.add_argument("--height", type=int_range(2, 12), metavar="H",
                   help="de-pdt: height h of the complete tree, 2..12 (default 5: 15 nodes, 16 leaves)")
    g.add_argument("--replacement", type=_fraction, metavar="X",
                   help="de-pdt: fraction of worst individuals replaced by random trees each generation "
                        "(default 0.1)")
    g.add_argument("--validation-fraction", type=_fraction, metavar="V",
                   help="de-pdt: stratified hold-out of the training rows that picks the final tree "
                        "(treegen extra; default 0 = off)")
    g.add_argument("--categorical", metavar="COLS",
                   help="id3: comma-separated categorical columns (names or 0-based indices), split "
                        "multiway (default: none)")
    g.add_argument("--pruning", choices=("none", "pessimistic"),
                   help="id3: C4.5 pessimistic (error-based) pruning (default none)")
    g.add_argument("--confidence", type=_open_fraction, metavar="CF",
                   help="id3: confidence factor of pessimistic pruning (default 0.25)")


def _categorical_by_index(params: dict, feature_names: list) -> None:
    """``--categorical`` names -> column indices (cv fits folds without feature names)."""
    spec = params.get("categorical")
    if isinstance(spec, str):
        items = [s.strip() for s in spec.split(",") if s.strip()]
        params["categorical"] = ",".join(str(feature_names.index(i)) if i in feature_names else i for i in items)


def _algo_params(args: argparse.Namespace) -> tuple[str, dict]:
    """Algorithm name and the estimator parameters given on the command line (seed excluded)."""
    algo = args.algo
    if algo not in ALGORITHMS:
        raise TreegenError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGORITHMS)})")
    regression = _regression(args)
    if regression and algo not in REGRESSORS:
        raise TreegenError(f"--algo {algo} has no regression variant (--task regression: choose from "
                           f"{', '.join(REGRESSORS)})")
    valid = (REGRESSORS if regression else ALGORITHMS)[algo]._param_names()
    params = {}
    for dest, (flag, param) in ALGO_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if param not in valid:
            raise TreegenError(f"option {flag} does not apply to --algo {algo}"
                               + (" --task regression" if regression else ""))
        params[param] = value
    return algo, params


def register(sub) -> None:
    """Add fit, predict, eval, cv and show to the subcommands ``sub``."""
    p = add_command(sub, "fit")
    add_csv_options(p)
    input_(p.add_argument("data", metavar="DATA", help="training CSV (header row; gzip allowed)"), "data")
    _add_algo_options(p)
    output(p.add_argument("-o", "--output", required=True, metavar="MODEL.json", help="model file to write"),
           "model file")
    output(p.add_argument("--json", metavar="FILE", help="also write the figures as JSON"), "JSON file")
    p.add_argument("--jobs", type=job_count, metavar="J",
                   help="rf: trees fitted in parallel (joblib n_jobs; -1 = all cores; default 1)")
    p.set_defaults(func=cmd_fit)

    p = add_command(sub, "predict")
    add_ignore_names(p)
    add_csv_options(p)
    input_(p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)"), "model")
    input_(p.add_argument("data", metavar="DATA", help="CSV with the model's features (label column optional)"), "data")
    p.add_argument("--label", metavar="NAME", help="label column to ignore (default: last, if present)")
    output(p.add_argument("-o", "--output", metavar="OUT.csv", help="write predictions here instead of stdout"),
           "output file")
    p.set_defaults(func=cmd_predict)

    p = add_command(sub, "eval")
    add_ignore_names(p)
    add_csv_options(p)
    input_(p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)"), "model")
    input_(p.add_argument("data", metavar="DATA", help="labelled CSV"), "data")
    p.add_argument("--label", metavar="NAME", help="label column (default: the last column)")
    output(p.add_argument("--json", metavar="FILE", help="also write the figures as JSON"), "JSON file")
    p.set_defaults(func=cmd_eval)

    p = add_command(sub, "cv")
    add_csv_options(p)
    input_(p.add_argument("data", metavar="DATA", help="labelled CSV"), "data")
    _add_algo_options(p)
    p.add_argument("--folds", type=int_range(2, MAX_FOLDS), default=5, metavar="K",
                   help="number of folds (default 5)")
    p.add_argument("--repeats", type=int_range(1, MAX_REPEATS), default=1, metavar="R",
                   help="number of repetitions (default 1)")
    p.add_argument("--jobs", type=job_count, default=1, metavar="J",
                   help="parallel jobs (joblib n_jobs; -1 = all cores; default 1)")
    p.add_argument("--scheduler", type=scheduler_address, metavar="tcp://HOST:PORT",
                   help="run the folds on this running Dask scheduler (joblib's Dask backend; --jobs is ignored)")
    output(p.add_argument("--json", metavar="FILE", help="also write the figures (and every fold) as JSON"),
           "JSON file")
    p.set_defaults(func=cmd_cv)

    p = add_command(sub, "show")
    input_(p.add_argument("model", metavar="MODEL", help="model file"), "model")
    p.add_argument("--dot", action="store_true", help="Graphviz DOT instead of text")
    p.add_argument("--units", choices=SHOW_UNITS, default="raw",
                   help="tests in raw input units (as the data file) or in the normalised units the tree "
                        "computes with (default raw)")
    p.set_defaults(func=cmd_show)


def _regression(args) -> bool:
    return getattr(args, "task", None) == "regression"


def check_task(labels, label_name: str, task: str | None) -> None:
    """Refuse a label column that does not fit the task, with a one-line hint: a continuous target
    without ``--task`` (``--task classification`` fits it anyway), class labels with ``--task
    regression``."""
    kind, n = label_kind(labels)
    if task is None and kind == "continuous":
        raise DataError(f"the label column {label_name!r} has {n} distinct numeric values, a continuous target: "
                        f"use --task regression to fit a regression tree (or --task classification for {n} "
                        f"classes)")
    if task == "regression" and kind in ("text", "levels"):
        what = "text class labels" if kind == "text" else f"only {n} integer levels"
        raise DataError(f"the label column {label_name!r} holds {what}: use --task classification "
                        f"(regression needs a numeric target with more than a few levels)")


def _load_training(args) -> tuple:
    """The dataset and its sorted classes (None for --task regression)."""
    ds = load_csv(args.data, label=args.label, **csv_options(args))
    check_task(ds.labels, ds.label_name, getattr(args, "task", None))
    if _regression(args):
        return ds, None
    classes = np.unique(ds.labels)
    if classes.shape[0] < 2:
        raise DataError(f"{args.data} has a single class ({classes[0]!r}); at least two are needed")
    return ds, classes


# ---------------------------------------------------------------------- commands
def _device_engine(args, params: dict):
    """The inducer of --engine device (treegen.device, imported only here)."""
    if params.get("engine") != "device":
        raise TreegenError("--target and --port of fit only apply with --engine device")
    if getattr(args, "target", None) is None:
        raise TreegenError("--engine device needs --target T (e.g. qemu-m4; treegen targets lists them)")
    from treegen.core import targets
    from treegen.device.train_fit import device_inducer

    target = targets.get(args.target)
    if args.port is None and target.kind not in ("emulated", "host"):
        raise TreegenError(f"target {target.name!r} ({target.kind}) is not started here: flash a training "
                           f"firmware (treegen flash MODEL --target {target.name} --train --data CSV) and pass "
                           f"--port PORT")
    return device_inducer(target, port=args.port,
                          log=None if args.quiet else (lambda m: print(f"device          {m}", flush=True)))


def cmd_fit(args) -> int:
    algo, params = _algo_params(args)
    regression = _regression(args)
    if getattr(args, "jobs", None) is not None:
        if "n_jobs" not in (REGRESSORS if regression else ALGORITHMS)[algo]._param_names():
            raise TreegenError(f"option --jobs does not apply to --algo {algo}")
        params["n_jobs"] = args.jobs
    ds, classes = _load_training(args)
    device = None
    if params.get("engine") == "device" or getattr(args, "target", None) or getattr(args, "port", None):
        device = _device_engine(args, params)
        params["engine"] = device
    est = make_regressor(algo, **params) if regression else make_estimator(algo, **params)
    if "random_state" in est._param_names():
        est.set_params(random_state=_seed_of(args))

    show_bar = progress_enabled(args.quiet)
    total = (getattr(est, "max_iter", None) or getattr(est, "generations", None)
             if "callback" in est._param_names() else None)
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
    seed = est.seed_

    model = est.model_
    model.metadata["params"].pop("callback", None)
    if device is not None:
        model.metadata["params"]["engine"] = "device"
    model.metadata["dataset"] = Path(args.data).name
    model.metadata["label_column"] = ds.label_name
    if regression:
        model.metadata["target_name"] = ds.label_name
    model.metadata["train_seconds"] = seconds
    if args.output == STDOUT:
        write_text(STDOUT, model.to_json() + "\n", "model file")
    else:
        save(model, args.output)

    tree = est.tree_
    meta = model.metadata
    shown = {k: v for k, v in model.metadata["params"].items() if k in params}
    shown["seed"] = seed
    target = f"regression of {ds.label_name}" if regression else f"{classes.shape[0]} classes"
    print(f"dataset         {Path(args.data).name}  ({ds.n_rows} rows, {ds.n_features} features, {target})")
    print(f"algorithm       {algo}  ({params_text(shown)})")
    if regression:
        print(f"train RMSE      {meta['train_rmse']:.6g}")
        print(f"train MAE       {meta['train_mae']:.6g}")
        print(f"train R²        {meta['train_r2']:.4f}")
    else:
        print(f"train accuracy  {pct(meta['train_accuracy']):.2f} %")
    if len(model.trees) > 1:
        print(f"trees           {len(model.trees)}")
        print(f"leaves          {sum(t.n_leaves for t in model.trees)} in total")
        print(f"depth           {max(t.depth for t in model.trees)} (deepest tree)")
    else:
        print(f"leaves          {tree.n_leaves}")
        print(f"depth           {tree.depth}")
    if hasattr(est, "oob_score_"):
        print(f"oob R²          {est.oob_score_:.4f}" if regression else f"oob accuracy    {pct(est.oob_score_):.2f} %")
    if "training_risk" in est.fit_info_:
        print(f"training risk   {est.fit_info_['training_risk']:.4f} ({est.fit_info_['risk']})")
    print(f"time            {seconds:.3f} s")
    print(f"model           {args.output}")
    figures = ({"task": "regression", "train_rmse": meta["train_rmse"], "train_mae": meta["train_mae"],
                "train_r2": meta["train_r2"]} if regression else
               {"n_classes": int(classes.shape[0]), "train_accuracy": meta["train_accuracy"]})
    write_json(args.json, {
        "command": "fit", "dataset": Path(args.data).name, "algorithm": algo,
        "params": model.metadata["params"], "seed": seed,
        "n_rows": ds.n_rows, "n_features": ds.n_features, **figures, "leaves": tree.n_leaves, "depth": tree.depth,
        "train_seconds": seconds, "model": str(args.output),
        "info": {k: v for k, v in est.fit_info_.items()},
    })
    return 0


def cmd_predict(args) -> int:
    model = load(args.model)
    ds = load_for_model(args.data, model.n_features, label=args.label,
                        feature_names=model_names(args, model), **csv_options(args),
                        missing=model.handles_missing)
    pred = model.predict(ds.X)
    if args.output is None:          # streamed ('-o -' goes through write_text, as any output)
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
    from treegen.core.metrics import evaluate

    model = load(args.model)
    ds = load_for_model(args.data, model.n_features, label=args.label,
                        feature_names=model_names(args, model), **csv_options(args),
                        missing=model.handles_missing)
    if ds.labels.shape[0] == 0:
        raise DataError(f"{args.data} has no label column ({model.n_features} columns = the model's features); "
                        "eval needs the true labels")
    if model.is_regression:
        return _eval_regression(args, model, ds)
    rep = evaluate(model, ds.X, ds.labels)        # treegen.core.metrics.evaluate: the Python API of eval
    labels, extra, predict_seconds = rep["classes"], rep["unknown_classes"], rep["predict_seconds"]
    auc = {"auc": rep["roc_auc"]}

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
    # the metrics table of the random-forest seed (shared/seeds/003): one line per figure
    train_seconds = model.metadata.get("train_seconds")
    macro = rep["macro_avg"]
    rows = [["metric", "value"],
            ["accuracy", f"{rep['accuracy']:.4f}"],
            ["precision (macro)", f"{macro['precision']:.4f}"],
            ["recall (macro)", f"{macro['recall']:.4f}"],
            ["f1 (macro)", f"{macro['f1']:.4f}"],
            ["roc auc" + (" (one-vs-rest, macro)" if len(model.classes) > 2 else ""),
             "n/a" if auc is None or auc["auc"] is None else f"{auc['auc']:.4f}"],
            ["training time", "n/a" if train_seconds is None else f"{float(train_seconds):.3f} s"],
            ["prediction time", f"{predict_seconds:.4f} s ({1e6 * predict_seconds / max(1, ds.n_rows):.2f} us/row)"]]
    print()
    print(table(rows))
    write_json(args.json, {
        "command": "eval", "model": str(args.model), "dataset": Path(args.data).name, "n_rows": ds.n_rows,
        "accuracy": rep["accuracy"], "correct": rep["correct"], "classes": labels,
        "confusion_matrix": rep["confusion_matrix"], "per_class": rep["per_class"],
        "macro_avg": rep["macro_avg"], "weighted_avg": rep["weighted_avg"],
        "roc_auc": rep["roc_auc"], "roc_auc_per_class": rep["roc_auc_per_class"],
        "train_seconds": train_seconds, "predict_seconds": predict_seconds,
    })
    return 0


def _eval_regression(args, model, ds) -> int:
    from treegen.core.metrics import evaluate

    rep = evaluate(model, ds.X, ds.labels)        # treegen.core.metrics.evaluate_regression
    train_seconds = model.metadata.get("train_seconds")
    print(f"model     {args.model}")
    print(f"data      {args.data}  ({ds.n_rows} rows)")
    print(f"RMSE      {rep['rmse']:.6g}")
    print(f"MAE       {rep['mae']:.6g}")
    print(f"R²        {rep['r2']:.4f}")
    print(f"time      {rep['predict_seconds']:.4f} s ({1e6 * rep['predict_seconds'] / max(1, ds.n_rows):.2f} us/row)")
    write_json(args.json, {
        "command": "eval", "model": str(args.model), "dataset": Path(args.data).name, "n_rows": ds.n_rows,
        "task": "regression", "rmse": rep["rmse"], "mae": rep["mae"], "r2": rep["r2"],
        "train_seconds": train_seconds, "predict_seconds": rep["predict_seconds"],
    })
    return 0


def cmd_cv(args) -> int:
    from treegen.learn.cv import cross_validate     # joblib: only cv needs it here

    algo, params = _algo_params(args)
    if params.get("engine") == "device" or args.target is not None or args.port is not None:
        raise TreegenError("--engine device, --target and --port apply to fit only (cv trains on the host)")
    ds, classes = _load_training(args)
    _categorical_by_index(params, ds.feature_names)
    if args.folds > ds.n_rows:
        raise TreegenError(f"--folds {args.folds} exceeds the number of rows ({ds.n_rows})")
    seed = _seed_of(args)
    total = args.folds * args.repeats
    with contextlib.ExitStack() as stack:
        jobs = args.jobs
        if getattr(args, "scheduler", None):   # the same folds and seeds, run by the cluster's workers
            from joblib import parallel_config

            from treegen.learn.compare import dask_client
            client = stack.enter_context(dask_client(args.scheduler))
            stack.enter_context(client.as_current())
            stack.enter_context(parallel_config(backend="dask"))
            jobs = -1
        bar = stack.enter_context(progress_bar(total=total, desc=f"{algo} cv", quiet=args.quiet, unit="fold"))
        result = cross_validate(ds.X, ds.labels, algo, params, folds=args.folds, repeats=args.repeats,
                                seed=seed, jobs=jobs, dataset=Path(args.data).name,
                                on_fold=lambda rec: bar.update(1), task=args.task or "classification")
    leaves, depth = result["leaves"], result["depth"]
    target = f"regression of {ds.label_name}" if classes is None else f"{classes.shape[0]} classes"
    print(f"dataset    {result['dataset']}  ({ds.n_rows} rows, {ds.n_features} features, {target})")
    print(f"algorithm  {algo}  ({params_text(result['params'])})")
    print(f"folds      {args.folds} x {args.repeats} repetition(s), seed {result['seed']}")
    if classes is None:
        for key, name in (("rmse", "RMSE"), ("mae", "MAE")):
            print(f"{name:<10} {result[key]['mean']:.6g} ± {result[key]['ci95']:.4g}")
        print(f"R²         {result['r2']['mean']:.4f} ± {result['r2']['ci95']:.4f}")
    else:
        acc = result["accuracy"]
        print(f"accuracy   {pct(acc['mean']):.2f} ± {pct(acc['ci95']):.2f} %")
    print(f"leaves     {leaves['mean']:.2f} ± {leaves['ci95']:.2f}")
    print(f"depth      {depth['mean']:.2f} ± {depth['ci95']:.2f}")
    print(f"time       {result['train_seconds']:.3f} s (total training)")
    write_json(args.json, {"command": "cv", **result})
    return 0


def cmd_show(args) -> int:
    from treegen.emit.show import render_dot, render_text

    model = load(args.model)
    sys.stdout.write(render_dot(model, units=args.units) if args.dot else render_text(model, units=args.units))
    return 0


