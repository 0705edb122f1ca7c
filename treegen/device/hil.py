"""Hardware in the loop: run a model's firmware on a device and check it against the Python models.

::

    report = run_hil(model, "qemu-m4", data=(X_raw, labels), build_dir="build/veh-qemu-m4")

The device is one of

- ``native``: the harness compiled for the host (:func:`treegen.device.firmware.build_native`), run as a
  process serving a pseudo-terminal (:class:`treegen.device.firmware.NativeDevice`);
- an emulated board (``qemu-m3``, ``qemu-m4``, ``qemu-m7``): an offline PlatformIO build
  (:mod:`treegen.device.platformio`) run by its emulator (QEMU; simavr for the AVR boards) with its UART
  on a local TCP socket (:func:`treegen.device.emulated.emulated_board`);
- a real board (``kind = "board"``): needs ``port`` (``/dev/ttyACM0``, ``COM5`` ...) and must have
  been flashed with ``treegen flash`` beforehand;
- or, for any target, a device that is already running at ``port`` (any pyserial URL or path,
  e.g. the ``socket://127.0.0.1:PORT`` printed by ``treegen flash`` for an emulated target).

Three checks, in order, each recorded in ``report["checks"]`` (name, ok, seconds, message):

``hash``         INFO: the device's model hash must equal :meth:`Model.hash` ("device runs model X,
                 expected Y" otherwise), with the same feature and class counts and target.
``predictions``  every data row, converted to Q15 with the model's own input scaling, goes to the
                 device with PREDICT; every answer must be *identical* to the Python fixed-point
                 model (:func:`treegen.emit.quantize.predict_model_q15` of the model quantised exactly
                 as the firmware's exporter does it, without data). The agreement with the float
                 model on the raw rows (:func:`treegen.core.metrics.agreement`, the one definition export
                 uses too; an imported ensemble: the source library's own arithmetic,
                 :mod:`treegen.device.library_ref`; a fraction 0..1, as every figure in JSON) and, given
                 labels, the device's and the reference's accuracy are reported, not asserted.
``bench``        BENCH on up to :data:`BENCH_ROWS` rows spread over the data, ``bench_iters`` calls
                 each: the class must be the fixed-point one and the counter unit the one INFO
                 announced; ``insn_per_inference`` is the mean count per call in ``counter_unit``
                 (``instructions`` on the emulated boards -- SysTick under ``-icount shift=0``,
                 calibrated by the firmware against a loop of known length at start-up;
                 ``cycles`` on real Cortex-M3/M4/M7 boards -- DWT CYCCNT; ``nanoseconds`` on the
                 host). It includes the benchmark loop's own few instructions per call.

Outcomes: :func:`run_hil` returns the report; ``report["ok"]`` is False when predictions differ
(``report["mismatches"] > 0``, the first few rows in ``report["mismatch_rows"]``) or a BENCH answer
is inconsistent. A timeout, a protocol error, a wrong model on the device, a build failure or a
device that dies raises :class:`HilError`, whose ``report`` holds what was done so far
(``ok`` False, ``error`` the one-line message). Processes started here (QEMU, the native harness)
are always killed before :func:`run_hil` returns or raises.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from treegen.core import metrics
from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.version import __version__
from treegen.device.build import built_model, image_target, reusable_firmware  # noqa: F401 (re-exported)
from treegen.device.protocol import CAP_F32, CAP_PROBA, CAP_RAW, BenchResult, CounterUnit, DeviceClient, DeviceInfo

DEFAULT_TIMEOUT = 10.0          # seconds per request
DEFAULT_BENCH_ITERS = 2000      # calls per BENCH row
BENCH_ROWS = 8                  # rows timed by BENCH (spread evenly over the data)
MAX_MISMATCH_ROWS = 10          # mismatching rows kept in the report
RANDOM_ROWS = 1000              # rows checked when no data is given (seeded, uniform Q15)
CHECKS = ("hash", "predictions", "bench")
#: the float-entry check: float32 inputs within this many ulps of every threshold (treegen hil --float-ulps)
FLOAT_ENTRY_ULPS = 64
MAX_FLOAT_ULPS = 4096
REPORT_FORMAT = "treegen-hil"


class HilError(TreegenError):
    """A HIL run that could not complete (timeout, protocol error, wrong model, build failure,
    device died). ``report`` is the partial report (``ok`` False)."""

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report


class WrongModel(TreegenError):
    """The device runs another model (or target) than the one under test."""


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _target(target) -> _targets.Target:
    return target if isinstance(target, _targets.Target) else _targets.get(str(target))


def counter_unit_name(unit: int) -> str:
    try:
        return CounterUnit(unit).name.lower()
    except ValueError:
        return f"unit {unit}"


# ---------------------------------------------------------------------- reference models
@dataclass(eq=False)
class Reference:
    """What the device must answer: Q15 rows, the fixed-point classes and the float classes."""
    X_q15: np.ndarray            # int64 (n, n_features), 0..32767
    fixed: np.ndarray            # int64 (n,) class indices of the Python fixed-point model
    floating: np.ndarray         # int64 (n,) class indices of the float model
    labels: np.ndarray | None    # int64 (n,) true class indices (-1 = label unknown to the model), or None
    proba: np.ndarray | None = None  # int64 (n, n_classes) PROBA answers (soft-voting ensembles), else None
    # a regression model: ``fixed`` holds the int32 fixed-point values (units of 2^-frac_bits), ``floating``
    # is None and these hold the float model's values, the frac bits and the true values
    float_values: np.ndarray | None = None
    frac_bits: int | None = None
    target_values: np.ndarray | None = None

    @property
    def is_regression(self) -> bool:
        return self.frac_bits is not None


def _class_indices(model: Model, labels, n_rows: int) -> np.ndarray:
    """The true class index of every row's label (-1: a label the model does not know)."""
    labels = list(np.asarray(labels, dtype=object).tolist())
    if len(labels) != n_rows:
        raise TreegenError(f"{len(labels)} labels for {n_rows} rows")
    known = {repr(c): i for i, c in enumerate(model.classes)}
    return np.array([known.get(repr(v), -1) for v in labels], dtype=np.int64)


