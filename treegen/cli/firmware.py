"""``treegen build | flash``: the PlatformIO project of a model (optionally with on-device
training), built offline for emulated targets; uploaded to a board or run in QEMU."""

from __future__ import annotations

import argparse
import shlex
import signal
from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import (add_csv_options, add_ignore_names, csv_options, int_range, kib,
                                model_names, positive_float)
from treegen.cli.paths import input_, output
from treegen.core.data import load_for_model
from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_EFTI_DEPTH
from treegen.core.model import load
from treegen.core.output import Output, check_paths
from treegen.core.targets import get as get_target
from treegen.emit.export import LAYOUTS as EXPORT_LAYOUTS
from treegen.emit.export import VARIANTS as EXPORT_VARIANTS
from treegen.learn.vicinal import DEFAULT_SIGMA2

FRAMEWORKS = ("baremetal", "arduino")      # treegen.device.platformio.FRAMEWORKS (not imported: device is lazy)
UPLOADERS = ("pyocd", "openocd", "platformio")   # treegen.device.upload.UPLOADERS


def register(sub) -> None:
    """Add build and flash to the subcommands ``sub``."""
    p = add_command(sub, "build")
    _add_firmware_options(p)
    p.add_argument("-v", "--verbose", action="store_true", help="show PlatformIO's output while it builds")
    p.set_defaults(func=cmd_build)

    p = add_command(sub, "flash")
    _add_firmware_options(p)
    p.add_argument("--port", metavar="P",
                   help="boards: upload port (e.g. /dev/ttyACM0); emulated: TCP port of the UART (default: a free one)")
    p.add_argument("-v", "--verbose", action="store_true", help="show PlatformIO's output while it builds")
    p.add_argument("--uploader", choices=UPLOADERS, default=None,
                   help="boards: pyocd (default for the ST and Nordic boards: ST-LINK / CMSIS-DAP probes), "
                        "openocd (default for the HiFive1: its FTDI JTAG), avrdude (default for the Arduino Uno: "
                        "its bootloader on --port) or platformio (pio run -t upload)")
    p.add_argument("--dry-run", action="store_true",
                   help="boards: build, print the exact upload command, do not run it")
    p.set_defaults(func=cmd_flash)


def _add_firmware_options(p: argparse.ArgumentParser) -> None:
    add_ignore_names(p)
    add_csv_options(p)
    input_(p.add_argument("model", metavar="MODEL", help="model file (treegen fit -o)"), "model")
    input_(p.add_argument("--target", required=True, metavar="T",
                          help="emulated target (qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55) or board (see "
                               "'treegen targets')"), "target")
    output(p.add_argument("-o", "--output", metavar="DIR",
                          help="PlatformIO project directory (default: build/<model>-<target>)"),
           "project directory", "folder")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default="table", help="model code layout (default table)")
    p.add_argument("--variant", choices=EXPORT_VARIANTS, default="auto",
                   help="oblique multiply-accumulate: scalar, dsp, mve or auto (default auto)")
    p.add_argument("--framework", choices=FRAMEWORKS, default="baremetal",
                   help="boards: baremetal (default: register-level port, built offline) or arduino (the "
                        "official PlatformIO platform and Arduino core, online)")
    g = p.add_argument_group("on-device training (the firmware 'treegen hil --train --port' talks to)")
    g.add_argument("--train", action="store_true",
                   help="add the EFTI training engine, sized for the rows of --data (after a RAM check)")
    input_(g.add_argument("--data", metavar="CSV", help="--train: labelled training data that sizes the engine"),
           "data")
    g.add_argument("--label", metavar="NAME", help="--train: label column of --data (default: last)")
    g.add_argument("--max-depth", type=int_range(1, MAX_EFTI_DEPTH), metavar="D",
                   help="--train: maximum tree depth (default: the model's EFTI parameters, else 8)")
    g.add_argument("--risk", choices=("empirical", "vicinal"), default=None,
                   help="--train: the fitness's risk (default empirical; vicinal: widths and Phi table in flash)")
    g.add_argument("--vicinity-sigma2", type=positive_float, default=None, metavar="S",
                   help="--train --risk vicinal: kernel variance per attribute variance (default 0.1)")


def _firmware_project(args):
    """(model, target, project dir) of build/flash; the target must be built with PlatformIO."""
    _check_train_flags(args)
    target = get_target(args.target)
    if target.kind not in ("emulated", "board"):
        raise TreegenError(f"target {target.name!r} (kind {target.kind!r}) has no firmware build; use an "
                           "emulated target (qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55) or a board (see 'treegen targets')")
    stem = Path(args.model).name.removesuffix(".json")
    out = Path(args.output) if args.output else Path("build") / f"{stem}-{target.name}"
    if args.output is None:     # the default folder: checked as -o DIR was (treegen.cli.paths)
        check_paths([Output(str(out), "project directory", "folder")], [args.model, args.data])
    model = load(args.model)
    return model, target, out


