"""A labgrid board farm seen from treegen: the coordinator's places, acquiring and releasing them, and
the serial port a place's board answers on.

::

    with Coordinator("127.0.0.1:20408") as lab:
        with lab.held("nucleo-1", timeout=60, progress=print) as place:
            url = place.serial.url          # rfc2217://lab-host:PORT?ign_set_control, socket://...

It talks to the coordinator through labgrid's own client session (:class:`labgrid.remote.client.
ClientSession`, run on an event loop in a thread of its own), the one ``labgrid-client`` uses; the
user a place is acquired for is labgrid's (``LG_HOSTNAME``/``LG_USERNAME``, else this host and user),
so ``labgrid-client who`` names it. A place is released by the ``with`` block that acquired it, on
every way out. Everything that goes wrong here is one :class:`FarmError` line: the coordinator
cannot be reached or went away, a place does not exist, is held by someone else past the timeout
(the message names the holder), or has no serial port.

A place's serial port is its ``NetworkSerialPort`` resource: exported as it is (``protocol: raw``,
a TCP socket such as QEMU's UART: ``socket://HOST:PORT``) or made by the exporter from a
``RawSerialPort``/``USBSerialPort`` it serves through ser2net (RFC 2217: ``rfc2217://HOST:PORT``,
with pyserial's ``ign_set_control``: ser2net on a pseudo-terminal does not confirm flow-control
settings). The local device path of such a port (``extra.path``) is kept: an emulated place's
board is started there (:mod:`treegen.device.farm_board`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from dataclasses import dataclass, field

from treegen.core.errors import TreegenError

#: seconds to reach the coordinator and for each request to it
CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 15.0
#: the place tag that names a place's treegen target (``labgrid-client -p P set-tags target=qemu-m4``)
TARGET_TAG = "target"
POLL = 0.1


class FarmError(TreegenError):
    """The farm could not do what was asked (one line)."""


class PlaceBusy(FarmError):
    """A place stayed held by someone else for the whole wait."""

    def __init__(self, message: str, holder: str):
        super().__init__(message)
        self.holder = holder


def _one_line(text) -> str:
    return " ".join(str(text).split())


def identity() -> str:
    """The ``host/user`` the coordinator records as a place's holder (labgrid's own rule)."""
    import getpass

    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    user = os.environ.get("LG_USERNAME") or getpass.getuser()
    return f"{host}/{user}"


def coordinator_address(explicit: str | None) -> str:
    """``--coordinator HOST:PORT``, else ``LG_COORDINATOR``; a missing one is a one-line error."""
    address = explicit or os.environ.get("LG_COORDINATOR")
    if not address:
        raise FarmError("no labgrid coordinator: pass --coordinator HOST:PORT or set LG_COORDINATOR")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise FarmError(f"labgrid coordinator address {address!r} is not HOST:PORT")
    return address


@dataclass(frozen=True)
class SerialEndpoint:
    """Where a place's board answers: ``url`` for pyserial, and what it was made from."""
    host: str
    port: int
    protocol: str                # raw or rfc2217
    path: str | None             # the device path on the exporter's host (RawSerialPort/USBSerialPort)
    exporter: str
    resource: str                # exporter/group/cls/name

    @property
    def url(self) -> str:
        if self.protocol == "raw":
            return f"socket://{self.host}:{self.port}"
        return f"rfc2217://{self.host}:{self.port}?ign_set_control"


@dataclass(frozen=True)
class PlaceInfo:
    name: str
    tags: dict
    acquired: str | None
    matches: tuple = ()
    exporters: tuple = ()

    @property
    def target(self) -> str | None:
        return self.tags.get(TARGET_TAG)


@dataclass
class HeldPlace:
    """A place acquired by this client (``with Coordinator.held(...)``)."""
    name: str
    serial: SerialEndpoint
    tags: dict = field(default_factory=dict)
    waited: float = 0.0

    @property
    def exporter(self) -> str:
        return self.serial.exporter


