"""``treegen farm``: the HIL of several models on every target of a labgrid farm's places, in parallel
(:mod:`treegen.device.farm_matrix`)."""

from __future__ import annotations

import sys
from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import (HilFailed, add_csv_options, add_ignore_names, csv_options, int_range,
                                non_negative_float, timeout_seconds)
from treegen.cli.paths import input_, output
from treegen.core.data import load_for_model
from treegen.core.errors import DataError, TreegenError
from treegen.core.model import load
from treegen.core.output import write_json, write_text
from treegen.emit.export import LAYOUTS as EXPORT_LAYOUTS


def register(sub) -> None:
    p = add_command(sub, "farm")
    add_ignore_names(p)
    add_csv_options(p)
    input_(p.add_argument("models", nargs="+", metavar="MODEL", help="model files (treegen fit -o)"), "model")
    input_(p.add_argument("--data", required=True, metavar="CSV",
                          help="rows streamed to every device (label column optional); one feature set for all "
                               "models"), "data")
    p.add_argument("--label", metavar="NAME", help="label column of --data (default: last, if present)")
    p.add_argument("--places", metavar="P1,P2,...",
                   help="places to use (default: every place with a target tag); each cell runs on a free place "
                        "whose target tag is the cell's target")
    p.add_argument("--targets", metavar="T1,T2,...", help="only these targets of the places")
    p.add_argument("--coordinator", metavar="HOST:PORT",
                   help="labgrid coordinator (default: the LG_COORDINATOR environment variable)")
    p.add_argument("--place-timeout", type=non_negative_float, default=0.0, metavar="S",
                   help="seconds to wait for a place held by someone else (default 0: its cells go to other "
                        "places of their target)")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default=None, help="model code layout (default table)")
    output(p.add_argument("-o", "--build-dir", dest="build_dir", metavar="DIR", default="build/farm",
                          help="firmware builds, one folder per model and target (default build/farm)"),
           "build directory", "folder")
    p.add_argument("--timeout", type=timeout_seconds, default=10.0, metavar="S",
                   help="seconds to wait for each response (default 10)")
    p.add_argument("--bench-iters", type=int_range(0, 65535), default=2000, metavar="N",
                   help="BENCH calls per timed row (default 2000; 0 = no BENCH)")
    output(p.add_argument("--json", metavar="FILE", help="write the report (a row per cell) as JSON"), "JSON file")
    output(p.add_argument("--junit", metavar="FILE", help="write JUnit XML: a testcase per cell"), "JUnit file")
    p.add_argument("-q", "--quiet", action="store_true", help="no live progress line")
    p.set_defaults(func=cmd_farm)


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise TreegenError("an empty list of names")
    return names


class Progress:
    """One live line on a terminal (rewritten in place), one line per event elsewhere."""

    def __init__(self, total: int, quiet: bool):
        self.total = total
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.done = 0
        self.counts = {"PASS": 0, "FAIL": 0, "ERROR": 0}
        self.running: dict[str, str] = {}

    def _status(self) -> str:
        run = ", ".join(f"{p}: {c}" for p, c in sorted(self.running.items()))
        return (f"farm {self.done}/{self.total} cells  pass {self.counts['PASS']} fail {self.counts['FAIL']} "
                f"error {self.counts['ERROR']}" + (f"  running {run}" if run else ""))

    def _line(self, text: str) -> None:
        if self.quiet:
            return
        if self.tty:
            print(f"\r\033[K{text}\n{self._status()}", end="", file=sys.stderr, flush=True)
        else:
            print(f"[{self.done}/{self.total}] {text}", file=sys.stderr, flush=True)

    def __call__(self, kind: str, cell=None, place=None, text=None) -> None:
        if kind == "start":
            self.running[place] = f"{Path(cell.model_name).name} on {cell.target}"
            self._line(f"start  {Path(cell.model_name).name} x {cell.target} on {place}")
        elif kind == "done":
            self.done += 1
            self.counts[cell.result] += 1
            where = cell.attempts[-1]["place"] if cell.attempts else "-"
            for p, _ in list(self.running.items()):
                if p == where:
                    self.running.pop(p)
            extra = f" ({cell.error})" if cell.error else ""
            retried = " (retried)" if len(cell.attempts) > 1 else ""
            self._line(f"{cell.result:<6} {Path(cell.model_name).name} x {cell.target} on {where}{retried}{extra}")
        elif kind == "retry":
            self.running.pop(place, None)
            self._line(f"retry  {Path(cell.model_name).name} x {cell.target}: {text}; to run on another place")
        elif kind in ("wait", "unusable", "warning", "built"):
            self._line(f"{kind:<6} {place + ': ' if place else ''}{text}")

    def close(self) -> None:
        if not self.quiet and self.tty:
            print(f"\r\033[K{self._status()}", file=sys.stderr, flush=True)


def cmd_farm(args) -> int:
    from treegen.device.farm import Coordinator, FarmError, coordinator_address
    from treegen.device.farm_matrix import junit_xml, run_matrix, select_places

    models = [(m, load(m)) for m in args.models]
    if len({mod.n_features for _, mod in models}) != 1:
        raise TreegenError("the models take different numbers of features: one --data for all needs the same")
    first = models[0][1]
    ds = load_for_model(args.data, first.n_features, label=args.label, feature_names=None, **csv_options(args))
    if ds.n_rows == 0:
        raise DataError(f"{args.data} has no rows")
    address = coordinator_address(args.coordinator)
    with Coordinator(address) as lab:
        places = select_places(lab, _names(args.places), _names(args.targets))
        targets = sorted(set(places.values()))
        n_cells = len(models) * len(targets)
        print(f"coordinator     {address}  (as {lab.user})")
        print(f"places          {', '.join(f'{p} ({t})' for p, t in places.items())}")
        print(f"matrix          {len(models)} models x {len(targets)} targets = {n_cells} cells, "
              f"{ds.n_rows} rows each", flush=True)
        progress = Progress(n_cells, args.quiet)
        try:
            report = run_matrix(lab, models, places, data=(ds.X, ds.labels if ds.labels.shape[0] else None),
                                build_root=Path(args.build_dir), layout=args.layout, place_timeout=args.place_timeout,
                                hil_kw={"timeout": args.timeout, "bench_iters": args.bench_iters}, on_event=progress)
        finally:
            progress.close()
    for r in report["cells"]:
        retried = ""
        if r["retried"]:
            first_try = r["attempts"][0]
            retried = f"  retried: {first_try['place']} {first_try['result']} ({first_try['error']})"
        figures = f"{r['rows']} rows, {r['mismatches']} mismatches" if r["rows"] is not None else (r["error"] or "")
        print(f"{r['result']:<6} {Path(r['model']).name:<20} {r['target']:<18} {str(r['place'] or '-'):<16} "
              f"{figures}{retried}")
    s = report["seconds"]
    print(f"result          {report['passed']} of {len(report['cells'])} cells PASS, {report['failed']} FAIL, "
          f"{report['errors']} ERROR, {report['retried']} retried  (build {s['build']:.1f} s, "
          f"matrix {s['matrix']:.1f} s)")
    write_json(args.json, {"command": "farm", **report})
    if args.junit is not None:
        write_text(args.junit, junit_xml(report), "JUnit file")
    if report.get("coordinator_lost"):
        raise FarmError(f"lost the labgrid coordinator at {address} during the matrix: "
                        f"{len(report['cells']) - report['passed']} of {len(report['cells'])} cells did not pass")
    if not report["ok"]:
        raise HilFailed(f"{len(report['cells']) - report['passed']} of {len(report['cells'])} cells did not pass")
    return 0
