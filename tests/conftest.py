"""Shared fixtures. The shared datasets live beside the repository at ../shared (also in CI)."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

# the native engine's compiled libraries go to a folder of this test run, never to ~/.cache/treegen
# (unless the caller chose a cache with TREEGEN_CACHE); subprocesses inherit it
if "TREEGEN_CACHE" not in os.environ:
    os.environ["TREEGEN_CACHE"] = tempfile.mkdtemp(prefix="treegen-test-cache-")
SHARED = REPO.parent / "shared"
DATASETS = SHARED / "datasets"

# The signal tests stand for Ctrl-C in a terminal, where SIGINT has its default action. A run started
# in the background by a non-interactive shell (`cmd &`, nohup) inherits SIGINT *ignored*, and every
# child process (treegen, like any Unix program) keeps an ignored SIGINT ignored: give the children
# the default (a Python handler here becomes SIG_DFL across exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        raise RuntimeError(f"shared datasets not found at {DATASETS}; tests need ../shared beside the repo")
    return DATASETS


def load_shared(name: str):
    """(X int Q15 array, y 1-based labels) of a shared dataset."""
    path = DATASETS / f"{name}.csv.gz"
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64)
    return data[:, :-1], data[:, -1]


def process_group_gone(pid: int, within: float) -> bool:
    """Whether the process group ``pid`` (a run started with ``start_new_session=True``) has no process
    left within ``within`` seconds (zombies take a moment); if some remain, they are SIGKILLed and the
    answer is False."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.killpg(pid, signal.SIGKILL)
    return False


def run_cli(capsys, argv):
    """Run ``treegen ARGV`` in-process: (exit code, stdout, stderr)."""
    from treegen import cli

    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(capsys, argv, match: str) -> str:
    """The CLI must fail with exit 2 and exactly one line ``treegen: error: ...`` containing ``match``."""
    code, out, err = run_cli(capsys, argv)
    assert code == 2, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("treegen: error: "), err
    assert "Traceback" not in err
    assert match.lower() in lines[0].lower(), lines[0]
    return lines[0]


# ---------------------------------------------------------------------- no process outlives the tests
def _leftover_processes(base: str) -> list[tuple[int, str]]:
    """(pid, command) of running processes whose command line names the session's temp folder
    (QEMU boards, native harnesses, PlatformIO builds started by the tests)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if base in cmd and " -m pytest" not in cmd:
            found.append((int(entry.name), cmd[:160]))
    return found


#: every test file's wall time in the last measured run (bench/suite_cpu.py writes it)
FILE_DURATIONS = REPO / "tests" / "file_durations.json"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The longest test files first (their wall time in tests/file_durations.json; a file not listed
    there counts as long, it may be new and slow), each file's tests kept in order. With pytest-xdist
    (--dist loadfile --no-loadscope-reorder, scripts/test.sh) the workers take files in this order, so
    no worker is still starting a long file while the others have run out of work."""
    try:
        durations = json.loads(FILE_DURATIONS.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError):
        return
    unknown = max(durations.values(), default=0.0)
    rank = {item: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-durations.get(item.nodeid.split("::")[0], unknown), rank[item]))


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a process started by a test (its command line names the session's temp
    folder) is still running at the end: a leak, and on CI a CPU hog. The processes are killed."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or not Path("/proc").is_dir():
        return
    base = str(factory.getbasetemp())
    time.sleep(0.5)                                   # let processes stopped just now exit
    leftovers = _leftover_processes(base)
    for pid, _ in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if leftovers:
        lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in leftovers)
        print(f"\nERROR: {len(leftovers)} process(es) started by the tests outlived them (killed now):\n{lines}",
              file=sys.stderr)
        session.exitstatus = 1