def _print_size(flash: int, ram: int, target) -> None:
    print(f"flash           {kib(flash)} of {target.flash_kb} KiB "
          f"({100 * flash / target.flash_bytes:.1f} %)")
    print(f"RAM             {kib(ram)} of {target.ram_kb} KiB ({100 * ram / target.ram_bytes:.1f} %; "
          "static data + stack reserve)")


def _print_model_linked(src: Path, model, target) -> None:
    """Beside the firmware's size: what the model alone costs in a linked image for the target
    (:func:`treegen.emit.size.measure_linked`, library routines included)."""
    from treegen.emit.entry_points import boost_entry_points
    from treegen.emit.size import measure_linked

    predict = "predict_value_q15" if model.is_regression and model.vote != "sum" else "predict_q15"
    names = [h.stem for h in sorted(src.glob("*.h")) if (src / f"{h.stem}.c").is_file()
             and f"tg_{h.stem}_{predict}(" in h.read_text(encoding="utf-8", errors="replace")]
    if len(names) != 1:
        return
    # the probes call what the firmware's (q15) export declares: the boosted Q15 C has no float entry;
    # a tree export's names follow from its dtype (measure_linked derives them)
    eps = (boost_entry_points(names[0], dtype="q15", classification=not model.is_regression)
           if model.vote == "sum" else None)
    linked = measure_linked(src, names[0], target, "q15", model.n_features, value=model.is_regression,
                            entry_points=eps)
    parts = [f"{what} {d['flash_bytes']} / {d['ram_bytes']} bytes" for what, d in
             (("Q15 entry", linked.get("q15")), ("float entry", linked.get("float"))) if d is not None]
    print(f"model linked    {'; '.join(parts) or 'not measured'} flash / RAM  ({linked['note']})")


def _check_train_flags(args) -> None:
    if not args.train and (args.data is not None or args.max_depth is not None or args.label is not None
                           or args.risk is not None or args.vicinity_sigma2 is not None):
        raise TreegenError("--data, --label, --max-depth, --risk and --vicinity-sigma2 of build/flash only apply "
                           "with --train")
    if args.vicinity_sigma2 is not None and args.risk != "vicinal":
        raise TreegenError("--vicinity-sigma2 goes with --risk vicinal")
    if args.train and args.data is None:
        raise TreegenError("--train needs --data CSV: the training rows size the engine's buffers")


def _train_spec(args, model, target):
    """The on-device training configuration of build/flash --train (None without --train)."""
    from treegen.device.train_firmware import make_train_spec, params_from_model, training_rows

    if not args.train:
        return None
    ds = load_for_model(args.data, model.n_features, label=args.label,
                        feature_names=model_names(args, model), **csv_options(args))
    Xq, y, C, _ = training_rows(ds.X, ds.labels if ds.labels.shape[0] else None, model=model)
    n, A = Xq.shape
    params = params_from_model(model, max_depth=args.max_depth)
    # the rows go into flash with the firmware; without --max-depth the depth is lowered until the engine fits
    risk_kw = {}
    if args.risk == "vicinal":
        risk_kw = {"risk": "vicinal",
                   "vicinity_sigma2": DEFAULT_SIGMA2 if args.vicinity_sigma2 is None else args.vicinity_sigma2}
    spec = make_train_spec(target, params, flash_data=(Xq, y, C), flash_source=str(args.data), dsp=args.variant,
                           depth_auto=args.max_depth is None, **risk_kw)
    print(f"training        engine for {n} rows x {A} attributes, {C} classes, depth {'<= ' if args.max_depth is None else ''}"
          f"{spec.max_depth} (rows from {args.data}, in flash){', vicinal risk' if spec.vicinal else ''}")
    return spec


def _build_firmware(model, target, out: Path, args, train=None, reuse: bool = False):
    """Write the project and build it (emulated targets, or boards whose platform is installed):
    :func:`treegen.device.commands.build_firmware`, printed."""
    from treegen.device.commands import build_firmware

    res = build_firmware(model, target, out, layout=args.layout, variant=args.variant, train=train,
                         verbose=args.verbose, reuse=reuse, framework=getattr(args, "framework", "baremetal"))
    if res.elf is None:
        return res
    if res.up_to_date:
        print(f"firmware        {res.elf}  (up to date)")
        return res
    print(f"firmware        {res.elf}")
    if res.bin is not None:
        print(f"binary          {res.bin}")
    print(f"image sha256    {res.image_sha256}  (loadable sections)")
    _print_size(res.flash_bytes, res.ram_bytes, target)
    _print_model_linked(out / "src", model, target)
    print(f"build time      {res.seconds:.1f} s")
    return res