def _target_values(labels, n_rows: int) -> np.ndarray:
    """A regression model's target of every row, float64."""
    try:
        y = np.asarray(np.asarray(labels, dtype=object).tolist(), dtype=np.float64)
    except (TypeError, ValueError):
        raise TreegenError("a regression model's HIL data needs numeric target values") from None
    if y.shape[0] != n_rows:
        raise TreegenError(f"{y.shape[0]} target values for {n_rows} rows")
    return y


def reference(model: Model, X_raw=None, labels=None, *, q15=None) -> Reference:
    """The expected answers for raw rows ``X_raw`` (or for Q15 rows ``q15``).

    The fixed-point model is quantised *without* data, exactly as the firmware's exporter does
    (:func:`treegen.device.firmware.write_harness`), so it is the model the device runs.
    """
    from treegen.emit.quantize import predict_model_q15, proba_q15, quantize_model, soft_sums, soft_vote

    if q15 is not None:
        Xq = np.asarray(q15, dtype=np.int64)
        if Xq.ndim != 2 or Xq.shape[1] != model.n_features:
            raise TreegenError(f"Q15 rows have shape {Xq.shape}, the model expects (n, {model.n_features})")
        if Xq.size and (Xq.min() < 0 or Xq.max() > 32767):
            raise TreegenError("Q15 rows must hold values 0..32767")
    else:
        Xq = np.asarray(model.scaling.to_q15(np.asarray(X_raw, dtype=np.float64)), dtype=np.int64)
    proba = None
    raw = None if q15 is not None else np.asarray(X_raw, dtype=np.float64)
    if model.vote == "sum":           # boosted models: the integer sums of the q15 boosted export
        return _boost_reference(model, Xq, labels, raw)
    if model.is_regression:
        return _value_reference(model, Xq, labels, raw)
    if len(model.trees) > 1 and model.vote == "soft":   # the firmware's soft vote (fixed point)
        sv = soft_vote(model)
        sums = soft_sums(quantize_model(model, None, sv.leaf_ids), sv, Xq)
        fixed = sums.argmax(axis=1).astype(np.int64)
        proba = proba_q15(sums, len(model.trees))
    else:
        fixed = np.asarray(predict_model_q15(quantize_model(model), model.n_classes, Xq), dtype=np.int64)
    floating = _float_classes(model, Xq, raw)
    y = None if labels is None else _class_indices(model, labels, Xq.shape[0])
    return Reference(Xq, fixed, floating, y, proba)


def _float_classes(model: Model, Xq: np.ndarray, raw) -> np.ndarray:
    """The float reference's class per row (:mod:`treegen.device.library_ref`: the source library's for
    an imported model) on the raw rows; without raw rows (Q15 rows only) the float model on the grid."""
    if raw is None:
        return np.asarray(model.predict_index_normalised(Xq.astype(np.float64) / 32768.0), dtype=np.int64)
    from treegen.device.library_ref import reference_classes

    return reference_classes(model, raw)


def _float_values(model: Model, Xq: np.ndarray, raw) -> np.ndarray:
    """:func:`_float_classes` for a regression model's values."""
    if raw is None:
        return model.predict_value_normalised(Xq.astype(np.float64) / 32768.0)
    from treegen.device.library_ref import reference_values

    return reference_values(model, raw)


def _boost_reference(model: Model, Xq: np.ndarray, labels, raw=None) -> Reference:
    """A boosted (vote 'sum') model: the int32 sums of :func:`treegen.emit.lower_boost.lower_boost_q15`
    (what its q15 export runs): classes from them, or the regression value in units of 2^-frac_bits."""
    from treegen.emit.lower_boost import lower_boost_q15, predict_class_q15, predict_raw_q15

    tq = lower_boost_q15(model)
    sums = predict_raw_q15(tq, Xq)
    if model.is_regression:
        floating = _float_values(model, Xq, raw)
        y = None if labels is None else _target_values(labels, Xq.shape[0])
        return Reference(Xq, sums[:, 0].astype(np.int64), None, None, None, floating, tq.frac_bits, y)
    fixed = predict_class_q15(tq, sums)
    floating = _float_classes(model, Xq, raw)
    y = None if labels is None else _class_indices(model, labels, Xq.shape[0])
    return Reference(Xq, fixed, floating, y, None)


def _value_reference(model: Model, Xq: np.ndarray, labels, raw=None) -> Reference:
    """The regression reference: the int32 values of the fixed-point model the firmware runs (the value
    table of :mod:`treegen.emit.lower_value`, trees quantised without data) and the float model's."""
    from treegen.emit.check import predict_q15
    from treegen.emit.lower_value import combine_fixed, value_vote
    from treegen.emit.quantize import quantize_model

    vv = value_vote(model)
    qtrees = quantize_model(model, None, vv.leaf_ids)
    rows = np.stack([predict_q15(qt, Xq) for qt in qtrees], axis=1)
    fixed = np.asarray(combine_fixed(vv, rows), dtype=np.int64)
    floating = _float_values(model, Xq, raw)
    y = None if labels is None else _target_values(labels, Xq.shape[0])
    return Reference(Xq, fixed, None, None, None, floating, vv.frac_bits, y)


def raw_of_q15(model: Model, Xq: np.ndarray) -> np.ndarray:
    """Raw-unit rows whose Q15 values are about ``Xq`` (the base rows of the float-entry probes when
    the check runs without data)."""
    off, sc = model.scaling.offset, model.scaling.scale
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sc != 0, off + (np.asarray(Xq, dtype=np.float64) / 32768.0) / np.where(sc != 0, sc, 1.0), off)


