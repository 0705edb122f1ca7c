"""pytest plugin of ``bench/suite_cpu.py``: one JSON line per test in ``$SUITE_CPU_LOG`` with the CPU time of
the test's process (user + system) and of the child processes it reaped while the test ran (compilers,
emulators, CLI subprocesses: ``RUSAGE_CHILDREN``), and its wall time. Under pytest-xdist each worker
appends its own lines (one ``write`` per line)."""

from __future__ import annotations

import json
import os
import resource
import time

import pytest


def _cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("SUITE_CPU_LOG")
    s, c, t, start = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.monotonic(), time.time()
    yield
    if path:
        line = json.dumps({"id": item.nodeid, "self": round(_cpu(resource.RUSAGE_SELF) - s, 4),
                           "children": round(_cpu(resource.RUSAGE_CHILDREN) - c, 4),
                           "wall": round(time.monotonic() - t, 4), "start": round(start, 3),
                           "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
