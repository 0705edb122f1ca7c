"""Helpers of the reliability suite: running ``python -m treegen`` as a separate process (the code
under test is the ``treegen`` package this test session imported, so the suite can be pointed at
another checkout with PYTHONPATH), and listing processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import treegen

ROOT = Path(treegen.__file__).resolve().parents[1]
DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def env(**extra) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("TREEGEN_CACHE", str(Path(os.environ.get("TMPDIR", "/tmp")) / "treegen-test-cache"))
    e.update(extra)
    return e


def treegen_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "treegen", *map(str, args)]


def run(*args, input=None, timeout=60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(treegen_cmd(*args), input=input, capture_output=True, timeout=timeout, env=env(), **kw)


def popen(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen(treegen_cmd(*args), env=env(), **kw)


def one_error_line(proc, match: str) -> str:
    err = proc.stderr.decode() if isinstance(proc.stderr, bytes) else proc.stderr
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("treegen: error: "), err[-2000:]
    assert match in lines[0], lines[0]
    return lines[0]


def descendants(pid: int) -> list[int]:
    """Every living process whose parent chain leads to ``pid`` (from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out.extend(kids)
        frontier.extend(kids)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