def check_float_entry(client, model: Model, raw_rows: np.ndarray, ulps: int = FLOAT_ENTRY_ULPS) -> dict:
    """PREDICT_RAW on float32 rows within ``ulps`` of every threshold (:mod:`treegen.device.float_probes`):
    the device's float entry point must give the Python fixed-point model's class (``to_q15`` then the
    Q15 trees; models imported with source thresholds: the source model's float32 tests)."""
    from treegen.device.float_probes import threshold_probes

    probes, n_points = threshold_probes(model, raw_rows, ulps)
    if model.has_raw_thresholds:   # the source's float32 tests (a library ensemble: its own arithmetic)
        from treegen.device.library_ref import reference_classes

        want = reference_classes(model, probes.astype(np.float64))
    else:
        want = reference(model, probes.astype(np.float64)).fixed
    got = client.predict_raw(probes) if probes.shape[0] else np.empty(0, dtype=np.int64)
    bad = np.flatnonzero(got != want)
    first = (f"row {probes[bad[0]].tolist()}, device class {int(got[bad[0]])}, expected {int(want[bad[0]])}"
             if bad.size else None)
    return {"rows": int(probes.shape[0]), "breakpoints": n_points, "ulps": int(ulps),
            "mismatches": int(bad.size), "first": first}


def random_rows(n_features: int, n_rows: int = RANDOM_ROWS, seed: int = 0) -> np.ndarray:
    """Seeded uniform Q15 rows plus the two corners (all 0, all 32767): data for a model without a dataset."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 32768, size=(max(n_rows - 2, 0), n_features), dtype=np.int64)
    corners = np.array([[0] * n_features, [32767] * n_features], dtype=np.int64)
    return np.vstack([corners, rows])[:max(n_rows, 2)]


# ---------------------------------------------------------------------- firmware
@dataclass(frozen=True)
class Firmware:
    """A built firmware: ``path`` is the ELF (emulated, board) or the host executable (native)."""
    target: str
    path: Path | None
    layout: str
    variant: str                 # resolved: scalar or dsp
    flash_bytes: int | None
    ram_bytes: int | None
    build_seconds: float
    project: Path | None = None
    reused: bool = False         # an up-to-date build found in the folder (treegen build), not rebuilt
    replaced: str | None = None  # rebuilt over a build of this other model (hash) in the same folder

    @property
    def image_sha256(self) -> str | None:
        """sha256 of the ELF's loadable contents (:mod:`treegen.device.image`), None for the host build."""
        if self.path is None or self.project is None or self.flash_bytes is None:
            return None
        from treegen.device.image import image_sha256

        return image_sha256(self.path)

    @property
    def variant_string(self) -> str:
        """The INFO variant string the firmware announces (``q15-<layout>-<variant>``)."""
        return f"q15-{self.layout}-{self.variant}"


def build_firmware(model: Model, target, build_dir, *, layout: str = "table", variant: str = "auto",
                   reuse: bool = True) -> Firmware:
    """Generate and build the harness for ``model``: native (host compiler) or an emulated board
    (offline PlatformIO), through :func:`treegen.device.build.build`. Real boards are built and
    flashed with ``treegen flash``.

    ``reuse`` (emulated boards): a complete build of the same model, layout and variant already in
    ``build_dir`` (``treegen build -o DIR``) is used as it is (``Firmware.reused``); a build of another
    model there is replaced (``Firmware.replaced`` = its model hash)."""
    from treegen.device.build import build
    from treegen.emit.export import LAYOUTS, _choice, resolve_variant

    tgt = _target(target)
    _choice(layout, LAYOUTS, "layout")
    resolved = resolve_variant(variant, tgt, "q15")
    if tgt.kind not in ("host", "emulated"):
        raise TreegenError(f"target {tgt.name!r} ({tgt.kind}) is not built by treegen hil: flash the board with "
                           f"'treegen flash MODEL --target {tgt.name} --port PORT', then pass --port")
    b = build(model, tgt, build_dir, layout=layout, variant=variant, reuse=reuse and tgt.kind == "emulated")
    path = b.path.resolve() if b.reused else b.path
    return Firmware(b.target.name, path, layout, resolved, b.flash_bytes, b.ram_bytes, b.seconds, b.project,
                    reused=b.reused, replaced=b.replaced)


def existing_firmware(model: Model, target, build_dir, *, layout: str | None, variant: str | None) -> Firmware | None:
    """A firmware already built into ``build_dir`` (``treegen build``/``flash``) for this model, if
    any: gives the flash and RAM figures when the device runs elsewhere (a board at ``port``)."""
    from treegen.device import platformio as pio

    tgt = _target(target)
    if build_dir is None or tgt.kind not in ("emulated", "board"):
        return None
    project = Path(build_dir)
    elf = pio.firmware_current(project, tgt, f"model {model.hash()}")
    if elf is None:
        return None
    try:
        size = pio.flash_size(elf, pio.toolchain_prefix(tgt))
    except TreegenError:
        return None
    return Firmware(tgt.name, elf, layout or "?", variant or "?", size.flash, size.ram, 0.0, project)


# ---------------------------------------------------------------------- devices
class Device:
    """A connected device: ``client`` (:class:`~treegen.device.protocol.DeviceClient`), ``url``, and the
    process serving it when started here (``process``: an emulator board or NativeDevice, else None)."""

    def __init__(self, client: DeviceClient, url: str, target: _targets.Target, process=None):
        self.client = client
        self.url = url
        self.target = target
        self.process = process

    def alive(self) -> bool:
        proc = self.process
        if proc is None:
            return True
        rc = proc.poll() if hasattr(proc, "poll") else proc.returncode
        return rc is None

    def diagnostics(self) -> str:
        """One line about the serving process (exit status, last log line), '' when nothing to say."""
        proc = self.process
        if proc is None:
            return ""
        if hasattr(proc, "stderr") and callable(proc.stderr):          # an emulator board
            rc = proc.poll()
            err = _one_line(proc.stderr())
            name = getattr(proc, "label", "emulator")
            if rc is not None:
                return f"{name} exited with status {rc}: {err or 'no message'}"
            return f"{name} stderr: {err}" if err else ""
        rc = proc.returncode                                             # NativeDevice
        tail = proc.log_tail()
        if rc is not None:
            return f"native harness exited with status {rc}: {tail or 'no message'} (log: {proc.log_path})"
        return f"native harness log: {proc.log_path}" if proc.log_path else ""


