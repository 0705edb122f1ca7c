"""``treegen hil``: check a model's firmware on a device against the host (and, with ``--train``,
on-device training against the host engine)."""

from __future__ import annotations

from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import (HilFailed, add_csv_options, add_ignore_names, csv_options, int_range,
                                model_names, non_negative_float, positive_float, timeout_seconds)
from treegen.cli.paths import input_, output
from treegen.core.data import load_for_model
from treegen.core.errors import DataError, TreegenError
from treegen.core.model import load
from treegen.core.output import Output, check_paths, write_json, write_text
from treegen.core.progress import progress_bar
from treegen.core.targets import get as get_target
from treegen.emit.export import LAYOUTS as EXPORT_LAYOUTS
from treegen.emit.export import VARIANTS as EXPORT_VARIANTS
from treegen.learn.inducers.efti import MAX_SEED
from treegen.learn.vicinal import DEFAULT_SIGMA2


def register(sub) -> None:
    """Add hil to the subcommands ``sub``."""
    p = add_command(sub, "hil")
    add_ignore_names(p)
    add_csv_options(p)
    input_(p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)"), "model")
    input_(p.add_argument("--target", required=True, metavar="T",
                          help="native, an emulated target (qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55) or a board "
                               "(see 'treegen targets')"), "target")
    p.add_argument("--port", metavar="URL",
                   help="use the device running at this serial port or pyserial URL (/dev/ttyACM0, "
                        "socket://127.0.0.1:PORT); required for real boards (flashed with 'treegen flash'). "
                        "Without it, native and emulated targets are built and started here")
    add_place_options(p)
    input_(p.add_argument("--data", required=True, metavar="CSV", help="rows to stream (label column optional)"),
           "data")
    p.add_argument("--label", metavar="NAME", help="label column of --data (default: last, if present)")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default=None,
                   help="model code layout to build (default table; with --port: checked against the device)")
    p.add_argument("--variant", choices=EXPORT_VARIANTS, default=None,
                   help="multiply-accumulate variant to build (default auto; with --port: checked against the device)")
    output(p.add_argument("-o", "--output", "--build-dir", dest="output", metavar="DIR",
                          help="build directory (default: build/<model>-<target>, as for treegen build); a complete "
                               "'treegen build' of the same model, layout and variant there is reused, not rebuilt"),
           "build directory", "folder")
    p.add_argument("--timeout", type=timeout_seconds, default=10.0, metavar="S",
                   help="seconds to wait for each response (default 10)")
    p.add_argument("--bench-iters", type=int_range(0, 65535), default=2000, metavar="N",
                   help="BENCH calls per timed row (default 2000; 0 = no BENCH)")
    p.add_argument("--float-ulps", type=int_range(0, 4096), default=0, metavar="N",
                   help="also check the float entry point (tg_<name>_predict, raw float32 inputs) on the float32 "
                        "values within N ulps of every threshold against the fixed-point model (e.g. 64; "
                        "default 0: not checked); a regression or boosted model: its float32 export's outputs, bit "
                        "for bit, on the data rows and these")
    output(p.add_argument("--json", metavar="FILE",
                          help="write the report as JSON (also when the run fails: ok false)"), "JSON file")
    output(p.add_argument("--junit", metavar="FILE",
                          help="write JUnit XML: one testcase per check (hash, predictions, bench)"), "JUnit file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    g = p.add_argument_group("on-device training (treegen.device.train_hil)")
    g.add_argument("--train", action="store_true",
                   help="instead: build the firmware with the EFTI engine sized for --data, train on the device and "
                        "on the host with the same seed, require identical trees, fitness and PREDICT_TRAINED")
    g.add_argument("--iters", type=int_range(1, (1 << 32) - 1), default=2000, metavar="N",
                   help="--train: EFTI iterations (default 2000)")
    g.add_argument("--seed", type=int_range(0, MAX_SEED), default=0, metavar="S",
                   help="--train: random seed (default 0, as for fit and cv)")
    g.add_argument("--risk", choices=("empirical", "vicinal"), default=None,
                   help="--train: the fitness's risk (default empirical); vicinal = the rows' Gaussian-kernel "
                        "probability of correct classification (integer Q16, widths and Phi table in flash)")
    g.add_argument("--vicinity-sigma2", type=positive_float, default=None, metavar="S",
                   help="--train --risk vicinal: kernel variance per attribute variance (default 0.1)")
    p.set_defaults(func=cmd_hil)


def add_place_options(p) -> None:
    """--place, --coordinator, --place-timeout (a labgrid place instead of --port)."""
    g = p.add_argument_group("board farm (labgrid; docs/guide/board-farm.md)")
    g.add_argument("--place", metavar="NAME",
                   help="run on this labgrid place instead of --port: acquire it (waiting up to --place-timeout "
                        "while someone else holds it), start its emulated board with the image (native/QEMU "
                        "places) or use its flashed board, run the HIL on its serial port, release it")
    g.add_argument("--coordinator", metavar="HOST:PORT",
                   help="labgrid coordinator (default: the LG_COORDINATOR environment variable)")
    g.add_argument("--place-timeout", type=non_negative_float, default=0.0, metavar="S",
                   help="seconds to wait for a place held by someone else (default 0: fail at once)")


def cmd_hil(args) -> int:
    target = get_target(args.target)
    model = load(args.model)
    ds = load_for_model(args.data, model.n_features, label=args.label,
                        feature_names=model_names(args, model), **csv_options(args),
                        missing=model.handles_missing)
    if ds.n_rows == 0:
        raise DataError(f"{args.data} has no rows")
    stem = Path(args.model).name.removesuffix(".json")
    out = Path(args.output) if args.output else Path("build") / f"{stem}-{target.name}"
    if args.output is None and args.port is None:   # the default folder: checked as -o DIR was (cli.paths)
        check_paths([Output(str(out), "build directory", "folder")], [args.model, args.data])
    print(f"model           {args.model}  (sha256 {model.hash()[:16]})")
    print(f"target          {target.name}  ({target.kind}: {target.description})")
    print(f"data            {args.data}  ({ds.n_rows} rows)", flush=True)
    if not args.train and (args.risk is not None or args.vicinity_sigma2 is not None):
        raise TreegenError("--risk and --vicinity-sigma2 go with --train")
    if args.vicinity_sigma2 is not None and args.risk != "vicinal":
        raise TreegenError("--vicinity-sigma2 goes with --risk vicinal")
    if args.place is not None:
        if args.port is not None:
            raise TreegenError("--place and --port exclude each other: the place's serial port is used")
        if args.train:
            raise TreegenError("--train does not run on a --place (yet): use --port")
        return cmd_hil_place(args, model, target, ds, out)
    if args.train:
        if args.port is not None:
            return cmd_hil_train(args, model, target, ds, out)
        from treegen.device import buildfolder

        with buildfolder.locked(out):          # build and run: one treegen at a time per build folder
            return cmd_hil_train(args, model, target, ds, out)

    return _run_and_report(args, model, target, ds, out, args.port)


def cmd_hil_place(args, model, target, ds, out) -> int:
    """``treegen hil MODEL --target T --place NAME``: acquire the place, build the image (native and
    emulated places), start the place's board with it, run the HIL on its serial port, release."""
    import sys

    from treegen.device import hil
    from treegen.device.farm import Coordinator, FarmError, coordinator_address
    from treegen.device.farm_board import place_board

    address = coordinator_address(args.coordinator)
    with Coordinator(address) as lab:
        info = lab.place(args.place)
        if info.target is not None and info.target != target.name:
            raise FarmError(f"place {args.place} is tagged target={info.target}, not {target.name}")

        tty = sys.stderr.isatty()
        shown = []

        def waiting(text):
            if not args.quiet:
                shown.append(text)
                print(f"\r\033[K{text}" if tty else text, end="" if tty else "\n", file=sys.stderr, flush=True)

        fw = None
        if target.kind in ("host", "emulated"):
            from treegen.device import buildfolder

            with buildfolder.locked(out):
                fw = hil.build_firmware(model, target, out, layout=args.layout or "table",
                                        variant=args.variant or "auto")
        try:
            with lab.held(args.place, timeout=args.place_timeout, progress=waiting) as place:
                if shown and tty:
                    print(file=sys.stderr)
                print(f"place           {place.name}  (acquired by {lab.user} from {address}; serial "
                      f"{place.serial.resource})", flush=True)
                with place_board(place, target, fw) as board:
                    return _run_and_report(args, model, target, ds, out, board.url, place=place.name)
        except FarmError:
            if shown and tty:
                print(file=sys.stderr, flush=True)
            raise


def _run_and_report(args, model, target, ds, out, port, place: str | None = None) -> int:
    from treegen.device import hil

    bar = progress_bar(total=ds.n_rows, desc="hil predict", quiet=args.quiet, unit="row")

    def progress(done, total):
        bar.update(done - bar.n)

    try:
        report = hil.run_hil(model, target, port=port, data=(ds.X, ds.labels if ds.labels.shape[0] else None),
                             layout=args.layout, variant=args.variant, build_dir=out, timeout=args.timeout,
                             bench_iters=args.bench_iters, float_ulps=args.float_ulps, progress=progress)
    except hil.HilError as exc:
        bar.close()
        if exc.report is not None:
            exc.report["model"] = str(args.model)
            exc.report["place"] = place
            _hil_outputs(args, exc.report)
        raise
    finally:
        bar.close()
    report["model"] = str(args.model)
    report["place"] = place
    _print_hil(report)
    _hil_outputs(args, report)
    if not report["ok"]:
        raise HilFailed(hil.summary(report))
    return 0


def _hil_outputs(args, report: dict) -> None:
    from treegen.device import hil

    write_json(args.json, {"command": "hil", **report})
    if args.junit is not None:
        write_text(args.junit, hil.junit_xml(report), "JUnit file")


def _print_hil(r: dict) -> None:
    if r.get("firmware"):
        if r.get("firmware_reused"):
            built = "  (reused: already built for this model, layout and variant; not rebuilt)"
        elif "build" in r["seconds"]:
            built = f"  (built in {r['seconds']['build']:.1f} s"
            built += f"; replaced the build of model {r['firmware_replaced'][:16]} there)" \
                if r.get("firmware_replaced") else ")"
        else:
            built = ""
        print(f"firmware        {r['firmware']}{built}")
    if r.get("image_sha256"):
        print(f"image sha256    {r['image_sha256']}  ({r['image']} image, loadable sections)")
    if r["flash_bytes"] is not None:
        print(f"flash / RAM     {r['flash_bytes']} / {r['ram_bytes']} bytes")
    d = r["device"]
    runs = (f"layout {r['layout']}, variant {r['variant']}" if r.get("layout") else f"firmware {d['variant']}")
    print(f"device          {r['port']}  ({d['target']}, treegen {d['treegen_version']}, {runs}, "
          f"up to {d['max_batch']} rows per request)")
    for c in r["checks"]:
        print(f"{c['name']:<16}{'ok' if c['ok'] else 'FAILED'}  {c['message']}")
    if r["accuracy"] is not None:
        rows = (f", the {r['rows']} rows without missing values" if r.get("rows_missing") else "")
        print(f"accuracy        {100 * r['accuracy']:.2f} %  (device predictions vs the labels{rows})")
        if r.get("float_accuracy") is not None:
            why = ("the same rows as the device" if not r.get("quantisation_rows") else
                   f"{r['quantisation_rows']} row(s) take another class on the device's Q15 grid than in "
                   f"{r['float_reference']}: quantisation")
            print(f"                {100 * r['float_accuracy']:.2f} % {r['float_reference']} on the raw rows ({why})")
    elif r.get("rmse") is not None:
        print(f"RMSE            {r['rmse']:.6g} device, {r['float_rmse']:.6g} {r['float_reference']} on the raw "
              f"rows (vs the target values)")
    if r["rows_per_s"] is not None:
        print(f"throughput      {r['rows_per_s']:.0f} rows/s  ({r['rows']} rows in {r['seconds']['predict']:.2f} s)")
    if r["bench"] is not None:
        b = r["bench"]
        print(f"per inference   {b['mean']:g} {b['unit']}  (min {b['min']:g}, max {b['max']:g}; "
              f"{len(b['rows'])} rows x {b['n_iter']} calls, benchmark loop included)")
    print(f"result          {'PASS' if r['ok'] else 'FAIL'}")


def cmd_hil_train(args, model, target, ds, out) -> int:
    """``treegen hil MODEL --target T --data CSV --train [--iters N] [--seed S]``: build (or reach
    at ``--port``) a firmware with on-device training sized for the data, train on the device and on
    the host, compare (:func:`run_train_hil`). Exit 0 only when everything is identical."""
    from treegen.device.hil import open_device
    from treegen.device.train_firmware import make_train_spec, mode_name, params_from_model, training_rows
    from treegen.device.train_hil import (build_train_firmware, device_training_setup, fitness_text, junit_xml,
                                          run_train_hil, summary_lines)

    Xq, y, C, _ = training_rows(ds.X, ds.labels if ds.labels.shape[0] else None, model=model)
    n, A = Xq.shape
    params = params_from_model(model)
    risk = args.risk or "empirical"
    sigma2 = args.vicinity_sigma2 if args.vicinity_sigma2 is not None else DEFAULT_SIGMA2
    risk_kw = {"risk": risk, "vicinity_sigma2": sigma2} if risk == "vicinal" else {}
    report: dict = {"mode": "train", "target": target.name, "model": str(args.model), "ok": False, "error": None}
    fw = None
    try:
        source = "ram"
        if args.port is None:
            # the rows come with the firmware (flash); the engine's mode and depth follow the target's RAM
            spec = make_train_spec(target, params, flash_data=(Xq, y, C), flash_source=str(args.data),
                                   dsp=args.variant or "auto", depth_auto=True, **risk_kw)
            fw = build_train_firmware(model, target, out, spec, layout=args.layout or "table",
                                      variant=args.variant or "auto")
            sizes = "" if fw.ram_bytes is None else f"; flash {fw.flash_bytes} / RAM {fw.ram_bytes} bytes"
            print(f"firmware        {fw.path}  (built in {fw.build_seconds:.1f} s{sizes})")
            s = fw.spec
            params = s.params
            source = "flash" if s.flash_rows else "ram"      # AVR: rows in the RAM buffer (TRAIN_DATA)
            print(f"engine          {s.max_rows} rows x {s.n_attr} attributes, up to {s.n_classes} classes, "
                  f"{mode_name(s)}, {s.variant} dot product{', vicinal risk' if s.vicinal else ''}")
            if s.max_depth != params_from_model(model).max_depth:
                print(f"                maximum depth {params_from_model(model).max_depth} -> {s.max_depth}: the node "
                      f"pool that fits {target.name}'s {target.ram_kb} KiB RAM")
            if fw.ram_bytes is not None:
                print(f"board memory    RAM {fw.ram_bytes} of {target.ram_bytes} bytes "
                      f"({100 * fw.ram_bytes / target.ram_bytes:.0f} %), flash {fw.flash_bytes} of "
                      f"{target.flash_bytes} bytes ({100 * fw.flash_bytes / target.flash_bytes:.0f} %)")
        with open_device(target, firmware=fw, port=args.port, timeout=args.timeout, model=model) as dev:
            print(f"device          {dev.url}", flush=True)
            if args.port is not None:
                params, source = device_training_setup(dev.client, params, n, A)
            log = None if args.quiet else (lambda m: print(f"                {m}", flush=True))
            result = run_train_hil(params, (Xq, y), dev.client, args.seed, args.iters, n_classes=C, source=source,
                                   log=log, **risk_kw)
        report.update(result)
        report["firmware"] = None if fw is None else str(fw.path)
    except TreegenError as exc:
        report["error"] = " ".join(str(exc).split())
        write_json(args.json, {"command": "hil", **report})
        if args.junit is not None:
            write_text(args.junit, junit_xml(report, target.name, report["error"]), "JUnit file")
        raise
    for line in summary_lines(report):
        print(line)
    print(f"result          {'PASS' if report['ok'] else 'FAIL'}")
    write_json(args.json, {"command": "hil", **report})
    if args.junit is not None:
        write_text(args.junit, junit_xml(report, target.name, None), "JUnit file")
    if not report["ok"]:
        raise HilFailed(f"on-device training differs from the host ({fitness_text(report['train'])})")
    return 0
