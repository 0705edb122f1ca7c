"""The firmware harness: generated C that serves the serial protocol (``docs/protocol.md``) around an
exported model, and the native (host) build of it.

:func:`write_harness` writes, into one source folder (a PlatformIO project's ``src/``)::

    <name>.h / <name>.c          the exported model (treegen.emit.export.export_model, q15)
    tg_protocol.h / .c           frame parser + builder + CRC (pure C99, no I/O; fuzzed on the host)
    tg_port.h                    the port interface; TG_COUNTER_BITS of the port
    tg_port_<uart>.c(pp)         the port of the target's UART kind (target key ``uart``)
    tg_model_glue.h              binds the harness to tg_<name>_predict_q15, counts, hash, names
    tg_harness.c                 main(): port -> parser -> PING/INFO/PREDICT/BENCH -> response
    (train=...) tg_train.h/.c, tg_efti.h/.c, tg_efti_config.h/.c [, tg_efti_data.h/.c]: on-device
                                 training (treegen.device.train_firmware)

Everything comes from ``templates/firmware/`` (Jinja2, StrictUndefined). Port kinds are data:
``templates/firmware/ports.toml`` gives each kind's counter width, and the port's C file is
``tg_port_<kind>.c`` (or ``.cpp``) — adding a port needs no code here.

:func:`build_native` compiles the harness for the ``native`` target with the host compiler (strict
warnings; optionally ASan/UBSan) and :class:`NativeDevice` runs it: the executable opens a
pseudo-terminal and prints ``TG_PORT <path>``; the host then talks to that path with pyserial as to
any serial device.
"""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path

from treegen.core import targets as _targets
from treegen.core.codegen import c_identifier, c_string_body, comment_text, prepare_out_dir, render, write_generated
from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.native import STRICT_CFLAGS
from treegen.core.resources import templates_dir
from treegen.core.version import __version__
from treegen.device import processes
from treegen.emit.entry_points import find as find_entry

FIRMWARE_DIR = "firmware"
PORTS_FILE = "ports.toml"
SANITIZE_CFLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-fno-omit-frame-pointer")
NATIVE_EXECUTABLE = "tg_harness_native"
HARNESS_FILES = ("tg_protocol.h", "tg_protocol.c", "tg_port.h", "tg_model_glue.h", "tg_harness.c")
MAX_PAYLOAD_LIMIT = 0xFFFF
MIN_PAYLOAD = 64                  # TG_MAX_PAYLOAD lower bound checked by tg_protocol.h
HOST_MAX_PAYLOAD = 4096           # default on the host
MCU_MAX_PAYLOAD = (256, 1024)     # default on devices: RAM/16 clamped to this range
INFO_FIXED_BYTES = 1 + 2 + 2 + 2 + 2 + 1 + 4 + 32


# ---------------------------------------------------------------------- data
def port_kinds() -> dict:
    """``templates/firmware/ports.toml``: port kind -> {counter_bits, counter_unit, description}."""
    path = templates_dir() / FIRMWARE_DIR / PORTS_FILE
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TreegenError(f"firmware port table {path}: {exc}") from None
    for kind, entry in data.items():
        bits = entry.get("counter_bits") if isinstance(entry, dict) else None
        if not isinstance(bits, int) or isinstance(bits, bool) or not 8 <= bits <= 32:
            raise TreegenError(f"firmware port table {path.name}: [{kind}] needs counter_bits 8..32")
    return data


def _port_template(kind: str) -> str:
    for ext in (".c", ".cpp"):
        rel = f"{FIRMWARE_DIR}/tg_port_{kind}{ext}"
        if (templates_dir() / rel).is_file():
            return rel
    raise TreegenError(f"no firmware port {kind!r}: templates/{FIRMWARE_DIR}/tg_port_{kind}.c is missing")


def _target(target) -> _targets.Target:
    return target if isinstance(target, _targets.Target) else _targets.get(str(target))