def _max_payload_hint(model: Model, tgt: _targets.Target) -> int:
    """The max_payload a default build of ``model`` for ``tgt`` has (flush size before INFO)."""
    from treegen.device.firmware import default_max_payload, harness_limits

    try:
        return harness_limits(model.n_features, model.n_classes,
                              [tgt.name, __version__, "q15-unrolled-scalar"], default_max_payload(tgt),
                              explicit=False)["max_payload"]
    except TreegenError:
        return 0xFFFF


#: seconds per boot PING: a lost first PING (about every second start on netduinoplus2 /
#: stm32vldiscovery) costs the first; the longer ones cover a slow boot on a loaded machine
BOOT_PING_TIMEOUTS = (0.25, 1.0, 3.0)


def drain_quiet(target) -> float:
    """Seconds of silence that end a flush on ``target``: its ``[emulator] drain_quiet`` (a slow emulated
    UART), else the protocol's default."""
    from treegen.device.protocol import DRAIN_QUIET

    return float(_target(target).emulator.get("drain_quiet", DRAIN_QUIET))


def await_boot(client: DeviceClient, *, timeouts=BOOT_PING_TIMEOUTS) -> None:
    """PING a freshly started emulated board until it answers (one try per entry of ``timeouts``).
    QEMU connects the socket before the firmware has set up its UART, and some UART models (the
    STM32 USART of netduinoplus2 / stm32vldiscovery) drop what arrives while the USART is off; a
    PING lost that way times out, the client's flush resynchronises the link, the next one answers."""
    from treegen.device.firmware import MIN_PAYLOAD
    from treegen.device.protocol import DeviceTimeout, ProtocolError

    # A lost PING leaves at most a suffix of its 12 bytes on the device (the drop is a prefix), and no
    # suffix of it holds the sync pair A5 5A: a short flush is enough. The client's default flush
    # (max_payload + 8 zeros, 64 KiB before INFO) would queue behind the next PING for seconds.
    hint, client.max_payload_hint = client.max_payload_hint, MIN_PAYLOAD
    attempt, late = 0, 0
    try:
        while True:
            try:
                client.ping(b"boot", timeout=timeouts[attempt])
                return
            except DeviceTimeout:                      # lost (or slow): the next try waits longer
                attempt += 1
                if attempt == len(timeouts):
                    raise
            except ProtocolError:
                # the late answer to an earlier PING (a slow boot on a loaded host): the device is up;
                # PING again with the same wait (the answer to this one is already on its way)
                late += 1
                if late > len(timeouts):
                    raise
    finally:
        client.max_payload_hint = hint


@contextlib.contextmanager
def open_device(target, *, firmware: Firmware | None = None, port: str | None = None,
                timeout: float = DEFAULT_TIMEOUT, model: Model | None = None):
    """``with open_device(...) as dev:`` a connected :class:`Device`.

    With ``port``: connect to that running device (a real board, or anything serving the protocol).
    Otherwise start ``firmware``: the native executable, or QEMU for an emulated target. Whatever
    was started is stopped when the block ends, also on errors. A native harness that exited by
    itself with a non-zero status (e.g. a sanitizer report) raises on a clean exit of the block.
    """
    tgt = _target(target)
    hint = _max_payload_hint(model, tgt) if model is not None else None
    if port is not None:
        client = DeviceClient.open(str(port), timeout=timeout, max_payload=hint)
        try:
            try:
                client.port.reset_input_buffer()          # stale bytes of an earlier session
            except (AttributeError, OSError, ValueError):
                pass
            yield Device(client, str(port), tgt)
        finally:
            client.close()
        return
    if firmware is None or firmware.path is None:
        raise TreegenError(f"no firmware to run for target {tgt.name!r} and no --port")
    if tgt.kind == "host":
        from treegen.device.firmware import NativeDevice

        proc = NativeDevice(firmware.path)
        path = proc.start()
        ok = False
        try:
            client = DeviceClient.open(path, timeout=timeout, max_payload=hint)
            try:
                yield Device(client, path, tgt, proc)
            finally:
                client.close()
            ok = True
        finally:
            if ok:
                proc.stop(check=True)
            else:
                proc.kill()
                proc.stop(check=False)
        return
    if tgt.kind == "emulated":
        from treegen.device.emulated import emulated_board

        board = emulated_board(tgt, firmware.path)
        board.start()
        try:
            client = DeviceClient.open(board.url, timeout=timeout, max_payload=hint)
            client.drain_quiet = drain_quiet(tgt)
            try:
                await_boot(client)
                yield Device(client, board.url, tgt, board)
            finally:
                client.close()
        finally:
            board.close()
        return
    raise TreegenError(f"target {tgt.name!r} is a real board: pass the serial port it is connected to "
                       "(e.g. --port /dev/ttyACM0) after flashing it with 'treegen flash'")


