"""Command-line interface: ``treegen fit | predict | eval | cv | show | export | targets | build | flash | hil``.

Results go to stdout, progress bars to stderr (only on a terminal, never with ``--quiet``).
Every user error prints one line ``treegen: error: ...`` on stderr and exits with status 2;
an interrupt exits with 130. Unexpected exceptions (bugs) keep their traceback.

``--json FILE`` writes the figures of ``fit``, ``eval`` and ``cv`` as JSON; accuracies there are
percentages (0..100), like on screen.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import signal
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .cv import cross_validate
from .data import load_csv, load_for_model
from .errors import DataError, TreegenError
from .estimators import ALGORITHMS, make_estimator
from .export import DTYPES as EXPORT_DTYPES
from .export import LAYOUTS as EXPORT_LAYOUTS
from .export import VARIANTS as EXPORT_VARIANTS
from .export import export_model
from .metrics import classification_report
from .model import _plain, load, save
from .progress import enabled as progress_enabled
from .progress import progress_bar
from .scaling import METHODS as SCALING_METHODS
from .show import render_dot, render_text
from .targets import all_targets
from .targets import get as get_target

PROG = "treegen"


class CLIError(TreegenError):
    """A command-line usage error (bad option, missing argument)."""


class _Parser(argparse.ArgumentParser):
    """argparse parser whose errors are one line ``treegen: error: ...`` (no usage block)."""

    def error(self, message: str):  # type: ignore[override]
        raise CLIError(f"{message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------- option value types
def _int_at_least(minimum: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} expected, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number expected, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer expected, got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("must not be 0 (1 = sequential, -1 = all cores)")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number expected, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _int_range(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"an integer expected, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {lo}..{hi}, got {value}")
        return value
    return parse


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
    g.add_argument("--max-iter", type=_int_at_least(0, "an integer"), metavar="N",
                   help="efti: number of evolution iterations")
    g.add_argument("--oversize-weight", type=_nonneg_float, metavar="KO",
                   help="efti: weight of the squared relative oversize in the fitness")
    g.add_argument("--missing-weight", type=_nonneg_float, metavar="KM",
                   help="efti: weight of the fraction of classes no leaf predicts")
    g.add_argument("--engine", choices=("auto", "python", "native"),
                   help="efti: native = the C engine compiled for the host (same result, faster); "
                        "default auto (native when a C compiler exists)")
    g.add_argument("--dipole", choices=("global", "node"),
                   help="efti: draw new nodes' dipoles from the whole set (default) or the leaf's rows")
    g.add_argument("--scaling", choices=SCALING_METHODS, help="input scaling (default auto)")
    g.add_argument("--criterion", choices=("gini", "entropy"), help="cart: split criterion")
    g.add_argument("--max-depth", type=_int_at_least(1, "an integer"), metavar="D", help="maximum tree depth")
    g.add_argument("--min-samples-leaf", type=_int_at_least(1, "an integer"), metavar="N",
                   help="cart: minimum training rows in a leaf")
    g.add_argument("--ccp-alpha", type=_nonneg_float, metavar="A",
                   help="cart: cost-complexity pruning parameter")
    p.add_argument("--seed", type=_int_at_least(0, "an integer"), metavar="S", help="random seed (default 0)")
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Decision trees for microcontrollers: induce, evaluate, inspect.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
    p.add_argument("--folds", type=_int_at_least(2, "an integer"), default=5, metavar="K",
                   help="number of folds (default 5)")
    p.add_argument("--repeats", type=_int_at_least(1, "an integer"), default=1, metavar="R",
                   help="number of repetitions (default 1)")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="J",
                   help="parallel jobs (joblib n_jobs; -1 = all cores; default 1)")
    p.add_argument("--json", metavar="FILE", help="also write the figures (and every fold) as JSON")
    p.set_defaults(func=cmd_cv)

    p = sub.add_parser("show", help="print a model's tree")
    p.add_argument("model", metavar="MODEL", help="model file")
    p.add_argument("--dot", action="store_true", help="Graphviz DOT instead of text")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="generate fixed-point (Q15) or float32 C for a target")
    p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o); with --train also a training CSV")
    p.add_argument("--target", required=True, metavar="T", help="target name (see 'treegen targets')")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default="table",
                   help="table: const node arrays + a loop; unrolled: one code block per node (default table)")
    p.add_argument("--dtype", choices=EXPORT_DTYPES, default="q15", help="q15 fixed point or f32 (default q15)")
    p.add_argument("--variant", choices=EXPORT_VARIANTS, default="auto",
                   help="oblique multiply-accumulate: scalar C, ARMv7E-M dsp, or auto (dsp if the target has it)")
    p.add_argument("--name", metavar="NAME", help="C identifier of the model (default: the model file name)")
    p.add_argument("--data", metavar="CSV", help="labelled data: fixed-vs-float agreement, accuracy, example rows")
    p.add_argument("--label", metavar="NAME", help="label column of --data (default: last, if present)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (created if missing)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    g = p.add_argument_group("on-device training (--train: the EFTI engine as a library; treegen.train_firmware)")
    g.add_argument("--train", action="store_true",
                   help="write the EFTI engine (tg_efti.*, tg_efti_config.c, example main.c) sized for MODEL or a "
                        "training CSV (compiled into flash), after a RAM check")
    g.add_argument("--max-depth", type=_int_at_least(1, "an integer"), metavar="D",
                   help="--train: maximum tree depth (default: the model's EFTI parameters, else 8)")
    g.add_argument("--max-rows", type=_int_at_least(2, "an integer"), metavar="N",
                   help="--train: training rows the device keeps (default: the data's or the model's n_train)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("targets", help="list the targets code can be exported for")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("build", help="write a PlatformIO project (model + firmware harness) and build it")
    _add_firmware_options(p)
    p.add_argument("-v", "--verbose", action="store_true", help="show PlatformIO's output while it builds")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("flash", help="upload the firmware to a board, or run it in QEMU for an emulated target")
    _add_firmware_options(p)
    p.add_argument("--port", metavar="P",
                   help="boards: upload port (e.g. /dev/ttyACM0); emulated: TCP port of the UART (default: a free one)")
    p.add_argument("-v", "--verbose", action="store_true", help="show PlatformIO's output while it builds")
    p.set_defaults(func=cmd_flash)

    p = sub.add_parser("hil", help="hardware in the loop: check a model's firmware on a device against the host")
    p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)")
    p.add_argument("--target", required=True, metavar="T",
                   help="native, an emulated target (qemu-m3, qemu-m4, qemu-m7) or a board (see 'treegen targets')")
    p.add_argument("--port", metavar="URL",
                   help="use the device running at this serial port or pyserial URL (/dev/ttyACM0, "
                        "socket://127.0.0.1:PORT); required for real boards (flashed with 'treegen flash'). "
                        "Without it, native and emulated targets are built and started here")
    p.add_argument("--data", required=True, metavar="CSV", help="rows to stream (label column optional)")
    p.add_argument("--label", metavar="NAME", help="label column of --data (default: last, if present)")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default=None,
                   help="model code layout to build (default table; with --port: checked against the device)")
    p.add_argument("--variant", choices=EXPORT_VARIANTS, default=None,
                   help="multiply-accumulate variant to build (default auto; with --port: checked against the device)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="build directory (default: build/<model>-<target>)")
    p.add_argument("--timeout", type=_positive_float, default=10.0, metavar="S",
                   help="seconds to wait for each response (default 10)")
    p.add_argument("--bench-iters", type=_int_range(0, 65535), default=2000, metavar="N",
                   help="BENCH calls per timed row (default 2000; 0 = no BENCH)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (also when the run fails: ok false)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML: one testcase per check (hash, predictions, bench)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    g = p.add_argument_group("on-device training (treegen.train_hil)")
    g.add_argument("--train", action="store_true",
                   help="instead: build the firmware with the EFTI engine sized for --data, train on the device and "
                        "on the host with the same seed, require identical trees, fitness and PREDICT_TRAINED")
    g.add_argument("--iters", type=_int_at_least(1, "an integer"), default=2000, metavar="N",
                   help="--train: EFTI iterations (default 2000)")
    g.add_argument("--seed", type=_int_at_least(0, "an integer"), default=1, metavar="S",
                   help="--train: random seed (default 1)")
    p.set_defaults(func=cmd_hil)
    return parser


def _add_firmware_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)")
    p.add_argument("--target", required=True, metavar="T",
                   help="emulated target (qemu-m3, qemu-m4, qemu-m7) or board (see 'treegen targets')")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="PlatformIO project directory (default: build/<model>-<target>)")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default="table", help="model code layout (default table)")
    p.add_argument("--variant", choices=EXPORT_VARIANTS, default="auto",
                   help="oblique multiply-accumulate: scalar, dsp or auto (default auto)")
    g = p.add_argument_group("on-device training (the firmware 'treegen hil --train --port' talks to)")
    g.add_argument("--train", action="store_true",
                   help="add the EFTI training engine, sized for the rows of --data (after a RAM check)")
    g.add_argument("--data", metavar="CSV", help="--train: labelled training data that sizes the engine")
    g.add_argument("--label", metavar="NAME", help="--train: label column of --data (default: last)")
    g.add_argument("--max-depth", type=_int_at_least(1, "an integer"), metavar="D",
                   help="--train: maximum tree depth (default: the model's EFTI parameters, else 8)")


# ---------------------------------------------------------------------- output helpers
def _check_output(path: str | None, what: str) -> None:
    """Fail early (before a long fit) if ``path`` obviously cannot be written."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise TreegenError(f"cannot write {what} {p}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TreegenError(f"cannot write {what} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise TreegenError(f"cannot write {what} {p}: permission denied")


def _write_text(path: str, text: str, what: str) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except OSError as exc:
        raise TreegenError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def _write_json(path: str | None, obj: dict) -> None:
    if path is not None:
        _write_text(path, json.dumps(_plain(obj), indent=2, allow_nan=False) + "\n", "JSON file")


def _pct(fraction: float) -> float:
    return 100.0 * float(fraction)


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def _table(rows: list[list[str]], align_left: int = 1) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [cell.ljust(widths[c]) if c < align_left else cell.rjust(widths[c]) for c, cell in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def _load_training(args) -> tuple:
    ds = load_csv(args.data, label=args.label)
    classes = np.unique(ds.labels)
    if classes.shape[0] < 2:
        raise DataError(f"{args.data} has a single class ({classes[0]!r}); at least two are needed")
    return ds, classes


# ---------------------------------------------------------------------- commands
def cmd_fit(args) -> int:
    algo, params = _algo_params(args)
    _check_output(args.output, "model file")
    _check_output(args.json, "JSON file")
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
    train_acc = _pct(model.metadata["train_accuracy"])
    shown = {k: v for k, v in model.metadata["params"].items() if k in params or k == "random_state"}
    print(f"dataset         {Path(args.data).name}  ({ds.n_rows} rows, {ds.n_features} features, "
          f"{classes.shape[0]} classes)")
    print(f"algorithm       {algo}  ({_params_text(shown)})")
    print(f"train accuracy  {train_acc:.2f} %")
    print(f"leaves          {tree.n_leaves}")
    print(f"depth           {tree.depth}")
    print(f"time            {seconds:.3f} s")
    print(f"model           {args.output}")
    _write_json(args.json, {
        "command": "fit", "dataset": Path(args.data).name, "algorithm": algo,
        "params": model.metadata["params"], "seed": seed,
        "n_rows": ds.n_rows, "n_features": ds.n_features, "n_classes": int(classes.shape[0]),
        "train_accuracy": train_acc, "leaves": tree.n_leaves, "depth": tree.depth,
        "train_seconds": seconds, "model": str(args.output),
        "info": {k: v for k, v in est.fit_info_.items()},
    })
    return 0


def cmd_predict(args) -> int:
    _check_output(args.output, "output file")
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
        _write_text(args.output, buf.getvalue(), "output file")
    return 0


def cmd_eval(args) -> int:
    _check_output(args.json, "JSON file")
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
    print(f"accuracy  {_pct(rep['accuracy']):.2f} %  ({rep['correct']}/{rep['n']})")
    if extra:
        print(f"note      classes not known to the model: {', '.join(map(str, extra))}")
    print()
    print("confusion matrix (rows: true class, columns: predicted class)")
    rows = [["true\\pred"] + names]
    for i, name in enumerate(names):
        rows.append([name] + [str(v) for v in rep["confusion_matrix"][i]])
    print(_table(rows))
    print()
    rows = [["class", "precision", "recall", "f1", "support"]]
    for pc in rep["per_class"]:
        rows.append([str(pc["class"]), f"{pc['precision']:.4f}", f"{pc['recall']:.4f}", f"{pc['f1']:.4f}",
                     str(pc["support"])])
    for name, key in (("macro avg", "macro_avg"), ("weighted avg", "weighted_avg")):
        avg = rep[key]
        rows.append([name, f"{avg['precision']:.4f}", f"{avg['recall']:.4f}", f"{avg['f1']:.4f}", str(rep["n"])])
    print(_table(rows))
    _write_json(args.json, {
        "command": "eval", "model": str(args.model), "dataset": Path(args.data).name, "n_rows": ds.n_rows,
        "accuracy": _pct(rep["accuracy"]), "correct": rep["correct"], "classes": labels,
        "confusion_matrix": rep["confusion_matrix"], "per_class": rep["per_class"],
        "macro_avg": rep["macro_avg"], "weighted_avg": rep["weighted_avg"],
    })
    return 0


def cmd_cv(args) -> int:
    algo, params = _algo_params(args)
    _check_output(args.json, "JSON file")
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
    print(f"algorithm  {algo}  ({_params_text(result['params'])})")
    print(f"folds      {args.folds} x {args.repeats} repetition(s), seed {seed}")
    print(f"accuracy   {acc['mean']:.2f} ± {acc['ci95']:.2f} %")
    print(f"leaves     {leaves['mean']:.2f} ± {leaves['ci95']:.2f}")
    print(f"depth      {depth['mean']:.2f} ± {depth['ci95']:.2f}")
    print(f"time       {result['train_seconds']:.3f} s (total training)")
    _write_json(args.json, {"command": "cv", **result})
    return 0


def cmd_show(args) -> int:
    model = load(args.model)
    sys.stdout.write(render_dot(model) if args.dot else render_text(model))
    return 0


def cmd_export(args) -> int:
    if args.train:
        from .train_firmware import cmd_export_train

        return cmd_export_train(args)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise TreegenError(f"output path {out} is a file, not a directory")
    _check_output(args.json, "JSON file")
    if args.label is not None and args.data is None:
        raise TreegenError("--label needs --data")
    target = get_target(args.target)
    model = load(args.model)
    data = None
    if args.data is not None:
        ds = load_for_model(args.data, model.n_features, label=args.label)
        data = (ds.X, ds.labels if ds.labels.shape[0] else None)
    name = args.name if args.name is not None else Path(args.model).name.removesuffix(".json")
    rep = export_model(model, out, target=target, layout=args.layout, dtype=args.dtype, variant=args.variant,
                       name=name, data=data)
    d = rep.to_dict()
    flags = ", ".join(f for f, on in (("FPU", target.fpu), ("DSP", target.dsp)) if on) or "no FPU, no DSP"
    print(f"model           {args.model}  (sha256 {rep.model_hash[:16]})")
    print(f"target          {rep.target}  ({target.core}; {flags})")
    print(f"export          {rep.name}: layout {rep.layout}, dtype {rep.dtype}"
          + (f", variant {rep.variant}" if rep.dtype == "q15" else ""))
    print(f"files           {', '.join(rep.files)}")
    for i, t in enumerate(rep.trees):
        acc = f", int{t['acc_bits']}_t accumulator (|acc| <= {t['acc_bound']})" if t["kind"] == "oblique" and \
            t["acc_bits"] else ""
        print(f"{'trees' if i == 0 else '':<16}{i}: {t['kind']}, {t['n_internal']} internal nodes, "
              f"{t['n_leaves']} leaves, depth {t['depth']}{acc}")
    print(f"field types     child reference {rep.field_types['child_ref']}, "
          f"feature index {rep.field_types['feature_index']}")
    if rep.dtype == "q15":
        exact = "yes (integer tests equal the float tests on every Q15 input)" if rep.exact else \
            "not proven (inexact coefficients; thresholds fitted to the data given)"
        print(f"exact           {exact}")
        print(f"unresolved rows {len(rep.unresolved_rows)}")
    print(f"estimated bytes {rep.estimated_bytes}  (tables{' + code estimate' if rep.layout == 'unrolled' else ''})")
    if rep.flash_bytes is None:
        print(f"flash / RAM     {rep.size_note}")
    else:
        print(f"flash / RAM     {rep.flash_bytes} / {rep.ram_bytes} bytes; inference path alone "
              f"{rep.flash_bytes_inference} bytes flash")
        print(f"                ({rep.size_note})")
    agr = rep.agreement
    if agr is not None:
        if "fixed_vs_float_pct" in agr:
            print(f"agreement       {agr['fixed_vs_float_pct']:.2f} % fixed-point vs float  ({agr['rows']} rows)")
        if "accuracy_float_pct" in agr:
            fixed = f", fixed-point {agr['accuracy_fixed_pct']:.2f} %" if "accuracy_fixed_pct" in agr else ""
            print(f"accuracy        float {agr['accuracy_float_pct']:.2f} %{fixed}")
    for note in rep.notes:
        print(f"note            {note}")
    _write_json(args.json, {"command": "export", "model": str(args.model), **d})
    return 0


def cmd_targets(args) -> int:
    rows = [["name", "kind", "core", "FPU", "DSP", "flash", "RAM", "description"]]
    for t in all_targets():
        rows.append([t.name, t.kind, t.core, "yes" if t.fpu else "no", "yes" if t.dsp else "no",
                     f"{t.flash_kb} KiB", f"{t.ram_kb} KiB", t.description])
    print(_table(rows, align_left=8))
    return 0


def _firmware_project(args):
    """(model, target, project dir) of build/flash; the target must be built with PlatformIO."""
    _check_train_flags(args)
    target = get_target(args.target)
    if target.kind not in ("emulated", "board"):
        raise TreegenError(f"target {target.name!r} (kind {target.kind!r}) has no firmware build; use an "
                           "emulated target (qemu-m3, qemu-m4, qemu-m7) or a board (see 'treegen targets')")
    model = load(args.model)
    stem = Path(args.model).name.removesuffix(".json")
    out = Path(args.output) if args.output else Path("build") / f"{stem}-{target.name}"
    return model, target, out


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def _print_size(size, target) -> None:
    print(f"flash           {_kib(size.flash)} of {target.flash_kb} KiB "
          f"({100 * size.flash / target.flash_bytes:.1f} %)")
    print(f"RAM             {_kib(size.ram)} of {target.ram_kb} KiB ({100 * size.ram / target.ram_bytes:.1f} %; "
          "static data + stack reserve)")


def _check_train_flags(args) -> None:
    if not args.train and (args.data is not None or args.max_depth is not None or args.label is not None):
        raise TreegenError("--data, --label and --max-depth of build/flash only apply with --train")
    if args.train and args.data is None:
        raise TreegenError("--train needs --data CSV: the training rows size the engine's buffers")


def _train_spec(args, model, target):
    """The on-device training configuration of build/flash --train (None without --train)."""
    if not args.train:
        return None
    from .train_firmware import make_train_spec, params_from_model, training_rows

    ds = load_for_model(args.data, model.n_features, label=args.label)
    Xq, _, C, _ = training_rows(ds.X, ds.labels if ds.labels.shape[0] else None, model=model)
    n, A = Xq.shape
    params = params_from_model(model, max_depth=args.max_depth)
    spec = make_train_spec(target, params, max_rows=n, n_attr=A, n_classes=C, dsp=args.variant)
    print(f"training        engine for {n} rows x {A} attributes, {C} classes, depth {spec.max_depth} "
          f"(rows from {args.data})")
    return spec


def _build_firmware(model, target, out: Path, args, train=None) -> Path:
    """Write the project and build it (emulated targets, or boards whose platform is installed)."""
    from . import platformio as pio

    pio.write_project(model, out, target=target, layout=args.layout, variant=args.variant, train=train)
    t0 = time.perf_counter()
    elf = pio.build(out, verbose=args.verbose, target=target)
    seconds = time.perf_counter() - t0
    size = pio.check_size(elf, target)
    print(f"firmware        {elf}")
    _print_size(size, target)
    print(f"build time      {seconds:.1f} s")
    return elf


def cmd_build(args) -> int:
    from . import platformio as pio

    model, target, out = _firmware_project(args)
    print(f"model           {args.model}  (sha256 {model.hash()[:16]})")
    print(f"target          {target.name}  ({target.kind}: {target.description})")
    print(f"project         {out}")
    train = _train_spec(args, model, target)
    platform = target.platformio.get("platform", "")
    if target.kind == "emulated" or pio.platform_installed(platform):
        _build_firmware(model, target, out, args, train=train)
        if target.kind == "emulated":
            extra = f" --train --data {args.data}" if train is not None else ""
            print(f"run             treegen flash {args.model} --target {target.name} -o {out}{extra}")
    else:
        pio.write_project(model, out, target=target, layout=args.layout, variant=args.variant, train=train)
        print(f"build           the PlatformIO platform {platform!r} is not installed here; where the PlatformIO "
              "registry is reachable, build and upload with:")
        print(f"                {' '.join(pio.upload_command(out))}")
    return 0


def _emulated_firmware(model, target, out: Path, args, train=None) -> Path:
    """The project's firmware.elf, rebuilt unless it is up to date for this model/layout/variant
    (always regenerated with on-device training; PlatformIO's build cache keeps that quick)."""
    from . import platformio as pio

    if train is not None:
        return _build_firmware(model, target, out, args, train=train)
    elf = out / ".pio" / "build" / pio.env_name(target) / "firmware.elf"
    try:
        ini = (out / "platformio.ini").read_text(encoding="utf-8")
    except OSError:
        ini = ""
    current = f"model {model.hash()}  layout {args.layout}  variant {args.variant}" in ini and \
        f"; target {target.name}:" in ini
    if current and elf.is_file():
        print(f"firmware        {elf}  (up to date)")
        return elf
    return _build_firmware(model, target, out, args)


def cmd_flash(args) -> int:
    from . import platformio as pio

    model, target, out = _firmware_project(args)
    train = _train_spec(args, model, target)
    if target.kind == "board":
        import subprocess

        pio.write_project(model, out, target=target, layout=args.layout, variant=args.variant, train=train)
        cmd = pio.pio_command() + pio.upload_command(out, port=args.port)[1:]
        print(f"upload          {' '.join(pio.upload_command(out, port=args.port))}", flush=True)
        try:
            rc = subprocess.run(cmd, env=pio.pio_environ(), stdin=subprocess.DEVNULL).returncode
        except OSError as exc:
            raise TreegenError(f"cannot run PlatformIO: {exc.strerror or exc}") from None
        if rc != 0:
            raise TreegenError(f"pio run -t upload failed (exit {rc}); see PlatformIO's output above")
        return 0

    from .emulator import QemuBoard

    port = None
    if args.port is not None:
        try:
            port = int(args.port)
        except ValueError:
            raise TreegenError(f"--port for an emulated target is a TCP port number, got {args.port!r}") from None
        if not 1 <= port <= 65535:
            raise TreegenError(f"--port must be 1..65535, got {port}")
    elf = _emulated_firmware(model, target, out, args, train=train)

    def _stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _stop)   # SIGTERM too must not leave QEMU running
    try:
        with QemuBoard(target, elf, port=port) as board:
            print(f"emulator        QEMU {target.emulator['machine']} (pid {board.process.pid})")
            print(f"serial          {board.url}")
            print("                QEMU waits for a client on that URL (pyserial serial_for_url); Ctrl-C stops it",
                  flush=True)
            try:
                rc = board.wait()
            except KeyboardInterrupt:
                print("stopped", flush=True)
                return 0
            err = " ".join(board.stderr().split())
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise TreegenError(f"QEMU exited with status {rc}: {err or 'no message'}")


class HilFailed(TreegenError):
    """The device answered, but not as the host model: exit status 1 (not a usage error)."""


def cmd_hil(args) -> int:
    from . import hil

    _check_output(args.json, "JSON file")
    _check_output(args.junit, "JUnit file")
    target = get_target(args.target)
    model = load(args.model)
    ds = load_for_model(args.data, model.n_features, label=args.label)
    if ds.n_rows == 0:
        raise DataError(f"{args.data} has no rows")
    stem = Path(args.model).name.removesuffix(".json")
    out = Path(args.output) if args.output else Path("build") / f"{stem}-{target.name}"
    print(f"model           {args.model}  (sha256 {model.hash()[:16]})")
    print(f"target          {target.name}  ({target.kind}: {target.description})")
    print(f"data            {args.data}  ({ds.n_rows} rows)", flush=True)
    if args.train:
        from .train_hil import cmd_hil_train

        return cmd_hil_train(args, model, target, ds, out)

    bar = progress_bar(total=ds.n_rows, desc="hil predict", quiet=args.quiet, unit="row")

    def progress(done, total):
        bar.update(done - bar.n)

    try:
        report = hil.run_hil(model, target, port=args.port, data=(ds.X, ds.labels if ds.labels.shape[0] else None),
                             layout=args.layout, variant=args.variant, build_dir=out, timeout=args.timeout,
                             bench_iters=args.bench_iters, progress=progress)
    except hil.HilError as exc:
        bar.close()
        if exc.report is not None:
            exc.report["model"] = str(args.model)
            _hil_outputs(args, exc.report)
        raise
    finally:
        bar.close()
    report["model"] = str(args.model)
    _print_hil(report)
    _hil_outputs(args, report)
    if not report["ok"]:
        raise HilFailed(hil.summary(report))
    return 0


def _hil_outputs(args, report: dict) -> None:
    from . import hil

    _write_json(args.json, {"command": "hil", **report})
    if args.junit is not None:
        _write_text(args.junit, hil.junit_xml(report), "JUnit file")


def _print_hil(r: dict) -> None:
    if r.get("firmware"):
        built = f"  (built in {r['seconds']['build']:.1f} s)" if "build" in r["seconds"] else ""
        print(f"firmware        {r['firmware']}{built}")
    if r["flash_bytes"] is not None:
        print(f"flash / RAM     {r['flash_bytes']} / {r['ram_bytes']} bytes")
    d = r["device"]
    print(f"device          {r['port']}  ({d['target']}, treegen {d['treegen_version']}, {d['variant']}, "
          f"max_batch {d['max_batch']})")
    for c in r["checks"]:
        print(f"{c['name']:<16}{'ok' if c['ok'] else 'FAILED'}  {c['message']}")
    if r["accuracy"] is not None:
        print(f"accuracy        {r['accuracy']:.2f} %  (device predictions vs the labels)")
    if r["rows_per_s"] is not None:
        print(f"throughput      {r['rows_per_s']:.0f} rows/s  ({r['rows']} rows in {r['seconds']['predict']:.2f} s)")
    if r["bench"] is not None:
        b = r["bench"]
        print(f"per inference   {b['mean']:g} {b['unit']}  (min {b['min']:g}, max {b['max']:g}; "
              f"{len(b['rows'])} rows x {b['n_iter']} calls, benchmark loop included)")
    print(f"result          {'PASS' if r['ok'] else 'FAIL'}")


# ---------------------------------------------------------------------- entry point
def _error(message: str) -> None:
    one_line = " ".join(str(message).split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 130 interrupted)."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            args = build_parser().parse_args(argv)
            return int(args.func(args) or 0)
    except TreegenError as exc:
        if isinstance(exc, HilFailed):
            print(f"{PROG}: hil failed: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        _error(str(exc))
        return 2
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            # stdout closed early (e.g. piped into `head`): silence the flush at exit
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError, AttributeError):
                pass
            return 1
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _error(f"{where}{exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


if __name__ == "__main__":
    sys.exit(main())
