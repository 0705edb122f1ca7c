"""``treegen compare``: algorithms and settings over many datasets on a Dask cluster, with statistics.

Every (dataset, method, repetition, fold) is one task (:mod:`treegen.learn.compare`); tasks run on a
local Dask cluster sized to the cores, or on a running cluster (``--scheduler tcp://HOST:PORT``).
Finished tasks go to a JSONL results file as they arrive; the same command run again skips them.
The summary (mean ± 95 % CI per cell, best per dataset, average ranks, Friedman / Iman-Davenport,
Nemenyi, Holm, Wilcoxon for two methods) is printed as Markdown and written to ``--json`` (and
``--markdown``). ``--task regression`` compares the algorithms' regressors on shuffled K-folds by test
RMSE (lower is better; MAE and R² beside it).
"""

from __future__ import annotations

import json
import math
import shlex
import signal
import sys
import tomllib
from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import int_at_least, int_range, scheduler_address
from treegen.cli.paths import input_, output
from treegen.core.data import load_csv
from treegen.core.errors import DataError, TreegenError
from treegen.core.limits import MAX_FOLDS, MAX_REPEATS, available_cores, read_text_file
from treegen.core.markdown import md_code, md_text
from treegen.core.output import STDOUT, Output, check_paths, write_json, write_text
from treegen.core.progress import progress_bar
from treegen.learn.compare_runs import MAX_RUNS_PER_FOLD, PICKS
from treegen.learn.estimators import ALGORITHMS
from treegen.learn.regressors import REGRESSORS
from treegen.learn.validation import label_kind

#: the results file of ``--json -`` (no file name to put it beside)
DEFAULT_RESULTS = "compare.tasks.jsonl"


def add_scheduler_option(p) -> None:
    p.add_argument("--scheduler", type=scheduler_address, metavar="tcp://HOST:PORT",
                   help="run the tasks on this running Dask scheduler (default: a local cluster)")