# ---------------------------------------------------------------------- checks
def check_identity(info: DeviceInfo, model: Model, target: _targets.Target | None = None,
                   variant_string: str | None = None) -> None:
    """Raise :class:`WrongModel` unless the device runs ``model`` (hash, shape) for ``target``."""
    expected = model.hash()
    if info.model_hash != expected:
        raise WrongModel(f"device runs model {info.model_hash[:16]}, expected {expected[:16]}")
    if (info.n_features, info.n_classes) != (model.n_features, model.n_classes):
        raise WrongModel(f"device model has {info.n_features} features and {info.n_classes} classes, expected "
                         f"{model.n_features} and {model.n_classes}")
    if target is not None and info.target != target.name:
        raise WrongModel(f"device is built for target {info.target!r}, expected {target.name!r}")
    if variant_string is not None and info.variant != variant_string:
        raise WrongModel(f"device runs variant {info.variant!r}, expected {variant_string!r}")


def predict_rows(client: DeviceClient, X_q15: np.ndarray, *, progress=None, chunk_batches: int = 8) -> np.ndarray:
    """PREDICT every row (batches of ``max_batch``); ``progress(n_done)`` after each chunk."""
    info = client.info()
    step = max(1, info.max_batch * chunk_batches)
    out = np.empty(X_q15.shape[0], dtype=np.int64)
    for start in range(0, X_q15.shape[0], step):
        out[start:start + step] = client.predict(X_q15[start:start + step])
        if progress is not None:
            progress(min(start + step, X_q15.shape[0]))
    return out


def bench_rows(n_rows: int, k: int = BENCH_ROWS) -> list[int]:
    """Up to ``k`` row indices spread evenly over ``n_rows`` rows."""
    if n_rows <= 0:
        return []
    return sorted({int(i) for i in np.linspace(0, n_rows - 1, min(k, n_rows)).round()})


def mismatch_rows(ref: Reference, got: np.ndarray, model: Model, limit: int = MAX_MISMATCH_ROWS) -> list[dict]:
    """The first ``limit`` rows whose device class differs from the fixed-point class."""
    out = []
    for i in np.flatnonzero(got != ref.fixed)[:limit]:
        i = int(i)
        if ref.is_regression:
            out.append({"row": i, "device": int(got[i]), "fixed_point": int(ref.fixed[i]),
                        "float": float(ref.float_values[i]), "q15": [int(v) for v in ref.X_q15[i]]})
            continue
        out.append({"row": i, "device": int(got[i]), "fixed_point": int(ref.fixed[i]), "float": int(ref.floating[i]),
                    "device_label": _label(model, got[i]), "fixed_point_label": _label(model, ref.fixed[i]),
                    "q15": [int(v) for v in ref.X_q15[i]]})
    return out


def _label(model: Model, index) -> object:
    index = int(index)
    return model.classes[index] if 0 <= index < model.n_classes else None


# ---------------------------------------------------------------------- the run
def _model_summary(model: Model) -> dict:
    """What the report names the model by: its algorithm and size (the hash identifies it)."""
    leaves = sum(t.n_leaves for t in model.trees)
    size = f"{leaves} leaves" if len(model.trees) == 1 else f"{len(model.trees)} trees, {leaves} leaves"
    return {"algorithm": str((model.metadata or {}).get("algorithm") or "model"), "size": size}


def _new_report(model: Model, tgt: _targets.Target, port: str | None) -> dict:
    return {
        "format": REPORT_FORMAT, "treegen_version": __version__, "ok": False, "error": None,
        "target": tgt.name, "target_kind": tgt.kind, "port": port, "model_hash": model.hash(),
        "model_summary": _model_summary(model),
        "layout": None, "variant": None, "rows": 0, "mismatches": None, "mismatch_rows": [],
        "float_agreement": None, "float_reference": None, "float_accuracy": None, "quantisation_rows": None,
        "float_entry": None, "float32": None, "accuracy": None, "rows_per_s": None, "insn_per_inference": None,
        "counter_unit": None, "bench": None, "flash_bytes": None, "ram_bytes": None, "device": None,
        "data": None, "firmware_reused": False, "firmware_replaced": None, "seconds": {},
        "checks": [{"name": c, "ok": None, "seconds": 0.0, "message": "not run"} for c in CHECKS],
    }


def _set_check(report: dict, name: str, ok: bool, seconds: float, message: str) -> None:
    for c in report["checks"]:
        if c["name"] == name:
            c.update(ok=ok, seconds=round(seconds, 4), message=message)


def run_hil(model: Model, target, *, port: str | None = None, build_dir=None, **kw) -> dict:
    """Check ``model`` on a device for ``target`` (see :func:`_run_hil` for the parameters). When the
    firmware is built here (no ``port``), the build folder is locked for the build and the run
    (:mod:`treegen.device.buildfolder`): concurrent runs on one folder take turns."""
    if port is None and build_dir is not None:
        from treegen.device import buildfolder

        with buildfolder.locked(build_dir):
            return _run_hil(model, target, port=port, build_dir=build_dir, **kw)
    return _run_hil(model, target, port=port, build_dir=build_dir, **kw)


