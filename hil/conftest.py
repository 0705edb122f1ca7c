"""Fixtures of the HIL suite: model -> firmware -> device -> dut (a connected DeviceClient).

Options (``pytest hil --help``, group "hil"):

``--hil-target T``   target(s) to test (repeat or comma-separate); default: native, qemu-m3, qemu-m4,
                     qemu-m7, qemu-m33 and qemu-m55, each test parametrised over them. In the default
                     run the newer cores (qemu-m33, qemu-m55) get the core device checks
                     (test_device.py) and the variant comparison on the first case only (EFTI on
                     veh, an 18-attribute oblique tree), to keep CI time in check; naming them
                     with --hil-target runs the whole suite there.
``--hil-port URL``   test the device already running at this serial port / pyserial URL (a real
                     board flashed with ``treegen flash``, or ``socket://...`` of ``treegen flash``
                     for an emulated target); needs exactly one ``--hil-target``. Nothing is built.
``--hil-model FILE`` the model under test (with ``--hil-port``: the model flashed on the board).
                     Default: the suite's models (``hil/models.py``: EFTI and CART on veh, seg and
                     pid, fixed seeds); with ``--hil-port`` the device's INFO hash picks the one it runs.
``--hil-data CSV``   rows for ``--hil-model`` (default: its dataset if it is a shared one, else
                     seeded random Q15 rows).
``--hil-timeout S``  seconds per request (default 20).

Each emulated or native firmware is built once per session (offline PlatformIO / host compiler).
Every started process (QEMU, native harness) and every opened port is closed in ``finally``, and a
device that cannot be reached, built or started makes the test FAIL, never skip. A failing test's
report carries a "hil device" section: the URL, and QEMU's stderr or the native harness log.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from treegen.core import targets as tg_targets
from treegen.core.errors import TreegenError
from treegen.device.protocol import CounterUnit, DeviceClient

from . import models as hil_models

DEFAULT_TARGETS = ("native", "qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55")
#: default targets that run only the core device checks (+ test_variants.py) on the first case
#: (EFTI on veh: an 18-attribute oblique tree) unless named with --hil-target
CORE_ONLY_TARGETS = ("qemu-m33", "qemu-m55")
CORE_ONLY_MODULES = ("test_device.py", "test_variants.py")
TOOLS = {"emulated": ("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm"), "host": ("cc",)}


# ---------------------------------------------------------------------- options
def pytest_addoption(parser):
    g = parser.getgroup("hil", "treegen hardware in the loop (hil/)")
    g.addoption("--hil-target", action="append", default=None, metavar="T",
                help="target(s) to test, repeatable or comma-separated (default: native, qemu-m3, qemu-m4, qemu-m7, "
                     "qemu-m33, qemu-m55)")
    g.addoption("--hil-port", default=None, metavar="URL",
                help="use the device running at this port/URL (e.g. /dev/ttyACM0); needs one --hil-target")
    g.addoption("--hil-model", default=None, metavar="FILE",
                help="model file under test (default: the suite's EFTI/CART models; with --hil-port: "
                     "recognised by the device's model hash)")
    g.addoption("--hil-data", default=None, metavar="CSV", help="rows for --hil-model")
    g.addoption("--hil-timeout", type=float, default=20.0, metavar="S", help="seconds per request (default 20)")


@dataclass(frozen=True)
class HilOptions:
    targets: tuple
    port: str | None
    model: str | None
    data: str | None
    timeout: float
    default_targets: bool = False      # no --hil-target given: CORE_ONLY_TARGETS run the core checks

    @property
    def port_mode(self) -> bool:
        return self.port is not None


def _options(config) -> HilOptions:
    cached = getattr(config, "_hil_options", None)
    if cached is not None:
        return cached
    raw = config.getoption("--hil-target") or []
    targets = tuple(t.strip() for item in raw for t in item.split(",") if t.strip()) or DEFAULT_TARGETS
    port = config.getoption("--hil-port")
    if port is not None and len(targets) != 1:
        raise pytest.UsageError("--hil-port needs exactly one --hil-target (the target the device was built for)")
    for t in targets:
        try:
            tg_targets.get(t)
        except TreegenError as exc:
            raise pytest.UsageError(f"--hil-target: {exc}") from None
    if config.getoption("--hil-data") and not config.getoption("--hil-model"):
        raise pytest.UsageError("--hil-data needs --hil-model")
    opts = HilOptions(targets, port, config.getoption("--hil-model"), config.getoption("--hil-data"),
                      float(config.getoption("--hil-timeout")), default_targets=not raw)
    config._hil_options = opts
    return opts


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hil_only(targets=None, algos=None, first_case=False, build=False): run a HIL test only for "
                   "these targets / algorithms / the first model case / when the suite builds the firmware "
                   "itself (not with --hil-port); other combinations are deselected, not skipped")


def _case_names(opts: HilOptions) -> list[str]:
    if opts.model:
        return [f"file-{Path(opts.model).stem}"]
    if opts.port_mode:
        return ["device-model"]
    return list(hil_models.CASES)


def pytest_generate_tests(metafunc):
    if "hil_target" not in metafunc.fixturenames and "case_name" not in metafunc.fixturenames:
        return
    opts = _options(metafunc.config)
    if "hil_target" in metafunc.fixturenames:
        metafunc.parametrize("hil_target", list(opts.targets), scope="session")
    if "case_name" in metafunc.fixturenames:
        metafunc.parametrize("case_name", _case_names(opts), scope="session")


def _case_algo(name: str) -> str:
    return hil_models.CASES[name][0] if name in hil_models.CASES else "any"


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    keep, drop = [], []
    for item in items:
        if here not in Path(item.path).resolve().parents:
            keep.append(item)
            continue
        marker = item.get_closest_marker("hil_only")
        params = getattr(item, "callspec", None)
        params = params.params if params is not None else {}
        ok = True
        opts = _options(config)
        if opts.default_targets and params.get("hil_target") in CORE_ONLY_TARGETS:
            if Path(item.path).name not in CORE_ONLY_MODULES or params.get("case_name") != _case_names(opts)[0]:
                ok = False
        if marker is not None:
            opts = _options(config)
            kw = marker.kwargs
            if kw.get("targets") and params.get("hil_target") not in kw["targets"]:
                ok = False
            if kw.get("algos") and _case_algo(params.get("case_name", "")) not in kw["algos"]:
                ok = False
            if kw.get("first_case") and params.get("case_name") != _case_names(opts)[0]:
                ok = False
            if kw.get("build") and opts.port_mode:
                ok = False
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# ---------------------------------------------------------------------- failure reports
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    dev = getattr(item, "_hil_device", None)
    if rep.failed and dev is not None:
        rep.sections.append(("hil device", dev.describe()))
    return rep


# ---------------------------------------------------------------------- model
@pytest.fixture(scope="session")
def hil_options(request) -> HilOptions:
    return _options(request.config)


class _Cases:
    """The model cases, fitted on first use (once per session)."""

    def __init__(self, opts: HilOptions):
        self.opts = opts
        self._cache: dict = {}
        self._device_case = None

    def get(self, name: str) -> hil_models.Case:
        if name not in self._cache:
            try:
                if name.startswith("file-"):
                    self._cache[name] = hil_models.file_case(self.opts.model, self.opts.data)
                elif name == "device-model":
                    self._cache[name] = self._identify()
                else:
                    self._cache[name] = hil_models.fit_case(name)
            except (TreegenError, OSError) as exc:
                self._cache[name] = f"model case {name}: {' '.join(str(exc).split())}"
        value = self._cache[name]
        if isinstance(value, str):                       # a failure, remembered: fail every test fast
            pytest.fail(value, pytrace=False)
        return value

    def _identify(self) -> hil_models.Case:
        """The default case whose model the device at --hil-port runs (by INFO hash)."""
        opts = self.opts
        try:
            with contextlib.closing(DeviceClient.open(opts.port, timeout=opts.timeout)) as client:
                info = client.info()
        except TreegenError as exc:
            raise TreegenError(f"cannot reach the device at --hil-port {opts.port}: {exc}") from None
        known = []
        for name in hil_models.CASES:
            case = self.get(name)
            if case.model.hash() == info.model_hash:
                return case
            known.append(f"{name} {case.model.hash()[:16]}")
        raise TreegenError(f"the device at {opts.port} runs model {info.model_hash[:16]}, which is none of the "
                           f"suite's models ({', '.join(known)}); pass the flashed model with --hil-model FILE, "
                           "or flash one written by 'python -m hil.models -o DIR'")


@pytest.fixture(scope="session")
def hil_cases(hil_options) -> _Cases:
    return _Cases(hil_options)


@pytest.fixture
def target(hil_target) -> tg_targets.Target:
    return tg_targets.get(hil_target)


@pytest.fixture
def case(case_name, hil_cases) -> hil_models.Case:
    """The model under test with its rows (``case.ref``: Q15 rows, fixed-point and float classes)."""
    return hil_cases.get(case_name)


# ---------------------------------------------------------------------- firmware
def _require_tools(kind: str) -> None:
    import shutil

    missing = [t for t in TOOLS.get(kind, ()) if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: install the Debian packages gcc-arm-none-eabi "
                    "libnewlib-arm-none-eabi qemu-system-arm gcc (bash scripts/setup.sh)", pytrace=False)


class _Firmwares:
    """Firmware builds, once per (target, model, layout, variant) and session."""

    def __init__(self, root: Path):
        self.root = root
        self._cache: dict = {}

    def get(self, target: tg_targets.Target, case: hil_models.Case, *, layout: str | None = None,
            variant: str = "auto"):
        from treegen.device import hil
        from treegen.emit.export import resolve_variant

        layout = layout or case.layout
        try:
            variant = resolve_variant(variant, target, "q15")     # auto -> dsp/scalar: one build for both
        except TreegenError as exc:
            variant = f"{variant} on {target.name}: {exc}"       # a failure (below, outside the except)
        if ":" in variant:
            pytest.fail(variant, pytrace=False)
        key = (target.name, case.model.hash(), layout, variant)
        if key not in self._cache:
            if target.kind not in ("host", "emulated"):
                pytest.fail(f"target {target.name} is a real board ({target.kind}): flash it with 'treegen flash' "
                            f"and pass --hil-port (e.g. --hil-port /dev/ttyACM0)", pytrace=False)
            _require_tools(target.kind)
            out = self.root / f"{target.name}-{case.name}-{layout}-{variant}"
            try:
                self._cache[key] = hil.build_firmware(case.model, target, out, layout=layout, variant=variant)
            except TreegenError as exc:
                self._cache[key] = f"firmware build for {target.name} ({case.name}, {layout}, {variant}) failed: {exc}"
        value = self._cache[key]
        if isinstance(value, str):
            pytest.fail(value, pytrace=False)
        return value


@pytest.fixture(scope="session")
def firmwares(tmp_path_factory) -> _Firmwares:
    return _Firmwares(tmp_path_factory.mktemp("hil-firmware"))


@pytest.fixture
def firmware(hil_options, target, case, firmwares):
    """The built firmware of ``case`` for ``target`` (None with --hil-port: the device is already running)."""
    if hil_options.port_mode:
        return None
    return firmwares.get(target, case)


# ---------------------------------------------------------------------- device and dut
@dataclass(eq=False)
class RunningDevice:
    """A device serving the protocol at ``url``: started here (``process``) or given by --hil-port."""
    target: tg_targets.Target
    url: str
    process: object = None
    firmware: object = None
    notes: list = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"device {self.target.name} at {self.url}"]
        if self.firmware is not None:
            lines.append(f"firmware {self.firmware.path}")
        proc = self.process
        if proc is not None and hasattr(proc, "stderr") and callable(proc.stderr):
            rc = proc.poll()
            lines.append(f"QEMU {'running' if rc is None else f'exited with status {rc}'}; command: "
                         f"{' '.join(proc.command)}")
            err = proc.stderr().strip()
            lines.append(f"QEMU stderr: {err or '(empty)'}")
        elif proc is not None:
            lines.append(f"native harness {'running' if proc.returncode is None else f'exited with status {proc.returncode}'}"
                         f"; log: {proc.log_path}")
            tail = proc.log_tail()
            if tail:
                lines.append(f"log tail: {tail}")
        return "\n".join(lines + self.notes)


@contextlib.contextmanager
def start_device(target: tg_targets.Target, fw, port: str | None):
    """A :class:`RunningDevice` for ``fw`` on ``target`` (or the device at ``port``); stopped at exit."""
    if port is not None:
        yield RunningDevice(target, port)
        return
    if fw is None:
        pytest.fail(f"no firmware for {target.name}", pytrace=False)
    if target.kind == "host":
        from treegen.device.firmware import NativeDevice

        proc = NativeDevice(fw.path)
        error = None
        try:
            path = proc.start()
        except TreegenError as exc:
            error = f"native harness did not start: {exc}"
        if error:
            pytest.fail(error, pytrace=False)
        try:
            yield RunningDevice(target, path, proc, fw)
        finally:
            proc.kill()
            proc.stop(check=False)
        return
    from treegen.device.emulator import QemuBoard

    board = QemuBoard(target, fw.path)
    error = None
    try:
        board.start()
    except TreegenError as exc:
        error = f"QEMU did not start for {target.name}: {exc}"
    if error:
        pytest.fail(error, pytrace=False)
    try:
        yield RunningDevice(target, board.url, board, fw)
    finally:
        board.close()


@pytest.fixture
def device(request, hil_options, target, firmware):
    """The running device (no client connected yet): QEMU or the native harness started for this
    test and always stopped afterwards, or the --hil-port device."""
    with start_device(target, firmware, hil_options.port) as dev:
        request.node._hil_device = dev
        yield dev


def open_client(dev: RunningDevice, timeout: float) -> DeviceClient:
    error = None
    try:
        client = DeviceClient.open(dev.url, timeout=timeout)
    except TreegenError as exc:
        error = f"cannot open the device's port: {exc}"
    if error:
        pytest.fail(error, pytrace=False)
    if dev.process is None:
        with contextlib.suppress(AttributeError, OSError, ValueError):
            client.port.reset_input_buffer()
    return client


@pytest.fixture
def dut(device, hil_options, case, target):
    """A :class:`~treegen.device.protocol.DeviceClient` connected to the device, which has answered INFO
    for the model under test ("device runs model X, expected Y" otherwise); closed in ``finally``."""
    from treegen.device.hil import WrongModel, check_identity

    client = open_client(device, hil_options.timeout)
    try:
        error = None
        try:
            check_identity(client.info(), case.model, target)
        except WrongModel as exc:
            error = f"{device.url}: {exc}"
        if error:
            pytest.fail(error, pytrace=False)
        yield client
    finally:
        client.close()


def expected_counter_unit(target: tg_targets.Target) -> int:
    """What BENCH counts on this target: host ns, QEMU instructions, real boards cycles (ns on M0/M0+)."""
    if target.kind == "host":
        return CounterUnit.NANOSECONDS
    if target.kind == "emulated":
        return CounterUnit.INSTRUCTIONS
    return CounterUnit.NANOSECONDS if target.core.startswith("cortex-m0") else CounterUnit.CYCLES
