"""treegen's pytest plugin (entry point ``pytest11``, loaded by pytest wherever treegen is installed).

Options (``pytest --help``, group "treegen")::

    --treegen-target T    target of the device under test (``treegen targets``): native, qemu-m4, a board
    --treegen-port URL    the device already running at this serial port / pyserial URL (a board flashed
                          with ``treegen flash``, or the socket:// URL it prints); nothing is built
    --treegen-model FILE  the model under test (a treegen model file)
    --treegen-data CSV    rows sent to the device (default: seeded random Q15 rows)
    --treegen-timeout S   seconds per request (default 20)
    --treegen-place NAME  a labgrid place instead of --treegen-port: acquired for the session (released at
                          its end); a native or emulated place's board runs the session's firmware, a
                          real board's serial port is used as --treegen-port would be
    --treegen-coordinator HOST:PORT   labgrid coordinator (default: LG_COORDINATOR)
    --treegen-place-timeout S         seconds to wait for a place someone else holds (default 0)

Fixtures, for the bundled checks (``pytest --pyargs treegen.hil ...``) and for your own tests:

``treegen_device``
    A :class:`~treegen.device.protocol.DeviceClient` connected to the device under test, which has
    answered INFO for ``treegen_model``; ``predict(rows_q15)``, ``predict_proba``, ``bench``,
    ``info()``, ``ping``. For an emulated or native target the firmware is built once per session
    and started for each test; the process and the port are closed afterwards.
``treegen_model``
    The :class:`~treegen.core.model.Model` of ``--treegen-model``.
``treegen_case``
    The model with its rows (``X_raw``, ``labels``) and expected answers (``ref.X_q15``, ``ref.fixed``:
    the fixed-point model's classes, ``ref.floating``: the float model's).
``treegen_target``, ``treegen_firmware`` (None with ``--treegen-port``), ``treegen_running_device``
    (the started device before any client connects), ``treegen_options``.
``treegen_record``
    ``treegen_record(name, value)``: a figure of this test (rows/s, instructions per inference, ...),
    written by ``--junitxml`` as a property of its testcase.

Nothing is collected, and neither numpy nor treegen's models, learners or device code are imported,
unless a test asks for a ``treegen_*`` fixture. A test that asks for the device when it cannot be
built, started or reached FAILS with one line (a missing option names the option); it is never
skipped. A failing test's report has a "treegen device" section (URL, QEMU's stderr or the native
harness's log). JUnit XML comes from pytest's own ``--junitxml`` (figures as testcase properties).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


def pytest_addoption(parser):
    g = parser.getgroup("treegen", "treegen hardware in the loop (fixtures treegen_device, treegen_model)")
    g.addoption("--treegen-target", default=None, metavar="T",
                help="target of the device under test (see 'treegen targets'), e.g. native, qemu-m4, nucleo_f446re")
    g.addoption("--treegen-port", default=None, metavar="URL",
                help="use the device running at this serial port / pyserial URL (e.g. /dev/ttyACM0); "
                     "nothing is built")
    g.addoption("--treegen-model", default=None, metavar="FILE", help="model file under test")
    g.addoption("--treegen-data", default=None, metavar="CSV",
                help="rows sent to the device (default: seeded random Q15 rows)")
    g.addoption("--treegen-timeout", type=float, default=20.0, metavar="S",
                help="seconds per device request (default 20)")
    g.addoption("--treegen-place", default=None, metavar="NAME",
                help="the device under test is this labgrid place's board (instead of --treegen-port)")
    g.addoption("--treegen-coordinator", default=None, metavar="HOST:PORT",
                help="labgrid coordinator of --treegen-place (default: LG_COORDINATOR)")
    g.addoption("--treegen-place-timeout", type=float, default=0.0, metavar="S",
                help="seconds to wait for a place held by someone else (default 0)")


@dataclass(frozen=True)
class Options:
    """The ``--treegen-*`` options."""
    target: str | None
    port: str | None
    model: str | None
    data: str | None
    timeout: float
    place: str | None = None
    coordinator: str | None = None
    place_timeout: float = 0.0

    @property
    def port_mode(self) -> bool:
        return self.port is not None


def options(config) -> Options:
    return Options(config.getoption("--treegen-target"), config.getoption("--treegen-port"),
                   config.getoption("--treegen-model"), config.getoption("--treegen-data"),
                   float(config.getoption("--treegen-timeout")), config.getoption("--treegen-place"),
                   config.getoption("--treegen-coordinator"), float(config.getoption("--treegen-place-timeout")))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    dev = getattr(item, "_treegen_device", None)
    if rep.failed and dev is not None:
        rep.sections.append(("treegen device", dev.describe()))
    return rep


def _fail(message: str):
    pytest.fail(message, pytrace=False)


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def treegen_options(request) -> Options:
    """The ``--treegen-*`` options (:class:`Options`); a timeout beyond the bounds fails in one line."""
    from treegen.core.errors import TreegenError
    from treegen.core.limits import check_timeout

    opts = options(request.config)
    try:
        check_timeout(opts.timeout, "--treegen-timeout")
        if opts.place is not None and opts.port is not None:
            raise TreegenError("--treegen-place and --treegen-port exclude each other")
    except TreegenError as exc:
        message = str(exc)
    else:
        return opts
    _fail(message)


@pytest.fixture(scope="session")
def treegen_place(treegen_options):
    """The acquired labgrid place of ``--treegen-place`` (:class:`~treegen.device.farm.HeldPlace`), None
    without it; released when the session ends."""
    if treegen_options.place is None:
        yield None
        return
    from treegen.hil.devices import held_place

    with held_place(treegen_options) as place:
        yield place


@pytest.fixture(scope="session")
def treegen_target(treegen_options):
    """The :class:`~treegen.core.targets.Target` of ``--treegen-target``."""
    from treegen.core import targets
    from treegen.core.errors import TreegenError

    if not treegen_options.target:
        _fail("no device under test: pass --treegen-target T (native, qemu-m4, ...; see 'treegen targets'), "
              "and --treegen-port URL for a flashed board")
    try:
        return targets.get(treegen_options.target)
    except TreegenError as exc:
        message = f"--treegen-target: {exc}"
    _fail(message)


@pytest.fixture(scope="session")
def treegen_case(treegen_options):
    """The model under test with its rows and expected answers (:class:`~treegen.hil.cases.Case`)."""
    from treegen.core.errors import TreegenError
    from treegen.hil.cases import file_case

    if not treegen_options.model:
        _fail("no model under test: pass --treegen-model FILE (and --treegen-data CSV for its rows)")
    try:
        return file_case(treegen_options.model, treegen_options.data)
    except (TreegenError, OSError) as exc:
        message = f"--treegen-model {treegen_options.model}: {' '.join(str(exc).split())}"
    _fail(message)


@pytest.fixture(scope="session")
def treegen_model(treegen_case):
    """The :class:`~treegen.core.model.Model` of ``--treegen-model``."""
    return treegen_case.model


@pytest.fixture(scope="session")
def treegen_firmwares(tmp_path_factory):
    """Firmware builds of this session (:class:`~treegen.hil.devices.Firmwares`)."""
    from treegen.hil.devices import Firmwares

    return Firmwares(tmp_path_factory.mktemp("treegen-firmware"))


@pytest.fixture(scope="session")
def treegen_firmware(treegen_options, treegen_target, treegen_case, treegen_firmwares):
    """The firmware built for the model and target (None with ``--treegen-port``: the device runs already)."""
    if treegen_options.port_mode or (treegen_options.place is not None and treegen_target.kind == "board"):
        return None            # a board runs what was flashed on it
    return treegen_firmwares.get(treegen_target, treegen_case)


@pytest.fixture
def treegen_running_device(request, treegen_options, treegen_target, treegen_firmware, treegen_place):
    """The device (:class:`~treegen.hil.devices.RunningDevice`, no client connected): QEMU or the native
    harness started for this test and stopped afterwards (at the ``--treegen-place``'s serial port for
    a place), or the ``--treegen-port`` device."""
    from treegen.hil.devices import ITEM_ATTR, start_device

    with start_device(treegen_target, treegen_firmware, treegen_options.port, place=treegen_place) as dev:
        setattr(request.node, ITEM_ATTR, dev)
        yield dev


@pytest.fixture
def treegen_device(treegen_running_device, treegen_options, treegen_case, treegen_target):
    """A :class:`~treegen.device.protocol.DeviceClient` connected to the device under test, which has
    answered INFO for the model under test; closed afterwards."""
    from treegen.hil.devices import connected

    with connected(treegen_running_device, treegen_case, treegen_target, treegen_options.timeout) as client:
        yield client


@pytest.fixture
def treegen_record(request):
    """``treegen_record(name, value)``: a property of this test's JUnit testcase (``--junitxml``).

    Like pytest's ``record_property`` (the same ``user_properties``, written by pytest whatever the
    ``junit_family``), without its warning under the default ``xunit2`` family."""
    def record(name: str, value) -> None:
        request.node.user_properties.append((name, value))

    return record