def _run_hil(model: Model, target, *, port: str | None = None, data=None, layout: str | None = None,
            variant: str | None = None, build_dir=None, timeout: float = DEFAULT_TIMEOUT,
            bench_iters: int = DEFAULT_BENCH_ITERS, float_ulps: int = 0, progress=None) -> dict:
    """Check ``model`` on a device for ``target``; returns the report (see the module docstring).

    ``port``: use the device running there (required for real boards) instead of building and
    starting one. ``data``: ``(X_raw, labels or None)``, the rows to stream (default: 1000 seeded
    random Q15 rows and the two corners). ``layout``/``variant``: what to build (default table/auto);
    with ``port``, when given, the device's INFO variant must match. ``build_dir``: where the
    firmware is built (required unless ``port``). ``timeout``: seconds per request.
    ``bench_iters``: calls per BENCH row (0 = no BENCH). ``float_ulps``: check the float entry point
    (PREDICT_RAW) on the float32 inputs within that many ulps of every threshold
    (:func:`check_float_entry`; 0 = not checked). ``progress(done, total)`` is called while the rows
    stream.
    """
    tgt = _target(target)
    if not 0 <= int(bench_iters) <= 0xFFFF:
        raise TreegenError(f"bench_iters must be 0..65535, got {bench_iters}")
    if not 0 <= int(float_ulps) <= MAX_FLOAT_ULPS:
        raise TreegenError(f"float_ulps must be 0..{MAX_FLOAT_ULPS}, got {float_ulps}")
    if timeout <= 0:
        raise TreegenError("timeout must be > 0 seconds")
    if port is None and tgt.kind == "board":
        from treegen.device.platformio import emulated_stand_in

        twin = emulated_stand_in(tgt)
        raise TreegenError(f"target {tgt.name!r} is a real board: give its serial port (--port /dev/ttyACM0 ...) "
                           f"after 'treegen flash MODEL --target {tgt.name}'"
                           + (f", or run on its emulated stand-in (--target {twin})" if twin else ""))
    if port is None and build_dir is None:
        raise TreegenError("run_hil needs build_dir (where to build the firmware) or port (a running device)")
    missing_rows = 0
    if data is None:
        ref = reference(model, q15=random_rows(model.n_features))
        data_note = f"{ref.X_q15.shape[0]} seeded random Q15 rows"
        raw_rows = raw_of_q15(model, ref.X_q15)
    else:
        X_raw = np.asarray(data[0], dtype=np.float64)
        labels = data[1] if len(data) > 1 else None
        # missing (NaN) or infinite cells: only a model that routes them takes them (its library's default
        # directions); the Q15 entry has no NaN, so those rows are checked through the float32 export
        grid = np.all(np.isfinite(X_raw), axis=1) if X_raw.ndim == 2 else np.ones(len(X_raw), dtype=bool)
        if not grid.all() and not model.handles_missing:
            raise TreegenError(f"{int(np.count_nonzero(~grid))} data rows hold NaN or infinite values, and the "
                               "model has no direction for missing values")
        ref = reference(model, X_raw[grid], None if labels is None else np.asarray(labels, dtype=object)[grid])
        missing_rows = int(np.count_nonzero(~grid))
        data_note = f"{ref.X_q15.shape[0]} rows" + (
            f" (+ {missing_rows} with missing or infinite values: float32 export only)" if missing_rows else "")
        raw_rows = X_raw
    if ref.X_q15.shape[0] == 0 and not missing_rows:
        raise TreegenError("no data rows to check")
    from treegen.device.library_ref import reference_name

    reference_label = reference_name(model) if data is not None else "the float model on the Q15 grid"

    report = _new_report(model, tgt, port)
    report["data"] = data_note
    report["rows"] = int(ref.X_q15.shape[0])
    report["rows_missing"] = missing_rows
    t_start = time.perf_counter()
    current = "build"
    device: Device | None = None
    try:
        # ---- firmware
        fw = None
        if port is None:
            fw = build_firmware(model, tgt, build_dir, layout=layout or "table", variant=variant or "auto")
            if fw.reused:
                report["firmware_reused"] = True
            else:
                report["seconds"]["build"] = round(fw.build_seconds, 3)
                if fw.replaced:
                    report["firmware_replaced"] = fw.replaced
        else:
            fw = existing_firmware(model, tgt, build_dir, layout=layout, variant=variant)
        if fw is not None:
            report["flash_bytes"], report["ram_bytes"] = fw.flash_bytes, fw.ram_bytes
            report["firmware"] = str(fw.path) if fw.path else None
            report["image"] = fw.target
            report["image_sha256"] = fw.image_sha256
        expected_variant = fw.variant_string if port is None else None
        wanted = {}                      # with port: the parts of the variant string that were asked for
        if port is not None and layout is not None:
            wanted[1] = layout
        if port is not None and variant is not None:
            from treegen.emit.export import resolve_variant
            wanted[2] = resolve_variant(variant, tgt, "q15")

        # ---- device
        current = "start"
        t0 = time.perf_counter()
        with open_device(tgt, firmware=fw if port is None else None, port=port, timeout=timeout,
                         model=model) as device:
            report["port"] = device.url
            current = "hash"
            info = device.client.info()
            report["seconds"]["start"] = round(time.perf_counter() - t0, 3)
            report["device"] = {"target": info.target, "treegen_version": info.treegen_version,
                                "variant": info.variant, "max_payload": info.max_payload,
                                "max_batch": info.max_batch, "capabilities": info.capabilities,
                                "protocol_version": info.protocol_version}
            # layout and variant as the user types them (--layout table, --variant dsp); the firmware's
            # own INFO string (e.g. q15-table-dsp) stays in report["device"]["variant"]
            fw_parts = info.variant.split("-")
            report["layout"] = fw_parts[1] if len(fw_parts) >= 3 else None
            report["variant"] = fw_parts[2] if len(fw_parts) >= 3 else info.variant
            report["counter_unit"] = counter_unit_name(info.counter_unit)
            check_identity(info, model, image_target(tgt), expected_variant)
            parts = info.variant.split("-")
            for i, value in wanted.items():
                if len(parts) <= i or parts[i] != value:
                    what = ("layout", "variant")[i - 1]
                    runs = (f"layout {parts[1]!r}, variant {parts[2]!r}" if len(parts) >= 3
                            else f"firmware variant {info.variant!r}")
                    raise WrongModel(f"device runs {runs}, expected {what} {value!r}")
            _set_check(report, "hash", True, time.perf_counter() - t0, f"device runs model {info.model_hash[:16]}")

            # ---- predictions
            current = "predictions"
            t0 = time.perf_counter()
            n = ref.X_q15.shape[0]
            got = predict_rows(device.client, ref.X_q15,
                               progress=None if progress is None else (lambda done: progress(done, n)))
            seconds = time.perf_counter() - t0
            report["seconds"]["predict"] = round(seconds, 3)
            report["rows_per_s"] = round(n / seconds, 1) if seconds > 0 and n else None
            mism = int(np.count_nonzero(got != ref.fixed))
            report["mismatches"] = mism
            report["mismatch_rows"] = mismatch_rows(ref, got, model)
            report["float_reference"] = reference_label
            if ref.is_regression:
                _value_figures(report, ref, got)
            elif n:
                report["float_agreement"] = round(metrics.agreement(got, ref.floating), 6)
            if ref.labels is not None and n:
                report["accuracy"] = round(float(np.mean(got == ref.labels)), 6)
                report["float_accuracy"] = round(float(np.mean(ref.floating == ref.labels)), 6)
                report["quantisation_rows"] = int(np.count_nonzero(ref.fixed != ref.floating))
            if mism:
                first = report["mismatch_rows"][0]
                what = "value" if ref.is_regression else "class"
                msg = (f"{mism} of {n} device predictions differ from the fixed-point model (first: row "
                       f"{first['row']}, device {what} {first['device']}, expected {first['fixed_point']})")
            elif ref.is_regression:
                diff = report["float_difference"]
                msg = (f"{n} rows: int32 values identical to the fixed-point model (units of 2^-{ref.frac_bits}); "
                       f"difference from the float model RMSE {diff['rmse']:.3g}, max {diff['max_abs']:.3g}")
            elif n:
                msg = (f"{n} rows identical to the fixed-point model; float agreement "
                       f"{100 * report['float_agreement']:.2f} % (with {reference_label}, raw rows)")
            else:
                msg = "no rows for the Q15 entry"
            if missing_rows:
                msg = (f"{msg} (+ {missing_rows} rows with missing or infinite values: the Q15 entry takes none; "
                       "checked through the float32 export)" if n else
                       f"every one of the {missing_rows} rows holds a missing or infinite value: the Q15 entry takes "
                       "none; checked through the float32 export")
            _set_check(report, "predictions", mism == 0, seconds, msg)

            # ---- probabilities (soft-voting ensembles: PROBA)
            if ref.proba is not None and info.capabilities & CAP_PROBA:
                current = "proba"
                report["checks"].append({"name": "proba", "ok": None, "seconds": 0.0, "message": "not run"})
                t0 = time.perf_counter()
                p_cls, p_val = device.client.predict_proba(ref.X_q15)
                bad = np.flatnonzero((p_cls != ref.fixed) | np.any(p_val != ref.proba, axis=1))
                report["proba_mismatches"] = int(bad.size)
                msg = (f"{bad.size} of {n} rows: device probabilities differ from the fixed-point model (first: "
                       f"row {int(bad[0])}, device {p_val[bad[0]].tolist()}, expected {ref.proba[bad[0]].tolist()})"
                       if bad.size else f"{n} rows: classes and probabilities identical to the fixed-point model")
                _set_check(report, "proba", bad.size == 0, time.perf_counter() - t0, msg)

            # ---- the float32 export (PREDICT_F32): regression values / boosted raw scores, bit for bit
            f32_model = model.is_regression or model.vote == "sum"
            if info.capabilities & CAP_F32 and f32_model:
                from treegen.device import hil_f32

                current = "float32"
                report["checks"].append({"name": "float32", "ok": None, "seconds": 0.0, "message": "not run"})
                t0 = time.perf_counter()
                report["float32"] = hil_f32.check_float32(device.client, model, raw_rows, int(float_ulps))
                _set_check(report, "float32", report["float32"]["mismatches"] == 0, time.perf_counter() - t0,
                           hil_f32.message(report["float32"]))
            elif missing_rows:
                raise TreegenError(f"{missing_rows} data rows hold missing or infinite values, which only the float32 "
                                   "export takes, and the device does not serve PREDICT_F32 (a target without "
                                   "IEEE-754 float or under 64 KiB flash, or a model without source thresholds)")
            elif float_ulps > 0 and f32_model:
                raise TreegenError("the device does not serve PREDICT_F32 (no float32 export in its firmware: a "
                                   "target without IEEE-754 float or under 64 KiB flash, a model without source "
                                   "thresholds, or firmware built before this check): its float32 export cannot "
                                   "be checked")

            # ---- the float entry point (PREDICT_RAW): float32 inputs around every threshold
            if float_ulps > 0 and not f32_model:
                current = "float entry"
                report["checks"].append({"name": "float entry", "ok": None, "seconds": 0.0, "message": "not run"})
                if not info.capabilities & CAP_RAW:
                    raise TreegenError("the device does not serve PREDICT_RAW (an on-device training build, or "
                                       "firmware built before the float-entry check: build it again, e.g. "
                                       "into a new -o folder): its float entry cannot be checked")
                t0 = time.perf_counter()
                report["float_entry"] = check_float_entry(device.client, model, raw_rows[np.all(np.isfinite(
                    raw_rows), axis=1)] if missing_rows else raw_rows, int(float_ulps))
                fe = report["float_entry"]
                msg = (f"{fe['mismatches']} of {fe['rows']} float32 rows differ from the fixed-point model (first: "
                       f"{fe['first']})" if fe["mismatches"] else
                       f"{fe['rows']} float32 rows (+-{fe['ulps']} ulps around {fe['breakpoints']} thresholds) "
                       "identical to the fixed-point model")
                _set_check(report, "float entry", fe["mismatches"] == 0, time.perf_counter() - t0, msg)

            # ---- bench
            current = "bench"
            if bench_iters > 0 and n:
                t0 = time.perf_counter()
                rows = bench_rows(n)
                results: list[tuple[int, BenchResult]] = [(i, device.client.bench(ref.X_q15[i], int(bench_iters)))
                                                          for i in rows]
                problems = []
                for i, r in results:
                    if r.unit != info.counter_unit:
                        problems.append(f"row {i}: BENCH unit {r.unit_name}, INFO said {report['counter_unit']}")
                    want = int(ref.fixed[i]) & 0xFFFF if ref.is_regression else int(ref.fixed[i])  # BENCH: u16
                    if r.cls != want:
                        problems.append(f"row {i}: BENCH class {r.cls}, expected {want}")
                    if r.total == 0 or r.total >= 0xFFFFFFFF:
                        problems.append(f"row {i}: BENCH total {r.total} (zero or saturated)")
                per_call = [r.total / r.n_iter for _, r in results]
                report["insn_per_inference"] = round(float(np.mean(per_call)), 2)
                report["bench"] = {"n_iter": int(bench_iters), "unit": report["counter_unit"],
                                   "mean": report["insn_per_inference"], "min": round(min(per_call), 2),
                                   "max": round(max(per_call), 2),
                                   "rows": [{"row": i, "per_call": round(r.total / r.n_iter, 3), "total": r.total,
                                             "class": r.cls} for i, r in results]}
                seconds = time.perf_counter() - t0
                report["seconds"]["bench"] = round(seconds, 3)
                msg = "; ".join(problems) if problems else \
                    (f"{report['insn_per_inference']:g} {report['counter_unit']} per inference "
                     f"({len(rows)} rows x {bench_iters} calls)")
                _set_check(report, "bench", not problems, seconds, msg)
            else:
                _set_check(report, "bench", True, 0.0, "skipped (bench_iters 0)" if not bench_iters
                           else "skipped (no rows for the Q15 entry)")
            current = "stop"
        report["ok"] = all(c["ok"] for c in report["checks"])
    except (TreegenError, OSError) as exc:
        message = _one_line(exc if isinstance(exc, TreegenError) else f"{exc.strerror or exc}")
        if device is not None and device.process is not None and not device.alive():
            diag = device.diagnostics()
            if diag and diag not in message:
                message = f"{message} ({diag})"
        report["ok"] = False
        report["error"] = message
        if current in CHECKS or current in ("proba", "float entry"):
            _set_check(report, current, False, 0.0, message)
        for c in report["checks"]:
            if c["ok"] is None:
                c.update(ok=False, message=f"not run: {message}")
        report["seconds"]["total"] = round(time.perf_counter() - t_start, 3)
        raise HilError(message, report) from None
    report["seconds"]["total"] = round(time.perf_counter() - t_start, 3)
    return report