def register(sub) -> None:
    p = add_command(sub, "compare")
    input_(p.add_argument("datasets", nargs="+", metavar="DATASET",
                          help="labelled CSV files, or names of NAME.csv.gz / NAME.csv in --data-dir"), "dataset")
    p.add_argument("--algos", required=True, metavar="A,B,...",
                   help=f"algorithms, comma-separated ({', '.join(ALGORITHMS)}; --task regression: "
                        f"{', '.join(REGRESSORS)})")
    p.add_argument("--task", choices=("classification", "regression"),
                   help="classification (class labels; the default, but a label column that looks continuous is "
                        "refused unless given) or regression (a numeric target: regressors compared by test RMSE, "
                        "shuffled K-fold)")
    input_(p.add_argument("--params", metavar="FILE",
                          help="JSON or TOML file: algorithm -> parameters, or a list of settings (each one "
                               "column, optional \"name\")"), "params")
    p.add_argument("--folds", type=int_range(2, MAX_FOLDS), default=5, metavar="K",
                   help="number of folds (default 5)")
    p.add_argument("--repeats", type=int_range(1, MAX_REPEATS), default=1, metavar="R",
                   help="number of repetitions (default 1)")
    p.add_argument("--seed", type=int_range(0, (1 << 64) - 1), default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--runs-per-fold", type=int_range(1, MAX_RUNS_PER_FOLD), default=1, metavar="R",
                   help="independently seeded runs of each stochastic method per fold (default 1; deterministic "
                        "methods such as cart run once)")
    p.add_argument("--pick", choices=PICKS, default="median",
                   help="a fold's score from its runs: the median test accuracy, or the test accuracy of the run "
                        "with the best training accuracy (regression: RMSE; default median)")
    output(p.add_argument("--json", required=True, metavar="OUT", help="write the results and statistics as JSON"),
           "JSON file")
    output(p.add_argument("--markdown", metavar="OUT", help="also write the summary tables as Markdown"),
           "Markdown file")
    output(p.add_argument("--results", metavar="FILE",
                          help="finished tasks, one per line (default OUT.tasks.jsonl beside --json; "
                               "compare.tasks.jsonl with --json -); tasks found there are not run again"),
           "results file", "file")
    p.add_argument("--skip-bad-results", action="store_true",
                   help="leave out (with a warning) lines of the results file that are not valid task records "
                        "of this comparison, and run their tasks again (default: refuse, naming the line)")
    add_scheduler_option(p)
    p.add_argument("--workers", type=int_at_least(1, "an integer"), metavar="N",
                   help="worker processes of the local cluster (default: one per core)")
    input_(p.add_argument("--target", metavar="TARGET",
                          help="also measure the flash bytes of each tree's q15 export for this target"), "target")
    p.add_argument("--data-dir", metavar="DIR", help="where dataset names are looked up")
    p.add_argument("--label", metavar="NAME", help="label column (default: the last column)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_compare)


# ---------------------------------------------------------------------- inputs
def read_params_file(path: str) -> dict:
    p = Path(path)
    if not p.exists() or p.is_dir():
        raise TreegenError(f"params file not found: {path}")
    try:
        text = read_text_file(p, f"params file {path}")
        spec = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except TreegenError:                        # not text, or too large
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise TreegenError(f"cannot read params file {path}: {exc}") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise TreegenError(f"params file {path} is not valid {'TOML' if p.suffix.lower() == '.toml' else 'JSON'}: "
                           f"{exc}") from None
    if not isinstance(spec, dict):
        raise TreegenError(f"params file {path} must map algorithm names to parameters")
    return spec


def dataset_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name


def resolve_dataset(arg: str, data_dir: str | None) -> Path:
    p = Path(arg)
    if p.is_file():
        return p
    if data_dir is not None:
        for suffix in (".csv.gz", ".csv"):
            q = Path(data_dir) / f"{arg}{suffix}"
            if q.is_file():
                return q
        raise TreegenError(f"unknown dataset {arg!r}: no file {arg}, and no {arg}.csv.gz or {arg}.csv in {data_dir}")
    raise TreegenError(f"unknown dataset {arg!r}: no such file (give a CSV path, or a name with --data-dir)")


def check_labels(ds, path, task: str | None) -> None:
    """Refuse a label column that does not fit the task, with a one-line hint naming the fix: a
    continuous target without ``--task`` (``--task classification`` compares classifiers anyway), class
    labels with ``--task regression``."""
    kind, n = label_kind(ds.labels)
    if task is None and kind == "continuous":
        raise DataError(f"{path}: the label column {ds.label_name!r} has {n} distinct numeric values, a continuous "
                        f"target: use --task regression to compare regressors (or --task classification for {n} "
                        "classes)")
    if task == "regression" and kind in ("text", "levels"):
        what = "text class labels" if kind == "text" else f"only {n} integer levels"
        raise DataError(f"{path}: the label column {ds.label_name!r} holds {what}: use --task classification "
                        "(regression needs a numeric target with more than a few levels)")


def _command(args) -> str:
    parts = ["treegen", "compare", *args.datasets, "--algos", args.algos]
    if args.task is not None:
        parts += ["--task", args.task]
    runs = (("--runs-per-fold", args.runs_per_fold), ("--pick", args.pick)) if args.runs_per_fold > 1 else ()
    for flag, value in (("--params", args.params), ("--folds", args.folds), ("--repeats", args.repeats),
                        ("--seed", args.seed), *runs, ("--target", args.target), ("--data-dir", args.data_dir),
                        ("--label", args.label), ("--scheduler", args.scheduler), ("--workers", args.workers),
                        ("--json", args.json), ("--markdown", args.markdown), ("--results", args.results)):
        if value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts)


# ---------------------------------------------------------------------- output
def _pm(stat: dict | None, digits: int = 2, scale: float = 1.0) -> str:
    return "n/a" if stat is None else f"{scale * stat['mean']:.{digits}f} ± {scale * stat['ci95']:.{digits}f}"


