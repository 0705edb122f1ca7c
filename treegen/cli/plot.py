"""``treegen plot KIND ...``: pictures of a model or of reports (needs matplotlib: the ``plot`` extra).

    treegen plot tree MODEL -o tree.svg
    treegen plot partition MODEL DATA [--features A,B] -o regions.png
    treegen plot confusion MODEL DATA -o cm.png
    treegen plot cv CV.json [CV.json ...] -o cv.png          (files of 'treegen cv --json')
    treegen plot hil HIL.json [HIL.json ...] -o hil.png      (files of 'treegen hil --json')
"""

from __future__ import annotations

import json
from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import add_csv_options, add_ignore_names, csv_options, int_at_least, model_names
from treegen.cli.paths import input_, output
from treegen.core.data import load_for_model
from treegen.core.errors import TreegenError
from treegen.core.limits import read_text_file
from treegen.core.model import load


def register(sub) -> None:
    """Add plot to the subcommands ``sub``."""
    p = add_command(sub, "plot")
    add_ignore_names(p)
    add_csv_options(p)
    p.add_argument("kind", choices=("tree", "partition", "confusion", "cv", "hil", "tune"), help="what to draw")
    input_(p.add_argument("inputs", nargs="+", metavar="INPUT",
                          help="tree: MODEL; partition/confusion: MODEL DATA; cv/hil: one or more JSON reports; "
                               "tune: the JSON of 'treegen tune --json'"),
           "report")
    output(p.add_argument("-o", "--output", required=True, metavar="FILE",
                          help="picture to write (.svg, .png or .pdf)"), "picture", "binary")
    p.add_argument("--features", metavar="A,B", help="partition: the two features to draw (default: the first two)")
    p.add_argument("--max-depth", type=int_at_least(1, "an integer"), metavar="N",
                   help="tree: draw the tests down to depth N, each subtree below as one box (default: the depth "
                        "that fits 12 leaf columns)")
    p.add_argument("--label", metavar="NAME", help="label column of DATA (default: last, if present)")
    p.set_defaults(func=cmd_plot)


def _read_report(path: str) -> tuple[str, dict]:
    try:
        report = json.loads(read_text_file(path, f"{path}: report"))
    except FileNotFoundError:
        raise TreegenError(f"{path}: report not found") from None
    except TreegenError:                        # not text, or too large
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TreegenError(f"{path}: not a JSON report ({' '.join(str(exc).split())})") from None
    if not isinstance(report, dict):
        raise TreegenError(f"{path}: not a JSON report (top level is not an object)")
    return Path(path).name, report


def cmd_plot(args) -> int:
    from treegen.emit import plot

    suffix = Path(args.output).suffix.lower()
    if suffix not in (".svg", ".png", ".pdf"):
        raise TreegenError(f"picture format {suffix or '(none)'!r} not supported: name the output .svg, .png or .pdf")
    expected = {"tree": 1, "partition": 2, "confusion": 2, "tune": 1}.get(args.kind)
    if expected is not None and len(args.inputs) != expected:
        want = {"tree": "MODEL", "tune": "TUNE.json"}.get(args.kind, "MODEL DATA")
        raise TreegenError(f"plot {args.kind} takes {want}, got {len(args.inputs)} input(s)")
    if args.features is not None and args.kind != "partition":
        raise TreegenError("--features only applies to plot partition")
    if args.max_depth is not None and args.kind != "tree":
        raise TreegenError("--max-depth only applies to plot tree")
    if args.kind == "tree":
        out = plot.plot_tree(load(args.inputs[0]), args.output, max_depth=args.max_depth)
    elif args.kind in ("partition", "confusion"):
        model = load(args.inputs[0])
        ds = load_for_model(args.inputs[1], model.n_features, label=args.label,
                            feature_names=model_names(args, model), **csv_options(args),
                            missing=model.handles_missing)
        labels = ds.labels if ds.labels.shape[0] else None
        if args.kind == "partition":
            features = None
            if args.features is not None:
                names = [n.strip() for n in args.features.split(",")]
                if len(names) != 2 or not all(names):
                    raise TreegenError(f"--features takes two names A,B, got {args.features!r}")
                features = (names[0], names[1])
            out = plot.plot_partition(model, ds.X, labels, args.output, features=features)
        else:
            out = plot.plot_confusion(model, ds.X, labels, args.output)
    elif args.kind == "tune":
        from treegen.emit.plot_tune import plot_tune

        source, report = _read_report(args.inputs[0])
        try:
            out = plot_tune(report, args.output)
        except TreegenError as exc:
            raise TreegenError(f"{source}: {exc}") from None
    else:
        reports = [_read_report(p) for p in args.inputs]
        out = (plot.plot_cv if args.kind == "cv" else plot.plot_hil)(reports, args.output)
    print(f"picture         {out}")
    return 0