def _value_figures(report: dict, ref: Reference, got: np.ndarray) -> None:
    """A regression run's figures: the device values against the float model (RMSE, largest absolute
    difference) and, with true values, the device's RMSE."""
    values = np.ldexp(got.astype(np.float64), -ref.frac_bits)
    d = metrics.value_difference(values, ref.float_values)
    report["value_frac_bits"] = ref.frac_bits
    report["float_difference"] = {"rmse": d["rmse"], "max_abs": d["max_abs"]}
    if ref.target_values is not None and values.size:
        report["rmse"] = metrics.regression_scores(ref.target_values, values)["rmse"]
        report["float_rmse"] = metrics.regression_scores(ref.target_values, ref.float_values)["rmse"]


def summary(report: dict) -> str:
    """One line: PASS/FAIL and the key figures of a report."""
    if report.get("error"):
        return f"FAIL: {report['error']}"
    parts = [f"{report['rows']} rows, {report['mismatches']} mismatches"]
    if report.get("float_agreement") is not None:
        parts.append(f"float agreement {100 * report['float_agreement']:.2f} %")
    if report.get("float_difference") is not None:
        d = report["float_difference"]
        parts.append(f"difference from the float model RMSE {d['rmse']:.3g}, max {d['max_abs']:.3g}")
    if report.get("rmse") is not None:
        parts.append(f"RMSE {report['rmse']:.6g}")
    if report.get("insn_per_inference") is not None:
        parts.append(f"{report['insn_per_inference']:g} {report['counter_unit']}/inference")
    bad = [c for c in report["checks"] if c["ok"] is False]
    head = "PASS" if report.get("ok") else "FAIL"
    if bad:
        parts.append("; ".join(f"{c['name']}: {c['message']}" for c in bad))
    return f"{head}: " + ", ".join(parts)