def _p(p: float) -> str:
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.2e}"


def _runs_lines(result: dict) -> list[str]:
    """The runs-per-fold protocol in words (nothing for one run per fold)."""
    runs = result.get("runs_per_fold", 1)
    if runs == 1:
        return []
    if result.get("task") == "regression":
        how = ("the median test RMSE of its runs (MAE and R²: their own medians)" if result["pick"] == "median" else
               "the test figures of its run with the lowest training RMSE (ties: the lowest run index)")
    else:
        how = ("the median test accuracy of its runs" if result["pick"] == "median" else
               "the test accuracy of its run with the best training accuracy (ties: the lowest run index)")
    det = result.get("deterministic") or []
    once = (f" Deterministic, one run per fold: {', '.join(md_text(n) for n in det)}." if det else "")
    return [f"Runs per fold: {runs} independently seeded runs of each stochastic method (seeds from the task "
            f"key and the run index); a fold's score is {how} (pick {result['pick']}).{once} "
            "Fit times are per fold (all its runs).", ""]


def _pm_g(stat: dict) -> str:
    """mean ± CI of a figure in the target's units (RMSE, MAE of any scale): 4 significant digits of
    the mean, the CI to the same decimals (64.00 ± 3.38, 3.034 ± 0.143, 51234 ± 873)."""
    mean, ci = stat["mean"], stat["ci95"]
    digits = min(max(3 - math.floor(math.log10(abs(mean))), 0), 12) if mean else 3
    return f"{mean:.{digits}f} ± {ci:.{digits}f}"


def _task_tables(result: dict, head: str, rule: str) -> list[str]:
    """The per-dataset tables of the test figures: accuracy, or RMSE / MAE / R² for a regression."""
    s = result["summary"]
    names, datasets, cells = s["methods"], s["datasets"], s["cells"]
    regression = s.get("task") == "regression"
    figures = ((("rmse", "Test RMSE", _pm_g, "best (lowest) per dataset in bold"), ("mae", "Test MAE", _pm_g, ""),
                ("r2", "Test R²", lambda st: _pm(st, digits=4), "")) if regression else
               (("accuracy", "Test accuracy (%)", lambda st: _pm(st, scale=100.0), "best per dataset in bold"),))
    out = []
    for key, title, fmt, bold in figures:     # fractions in JSON, percent here
        out += ["", f"## {title}: mean ± 95 % CI over the folds" + (f"; {bold}" if bold else ""), "", head, rule]
        for ds in datasets:
            row = []
            for m in names:
                text = fmt(cells[ds][m][key])
                row.append(f"**{text}**" if bold and m in s["best"][ds] else text)
            out.append(f"| {md_text(ds)} | " + " | ".join(row) + " |")
        if bold and s["average_ranks"] is not None:
            out.append("| *average rank* | " + " | ".join(f"{s['average_ranks'][m]:.2f}" for m in names) + " |")
    return out


