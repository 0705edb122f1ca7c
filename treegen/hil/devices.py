"""Devices for tests: firmware builds (once per session), a started device (QEMU, the native harness,
or one given by a port) stopped in ``finally``, and a connected :class:`~treegen.device.protocol.DeviceClient`.

Everything that cannot be built, started or reached calls :func:`pytest.fail` with one line (never
:func:`pytest.skip`): a hardware-in-the-loop test that did not talk to a device did not pass.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from treegen.core import targets as tg_targets
from treegen.core.errors import TreegenError
from treegen.device.protocol import CounterUnit, DeviceClient

from .cases import Case

#: host programs needed to build and run each kind of target
TOOLS = {"emulated": ("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm"), "host": ("cc",)}

#: the attribute of a pytest item holding its :class:`RunningDevice` (for the failure report)
ITEM_ATTR = "_treegen_device"


def require_tools(kind: str) -> None:
    """Fail the test when a program needed for targets of ``kind`` is missing."""
    missing = [t for t in TOOLS.get(kind, ()) if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: install the Debian packages gcc-arm-none-eabi "
                    "libnewlib-arm-none-eabi qemu-system-arm gcc (bash scripts/setup.sh)", pytrace=False)


class Firmwares:
    """Firmware builds under ``root``, once per (target, model, layout, variant) and session.

    With ``shared``, the builds for emulated boards go there instead: a folder other pytest processes
    build into too (the parallel workers of one run). Every build folder is locked while it is built
    (:mod:`treegen.device.buildfolder`) and a complete build of the same model, layout and variant is
    reused (its stamp), so the workers build each firmware once. Native harnesses (host programs,
    not reused) stay in ``root``."""

    def __init__(self, root: Path, shared: Path | None = None):
        self.root = Path(root)
        self.shared = None if shared is None else Path(shared)
        self._cache: dict = {}

    def get(self, target: tg_targets.Target, case: Case, *, layout: str | None = None, variant: str = "auto"):
        from treegen.device import buildfolder, hil
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
                            f"and pass its port (--treegen-port, e.g. /dev/ttyACM0)", pytrace=False)
            require_tools(target.kind)
            base = self.shared if self.shared is not None and target.kind == "emulated" else self.root
            out = base / f"{target.name}-{case.name}-{layout}-{variant}"
            try:
                with buildfolder.locked(out):
                    self._cache[key] = hil.build_firmware(case.model, target, out, layout=layout, variant=variant)
            except TreegenError as exc:
                self._cache[key] = f"firmware build for {target.name} ({case.name}, {layout}, {variant}) failed: {exc}"
        value = self._cache[key]
        if isinstance(value, str):
            pytest.fail(value, pytrace=False)
        return value


@dataclass(eq=False)
class RunningDevice:
    """A device serving the protocol at ``url``: started here (``process``) or given by a port."""
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
            name = getattr(proc, "label", "emulator")
            lines.append(f"{name} {'running' if rc is None else f'exited with status {rc}'}; command: "
                         f"{' '.join(proc.command)}")
            err = proc.stderr().strip()
            lines.append(f"{name} stderr: {err or '(empty)'}")
        elif proc is not None:
            lines.append(f"native harness {'running' if proc.returncode is None else f'exited with status {proc.returncode}'}"
                         f"; log: {proc.log_path}")
            tail = proc.log_tail()
            if tail:
                lines.append(f"log tail: {tail}")
        return "\n".join(lines + self.notes)


def _await_boot(board) -> None:
    """Connect once and PING until the firmware answers (:func:`treegen.device.hil.await_boot`), then
    disconnect (QEMU's socket server takes the tests' connections after it): the STM32 USART models
    drop bytes that arrive before the firmware has switched the USART on."""
    from treegen.device.hil import await_boot

    client = DeviceClient.open(board.url, timeout=5.0)
    try:
        await_boot(client)
    finally:
        client.close()


@contextlib.contextmanager
def held_place(opts):
    """The labgrid place of ``--treegen-place``, acquired (waiting ``--treegen-place-timeout`` s) and released
    at exit; anything that goes wrong fails the test in one line."""
    from treegen.device.farm import Coordinator, coordinator_address

    error = None
    lab = None
    try:
        lab = Coordinator(coordinator_address(opts.coordinator)).connect()
        held = lab.held(opts.place, timeout=opts.place_timeout)
        place = held.__enter__()
    except TreegenError as exc:
        error = f"--treegen-place {opts.place}: {exc}"
        if lab is not None:
            lab.close()
    if error:
        pytest.fail(error, pytrace=False)
    try:
        yield place
    finally:
        try:
            held.__exit__(None, None, None)
        finally:
            lab.close()


@contextlib.contextmanager
def start_device(target: tg_targets.Target, fw, port: str | None, *, place=None):
    """A :class:`RunningDevice` for ``fw`` on ``target`` (or the device at ``port``, or the board of the
    acquired labgrid ``place``); stopped at exit."""
    if port is not None:
        yield RunningDevice(target, port)
        return
    if place is not None:
        from treegen.device.farm_board import place_board

        error = None
        try:
            ctx = place_board(place, target, fw if target.kind in ("host", "emulated") else None)
            board = ctx.__enter__()
        except TreegenError as exc:
            error = f"place {place.name}: the board did not start: {exc}"
        if error:
            pytest.fail(error, pytrace=False)
        try:
            yield RunningDevice(target, board.url, None, fw, [f"labgrid place {place.name} ({place.serial.resource})"])
        finally:
            ctx.__exit__(None, None, None)
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
    from treegen.device.emulated import emulated_board

    board = emulated_board(target, fw.path)
    error = None
    try:
        board.start()
        _await_boot(board)
    except TreegenError as exc:
        board.close()
        error = f"{board.label} did not start for {target.name}: {exc}"
    if error:
        pytest.fail(error, pytrace=False)
    try:
        yield RunningDevice(target, board.url, board, fw)
    finally:
        board.close()


def open_client(dev: RunningDevice, timeout: float) -> DeviceClient:
    """A client connected to ``dev`` (the caller closes it); fails the test when the port cannot be opened."""
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
    from treegen.device.hil import drain_quiet

    client.drain_quiet = drain_quiet(dev.target)
    return client


@contextlib.contextmanager
def connected(dev: RunningDevice, case: Case, target: tg_targets.Target, timeout: float):
    """A client connected to ``dev`` that has answered INFO for ``case.model`` ("device runs model X,
    expected Y" fails the test otherwise); closed at exit."""
    from treegen.device.hil import WrongModel, check_identity, image_target

    client = open_client(dev, timeout)
    try:
        error = None
        try:
            check_identity(client.info(), case.model, image_target(target))
        except (WrongModel, TreegenError) as exc:
            error = f"{dev.url}: {exc}"
        if error:
            pytest.fail(error, pytrace=False)
        yield client
    finally:
        client.close()


def expected_counter_unit(target: tg_targets.Target) -> int:
    """What BENCH counts on this target: host ns, QEMU instructions, real boards cycles (ns on M0/M0+)."""
    if target.kind == "host":
        return CounterUnit.NANOSECONDS
    if target.kind == "emulated":      # QEMU -icount: instructions; simavr: cycles, as on the chip
        return CounterUnit.CYCLES if target.emulator.get("engine") == "simavr" else CounterUnit.INSTRUCTIONS
    if target.uart != "arduino":
        return CounterUnit.CYCLES        # the bare-metal ports: SysTick / nRF51 TIMER0 at the CPU clock
    return CounterUnit.NANOSECONDS if target.core.startswith("cortex-m0") else CounterUnit.CYCLES
