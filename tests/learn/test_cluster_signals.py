"""treegen.learn.cluster_signals: worker processes start with SIGINT ignored; stop signals during a
cluster's start are recorded and delivered afterwards (issue 24)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import signal

import pytest

from treegen.learn.cluster_signals import children_ignore_sigint, deferred_stop_signals, raise_deferred


def _report(q):
    with open("/proc/self/status") as fh:
        ign = int(next(line for line in fh if line.startswith("SigIgn:")).split()[1], 16)
    q.put(bool(ign & (1 << (signal.SIGINT - 1))))


def _sigint_ignored_in_a_spawned_child() -> bool:
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_report, args=(q,))
    p.start()
    try:
        return q.get(timeout=60)
    finally:
        p.join(30)


def test_children_start_with_sigint_ignored():
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    with children_ignore_sigint():
        assert _sigint_ignored_in_a_spawned_child()
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN       # this process was never deaf


def test_stop_signals_are_deferred_then_raised():
    before = signal.getsignal(signal.SIGTERM)
    hits = []
    signal.signal(signal.SIGTERM, lambda s, f: hits.append(s))
    try:
        with deferred_stop_signals() as got:
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)            # recorded, no KeyboardInterrupt here
            assert hits == []
        assert got == [signal.SIGTERM, signal.SIGINT]
        raise_deferred(got)                               # the first one, to the handler now in place
        assert hits == [signal.SIGTERM]
        with pytest.raises(KeyboardInterrupt):
            raise_deferred([signal.SIGINT])
    finally:
        signal.signal(signal.SIGTERM, before)


def _sigint_ignored_here(_=None) -> bool:
    with open("/proc/self/status") as fh:
        ign = int(next(line for line in fh if line.startswith("SigIgn:")).split()[1], 16)
    return bool(ign & (1 << (signal.SIGINT - 1)))


def test_loky_workers_start_with_sigint_ignored():
    """joblib's loky (cv --jobs, fit --jobs) starts its workers with its own fork_exec: patched too."""
    from joblib.externals.loky import get_reusable_executor

    with children_ignore_sigint():
        executor = get_reusable_executor(max_workers=1, reuse=False)     # new workers, started here
        try:
            assert executor.submit(_sigint_ignored_here).result(timeout=60)
        finally:
            executor.shutdown(wait=True, kill_workers=True)


LOKY_IMPORTED_IN_THE_BLOCK = """
import signal, sys
from treegen.learn.cluster_signals import children_ignore_sigint

def sigint_ignored(_=None):
    with open("/proc/self/status") as fh:
        ign = int(next(line for line in fh if line.startswith("SigIgn:")).split()[1], 16)
    return bool(ign & (1 << (signal.SIGINT - 1)))

with children_ignore_sigint():
    print("joblib before:", "joblib" in sys.modules)
    from joblib.externals.loky import get_reusable_executor     # first imported inside the block
    executor = get_reusable_executor(max_workers=1, reuse=False)
    try:
        print("worker ignores SIGINT:", executor.submit(sigint_ignored).result(timeout=60))
    finally:
        executor.shutdown(wait=True, kill_workers=True)
from joblib.externals.loky.backend import fork_exec
print("restored:", fork_exec.fork_exec.__module__ == fork_exec.__name__)
"""


def test_loky_imported_inside_the_block_is_patched_and_not_before():
    """The block imports no joblib (``treegen --version`` / ``targets`` run in it); a command that
    imports joblib inside it still starts loky workers with SIGINT ignored, and the original is back after."""
    proc = subprocess.run([sys.executable, "-c", LOKY_IMPORTED_IN_THE_BLOCK], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["joblib before: False", "worker ignores SIGINT: True", "restored: True"]


LEAK_A_SEMAPHORE = """
import multiprocessing.resource_tracker as rt
from treegen.learn.cluster_signals import children_ignore_sigint
with children_ignore_sigint():
    rt.ensure_running()               # the tracker is spawned inside the block, as under cv --jobs / compare
rt.register("/treegen-test-never-unlinked", "semaphore")   # left registered, as by a worker stopped on a signal
"""


def test_the_resource_trackers_shutdown_warning_is_not_printed(tmp_path):
    """A tracker started by treegen's workers unlinks what stopped workers left, silently: no second
    'leaked semlock objects' line under treegen's one-line 'interrupted' message."""
    proc = subprocess.run([sys.executable, "-c", LEAK_A_SEMAPHORE], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr


def test_only_the_tracker_gets_the_warning_filter():
    from treegen.learn.cluster_signals import _quiet_tracker

    tracker = ["-c", "from joblib.externals.loky.backend.resource_tracker import main; main(5, False)"]
    worker = ["-c", "from joblib.externals.loky.backend.popen_loky_posix import main; main()"]
    assert _quiet_tracker(tracker)[:2] == ["-W", "ignore:resource_tracker:UserWarning"]
    assert _quiet_tracker(worker) == worker
