"""``treegen tune DATA --target T``: the most accurate model that fits the target's flash, RAM and time.

The search and its costs are :func:`treegen.device.tune.tune` (the Python API); here: the options,
the progress bar, the front as a table on stdout (the failed candidates under it), ``--json``,
``--plot`` (both written whatever happened to single candidates), the chosen model (``-o``), its
export (``--export``: a user's file there is refused before the search unless ``--force``) and the
exit status: 0 with a model, 2 and one line when nothing fits, 1 when no model within the budget
passed its confirming HIL run (the front, JSON and plot still written, no model saved).
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import sys
from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import int_at_least, int_range, positive_float, refuse_continuous_labels, table
from treegen.cli.compare import add_scheduler_option, dataset_name, resolve_dataset
from treegen.cli.paths import input_, output
from treegen.core.data import load_csv
from treegen.core.errors import TreegenError
from treegen.core.limits import available_cores
from treegen.core.output import STDOUT, Output, check_paths, write_json
from treegen.core.progress import progress_bar

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20}


def size_bytes(text: str) -> int:
    """``--max-flash``/``--max-ram``: bytes, or with a unit (``1KiB``, ``1.5 KiB``, ``8K``, ``2048``; K = 1024)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"a size expected (bytes, or e.g. 1KiB, 8K), got {text!r}")
    value = round(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if not 1 <= value <= 1 << 32:
        raise argparse.ArgumentTypeError(f"must be 1 B..4 GiB, got {text!r}")
    return int(value)


def register(sub) -> None:
    p = add_command(sub, "tune")
    input_(p.add_argument("data", metavar="DATA", help="labelled CSV (or a name in --data-dir)"), "dataset")
    input_(p.add_argument("--target", required=True, metavar="TARGET",
                          help="where costs are measured: an emulated target (qemu-m4, qemu-microbit ...) or native"),
           "target")
    p.add_argument("--max-flash", type=size_bytes, metavar="SIZE", help="flash budget of the model (e.g. 1KiB)")
    p.add_argument("--max-ram", type=size_bytes, metavar="SIZE", help="RAM budget of the model (static)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--max-latency-us", type=positive_float, metavar="U",
                   help="time budget per inference in µs (instructions / the target's clock)")
    g.add_argument("--max-instructions", type=int_at_least(1, "an integer"), metavar="N",
                   help="instructions per inference on the emulated core")
    p.add_argument("--algos", metavar="A,B,...", help="algorithms to search (default cart,efti,id3,de-pdt,rf; gp when named)")
    p.add_argument("--candidates", type=int_range(1, 200), default=6, metavar="N",
                   help="settings per algorithm: its defaults + N-1 sampled (default 6)")
    p.add_argument("--budget-minutes", type=positive_float, metavar="M",
                   help="no new search rung starts after M minutes (a cut search is reported)")
    p.add_argument("--seed", type=int_range(0, (1 << 32) - 1), default=0, metavar="S", help="random seed (default 0)")
    add_scheduler_option(p)
    p.add_argument("--workers", type=int_at_least(1, "an integer"), metavar="N",
                   help="worker processes of the local cluster (default: one per core)")
    output(p.add_argument("-o", "--output", required=True, metavar="BEST.json", help="the chosen model"), "model file")
    output(p.add_argument("--export", metavar="DIR", help="also export the chosen model's C library here"),
           "output directory", "folder")
    output(p.add_argument("--json", metavar="FILE", help="also write the front, every measured point and the search"),
           "JSON file")
    output(p.add_argument("--plot", metavar="FILE", help="draw the front (.svg, .png or .pdf; the plot extra)"),
           "picture", "binary")
    output(p.add_argument("--results", metavar="FILE",
                          help="finished CV tasks, one per line (default BEST.tasks.jsonl; measured costs go to "
                               "the same name with .costs.jsonl); the same command resumes from them"),
           "results file", "file")
    p.add_argument("--force", action="store_true",
                   help="let --export replace files in DIR that treegen did not generate")
    p.add_argument("--data-dir", metavar="DIR", help="where dataset names are looked up")
    p.add_argument("--label", metavar="NAME", help="label column (default: the last column)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tune)


def costs_path(results: str) -> str:
    return results[: -len(".tasks.jsonl")] + ".costs.jsonl" if results.endswith(".tasks.jsonl") \
        else results + ".costs.jsonl"


def _command(args) -> str:
    parts = ["treegen", "tune", args.data, "--target", args.target]
    for flag, value in (("--max-flash", args.max_flash), ("--max-ram", args.max_ram),
                        ("--max-latency-us", args.max_latency_us), ("--max-instructions", args.max_instructions),
                        ("--algos", args.algos), ("--candidates", args.candidates),
                        ("--budget-minutes", args.budget_minutes), ("--seed", args.seed),
                        ("--data-dir", args.data_dir), ("--label", args.label), ("-o", args.output),
                        ("--export", args.export), ("--json", args.json), ("--plot", args.plot)):
        if value is not None:
            parts += [flag, str(value)]
    if args.force:
        parts.append("--force")
    return shlex.join(parts)


def _fmt(v, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def front_table(result: dict) -> str:
    """The Pareto front (accuracy vs flash vs latency) as a text table, most accurate first, then the
    candidates that failed (``fits`` = ``failed [k]``) and, under the table, each failure's reason."""
    rows = [["model", "layout", "variant", "CV acc %", "folds", "flash B", "RAM B", "insn", "µs", "fits"]]
    pts = result["points"]
    chosen = result.get("chosen")
    for i in sorted(result["front"], key=lambda i: (-pts[i]["accuracy"], pts[i]["flash_bytes"])):
        p = pts[i]
        mark = "*" if chosen is not None and chosen["index"] == i else ""
        rows.append([mark + p["name"], p["layout"], p["variant"], f"{100 * p['accuracy']:.2f}", str(p["n_folds"]),
                     _fmt(p["flash_bytes"]), _fmt(p["ram_bytes"]), _fmt(p["instructions"], 1),
                     f"{p['latency_us']:.3g}", "yes" if p["fits"] else "no"])
    failures = result.get("failures") or []
    for k, f in enumerate(failures, start=1):
        rows.append([f["name"], f.get("layout") or "-", f.get("variant") or "-",
                     "n/a" if f.get("accuracy") is None else f"{100 * f['accuracy']:.2f}", "-", "-", "-", "-", "-",
                     f"failed [{k}]"])
    text = table(rows, align_left=3)
    if failures:
        text += f"\nfailed candidates ({len(failures)}; the search went on without them):"
        for k, f in enumerate(failures, start=1):
            text += f"\n  [{k}] {f['stage']}: {_short(f['reason'])}"
    return text


def _budget_text(b: dict) -> str:
    parts = []
    if b["max_flash"] is not None:
        parts.append(f"flash {b['max_flash']} B")
    if b["max_ram"] is not None:
        parts.append(f"RAM {b['max_ram']} B")
    if b["max_latency_us"] is not None:
        parts.append(f"{b['max_latency_us']:g} µs")
    if b["max_instructions"] is not None:
        parts.append(f"{b['max_instructions']} instructions")
    return ", ".join(parts) or "none"


def cmd_tune(args) -> int:
    from treegen.device.tune import tune

    path = resolve_dataset(args.data, args.data_dir)
    results = args.results or (str(Path(args.output).with_suffix("")) + ".tasks.jsonl" if args.output != STDOUT
                               else "tune.tasks.jsonl")
    costs = costs_path(results)
    check_paths([Output(args.output, "model file"), Output(args.json, "JSON file"),
                 Output(args.plot, "picture", "binary"), Output(args.export, "output directory", "folder"),
                 Output(results, "results file", "file"), Output(costs, "cost cache", "file")], [path])
    if args.plot:
        from treegen.emit.plot import _pyplot
        _pyplot()                  # matplotlib missing: one line now, not after the search
    if args.scheduler is not None and args.workers is not None:
        raise TreegenError("--workers sizes the local cluster; it cannot be used with --scheduler")
    if args.workers is not None and args.workers > available_cores():
        print(f"treegen: warning: --workers {args.workers} capped at {available_cores()} (the cores available)",
              file=sys.stderr)
        args.workers = available_cores()
    from treegen.learn.tune import parse_algos

    algos = parse_algos(args.algos)
    if args.export:                # a user's file in DIR: refused now, not after the search
        _check_export_dir(path, args.export, force=args.force)
    ds = load_csv(path, label=args.label)
    refuse_continuous_labels(ds, path, "tune")
    bars = {}

    def on_progress(stage, done, total):
        bar = bars.get(stage)
        if bar is None or bar.total != total:
            if bar is not None:
                bar.close()
            bar = bars[stage] = progress_bar(total=total, desc=f"tune {stage}", quiet=args.quiet,
                                             unit="task" if stage == "cv" else "HIL run")
        bar.n = done
        bar.refresh()

    try:
        result = tune(ds.X, ds.labels, args.target, max_flash=args.max_flash, max_ram=args.max_ram,
                      max_latency_us=args.max_latency_us, max_instructions=args.max_instructions, algos=algos,
                      per_algo=args.candidates, seed=args.seed, budget_minutes=args.budget_minutes, results=results,
                      costs=costs, scheduler=args.scheduler, workers=args.workers, dataset=dataset_name(path),
                      feature_names=ds.feature_names, on_progress=on_progress)
    except KeyboardInterrupt as exc:
        signum = int(getattr(exc, "signum", signal.SIGINT))
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        print(f"treegen: interrupted{by}: finished CV tasks kept in {results}, measured costs in {costs} "
              "(the same command resumes)", file=sys.stderr)
        return 128 + signum
    finally:
        for bar in bars.values():
            bar.close()
    chosen = result["chosen"]
    model = None if chosen is None else chosen.pop("model")
    result["command"] = _command(args)
    out = sys.stderr if args.output == STDOUT or args.json == STDOUT else sys.stdout
    s = result["search"]
    failed = f", {len(result['failures'])} failed" if result["failures"] else ""
    print(f"treegen tune {dataset_name(path)} on {result['target']}: {len(s['candidates'])} candidates{failed}, "
          f"{len(s['rungs'])} rung(s) of successive halving, {len(result['points'])} measured points "
          f"({result['hil_runs']} HIL runs now), budget {_budget_text(result['budget'])}, seed {args.seed}"
          + (" -- the time budget cut the search" if s["cut_by_budget"] else ""), file=out)
    if result["points"] or result["failures"]:
        print(front_table(result), file=out)
    # the front, the JSON and the plot are written whatever happened to single candidates
    if args.json:
        write_json(args.json, result)
    if args.plot:
        from treegen.emit.plot_tune import plot_tune
        plot_tune(result, args.plot)
    c = result["confirmation"]
    if chosen is None:
        if result["outcome"] == "confirmation failed":
            print(f"HIL on {result['target']}: FAIL: {c['reason']}", file=out)
            print(f"treegen: error: {result['message']}", file=sys.stderr)
            return 1
        raise TreegenError(result["message"])
    model.metadata["dataset"] = path.name
    model.metadata["tune"] = {"target": result["target"], "layout": chosen["layout"], "variant": chosen["variant"],
                              "cv_accuracy": chosen["accuracy"], "flash_bytes": chosen["flash_bytes"],
                              "latency_us": chosen["latency_us"], "seed": args.seed}
    from treegen.core.model import save
    from treegen.core.output import write_text
    if args.output == STDOUT:
        write_text(STDOUT, model.to_json() + "\n", "model file")
    else:
        save(model, args.output)
    if args.export:
        from treegen.emit.export import export_model
        export_model(model, args.export, target=result["target"], layout=chosen["layout"], dtype="q15",
                     variant=chosen["variant"], data=(ds.X, ds.labels), force=args.force)
    print(f"best: {result['message']}", file=out)
    if c is not None:
        unit = c["counter_unit"] or "instructions"       # instructions (QEMU -icount), cycles (simavr), ns
        print(f"HIL on {result['target']}: PASS: {c['rows']} rows, {c['mismatches']} "
              f"mismatches, device accuracy {100 * (c['device_accuracy'] or 0):.2f} %, model {c['flash_bytes']} B "
              f"flash / {c['ram_bytes']} B RAM (image {_fmt(c['image_flash_bytes'])} B), "
              f"{c['insn_per_inference']:g} {unit}/inference = {c['latency_us']:.3g} µs", file=out)
    return 0


def _check_export_dir(data_path: Path, out_dir: str, *, force: bool) -> None:
    """``--export DIR`` before the search: the files the export will write (``<dataset>.h``/``.c``) may
    replace only files treegen generated (or anything with ``--force``), as ``treegen export``."""
    from treegen.core.codegen import check_overwrite
    from treegen.emit.options import default_name

    name = default_name(argparse.Namespace(metadata={"dataset": data_path.name}))
    check_overwrite([Path(out_dir) / f"{name}.h", Path(out_dir) / f"{name}.c"], force=force)