def render_markdown(result: dict) -> str:
    s = result["summary"]
    names, datasets, cells = s["methods"], s["datasets"], s["cells"]
    regression = s.get("task") == "regression"
    head = "| dataset | " + " | ".join(map(md_text, names)) + " |"
    rule = "|---|" + "---|" * len(names)
    if result["n_tasks_run"]:
        ran = (f"{result['n_tasks']} tasks ({result['n_tasks_run']} run now, the rest from the results file); "
               f"wall time {result['wall_seconds']:.0f} s on {result['cluster']}")
    else:   # no cluster was started: a wall time of 0 s would describe nothing
        ran = f"{result['n_tasks']} tasks, all from the results file (none run now)"
    out = [f"# treegen compare{' (regression)' if regression else ''}: {len(names)} method(s) on "
           f"{len(datasets)} dataset(s)", "",
           f"{result['folds']}-fold {'shuffled (not stratified)' if regression else 'stratified'} CV x "
           f"{result['repeats']} repetition(s), seed {result['seed']}; "
           f"{ran}; the tasks' fit and measure times sum to {result['task_seconds']:.0f} s.", "",
           *_runs_lines(result),
           f"Command: {md_code(result['command'])}", "", "Methods:", ""]
    for name, m in result["methods"].items():
        params = ", ".join(f"{md_text(k)}={md_text(v)}" for k, v in m["params"].items())
        out.append(f"- **{md_text(name)}**: {md_text(m['algorithm'])} ({params})")
    out += _task_tables(result, head, rule)
    out += ["", f"## Leaves{' (all the trees of a forest)' if regression else ''}: mean ± 95 % CI", "", head, rule]
    for ds in datasets:
        out.append(f"| {md_text(ds)} | " + " | ".join(_pm(cells[ds][m]["leaves"]) for m in names) + " |")
    if result.get("target"):
        out += ["", f"## Flash bytes of the q15 export for {md_text(result['target'])} (compiled object, mean over folds)",
                "", head, rule]
        for ds in datasets:
            out.append(f"| {md_text(ds)} | " + " | ".join(
                "n/a" if cells[ds][m]["flash_bytes"] is None else f"{cells[ds][m]['flash_bytes']['mean']:.0f}"
                for m in names) + " |")
    out += ["", "## Fit time (s per fold, mean)", "", head, rule]
    for ds in datasets:
        out.append(f"| {md_text(ds)} | " + " | ".join(f"{cells[ds][m]['train_seconds']['mean']:.3f}" for m in names) + " |")
    out += ["", "## Statistics (one score per dataset: " + ("the mean test RMSE, lower is better; rank 1 = lowest)"
                                                              if regression else "the mean test accuracy)"), ""]
    f = s["friedman"]
    if f is None:
        out.append("Friedman test: needs at least 2 datasets and 2 methods.")
    else:
        ranks = ", ".join(f"{md_text(n)} {r:.3f}" for n, r in zip(f["names"], f["average_ranks"]))
        ff = "inf" if f["iman_davenport"] is None else f"{f['iman_davenport']:.3f}"
        out += [f"- Average ranks (1 = best): {ranks}",
                f"- Friedman: chi2_F = {f['chi2']:.3f} (df {f['df'][0]}, p = {_p(f['chi2_p_value'])}); "
                f"Iman-Davenport F_F = {ff} (df {f['df'][0]}, {f['df'][1]}), **p = {_p(f['p_value'])}** "
                f"({'reject' if f['p_value'] <= f['alpha'] else 'cannot reject'} equal performance at "
                f"alpha = {f['alpha']})"]
        sig = [f"{md_text(p['a'])} vs {md_text(p['b'])} ({p['rank_diff']:.3f})" for p in f["nemenyi"]["pairs"] if p["significant"]]
        out.append(f"- Nemenyi: q = {f['nemenyi']['q_alpha']:.3f}, critical difference CD = {f['nemenyi']['cd']:.3f}; "
                   f"pairs further apart than CD: {', '.join(sig) if sig else 'none'}")
        tests = "; ".join(f"{md_text(t['method'])}: z = {t['z']:.3f}, p = {_p(t['p_value'])}, Holm threshold "
                          f"{t['threshold']:.4g} -> {'reject' if t['reject'] else 'keep'}" for t in f["holm"]["tests"])
        out.append(f"- Holm against the best-ranked method ({md_text(f['holm']['control'])}): {tests}")
    w = s["wilcoxon"]
    if w is not None:
        out.append(f"- Wilcoxon signed-rank, {md_text(w['a'])} vs {md_text(w['b'])}: R+ = {w['r_plus']:g}, R- = {w['r_minus']:g}, "
                   f"T = {w['statistic']:g}, **p = {_p(w['p_value'])}** (wins/ties/losses of {md_text(w['a'])}: "
                   f"{w['wins']}/{w['ties']}/{w['losses']} over {w['n']} datasets)")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- the command
