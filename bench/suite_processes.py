"""Where the test suite's CPU goes, by program: compilers, emulators, PlatformIO, CLI runs, test workers.

Usage (root, on a quiet machine: the kernel accounts every process that ends while it runs)::

    python bench/suite_processes.py [--out bench/results/suite_processes.md] [--top 25] [-- PYTEST_ARGS]

Runs the README's test command (``bash scripts/test.sh``) with BSD process accounting on (``accton``
of the Debian package acct; ``dump-acct`` reads the records back), then totals user + system CPU by
program name (the kernel's 15-character ``comm``). Python processes are split into the pytest
controller and its test workers (by parent process id) and the rest (PlatformIO and SCons, ``python -m
treegen`` runs, Dask and labgrid processes, ...), with a histogram of the rest's CPU per process: the
fixed start-up cost of many short processes shows there. bench/suite_cpu.py gives the same CPU per
test file and test; this gives it per program, which no test owns (a compiler, QEMU).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance

ROOT = Path(__file__).resolve().parents[1]
BUCKETS = (0.2, 0.4, 0.6, 0.8, 1.2, 2.0, 5.0)


def records(pacct: Path) -> list[dict]:
    """The accounting records: comm, cpu (s), pid, ppid."""
    out = subprocess.run(["dump-acct", str(pacct)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 11:
            continue
        rows.append({"comm": f[0], "cpu": (float(f[2]) + float(f[3])) / 100.0, "pid": int(f[9]), "ppid": int(f[10])})
    return rows


def summarise(rows: list[dict], shell_pid: int) -> dict:
    controller = [r for r in rows if r["ppid"] == shell_pid and r["comm"].startswith("python")]
    ctl = {r["pid"] for r in controller}
    workers = [r for r in rows if r["ppid"] in ctl and r["comm"].startswith("python")]
    suite = {r["pid"] for r in controller + workers}
    progs: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        name = r["comm"] if r["pid"] not in suite else "pytest (controller, workers)"
        progs[name][0] += 1
        progs[name][1] += r["cpu"]
    others = [r["cpu"] for r in rows if r["comm"].startswith("python") and r["pid"] not in suite]
    hist = collections.OrderedDict()
    lo = 0.0
    for hi in (*BUCKETS, float("inf")):
        sel = [c for c in others if lo <= c < hi]
        hist[f"{lo:g}-{hi:g} s" if hi != float("inf") else f">= {lo:g} s"] = (len(sel), sum(sel))
        lo = hi
    return {"total": sum(r["cpu"] for r in rows), "programs": progs, "workers": sorted(r["cpu"] for r in workers),
            "controller": sum(r["cpu"] for r in controller), "python_other": hist}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "suite_processes.md"))
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    missing = [t for t in ("accton", "dump-acct") if shutil.which(t) is None]
    if missing:
        print(f"suite_processes: error: {', '.join(missing)} not found: apt-get install acct", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("suite_processes: error: process accounting needs root (accton)", file=sys.stderr)
        return 2
    commit = provenance.commit_of(ROOT, digits=12, mark_uncommitted=True)
    pacct = Path(tempfile.mkdtemp(prefix="suite_processes_")) / "pacct"
    pacct.touch()
    subprocess.run(["accton", str(pacct)], check=True, capture_output=True)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(["bash", "scripts/test.sh", *extra], cwd=ROOT)
        rc = proc.wait()
    finally:
        subprocess.run(["accton", "off"], capture_output=True)
    wall = time.monotonic() - t0
    s = summarise(records(pacct), proc.pid)
    command = "python bench/suite_processes.py " + " ".join(argv)
    cores = os.cpu_count() or 1
    progs = sorted(s["programs"].items(), key=lambda kv: -kv[1][1])
    out = [f"`{command}`", "",
           f"Commit `{commit}`, {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, {cores} cores; "
           f"pytest exit status {rc}. Every process that ended during the run is counted (a quiet machine).", "",
           f"- whole run (`bash scripts/test.sh`, setup included): **{wall / 60:.1f} min wall**, "
           f"{s['total'] / 60:.1f} min of CPU ({s['total'] / cores / 60:.1f} min of wall on {cores} cores at best)",
           f"- pytest: controller {s['controller']:.0f} s of CPU; its Python children (the test workers, "
           f"collection included): {', '.join(f'{w:.0f}' for w in s['workers'] if w >= 1)} s"
           f"{f' ({n} more under 1 s)' if (n := sum(w < 1 for w in s['workers'])) else ''}", "",
           f"## CPU by program (the {min(args.top, len(progs))} with the most)", "",
           "| program | processes | CPU s | CPU % |", "|---|---:|---:|---:|"]
    out += [f"| {name} | {n} | {cpu:.1f} | {100 * cpu / max(s['total'], 1e-9):.1f} |"
            for name, (n, cpu) in progs[:args.top]]
    out += ["", "## Other Python processes (PlatformIO, SCons, CLI runs, Dask, labgrid), by CPU each", "",
            "| CPU per process | processes | CPU s |", "|---|---:|---:|"]
    out += [f"| {k} | {n} | {cpu:.1f} |" for k, (n, cpu) in s["python_other"].items()]
    Path(args.out).write_text("\n".join(out) + "\n", encoding="utf-8")
    print("\n".join(out[:7]))
    return rc


if __name__ == "__main__":
    sys.exit(main())
