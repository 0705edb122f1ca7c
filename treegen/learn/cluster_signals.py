"""Stop signals while a local Dask cluster starts and runs.

Ctrl-C in a terminal sends SIGINT to the whole process group; only treegen should react (cancel the
tasks, close the cluster), not each worker process with a KeyboardInterrupt of its own. So worker
processes are started with SIGINT ignored — :func:`children_ignore_sigint` starts every process that
``multiprocessing`` or joblib's loky spawns through ``/bin/sh -c 'trap "" INT; exec ...'`` (an ignored
signal stays ignored across ``exec``; same process, same pid) — while treegen itself keeps its handlers.

A stop signal (SIGINT, SIGTERM, SIGHUP) that arrives while the cluster starts cannot interrupt Dask's
start-up without losing the half-started cluster and its processes: :func:`deferred_stop_signals`
records it, and :func:`raise_deferred` delivers it to the process's own handlers once the cluster
exists and will be closed (the exit status is then that of the signal: 130, 143, 129).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SH = "/bin/sh"


_TRAP = 'trap "" INT; exec "$0" "$@"'
_active = False


# A resource tracker (multiprocessing's or loky's) outlives the workers stopped on a signal and unlinks
# their semaphores itself; its "There appear to be N leaked semlock objects to clean up at shutdown"
# warning then only adds a second, confusing line under treegen's one-line "interrupted" message. The
# filter (a -W option cannot name a message containing ':') silences the tracker's UserWarnings, whose
# messages all start "resource_tracker"; it applies to the tracker process only.
_TRACKER_QUIET = "ignore:resource_tracker:UserWarning"


def _quiet_tracker(args: list) -> list:
    """``args`` (after the executable) with the tracker's shutdown warning filtered, for a tracker."""
    if any(isinstance(a, str) and "resource_tracker import main" in a for a in args):
        return ["-W", _TRACKER_QUIET, *args]
    return args


_LOKY_FORK_EXEC = "joblib.externals.loky.backend.fork_exec"


class _PatchOnImport:
    """A meta path finder that calls ``patch(module)`` right after the module ``name`` is imported, so
    that a module is patched without being imported for a command that never uses it (joblib costs
    about 0.1 s of start-up)."""

    def __init__(self, name: str, patch) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:           # the spec the other finders give, its loader wrapped
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, patch = spec.loader, self.patch
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        loader.exec_module = exec_and_patch
        return spec


@contextlib.contextmanager
def children_ignore_sigint() -> Iterator[None]:
    """Python worker processes started in this block — by ``multiprocessing`` (Dask's nannies, its
    resource tracker) or by joblib's loky (``cv --jobs``, ``fit --jobs``) — start with SIGINT ignored.
    joblib is patched when imported (now, or later in the block), never imported for it."""
    global _active
    import multiprocessing.util as mp_util

    if _active or not os.access(SH, os.X_OK):      # nested: the outer block has patched already
        yield
        return
    _active = True
    patched = []
    original = mp_util.spawnv_passfds

    def spawnv_passfds(path, args, passfds):
        return original(os.fsencode(SH), [SH, "-c", _TRAP, path, *_quiet_tracker(list(args)[1:])], passfds)

    patched.append((mp_util, "spawnv_passfds", original))
    mp_util.spawnv_passfds = spawnv_passfds

    def patch_loky(loky_fork_exec) -> None:
        if not hasattr(loky_fork_exec, "fork_exec"):
            return
        loky_original = loky_fork_exec.fork_exec

        def fork_exec(cmd, keep_fds, env=None):      # loky imports it from its module at each start
            return loky_original([SH, "-c", _TRAP, *cmd], keep_fds, env=env)

        patched.append((loky_fork_exec, "fork_exec", loky_original))
        loky_fork_exec.fork_exec = fork_exec

    finder = None
    if _LOKY_FORK_EXEC in sys.modules:
        patch_loky(sys.modules[_LOKY_FORK_EXEC])
    else:
        finder = _PatchOnImport(_LOKY_FORK_EXEC, patch_loky)
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder is not None and finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for module, name, value in reversed(patched):
            setattr(module, name, value)
        _active = False


@contextlib.contextmanager
def deferred_stop_signals() -> Iterator[list]:
    """Record stop signals instead of acting on them (main thread only; elsewhere nothing changes).
    Yields the list of signals received; the previous handlers are back on exit."""
    got: list = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def record(signum, frame):
        got.append(signum)

    previous = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, record)
        yield got
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def raise_deferred(got: list) -> None:
    """Deliver the first recorded signal to the handlers now in place (treegen's: an exception here)."""
    if got:
        signal.raise_signal(got[0])