def cmd_compare(args) -> int:
    from treegen.learn import compare as _cmp   # scipy and Dask load only for this command

    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    spec = read_params_file(args.params) if args.params else None
    methods = _cmp.methods_from_spec(algos, spec, args.task or "classification")
    if args.scheduler is not None and args.workers is not None:
        raise TreegenError("--workers sizes the local cluster; it cannot be used with --scheduler")
    if args.workers is not None:
        if args.workers > available_cores():           # one process each: capped, as cv's --jobs
            print(f"treegen: warning: --workers {args.workers} capped at {available_cores()} (the cores available)",
                  file=sys.stderr)
            args.workers = available_cores()
    measure = None
    if args.target is not None:
        from treegen.device.footprint import FlashSize
        measure = FlashSize(args.target)
    results_path = args.results or (DEFAULT_RESULTS if args.json == STDOUT else
                                    str(Path(args.json).with_suffix("")) + ".tasks.jsonl")
    paths = [resolve_dataset(a, args.data_dir) for a in args.datasets]
    # the argparse-declared check ran already; this one knows the default results file and the datasets
    # found in --data-dir (the results file is read too: no other output may be it)
    check_paths([Output(args.json, "JSON file"), Output(args.markdown, "Markdown file"),
                 Output(results_path, "results file", "file")],
                [*paths, args.params])

    data, info = [], []
    for path in paths:
        ds = load_csv(path, label=args.label)
        check_labels(ds, path, args.task)
        d = _cmp.CompareData(dataset_name(path), ds.X, ds.labels)
        data.append(d)
        target = ({"target": ds.label_name, "n_values": len(set(ds.labels.tolist()))} if args.task == "regression"
                  else {"n_classes": len(set(ds.labels.tolist()))})
        info.append({"name": d.name, "file": path.name, "n_rows": ds.n_rows, "n_features": ds.n_features,
                     **target, "digest": d.digest})
    # treegen.learn.compare.run_comparison: the Python API of this command; here only the progress and printing
    state = {"done": 0, "finished": 0, "total": 0, "bar": None}

    def on_start(n_tasks, n_done, n_pending):
        state.update(done=n_done, total=n_tasks)
        if n_pending:
            state["bar"] = progress_bar(total=n_pending, desc="compare", quiet=args.quiet, unit="task")

    def on_result(rec):
        state["finished"] += 1
        state["bar"].update(1)

    kept = lambda: (f"{state['done'] + state['finished']} of {state['total']} tasks finished, kept in "  # noqa: E731
                    f"{results_path} (the same command resumes)")
    try:
        run = _cmp.run_comparison(data, methods, folds=args.folds, repeats=args.repeats, seed=args.seed,
                                  runs_per_fold=args.runs_per_fold, pick=args.pick, results=results_path, scheduler=args.scheduler, workers=args.workers,
                                  measure=measure, on_start=on_start, on_result=on_result,
                                  skip_bad_results=args.skip_bad_results)
    except KeyboardInterrupt as exc:      # Ctrl-C, or SIGTERM/SIGHUP (Interrupted): 128 + the signal number
        if state["bar"] is not None:
            state["bar"].close()
        if not state["total"]:
            raise
        signum = int(getattr(exc, "signum", signal.SIGINT))
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        print(f"treegen: interrupted{by}: {kept()}", file=sys.stderr)
        return 128 + signum
    except TreegenError as exc:
        if not state["total"]:
            raise
        raise TreegenError(f"{exc}; {kept()}") from None
    finally:
        if state["bar"] is not None:
            state["bar"].close()
    result = {"command": _command(args), "datasets": info, **run, "target": args.target,
              "results_file": results_path}
    text = render_markdown(result)
    sys.stdout.write(text)
    write_json(args.json, result)
    if args.markdown:
        write_text(args.markdown, text, "Markdown file")
    return 0