def cmd_build(args) -> int:
    model, target, out = _firmware_project(args)
    print(f"model           {args.model}  (sha256 {model.hash()[:16]})")
    print(f"target          {target.name}  ({target.kind}: {target.description})")
    print(f"project         {out}")
    train = _train_spec(args, model, target)
    res = _build_firmware(model, target, out, args, train=train)
    if res.elf is not None:
        # a command to paste into a shell: paths with spaces quoted
        command = shlex.join(["treegen", "flash", str(args.model), "--target", target.name, "-o", str(out)]
                             + (["--train", "--data", str(args.data)] if train is not None else []))
        if target.kind == "emulated":
            print(f"run             {command}")
        elif args.framework == "baremetal":
            print(f"upload          {command}")
    else:
        platform = target.platformio.get("platform", "")
        print(f"build           the PlatformIO platform {platform!r} is not installed here; where the PlatformIO "
              "registry is reachable, build and upload with:")
        print(f"                {shlex.join(res.upload_command)}")
    return 0


def _emulated_firmware(model, target, out: Path, args, train=None) -> Path:
    """The project's firmware.elf, rebuilt unless it is up to date for this model/layout/variant
    (always regenerated with on-device training; PlatformIO's build cache keeps that quick)."""
    return _build_firmware(model, target, out, args, train=train, reuse=True).elf


def cmd_flash(args) -> int:
    from treegen.device import platformio as pio
    from treegen.device.commands import start_emulator

    model, target, out = _firmware_project(args)
    if target.kind == "board" and args.framework == "baremetal" and target.uart != "arduino":
        return _flash_baremetal(model, target, out, args)
    if args.dry_run or args.uploader in ("pyocd", "openocd"):
        raise TreegenError(f"--dry-run and --uploader {args.uploader or 'pyocd'} are for the bare-metal build of a "
                           "board (--framework baremetal)")
    train = _train_spec(args, model, target)
    if target.kind == "board":
        from treegen.device.commands import upload_firmware

        target = pio.for_framework(target, args.framework)
        pio.write_project(model, out, target=target, layout=args.layout, variant=args.variant, train=train)
        pio.check_board_platform(target, out)     # seconds, not PlatformIO's ~60 s wait for its registry
        print(f"upload          {shlex.join(pio.upload_command(out, port=args.port))}", flush=True)
        rc = upload_firmware(out, port=args.port)
        if rc != 0:
            raise TreegenError(f"pio run -t upload failed (exit {rc}); see PlatformIO's output above")
        return 0

    port = None
    if args.port is not None:
        try:
            port = int(args.port)
        except ValueError:
            raise TreegenError(f"--port for an emulated target is a TCP port number, got {args.port!r}") from None
        if not 1 <= port <= 65535:
            raise TreegenError(f"--port must be 1..65535, got {port}")
    elf = _emulated_firmware(model, target, out, args, train=train)

    # SIGTERM and SIGHUP raise Interrupted (cli.main): QEMU is stopped and the status is 128 + n;
    # Ctrl-C is the documented way to stop serving: status 0
    with start_emulator(target, elf, port=port) as board:
        print(f"emulator        {board.label} (pid {board.process.pid})")
        print(f"serial          {board.url}")
        print("                the emulator waits for a client on that URL (pyserial serial_for_url); Ctrl-C stops it",
              flush=True)
        try:
            rc = board.wait()
        except KeyboardInterrupt as exc:
            if getattr(exc, "signum", signal.SIGINT) != signal.SIGINT:
                raise
            print("stopped", flush=True)
            return 0
        err = " ".join(board.stderr().split())
    raise TreegenError(f"{board.label} exited with status {rc}: {err or 'no message'}")




def _flash_baremetal(model, target, out: Path, args) -> int:
    """``treegen flash`` for a board's bare-metal build: build offline, then upload with the board's
    uploader (pyOCD: probe checked first, a second, one line naming the probe when none is there)."""
    from treegen.device import platformio as pio
    from treegen.device import processes
    from treegen.device import upload as up
    from treegen.device.commands import upload_firmware

    uploader = up.uploader_for(target, args.uploader)
    if uploader == "pyocd" and not args.dry_run:
        up.check_probe(target)                  # before building: no probe -> one line, exit 2
        up.check_part(target)
    if uploader == "openocd" and not args.dry_run:
        up.check_openocd(target)
    if uploader == "avrdude" and not args.dry_run:
        up.check_avrdude(target)
    train = _train_spec(args, model, target)
    res = _build_firmware(model, target, out, args, train=train, reuse=train is None)
    if uploader == "platformio":
        cmd, cwd = pio.upload_command(out, port=args.port), None
    else:
        cmd, cwd = up.upload_invocation(target, res.elf, port=args.port)   # the path: a working directory only
    print(f"upload          {up.shown(cmd, cwd)}", flush=True)
    if args.dry_run:
        if uploader == "pyocd":
            try:
                up.check_part(target)
            except TreegenError as exc:          # a part from a CMSIS pack: say what to install
                print(f"note            {exc}")
        return 0
    if uploader == "platformio":
        rc = upload_firmware(out, port=args.port)
    else:
        try:
            rc = processes.run(cmd, cwd=cwd)
        except OSError as exc:
            raise TreegenError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
    if rc != 0:
        raise TreegenError(f"{uploader} upload failed (exit {rc}); see its output above")
    return 0
