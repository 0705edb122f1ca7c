"""treegen.learn.cluster_signals: worker processes start with SIGINT ignored; stop signals during a
cluster's start are recorded and delivered afterwards (issue 24)."""

from __future__ import annotations

import multiprocessing
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
