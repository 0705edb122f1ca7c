"""treegen.device.farm.Coordinator's bookkeeping of acquired places when the session closes while other
threads have requests on their way (a farm interrupted by Ctrl-C: the place workers still acquire and
release while the main thread leaves the ``with Coordinator(...)`` block). Seen once under load:
test_farm.py::test_interrupt_releases_every_place left place native-1 acquired after the farm exited.

The coordinator's requests are replaced by a recorder here; test_farm.py runs the real one."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("labgrid", reason="the farm extra (labgrid) is part of the test setup")

from treegen.device.farm import Coordinator  # noqa: E402


def _session(blocked: str):
    """A Coordinator that looks connected, whose ``blocked`` request (AcquirePlace or ReleasePlace) made
    outside the main thread waits until ``gate`` is set; (coordinator, calls, entered, gate)."""
    c = Coordinator("127.0.0.1:1")
    c._session = SimpleNamespace(stopping=threading.Event())
    c.sync = lambda: None
    c.place = lambda name: SimpleNamespace(acquired=None, exporters=[], tags={})
    c._matching_resources = lambda name: [("e", "g", "NetworkSerialPort", "r", None)]
    calls, entered, gate = [], threading.Event(), threading.Event()
    main = threading.current_thread()

    def rpc(method, request):
        calls.append((method, request.placename))
        if method == blocked and threading.current_thread() is not main:
            entered.set()
            assert gate.wait(10)

    c._rpc = rpc
    return c, calls, entered, gate


def _close_while(c, entered, gate, worker: threading.Thread) -> threading.Thread:
    worker.start()
    assert entered.wait(10)
    closer = threading.Thread(target=c.close)
    closer.start()
    time.sleep(0.3)
    waiting = closer.is_alive()
    gate.set()
    worker.join(10)
    closer.join(10)
    assert not closer.is_alive()
    return waiting


def test_close_waits_for_a_release_on_its_way():
    """Planted bug: close() without waiting -> it ends the session while the release is on its way
    (the coordinator never gets it)."""
    c, calls, entered, gate = _session("ReleasePlace")
    c._held.add("p")
    waiting = _close_while(c, entered, gate, threading.Thread(target=c.release, args=("p",)))
    assert waiting, "close() did not wait for the release on its way"
    assert calls == [("ReleasePlace", "p")] and not c._held


def test_a_place_acquired_while_the_session_closes_is_released():
    """Planted bug: acquire() adding the place to the held set only after a later step (or close() not
    waiting) -> the place acquired by the request on its way is never released."""
    c, calls, entered, gate = _session("AcquirePlace")
    waiting = _close_while(c, entered, gate, threading.Thread(target=c.acquire, args=("p",)))
    assert waiting, "close() did not wait for the acquire on its way"
    assert calls == [("AcquirePlace", "p"), ("ReleasePlace", "p")] and not c._held
