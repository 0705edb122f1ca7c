"""Where the test suite's time goes: CPU seconds per test file and per test.

Usage::

    python bench/suite_cpu.py [--out bench/results/suite_cpu.md] [--top 30] [--durations FILE] [-- PYTEST_ARGS]

Runs the README's test command (``bash scripts/test.sh``: setup, then pytest in parallel) with the plugin
``bench/suite_cpu_plugin.py``, which logs for every test the CPU time of its process and of the child
processes it reaped (compilers, emulators, CLI subprocesses) and its wall time. The report gives the
whole run's wall time and CPU (this script's reaped children: every process of the run), the CPU the
plugin attributed to tests, and the files and tests with the most CPU. On a machine with N cores the
suite cannot take less wall time than its CPU / N: this is the table to cut from.

CPU figures are what the kernel counted (``getrusage``), so they hold on a shared, noisy machine where
wall times do not; a process not reaped by the test that started it (a server a fixture stops later)
is counted against the test running when it is reaped.

It also says when each test worker ran its last test (a worker that ends early while another runs one
long file is a core left idle), and writes every file's wall time to ``tests/file_durations.json``
(``--durations``): tests/conftest.py hands the longest files to the workers first.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance

ROOT = Path(__file__).resolve().parents[1]


def per_file(rows: list[dict]) -> dict[str, list]:
    """{test file: [CPU s of the test processes, CPU s of their children, wall s, tests]}."""
    files: dict[str, list] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in rows:
        f = files[r["id"].split("::")[0]]
        f[0] += r["self"]
        f[1] += r["children"]
        f[2] += r["wall"]
        f[3] += 1
    return files


def summarise(rows: list[dict], top: int) -> tuple[list[tuple], list[dict]]:
    files = per_file(rows)
    by_file = sorted(((k, *v) for k, v in files.items()), key=lambda t: -(t[1] + t[2]))[:top]
    by_test = sorted(rows, key=lambda r: -(r["self"] + r["children"]))[:top]
    return by_file, by_test


def worker_ends(rows: list[dict]) -> tuple[float, list[float]]:
    """(seconds from the first test's start to the last test's end, when each worker's last test ended)."""
    timed = [r for r in rows if "start" in r]
    if not timed:
        return 0.0, []
    t0 = min(r["start"] for r in timed)
    ends: dict[str, float] = {}
    for r in timed:
        ends[r["worker"]] = max(ends.get(r["worker"], 0.0), r["start"] + r["wall"] - t0)
    return max(ends.values()), sorted(ends.values())


def file_durations(rows: list[dict]) -> dict[str, float]:
    return {k: round(v[2], 1) for k, v in sorted(per_file(rows).items())}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "suite_cpu.md"))
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--durations", default=str(ROOT / "tests" / "file_durations.json"),
                    help="where to write every test file's wall time ('' for nowhere)")
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    commit = provenance.commit_of(ROOT, digits=12, mark_uncommitted=True)
    log = Path(tempfile.mkdtemp(prefix="suite_cpu_")) / "tests.jsonl"
    env = dict(os.environ, SUITE_CPU_LOG=str(log),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")) if p))
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "scripts/test.sh", "-p", "suite_cpu_plugin", *extra], cwd=ROOT, env=env)
    wall = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    by_file, by_test = summarise(rows, args.top)
    attributed = sum(r["self"] + r["children"] for r in rows)
    cores = os.cpu_count() or 1
    command = "python bench/suite_cpu.py " + " ".join(argv)
    span, ends = worker_ends(rows)
    out = [f"`{command}`", "",
           f"Commit `{commit}`, {time.strftime('%Y-%m-%d')}, Python "
           f"{platform.python_version()}, {cores} cores, load average at the end "
           f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}; pytest exit status {proc.returncode}.", "",
           f"- whole run (`bash scripts/test.sh`, setup included): **{wall / 60:.1f} min wall**, "
           f"{ru.ru_utime / 60:.1f} min user + {ru.ru_stime / 60:.1f} min system CPU = "
           f"{(ru.ru_utime + ru.ru_stime) / 60:.1f} min ({(ru.ru_utime + ru.ru_stime) / cores / 60:.1f} min of "
           f"wall on {cores} cores at best)",
           f"- {len(rows)} tests; CPU attributed to them: {attributed / 60:.1f} min "
           f"({sum(r['self'] for r in rows) / 60:.1f} in the test processes, "
           f"{sum(r['children'] for r in rows) / 60:.1f} in the processes they started)",
           f"- tests ran for {span:.0f} s (first start to last end); each worker's last test ended at "
           f"{', '.join(f'{e:.0f}' for e in ends)} s", "",
           f"## The {len(by_file)} files with the most CPU", "",
           "| file | CPU s | of it children s | wall s (under load) | tests |", "|---|---:|---:|---:|---:|"]
    out += [f"| {f} | {s + c:.1f} | {c:.1f} | {w:.1f} | {n} |" for f, s, c, w, n in by_file]
    out += ["", f"## The {len(by_test)} tests with the most CPU", "", "| test | CPU s | wall s (under load) |",
            "|---|---:|---:|"]
    out += [f"| `{r['id']}` | {r['self'] + r['children']:.1f} | {r['wall']:.1f} |" for r in by_test]
    Path(args.out).write_text("\n".join(out) + "\n", encoding="utf-8")
    if args.durations and rows and proc.returncode == 0:
        Path(args.durations).write_text(json.dumps(
            {"command": command, "commit": commit, "cores": cores,
             "note": "wall seconds of each test file under xdist (tests/conftest.py: longest first)",
             "files": file_durations(rows)}, indent=1) + "\n", encoding="utf-8")
    print("\n".join(out[:6]))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
