"""The board of an acquired labgrid place, made to run a firmware: ``with place_board(place, target, fw)
as url:`` yields the pyserial URL where that firmware answers.

How the image gets to the board depends on the target's kind:

- an **emulated** target (QEMU): the place's ``NetworkSerialPort`` (``protocol: raw``) names a TCP
  port on its exporter's host; the holder of the place starts QEMU with the image there, listening on
  that port (the exporter only publishes the address; the place's lock makes the holder its only
  user). treegen must run on the exporter's host for this (the host must be one of this machine's
  addresses: checked). QEMU is stopped when the block ends.
- the **native** target (the harness compiled for the host): the place's ``RawSerialPort`` path,
  served by ser2net over RFC 2217, is a symbolic link that the holder points at the pseudo-terminal of
  the harness it starts (the link must live in a folder this user can write, e.g. ``/dev/shm/...``:
  labgrid's exporter only serves paths under ``/dev``).
- a **board** (``kind = "board"``): the image must already be on it (``treegen flash`` where the
  board hangs off, or labgrid's own debugger drivers; see docs/guide/board-farm.md); its serial port is
  used as it is.

The watcher passed as ``stop`` lets a caller abort the run (the exporter went away): the board is
stopped, so a HIL run on it ends with an error at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path

from treegen.core import targets as _targets
from treegen.core.errors import TreegenError
from treegen.device.farm import FarmError, HeldPlace


def _is_local(host: str) -> bool:
    """Whether ``host`` is an address of this machine (a socket can be bound to it)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, _type, _proto, _name, addr in infos:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr[0], 0))
                return True
            except OSError:
                continue
    return False


class Board:
    """The running board of a place: ``url``, and ``stop()`` (idempotent; aborts a run in progress)."""

    def __init__(self, url: str, process=None):
        self.url = url
        self.process = process
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        proc = self.process
        if proc is None:
            return
        if hasattr(proc, "kill"):          # NativeDevice
            proc.kill()
        else:                              # QemuBoard
            proc.close()


def _relink(path: str, target: str) -> None:
    """Point the symbolic link ``path`` at ``target`` atomically (rename over it)."""
    p = Path(path)
    if p.exists() and not p.is_symlink():
        raise FarmError(f"{path} (the place's RawSerialPort) is a device, not a link treegen can point at its "
                        "native harness")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        tmp.symlink_to(target)
        os.replace(tmp, p)
    except OSError as exc:
        raise FarmError(f"cannot point {path} at the native harness: {exc.strerror or exc}") from None


def boot(client, limit: float = 60.0) -> None:
    """PING the freshly started board until it answers its own PING. Like :func:`treegen.device.hil.await_boot`
    (a PING the UART dropped while it was off times out and the link is flushed), but patient with a slow
    boot on a loaded host: the firmware then answers the earlier PINGs late, in order, and such a stale
    answer (another SEQ) is passed over instead of ending the boot; ``limit`` seconds in all."""
    from treegen.device.firmware import MIN_PAYLOAD
    from treegen.device.protocol import DeviceTimeout, ProtocolError

    hint, client.max_payload_hint = client.max_payload_hint, MIN_PAYLOAD   # a short flush (see await_boot)
    end = time.monotonic() + limit
    timeouts = iter((0.25, 1.0, 3.0))
    try:
        while True:
            try:
                client.ping(b"boot", timeout=next(timeouts, 6.0))
                return
            except DeviceTimeout:          # lost (the client has flushed the link): PING again
                if time.monotonic() >= end:
                    raise
            except ProtocolError:          # a late answer to an earlier PING: let the rest arrive, drop it
                if time.monotonic() >= end:
                    raise
                _drain(client.port, quiet=1.0, limit=10.0)
    finally:
        client.max_payload_hint = hint


def _drain(port, *, quiet: float, limit: float) -> None:
    """Read and drop what arrives until ``quiet`` seconds pass without a byte (at most ``limit`` s)."""
    start = last = time.monotonic()
    while time.monotonic() - last < quiet and time.monotonic() - start < limit:
        if port.read(4096):
            last = time.monotonic()


@contextlib.contextmanager
def place_board(place: HeldPlace, target, firmware, *, boot_timeout: float = 5.0):
    """``with place_board(place, target, firmware) as board:`` the place's board running ``firmware``
    (:class:`~treegen.device.hil.Firmware`; None for a board flashed beforehand), reachable at
    ``board.url``; stopped when the block ends."""
    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    ep = place.serial
    if tgt.kind == "emulated":
        if ep.protocol != "raw":
            raise FarmError(f"place {place.name} runs the emulated target {tgt.name}: its serial port must be a "
                            f"NetworkSerialPort with protocol raw (QEMU's UART socket), not {ep.protocol}")
        if not _is_local(ep.host):
            raise FarmError(f"place {place.name}'s board is emulated on {ep.host}: run treegen on that host "
                            "(its exporter's), where QEMU is started with the image")
        from treegen.device.emulator import QemuBoard
        from treegen.device.hil import drain_quiet
        from treegen.device.protocol import DeviceClient

        qemu = QemuBoard(tgt, firmware.path, port=ep.port, host=ep.host)
        try:
            qemu.start()
        except TreegenError as exc:
            raise FarmError(f"place {place.name}: {exc}") from None
        board = Board(qemu.url, qemu)
        try:
            client = DeviceClient.open(qemu.url, timeout=boot_timeout)
            client.drain_quiet = drain_quiet(tgt)
            try:
                boot(client)    # then disconnect: QEMU's socket takes the HIL's connection next
            finally:
                client.close()
            yield board
        finally:
            board.stop()
        return
    if tgt.kind == "host":
        if ep.protocol == "raw" or not ep.path:
            raise FarmError(f"place {place.name} runs the native harness: its serial port must be a RawSerialPort "
                            "(a link under /dev/shm, served by ser2net), not a raw NetworkSerialPort")
        if not _is_local(ep.host):
            raise FarmError(f"place {place.name}'s native harness runs on {ep.host}: run treegen on that host")
        from treegen.device.firmware import NativeDevice

        native = NativeDevice(firmware.path)
        pty = native.start()
        board = Board(ep.url, native)
        try:
            _relink(ep.path, pty)
            yield board
        finally:
            native.kill()
            native.stop(check=False)
        return
    if firmware is not None and firmware.path is not None:
        raise FarmError(f"place {place.name} is a real board ({tgt.name}): flash it first "
                        "(see docs/guide/board-farm.md), then run without building")
    yield Board(ep.url)