def default_max_payload(target: _targets.Target) -> int:
    """The target's ``max_payload`` key, else 4096 on the host and RAM/16 (256..1024) on devices."""
    value = target.extra.get("max_payload")
    if value is not None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TreegenError(f"target {target.name!r}: max_payload must be an integer")
        return value
    if target.kind == "host":
        return HOST_MAX_PAYLOAD
    lo, hi = MCU_MAX_PAYLOAD
    return max(lo, min(hi, target.ram_bytes // 16))


def harness_limits(n_features: int, n_classes: int, info_strings: list[str], max_payload: int,
                   *, explicit: bool) -> dict:
    """max_payload (raised to the minimum the model needs unless ``explicit``), max_batch, class bytes
    (``n_classes`` 0: a regression model, each PREDICT answer an int32 value, 4 bytes)."""
    class_bytes = 4 if n_classes == 0 else (1 if n_classes <= 255 else 2)
    info_bytes = INFO_FIXED_BYTES + sum(1 + len(s.encode()) for s in info_strings)
    need = max(MIN_PAYLOAD, info_bytes, 2 + 2 * n_features)
    if need > MAX_PAYLOAD_LIMIT:
        raise TreegenError(f"a row of {n_features} features does not fit in one frame (LEN is at most "
                           f"{MAX_PAYLOAD_LIMIT} bytes)")
    if max_payload > MAX_PAYLOAD_LIMIT:
        raise TreegenError(f"max_payload {max_payload} is more than LEN can hold ({MAX_PAYLOAD_LIMIT})")
    if max_payload < need:
        if explicit:
            raise TreegenError(f"max_payload {max_payload} is too small: this model needs at least {need} bytes "
                               f"(one row of {n_features} features, the INFO response, and >= {MIN_PAYLOAD})")
        max_payload = need
    max_batch = min(0xFFFF, (max_payload - 2) // (2 * n_features), (max_payload - 2) // class_bytes)
    return {"max_payload": max_payload, "max_batch": max_batch, "class_bytes": class_bytes,
            "info_bytes": info_bytes}


# ---------------------------------------------------------------------- generation
def _resolve_port(tgt: _targets.Target) -> tuple[str, dict]:
    kind = tgt.extra.get("uart")
    if not kind:
        raise TreegenError(f"target {tgt.name!r} has no 'uart' key: no firmware port for it")
    ports = port_kinds()
    if kind not in ports:
        raise TreegenError(f"target {tgt.name!r}: port kind {kind!r} is not in templates/{FIRMWARE_DIR}/"
                           f"{PORTS_FILE} ({', '.join(sorted(ports))})")
    template = _port_template(kind)
    port = dict(ports[kind])
    port.update(kind=kind, file=Path(template).name, template=template,
                description=comment_text(port.get("description", kind)))
    return template, port


def render_harness(out_dir, *, name: str, n_features: int, n_classes: int, model_hash: str, target,
                   variant: str, max_payload: int | None = None, port: dict | None = None,
                   train=None, proba: bool = False, value: bool = False, raw: bool | str = False,
                   f32: dict | None = None) -> list[Path]:
    """The harness files alone (protocol, port header and port, glue, harness) for a model whose
    ``<name>.h`` (``tg_<name>_predict_q15``, ``TG_<NAME>_N_FEATURES/N_CLASSES``) is provided separately.

    ``model_hash``: sha256 hex; ``variant``: the INFO variant string (e.g. ``q15-table-dsp``);
    ``port``: override the port table entry of the target's UART kind (tests: a narrow counter).
    ``train``: a :class:`treegen.device.train_firmware.TrainSpec` adds on-device training (the EFTI engine
    and tg_train.h/.c; glue TG_GLUE_HAS_TRAIN 1); use :func:`write_harness` for its RAM check.
    ``proba``: the model header has ``tg_<name>_predict_proba_q15`` (a soft-voting ensemble): the
    harness serves PROBA (capability bit 3). ``value``: a regression model (``tg_<name>_predict_value_q15``,
    ``n_classes`` 0): PREDICT answers each row with its int32 fixed-point value.
    ``raw``: the model has the float entry point (float32 row -> class; True: ``tg_<name>_predict``, or
    its C name from the export's ``entry_points``): the harness serves PREDICT_RAW (capability bit 4; not with ``train``, not for a regression model).
    """
    tgt = _target(target)
    template, port_entry = _resolve_port(tgt)
    if port is not None:
        port_entry = {**port_entry, **port}
        template = port_entry["template"]
    ident = c_identifier(name)
    if ident != name:
        raise TreegenError(f"model name {name!r} is not a C identifier part (use {ident!r})")
    if ident in {f.split(".")[0] for f in HARNESS_FILES} or ident.startswith("tg_port"):
        raise TreegenError(f"model name {name!r} collides with a harness file name")
    digest = bytes.fromhex(model_hash)
    if len(digest) != 32:
        raise TreegenError("model hash must be a sha256 (64 hex digits)")
    explicit = max_payload is not None
    limits = harness_limits(n_features, n_classes, [tgt.name, __version__, variant],
                            int(max_payload) if explicit else default_max_payload(tgt), explicit=explicit)
    ctx = {
        "version": __version__,
        "max_payload": limits["max_payload"],
        "port": port_entry,
        "name": ident,
        "NAME": ident.upper(),
        "model_hash": model_hash,
        "hash_bytes": list(digest),
        "n_features": n_features,
        "n_classes": n_classes,
        "class_bytes": limits["class_bytes"],
        "max_batch": limits["max_batch"],
        "target_name": tgt.name,
        "target_name_c": c_string_body(tgt.name),
        "version_c": c_string_body(__version__),
        "variant": variant,
        "variant_c": c_string_body(variant),
        "has_train": train is not None,
        "has_proba": bool(proba),
        "value": bool(value),
        # PREDICT_RAW (the float entry point): not in training builds (their RAM and flash are the engine's)
        "has_raw": (bool(raw) and not value and train is None
                    and (limits["max_payload"] - 2) // (4 * n_features) >= 1),
        # the float entry point's C name (the export's recorded entry point; True: tg_<name>_predict)
        "raw_fn": raw if isinstance(raw, str) else f"tg_{ident}_predict",
        "f32": None if f32 is None else {**f32, "max_batch": min(
            limits["max_batch"], (limits["max_payload"] - 2) // max(4 * n_features, f32["row_bytes"]))},
        "max_batch_raw": min(limits["max_batch"], (limits["max_payload"] - 2) // (4 * n_features)),
        "max_batch_proba": min(limits["max_batch"],
                               (limits["max_payload"] - 2) // (limits["class_bytes"] + 2 * n_classes)),
    }
    out = prepare_out_dir(out_dir)
    sources = [f"{FIRMWARE_DIR}/tg_protocol.h", f"{FIRMWARE_DIR}/tg_protocol.c", f"{FIRMWARE_DIR}/tg_port.h",
               template, f"{FIRMWARE_DIR}/tg_model_glue.h.j2", f"{FIRMWARE_DIR}/tg_harness.c"]
    sources += [f"{FIRMWARE_DIR}/{inc}" for inc in port_entry.get("includes", [])]   # headers the port includes
    files = [write_generated(out / Path(t).name.removesuffix(".j2"), render(t, ctx)) for t in sources]
    if train is not None:
        from treegen.device.train_firmware import render_train_sources

        files += render_train_sources(out, train)
    return files


def f32_export_wanted(model: Model, tgt) -> bool:
    """The harness carries the model's float32 export too (PREDICT_F32) for a regression model or a
    boosted model imported with its source thresholds, on targets with IEEE-754 float arithmetic
    (not AVR) and at least 64 KiB of flash (two exports of the model)."""
    value_or_boosted = model.is_regression or model.vote == "sum"
    has_f32 = model.vote != "sum" or model.has_raw_thresholds
    return (value_or_boosted and has_f32 and bool(tgt.extra.get("ieee_float", True))
            and tgt.kind in ("host", "emulated", "board", "mcu") and tgt.flash_kb >= 64)


F32_WIDTH = {"f32": 4, "f64": 8}


def f32_spec(entry_points: list, *, header: str, class_bytes: int, n_outputs: int = 1) -> dict:
    """What PREDICT_F32 answers per row, from the float32 export's recorded entry points: the class
    (``class_bytes``, classifiers) then the raw scores (``raw_f32``/``raw_f64``: ``n_out`` values; a tree
    regressor: its ``value_f32``) as IEEE-754 bits, little endian."""
    raw = next((e for e in entry_points if e["input"] == "float32" and e["output"].startswith("raw_")), None)
    value = find_entry(entry_points, input="float32", output="value_f32")
    cls = find_entry(entry_points, input="float32", output="class")
    if raw is None and value is None:
        raise TreegenError("the float32 export records no value or raw-score entry point")
    width = F32_WIDTH[(raw or value)["output"].split("_")[1]]
    return {"header": header, "raw_fn": None if raw is None else raw["name"],
            "value_fn": None if value is None or raw is not None else value["name"],
            "class_fn": None if cls is None else cls["name"], "class_bytes": class_bytes if cls else 0,
            "width": width, "c_type": "float" if width == 4 else "double",
            "n_out": int(n_outputs) if raw is not None else 1,
            "row_bytes": (class_bytes if cls else 0) + (int(n_outputs) if raw is not None else 1) * width}


def write_harness(model: Model, out_dir, *, target, layout: str = "table", variant: str = "auto",
                  name: str = "model", max_payload: int | None = None, train=None) -> list[Path]:
    """Write the exported model and the firmware harness for ``target`` into ``out_dir``.

    ``target``: a target name or :class:`~treegen.core.targets.Target` with a ``uart`` key (the port
    kind). ``layout``/``variant``: as for :func:`treegen.emit.export.export_model` (dtype is q15: the
    protocol carries Q15 rows). ``max_payload``: the largest frame payload (default:
    :func:`default_max_payload`, raised to what the model needs). Returns the written files:
    ``<name>.h``, ``<name>.c``, then the harness files (:func:`render_harness`).

    ``train``: a :class:`treegen.device.train_firmware.TrainSpec` (``make_train_spec``) adds on-device
    training. Its RAM need (engine + row buffer + harness + stack) is checked against the target
    before anything is written: ``TreegenError("training needs N KiB RAM, <target> has M KiB")``.
    """
    from treegen.emit.export import export_model

    tgt = _target(target)
    _resolve_port(tgt)                      # fail before exporting when the target has no port
    if train is not None:
        train, max_payload = plan_train(model, tgt, train, max_payload)
    out = prepare_out_dir(out_dir)
    # export into a scratch folder (the library: <name>.h/.c, no main) and copy it beside the harness
    with tempfile.TemporaryDirectory(prefix="treegen-export-") as tmp:
        report = export_model(model, tmp, target=tgt, layout=layout, dtype="q15", variant=variant,
                              name=c_identifier(name), measure=False)
        written = [Path(shutil.copyfile(Path(tmp) / f, out / f)) for f in (f"{report.name}.h", f"{report.name}.c")]
    f32 = None
    if train is None and f32_export_wanted(model, tgt):
        with tempfile.TemporaryDirectory(prefix="treegen-export-f32-") as tmp:
            rep32 = export_model(model, tmp, target=tgt, dtype="f32", name=f"{report.name}_f32", measure=False)
            written += [Path(shutil.copyfile(Path(tmp) / f, out / f)) for f in (f"{rep32.name}.h", f"{rep32.name}.c")]
        f32 = f32_spec(rep32.entry_points, header=f"{rep32.name}.h",
                       class_bytes=1 if model.n_classes <= 255 else 2,
                       n_outputs=model.n_outputs if model.vote == "sum" else 1)
    # PREDICT_RAW serves the float entry point where the export records one (float32 rows -> class; the
    # boosted Q15 export has none): the report's entry points, not the header's text
    float_entry = find_entry(report.entry_points, input="float32", output="class")
    has_float_entry = float_entry is not None and float_entry["name"] == f"tg_{report.name}_predict"
    return written + render_harness(out, name=report.name, n_features=model.n_features, n_classes=model.n_classes,
                                    model_hash=model.hash(), target=tgt,
                                    variant=f"{report.dtype}-{report.layout}-{report.variant}",
                                    max_payload=max_payload, train=train,
                                    proba=len(model.trees) > 1 and report.vote == "soft",
                                    value=model.is_regression,
                                    raw=float_entry["name"] if has_float_entry and not model.is_regression else False,
                                    f32=f32)


def plan_train(model: Model, tgt: _targets.Target, train, max_payload: int | None):
    """(spec after the RAM check, max_payload serving the model and the training requests)."""
    from treegen.device import train_firmware as tf

    need = tf.train_payload_need(train)
    if max_payload is not None and int(max_payload) < need:
        raise TreegenError(f"max_payload {max_payload} is too small for on-device training on {train.n_attr} "
                           f"attributes (needs {need} bytes)")
    model_need = harness_limits(model.n_features, model.n_classes, [tgt.name, __version__, "q15-unrolled-scalar"],
                                0, explicit=False)["max_payload"]
    mp = max(int(max_payload) if max_payload is not None else default_max_payload(tgt), need, model_need)
    if mp > MAX_PAYLOAD_LIMIT:
        raise TreegenError(f"on-device training on {train.n_attr} attributes needs frames of {mp} bytes, "
                           f"more than LEN can hold ({MAX_PAYLOAD_LIMIT})")
    spec, _ = tf.check_ram(train, tgt, max_payload=mp, n_features=model.n_features)
    tf.check_flash(spec, tgt)
    return spec, mp


def render_protocol(out_dir, *, max_payload: int) -> list[Path]:
    """Only ``tg_protocol.h/.c`` (model-independent), e.g. for the fuzz driver."""
    if not MIN_PAYLOAD <= max_payload <= MAX_PAYLOAD_LIMIT:
        raise TreegenError(f"max_payload must be {MIN_PAYLOAD}..{MAX_PAYLOAD_LIMIT}")
    out = prepare_out_dir(out_dir)
    ctx = {"version": __version__, "max_payload": max_payload}
    return [write_generated(out / f, render(f"{FIRMWARE_DIR}/{f}", ctx)) for f in ("tg_protocol.h", "tg_protocol.c")]


# ---------------------------------------------------------------------- native build
def _host_cc(target: _targets.Target, cc: str | None) -> str:
    exe = shutil.which(cc or os.environ.get("CC") or target.cc)
    if exe is None:
        raise TreegenError(f"C compiler {cc or target.cc!r} not found (the native harness needs a host C compiler)")
    return exe


def build_native(model: Model, out_dir, *, sanitize: bool = False, cc: str | None = None, **kw) -> Path:
    """Generate the harness for the ``native`` target into ``out_dir/src`` and compile it with the host
    compiler (target cflags + strict warnings; ``sanitize=True`` adds ASan/UBSan). Returns the
    executable ``out_dir/tg_harness_native``. ``kw`` go to :func:`write_harness` (layout, variant,
    name, max_payload). A compile error raises :class:`TreegenError` naming the log file."""
    tgt = _targets.get("native")
    out = Path(out_dir)
    files = write_harness(model, out / "src", target=tgt, **kw)
    exe = out / NATIVE_EXECUTABLE
    tmp_exe = out / f".{NATIVE_EXECUTABLE}.tmp"     # renamed over exe only when the link succeeded
    # absolute paths: a relative name starting with - or @ would be an option or a response file to cc
    cmd = [_host_cc(tgt, cc), *tgt.cflags, *STRICT_CFLAGS, *(SANITIZE_CFLAGS if sanitize else ()),
           "-I", str((out / "src").absolute()), "-o", str(tmp_exe.absolute()),
           *(str(f.absolute()) for f in files if f.suffix == ".c")]
    try:
        cc_proc = processes.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise TreegenError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
    try:
        stdout, stderr = cc_proc.communicate()
    finally:
        processes.stop(cc_proc)
    proc = subprocess.CompletedProcess(cmd, cc_proc.returncode, stdout, stderr)
    if proc.returncode == 0:
        os.replace(tmp_exe, exe)
    else:
        tmp_exe.unlink(missing_ok=True)
    log = out / "build.log"
    write_generated(log, f"# build log generated by treegen\n$ {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), None) or \
            (proc.stderr.strip().splitlines() or ["?"])[0]
        raise TreegenError(f"native harness build failed ({Path(cmd[0]).name} exit {proc.returncode}): "
                           f"{first.strip()} (full log: {log})")
    return exe


class NativeDevice:
    """Run a native harness executable; ``with NativeDevice(exe) as port:`` yields its pty path.

    Starting waits (``start_timeout`` s) for the ``TG_PORT <path>`` line; if the process dies first,
    a one-line :class:`TreegenError` gives its exit status and last stderr line. On leaving, the
    process gets ``grace`` s to exit by itself (it does when the client has closed the port), then it
    is killed — always. If it exited by itself with a non-zero status (e.g. a sanitizer report) and no
    other exception is under way, a :class:`TreegenError` is raised. stderr goes to ``log_path``.
    """

    def __init__(self, executable, *, start_timeout: float = 10.0, grace: float = 1.0, env: dict | None = None):
        self.executable = Path(executable)
        self.start_timeout = float(start_timeout)
        self.grace = float(grace)
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.port: str | None = None
        self.log_path: Path | None = None
        self.killed = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> str:
        if not self.executable.is_file():
            raise TreegenError(f"native harness executable not found: {self.executable}")
        fd, log = tempfile.mkstemp(prefix=f"{self.executable.name}.", suffix=".log", dir=self.executable.parent)
        self.log_path = Path(log)
        env = dict(os.environ if self.env is None else self.env)
        try:
            self.proc = processes.spawn([str(self.executable)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=fd, env=env)
        except OSError as exc:
            raise TreegenError(f"cannot start {self.executable}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        try:
            self.port = self._read_port_line()
        except BaseException:
            self.kill()
            self.stop(check=False)
            raise
        return self.port

    def _read_port_line(self) -> str:
        proc = self.proc
        buf = b""
        deadline = time.monotonic() + self.start_timeout
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TreegenError(f"native device {self.executable.name} did not announce its port within "
                                       f"{self.start_timeout:g} s (stdout so far: {buf[:80]!r})")
                if not sel.select(remaining):
                    continue
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    rc = proc.wait(timeout=5)
                    raise TreegenError(f"native device {self.executable.name} exited with status {rc} before "
                                       f"announcing its port: {self.log_tail() or 'no message'}")
                buf += chunk
        line = buf.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        if not line.startswith("TG_PORT "):
            raise TreegenError(f"native device {self.executable.name} printed {line[:80]!r}, expected 'TG_PORT <path>'")
        return line[len("TG_PORT "):].strip()

    def kill(self) -> None:
        """Kill the process now (SIGKILL)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.killed = True
            processes.stop(self.proc, grace=0)

    def stop(self, *, check: bool = True) -> int | None:
        """Let the process exit (``grace`` s), else kill it; with ``check``, a non-zero exit of its own
        raises TreegenError. Returns the exit status."""
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=self.grace)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self.kill()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        rc = self.proc.returncode
        if check and not self.killed and rc != 0:
            raise TreegenError(f"native device {self.executable.name} exited with status {rc}: "
                               f"{self.log_tail() or 'no message'} (log: {self.log_path})")
        return rc

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def log_tail(self) -> str:
        lines = [ln.strip() for ln in self.log_text().splitlines() if ln.strip()]
        # a sanitizer report's summary line is the most telling one
        summary = [ln for ln in lines if ln.startswith("SUMMARY:") or "runtime error" in ln]
        return (summary or lines or [""])[-1][:300]

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop(check=exc_type is None)
