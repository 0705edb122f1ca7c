"""Fixtures of the HIL suite: model -> firmware -> device -> dut (a connected DeviceClient).

Options (``pytest hil --help``, group "hil"):

``--hil-target T``   target(s) to test (repeat or comma-separate); default: native, qemu-m3, qemu-m4,
                     qemu-m7, qemu-m33, qemu-m55 and every other target of kind "emulated" (the board
                     twins qemu-f103c8, qemu-f446re, qemu-l031k6: the robustness checks only, first
                     case), each test parametrised over them. In the default
                     run the newer cores (qemu-m33, qemu-m55) get the core device checks
                     (test_device.py), the protocol robustness checks (test_robustness.py) and the
                     variant comparison on the first case only (EFTI on veh, an 18-attribute oblique
                     tree), to keep CI time in check; naming them with --hil-target runs the whole
                     suite there.
``--hil-port URL``   test the device already running at this serial port / pyserial URL (a real
                     board flashed with ``treegen flash``, or ``socket://...`` of ``treegen flash``
                     for an emulated target); needs exactly one ``--hil-target``. Nothing is built.
``--hil-model FILE`` the model under test (with ``--hil-port``: the model flashed on the board).
                     Default: the suite's models (``hil/models.py``: EFTI and CART on veh, seg and
                     pid, fixed seeds); with ``--hil-port`` the device's INFO hash picks the one it runs.
``--hil-data CSV``   rows for ``--hil-model`` (default: its dataset if it is a shared one, else
                     seeded random Q15 rows).
``--hil-timeout S``  seconds per request (default 20).

The plugin's options ``--treegen-target``, ``--treegen-port``, ``--treegen-model``, ``--treegen-data``
and ``--treegen-timeout`` (:mod:`treegen.hil.plugin`) are accepted here too, for the same things.
The machinery (firmware builds, started devices, clients, the failure report) is the plugin's
(:mod:`treegen.hil.devices`); this conftest parametrises it over the suite's targets and models and
gives the bundled checks (``treegen/hil/test_*.py``, re-exported by ``test_device.py`` and
``test_robustness.py``) their ``treegen_*`` fixtures from these parameters.

Each emulated or native firmware is built once per session (offline PlatformIO / host compiler).
Every started process (QEMU, native harness) and every opened port is closed in ``finally``, and a
device that cannot be reached, built or started makes the test FAIL, never skip. A failing test's
report carries a "treegen device" section: the URL, and QEMU's stderr or the native harness log.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from treegen.core import targets as tg_targets
from treegen.core.errors import TreegenError
from treegen.device.protocol import DeviceClient
from treegen.hil.devices import ITEM_ATTR, Firmwares, connected, start_device

from . import models as hil_models

MAIN_TARGETS = ("native", "qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55")
#: default targets that run only the core device checks (+ test_variants.py, test_robustness.py) on the first case
#: (EFTI on veh: an 18-attribute oblique tree) unless named with --hil-target
CORE_ONLY_TARGETS = ("qemu-m33", "qemu-m55")
CORE_ONLY_MODULES = ("test_device.py", "test_variants.py", "test_robustness.py")
#: every other emulated target (the board twins, and any target file of kind "emulated" added later)
#: runs the protocol robustness checks by default, on the first case: one model each
ROBUSTNESS_ONLY_MODULES = ("test_robustness.py",)


#: emulated targets left out of the default run (none: simavr-uno, the AVR, runs its robustness checks
#: like the other boards' emulators)
NOT_BY_DEFAULT: tuple = ()


def _other_emulated() -> tuple:
    return tuple(t.name for t in tg_targets.all_targets()
                 if t.kind == "emulated" and t.name not in MAIN_TARGETS + NOT_BY_DEFAULT)


DEFAULT_TARGETS = MAIN_TARGETS + _other_emulated()


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
    g.addoption("--hil-timeout", type=float, default=None, metavar="S", help="seconds per request (default 20)")


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
    def opt(name):          # --hil-NAME, else the plugin's --treegen-NAME
        value = config.getoption(f"--hil-{name}")
        return value if value is not None else config.getoption(f"--treegen-{name}", None)

    raw = config.getoption("--hil-target") or []
    if not raw and config.getoption("--treegen-target", None):
        raw = [config.getoption("--treegen-target")]
    targets = tuple(t.strip() for item in raw for t in item.split(",") if t.strip()) or DEFAULT_TARGETS
    port = opt("port")
    if port is not None and len(targets) != 1:
        raise pytest.UsageError("--hil-port needs exactly one --hil-target (the target the device was built for)")
    for t in targets:
        try:
            tg_targets.get(t)
        except TreegenError as exc:
            raise pytest.UsageError(f"--hil-target: {exc}") from None
    if opt("data") and not opt("model"):
        raise pytest.UsageError("--hil-data needs --hil-model")
    timeout = config.getoption("--hil-timeout")
    if timeout is None:
        timeout = config.getoption("--treegen-timeout", 20.0)
    opts = HilOptions(targets, port, opt("model"), opt("data"), float(timeout), default_targets=not raw)
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
        target = params.get("hil_target")
        if opts.default_targets and (target in CORE_ONLY_TARGETS or target not in (*MAIN_TARGETS, None)):
            modules = CORE_ONLY_MODULES if target in CORE_ONLY_TARGETS else ROBUSTNESS_ONLY_MODULES
            if Path(item.path).name not in modules or params.get("case_name") != _case_names(opts)[0]:
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


# ---------------------------------------------------------------------- firmware, device, dut
@pytest.fixture(scope="session")
def firmwares(tmp_path_factory) -> Firmwares:
    """The session's firmware builds; the parallel workers of one run (pytest-xdist, scripts/test.sh)
    share the emulated boards' builds in their run's folder (each is built once, by the first worker
    that needs it)."""
    shared = None
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "hil-firmware"
        shared.mkdir(exist_ok=True)
    return Firmwares(tmp_path_factory.mktemp("hil-firmware"), shared=shared)


@pytest.fixture
def firmware(hil_options, target, case, firmwares):
    """The built firmware of ``case`` for ``target`` (None with --hil-port: the device is already running)."""
    if hil_options.port_mode:
        return None
    return firmwares.get(target, case)


@pytest.fixture
def device(request, hil_options, target, firmware):
    """The running device (no client connected yet): QEMU or the native harness started for this
    test and always stopped afterwards, or the --hil-port device."""
    with start_device(target, firmware, hil_options.port) as dev:
        setattr(request.node, ITEM_ATTR, dev)
        yield dev


@pytest.fixture
def dut(device, hil_options, case, target):
    """A :class:`~treegen.device.protocol.DeviceClient` connected to the device, which has answered INFO
    for the model under test ("device runs model X, expected Y" otherwise); closed in ``finally``."""
    with connected(device, case, target, hil_options.timeout) as client:
        yield client


# ---------------------------------------------------------------------- the plugin's fixtures, parametrised
# The bundled checks (treegen/hil/test_*.py) ask for treegen_*; here they get this suite's
# (target, case) parameters instead of the single --treegen-target / --treegen-model.
@pytest.fixture
def treegen_options(hil_options):
    return hil_options


@pytest.fixture
def treegen_target(target):
    return target


@pytest.fixture
def treegen_case(case):
    return case


@pytest.fixture
def treegen_model(case):
    return case.model


@pytest.fixture
def treegen_firmwares(firmwares):
    return firmwares


@pytest.fixture
def treegen_firmware(firmware):
    return firmware


@pytest.fixture
def treegen_running_device(device):
    return device


@pytest.fixture
def treegen_device(dut):
    return dut
