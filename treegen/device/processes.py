"""Child processes of treegen (QEMU, the native harness, PlatformIO and what it starts): each runs
in its own process group, is registered here while it lives, and is stopped — the whole group, so
``pio``'s SCons and compilers too — when its owner is done, on any exception, and at the latest when
the interpreter exits (:func:`stop_all`, also registered with :mod:`atexit`).

The CLI turns SIGINT, SIGTERM and SIGHUP into an exception in the main thread, so the ``with``
blocks and ``finally`` clauses of the device layer run and call :func:`stop`; :func:`stop_all`
catches anything left. A child in its own group does not receive the terminal's Ctrl-C itself:
treegen decides when it stops.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time

_live: dict[int, subprocess.Popen] = {}
_lock = threading.Lock()


def spawn(cmd, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)`` in a new session (own process group), registered for cleanup."""
    kwargs["start_new_session"] = True
    proc = subprocess.Popen(cmd, **kwargs)
    with _lock:
        _live[proc.pid] = proc
    return proc


def _killpg(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop(proc: subprocess.Popen | None, *, grace: float = 0.5) -> int | None:
    """Stop ``proc`` and every process of its group: SIGTERM, ``grace`` s, then SIGKILL. Idempotent;
    returns the exit status of ``proc``."""
    if proc is None:
        return None
    try:
        if proc.poll() is None and grace > 0:
            _killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        _killpg(proc.pid, signal.SIGKILL)    # also what the leader left behind in its group
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:   # pragma: no cover - SIGKILL ignored: nothing more to do
            pass
    finally:
        with _lock:
            _live.pop(proc.pid, None)
    return proc.returncode


def forget(proc: subprocess.Popen) -> None:
    """Unregister a child that has exited and been reaped (its group is killed first, for stragglers)."""
    _killpg(proc.pid, signal.SIGKILL)
    with _lock:
        _live.pop(proc.pid, None)


def live() -> list[int]:
    """Process ids of the registered children (for tests and diagnostics)."""
    with _lock:
        return [pid for pid, p in _live.items() if p.poll() is None]


def stop_all(grace: float = 0.2) -> None:
    """Stop every registered child (their whole groups)."""
    with _lock:
        procs = list(_live.values())
    for proc in procs:
        stop(proc, grace=grace)


def wait(proc: subprocess.Popen, timeout: float | None = None) -> int:
    """``proc.wait`` that wakes up regularly, so a signal handler's exception is raised promptly."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
        try:
            return proc.wait(timeout=step)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise


def run(cmd, **kwargs) -> int:
    """Run ``cmd`` to completion in its own process group (stopped, group and all, if interrupted);
    returns its exit status."""
    proc = spawn(cmd, **kwargs)
    try:
        return wait(proc)
    finally:
        stop(proc)


atexit.register(stop_all)