# ---------------------------------------------------------------------- JUnit
def junit_xml(report: dict, *, suite: str = "treegen.hil") -> str:
    """JUnit XML of a report: one testcase per check (hash, predictions, bench)."""
    from xml.sax.saxutils import escape, quoteattr

    checks = report["checks"]
    failures = sum(1 for c in checks if c["ok"] is False and not c["message"].startswith("not run"))
    errors = sum(1 for c in checks if c["ok"] is False and c["message"].startswith("not run"))
    skipped = sum(1 for c in checks if c["ok"] is None)
    total = sum(c["seconds"] for c in checks)
    cls = f"{suite}.{report['target']}"
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             f'<testsuites><testsuite name={quoteattr(suite)} tests="{len(checks)}" failures="{failures}" '
             f'errors="{errors}" skipped="{skipped}" time="{total:.3f}">',
             "<properties>"]
    for key in ("target", "model_hash", "variant", "port", "rows", "mismatches", "float_agreement", "rows_per_s",
                "insn_per_inference", "counter_unit", "flash_bytes", "ram_bytes"):
        lines.append(f"<property name={quoteattr(key)} value={quoteattr(str(report.get(key)))}/>")
    lines.append("</properties>")
    for c in checks:
        lines.append(f'<testcase classname={quoteattr(cls)} name={quoteattr(c["name"])} time="{c["seconds"]:.3f}">')
        if c["ok"] is False:
            tag = "error" if c["message"].startswith("not run") else "failure"
            lines.append(f"<{tag} message={quoteattr(c['message'])}>{escape(c['message'])}</{tag}>")
        elif c["ok"] is None:
            lines.append(f"<skipped message={quoteattr(c['message'])}/>")
        else:
            lines.append(f"<system-out>{escape(c['message'])}</system-out>")
        lines.append("</testcase>")
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"