class Coordinator:
    """A session with a labgrid coordinator at ``address`` (HOST:PORT); a context manager."""

    def __init__(self, address: str, *, connect_timeout: float = CONNECT_TIMEOUT):
        self.address = address
        self.connect_timeout = float(connect_timeout)
        self.user = identity()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session = None
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._inflight = 0                          # acquire/release requests on their way (other threads)
        self._settled = threading.Condition(self._lock)

    # ------------------------------------------------------------------ session
    def __enter__(self) -> "Coordinator":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self) -> "Coordinator":
        try:
            from labgrid.remote.client import ClientSession
        except ImportError:
            raise FarmError("labgrid is not installed; a board farm needs the farm extra: "
                            "pip install 'treegen[farm]'") from None
        import logging

        logging.getLogger().addHandler(logging.NullHandler())     # labgrid logs the lost coordinator itself
        os.environ.setdefault("LG_HOSTNAME", self.user.split("/")[0])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="labgrid-session", daemon=True)
        self._thread.start()

        async def start():
            session = ClientSession(self.address, self._loop)
            self._session = session
            await session.start()
            return session

        try:
            self._call(start(), self.connect_timeout)
        except FarmError as exc:
            self.close()
            raise FarmError(f"cannot reach the labgrid coordinator at {self.address}: {exc}") from None
        except Exception as exc:      # labgrid's ServerError, grpc errors
            self.close()
            text = _one_line(exc).removeprefix("Error: ") or type(exc).__name__
            raise FarmError(f"cannot reach the labgrid coordinator at {self.address}: {text}") from None
        return self

    def _call(self, coro, timeout: float = REQUEST_TIMEOUT):
        if self._loop is None:
            coro.close()
            raise FarmError("not connected to the labgrid coordinator")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise FarmError(f"no answer within {timeout:g} s") from None
        except BaseException:
            fut.cancel()
            raise

    def _rpc(self, method: str, request):
        """One request to the coordinator, then a sync (its place updates have arrived here)."""
        session = self._session

        async def call():
            await getattr(session.stub, method)(request)
            await session.sync_with_coordinator()

        return self._call(call())

    def connected(self) -> bool:
        s = self._session
        return s is not None and not s.stopping.is_set()

    def _check(self) -> None:
        if not self.connected():
            raise FarmError(f"lost the labgrid coordinator at {self.address}")

    def close(self) -> None:
        """Release every place still held here, end the session (idempotent). Acquire and release
        requests other threads have on their way are waited for first (up to a request's timeout): a
        place acquired, or a release cut off, by a request that ends while the session closes would
        stay acquired on the coordinator."""
        with self._lock:
            self._settled.wait_for(lambda: self._inflight == 0, REQUEST_TIMEOUT)
            names = sorted(self._held)
        for name in names:
            with contextlib.suppress(FarmError):
                self.release(name)
        loop, self._loop = self._loop, None
        session, self._session = self._session, None
        if loop is None:
            return
        if session is not None:
            async def stop():
                with contextlib.suppress(Exception):
                    await session.stop()
                with contextlib.suppress(Exception):
                    await session.close()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        if not loop.is_running():
            loop.close()

    def sync(self) -> None:
        """Wait until the coordinator's updates so far have arrived."""
        self._check()
        self._call(self._session.sync_with_coordinator())
        self._check()

    # ------------------------------------------------------------------ places
    def places(self) -> dict[str, PlaceInfo]:
        self._check()
        out = {}
        for name, p in list(self._session.places.items()):
            matches = tuple(repr(m) for m in p.matches)
            exporters = tuple(sorted({r[0] for r in p.acquired_resources}
                                     or {m.exporter for m in p.matches if "*" not in m.exporter}))
            out[name] = PlaceInfo(name, dict(p.tags), p.acquired, matches, exporters)
        return out

    def place(self, name: str) -> PlaceInfo:
        places = self.places()
        if name not in places:
            known = ", ".join(sorted(places)) or "none"
            raise FarmError(f"no place {name!r} at the labgrid coordinator {self.address} (places: {known})")
        return places[name]

    def define_place(self, name: str, matches, tags: dict | None = None) -> None:
        """Create place ``name`` matching the resource patterns ``matches`` (``exporter/group/*``) with
        ``tags`` (what ``labgrid-client -p NAME create``, ``add-match`` and ``set-tags`` do)."""
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

        async def define():
            await self._session.stub.AddPlace(pb.AddPlaceRequest(name=name))
            for pattern in matches:
                await self._session.stub.AddPlaceMatch(pb.AddPlaceMatchRequest(placename=name, pattern=pattern))
            if tags:
                await self._session.stub.SetPlaceTags(pb.SetPlaceTagsRequest(placename=name, tags=dict(tags)))
            await self._session.sync_with_coordinator()

        self._check()
        try:
            self._call(define())
        except FarmError:
            raise
        except Exception as exc:
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise FarmError(f"cannot create place {name}: {_one_line(details)}") from None

    def resource_names(self) -> list[str]:
        """``exporter/group/cls/name`` of every resource the coordinator knows, available or not."""
        self._check()
        return sorted(f"{e}/{g}/{entry.cls}/{r}" for e, groups in list(self._session.resources.items())
                      for g, res in list(groups.items()) for r, entry in list(res.items()) if entry.data.get("cls"))

    def holder(self, name: str) -> str | None:
        return self.place(name).acquired

    def _matching_resources(self, name: str) -> list:
        """(exporter, group, cls, resource name, entry) of the resources the place matches now."""
        p = self._session.places[name]
        out = []
        for exporter, groups in list(self._session.resources.items()):
            for group, resources in list(groups.items()):
                for rname, entry in list(resources.items()):
                    if not entry.data.get("cls"):
                        continue
                    path = (exporter, group, entry.cls, rname)
                    if p.getmatch(path) is not None:
                        out.append((*path, entry))
        return out

    def acquire(self, name: str, *, timeout: float = 0.0, progress=None,
                cancel: threading.Event | None = None) -> float:
        """Acquire place ``name``; while someone else holds it, wait up to ``timeout`` s (``progress(text)``
        about every second). Returns the seconds waited. Raises :class:`PlaceBusy` naming the holder."""
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

        start = time.monotonic()
        last_note = -1.0
        while True:
            self.sync()
            holder = self.place(name).acquired
            waited = time.monotonic() - start
            if holder is None:
                if not self._matching_resources(name):
                    raise FarmError(f"place {name} has no resources (its exporter is not connected, or its "
                                    "matches name none)")
                with self._lock:
                    self._inflight += 1
                try:
                    self._rpc("AcquirePlace", pb.AcquirePlaceRequest(placename=name))
                    with self._lock:         # held before the request counts as ended: close() sees one of them
                        self._held.add(name)
                except FarmError:
                    raise
                except Exception as exc:      # grpc: acquired by someone else in between, resources taken
                    details = exc.details() if hasattr(exc, "details") else str(exc)
                    if "already acquired" not in str(details):
                        raise FarmError(f"cannot acquire place {name}: {_one_line(details)}") from None
                    continue
                finally:
                    self._request_ended()
                self.sync()
                return waited
            if waited >= timeout:
                mine = " (this user: release it with 'labgrid-client -p %s release')" % name \
                    if holder == self.user else ""
                raise PlaceBusy(f"place {name} is held by {holder}{mine}; waited {timeout:g} s "
                                f"(--place-timeout)", holder)
            if progress is not None and waited - last_note >= 1.0:
                last_note = waited
                progress(f"place {name} is held by {holder}: waiting ({waited:.0f} of {timeout:g} s)")
            if cancel is not None and cancel.is_set():
                raise FarmError(f"gave up waiting for place {name}")
            time.sleep(min(0.25, max(0.01, timeout - waited)))

    def release(self, name: str) -> None:
        """Release place ``name`` if this client holds it."""
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

        with self._lock:
            if name not in self._held:
                return
            self._held.discard(name)
            self._inflight += 1
        try:
            if not self.connected():
                raise FarmError(f"lost the labgrid coordinator at {self.address}: place {name} is still acquired "
                                f"(labgrid-client -p {name} release)")
            try:
                self._rpc("ReleasePlace", pb.ReleasePlaceRequest(placename=name))
            except FarmError:
                raise
            except Exception as exc:
                details = exc.details() if hasattr(exc, "details") else str(exc)
                raise FarmError(f"cannot release place {name}: {_one_line(details)}") from None
        finally:
            self._request_ended()

    def _request_ended(self) -> None:
        """An acquire or release request counted in ``_inflight`` is over (close() may be waiting)."""
        with self._lock:
            self._inflight -= 1
            self._settled.notify_all()

    def held_names(self) -> list[str]:
        with self._lock:
            return sorted(self._held)

    def serial(self, name: str) -> SerialEndpoint:
        """The serial port of place ``name`` (acquired: ser2net-served ports get their TCP port then)."""
        self.sync()
        found = [r for r in self._matching_resources(name) if r[2] == "NetworkSerialPort"]
        if not found:
            raise FarmError(f"place {name} has no serial port (a NetworkSerialPort, RawSerialPort or "
                            "USBSerialPort resource)")
        if len(found) > 1:
            names = ", ".join("/".join(r[:4]) for r in found)
            raise FarmError(f"place {name} has {len(found)} serial ports ({names}); give it one")
        exporter, group, cls, rname, entry = found[0]
        params = entry.data.get("params", {})
        port = params.get("port")
        if not entry.data.get("avail", False) or port is None:
            raise FarmError(f"place {name}'s serial port {exporter}/{group}/{rname} is not available")
        extra = params.get("extra") or {}
        protocol = params.get("protocol") or "rfc2217"
        return SerialEndpoint(str(params.get("host")), int(port), str(protocol), extra.get("path"), exporter,
                              f"{exporter}/{group}/{cls}/{rname}")

    def alive(self, name: str) -> bool:
        """Whether place ``name``'s resources are all still there (their exporter connected) and the
        coordinator too."""
        if not self.connected():
            return False
        p = self._session.places.get(name)
        if p is None:
            return False
        paths = p.acquired_resources or []
        if not paths:
            return bool(self._matching_resources(name))
        for exporter, group, _cls, rname in paths:
            entry = self._session.resources.get(exporter, {}).get(group, {}).get(rname)
            if entry is None or not entry.data.get("cls") or not entry.data.get("avail", False):
                return False
        return True

    @contextlib.contextmanager
    def held(self, name: str, *, timeout: float = 0.0, progress=None, cancel=None):
        """``with lab.held(name) as place:`` the place acquired (waiting up to ``timeout`` s while someone
        else holds it) with its serial port; released when the block ends, however it ends."""
        self.place(name)
        waited = self.acquire(name, timeout=timeout, progress=progress, cancel=cancel)
        try:
            yield HeldPlace(name, self.serial(name), dict(self.place(name).tags), waited)
        finally:
            try:
                self.release(name)
            except FarmError:
                if self.connected():
                    raise
