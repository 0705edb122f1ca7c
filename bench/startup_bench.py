"""Start-up cost of the ``treegen`` command line: wall and CPU time of whole processes.

Usage::

    python bench/startup_bench.py [--before COMMIT] [--repeats 10] [--iters 50000]
                                  [--reference /path/to/efti] [--ref-repeats 3] [--md OUT] [--json OUT]

Times ``python -m treegen --version``, ``--help``, ``fit`` (the shared ``veh`` dataset, EFTI,
``--max-iter ITERS``) and ``export`` (that model, C for cortex-m4) as separate processes: wall clock
(``time.perf_counter`` around the process) and CPU (user + system of the finished child, from
``getrusage(RUSAGE_CHILDREN)``), median of ``--repeats`` runs. With ``--before COMMIT`` the same
commands also run on that commit (a temporary clone of this repository, removed afterwards), the two
checkouts alternating run by run so that both see the same load on a shared machine.

With ``--reference`` (a build of the public EFTI reference, github.com/bogdanvuk/efti, made by
``bash bench/build_efti_reference.sh``; not part of treegen) the reference's own per-fold training
time on veh at the same iterations is measured in the same run, as bench/train_bench.py reads it
(5 folds, ``$cv_pc_run`` lines, its ``getrusage`` user time; ``--ref-repeats`` runs, median fold).
The ratio is reference per-fold time / treegen's whole ``fit`` process (>= 1: treegen's whole command,
start-up included, takes no longer than the reference spends training one fold).

The native engine is compiled once per checkout before timing (a warm-up ``fit``), into a cache of
this run; the timed processes load it, as a user's second ``fit`` does. Both checkouts' modules are
byte-compiled first (``compileall``, as ``pip install`` does), so neither side pays for compiling its
sources (with ``PYTHONDONTWRITEBYTECODE`` set, a checkout would otherwise be compiled on every run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance
from shared_data import DATASETS
from train_bench import reference_rates

ROOT = Path(__file__).resolve().parents[1]


def commit_of(repo: Path) -> str:
    return provenance.commit_of(repo, digits=12, mark_uncommitted=True)


def checkout_at(commit: str, into: Path) -> Path:
    """A clone of this repository at ``commit`` in ``into`` (with ../shared beside it, as the repo expects)."""
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(into / "repo")], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=into / "repo", check=True)
    (into / "shared").symlink_to(DATASETS.parent, target_is_directory=True)
    return into / "repo"


def run_timed(checkout: Path, args: list[str], env: dict) -> tuple[float, float]:
    """(wall s, user + system CPU s) of ``python -m treegen ARGS`` run from ``checkout`` (in a folder
    outside any checkout: ``-m`` puts the working directory first on the module path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "treegen", *args], env={**env, "PYTHONPATH": str(checkout)},
                          cwd=env["TREEGEN_CACHE"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"startup_bench: treegen {' '.join(args)} failed in {checkout}:\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(work: Path, iters: int) -> dict[str, list[str]]:
    model = work / "veh.json"
    return {
        "--version": ["--version"],
        "--help": ["--help"],
        f"fit veh --max-iter {iters}": ["fit", str(DATASETS / "veh.csv.gz"), "--algo", "efti", "--max-iter",
                                        str(iters), "-o", str(model), "-q"],
        "export (veh model, cortex-m4)": ["export", str(model), "--target", "cortex-m4", "-o", str(work / "c"),
                                          "--force"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", metavar="COMMIT", help="also time this commit (e.g. the base of a change)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50000)
    ap.add_argument("--reference", help="path to a built EFTI reference binary (optional)")
    ap.add_argument("--ref-repeats", type=int, default=3)
    ap.add_argument("--md", dest="md_out")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args(argv)
    cmd = f"python bench/startup_bench.py --repeats {a.repeats} --iters {a.iters}"
    if a.before:
        cmd += f" --before {a.before}"
    if a.reference:
        cmd += f" --reference REF --ref-repeats {a.ref_repeats}"
    print(f"# {cmd}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="treegen-startup-"))
    try:
        env = {**os.environ, "TREEGEN_CACHE": str(tmp / "cache")}
        (tmp / "cache").mkdir()
        env.pop("PYTHONPATH", None)
        sides = {"after": (ROOT, commit_of(ROOT))}
        if a.before:
            before = checkout_at(a.before, tmp / "before")
            sides = {"before": (before, commit_of(before)), **sides}
        cmds = {}
        for side, (checkout, _) in sides.items():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "treegen")], check=True,
                           stdout=subprocess.DEVNULL, env={k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"})
            work = tmp / f"work-{side}"
            work.mkdir()
            cmds[side] = commands(work, a.iters)
            for args in cmds[side].values():          # warm-up: compiles the native engine, writes the model
                run_timed(checkout, args, env)
        times = {side: {name: [] for name in cmds[side]} for side in sides}
        for _ in range(a.repeats):                  # alternate the checkouts: the same load for both
            for side, (checkout, _) in sides.items():
                for name, args in cmds[side].items():
                    times[side][name].append(run_timed(checkout, args, env))
        ref_folds = []
        if a.reference:
            for _ in range(a.ref_repeats):
                ref_folds += [a.iters / rate for rate in reference_rates(a.reference, "veh", a.iters, 1)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows, results = [], []
    fit_name = f"fit veh --max-iter {a.iters}"
    ref_fold = statistics.median(ref_folds) if ref_folds else None
    for name in cmds["after"]:
        row = {"command": f"treegen {name}"}
        for side in sides:
            walls = [w for w, _ in times[side][name]]
            cpus = [c for _, c in times[side][name]]
            row[f"{side}_wall_s"] = round(statistics.median(walls), 3)
            row[f"{side}_cpu_s"] = round(statistics.median(cpus), 3)
        if name == fit_name and ref_fold is not None:
            row["reference_fold_s"] = round(ref_fold, 3)
            for side in sides:
                row[f"{side}_ratio_wall"] = round(ref_fold / row[f"{side}_wall_s"], 2)
                row[f"{side}_ratio_cpu"] = round(ref_fold / row[f"{side}_cpu_s"], 2)
        results.append(row)
    load = os.getloadavg()
    head = ["command"] + [f"{s} {k}" for s in sides for k in ("wall s", "CPU s")]
    for row in results:
        cells = [row["command"]] + [f"{row[f'{s}_{k}']:.3f}" for s in sides for k in ("wall_s", "cpu_s")]
        rows.append(cells)
    print(" | ".join(head))
    for cells in rows:
        print(" | ".join(cells))
    fit = next(r for r in results if r["command"] == f"treegen {fit_name}")
    ratio_lines = []
    if ref_fold is not None:
        for side in sides:
            ratio_lines.append(f"- {side}: reference per-fold {ref_fold:.3f} s / treegen fit whole process "
                               f"{fit[f'{side}_wall_s']:.3f} s wall = **{fit[f'{side}_ratio_wall']:.2f}** "
                               f"({fit[f'{side}_cpu_s']:.3f} s CPU: {fit[f'{side}_ratio_cpu']:.2f})")
        print("\n".join(ratio_lines))
    print(f"# load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    info = {"command": cmd, "python": platform.python_version(), "machine": platform.machine(),
            "cores": os.cpu_count(), "loadavg_end": [round(x, 2) for x in load],
            "commits": {s: c for s, (_, c) in sides.items()}, "repeats": a.repeats,
            "reference_fold_times_s": [round(t, 4) for t in ref_folds], "results": results}
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(info, indent=1) + "\n")
    if a.md_out:
        lines = [f"`{cmd}`", "",
                 "Commits: " + ", ".join(f"{s} `{c}`" for s, (_, c) in sides.items())
                 + f". Python {platform.python_version()}, {os.cpu_count()} cores, load average at the end "
                 f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (a shared machine: other jobs ran).", "",
                 f"Whole processes (`python -m treegen ...`), median of {a.repeats} alternating runs; wall = "
                 "perf_counter around the process, CPU = its user + system time.", "",
                 "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        if ratio_lines:
            lines += ["", f"EFTI reference (bogdanvuk/efti, `--max_iter={a.iters} --dataset_selection=veh "
                          f"--folds=5`, {a.ref_repeats} runs): median per-fold training time {ref_fold:.3f} s "
                          "(its getrusage user time).", ""] + ratio_lines
        Path(a.md_out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
