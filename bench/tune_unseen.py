"""`treegen tune` on datasets it was not developed on: does it complete, what does it choose, what failed.

Usage::

    nice -n 10 python bench/tune_unseen.py [--datasets gls,zoo,ion,son,liv,bcw,hrts,lym]
        [--targets qemu-m4,simavr-uno] [--algos cart,id3,de-pdt,rf] [--candidates 2] [--seed 0]
        [--workers 1] [--jobs 1] [--out bench/results/tune_unseen] [--keep DIR]

tune was developed and benched on irs (tests, docs), veh, pid and seg (bench/tune_bench.py); the
default datasets here are eight others of ``../shared/datasets`` of varied shapes (6 to 60 features,
2 to 7 classes, 101 to 699 rows; zoo's smallest class has 4 rows, fewer than the 5 folds). Each
(dataset, target) runs the command a user types, as a separate process::

    treegen tune DATA --target qemu-m4 --max-flash 1KiB --max-latency-us 2 ...
    treegen tune DATA --target simavr-uno --max-flash 2KiB ...

and records: its exit status (0 chosen; 2 nothing fits, one line; 1 no model within the budget
passed its confirming HIL run; anything else, or a traceback, is "did not complete"), whether the
JSON and the plot were written, the chosen model and its confirmation line, and every failed
candidate (stage, layout, variant, reason) from the JSON.

Output: ``<out>.md`` and ``<out>.json`` (the command and the commit in the header); the runs'
folders (JSON, plot, stdout/stderr) under ``--keep`` (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"

#: target -> its budget options
BUDGETS = {"qemu-m4": ["--max-flash", "1KiB", "--max-latency-us", "2"], "simavr-uno": ["--max-flash", "2KiB"]}
DEFAULT_DATASETS = "gls,zoo,ion,son,liv,bcw,hrts,lym"


def run_one(name: str, target: str, args, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["treegen", "tune", str(DATASETS / f"{name}.csv.gz"), "--target", target, *BUDGETS[target],
            "--algos", args.algos, "--candidates", str(args.candidates), "--seed", str(args.seed),
            "--workers", str(args.workers), "-o", str(folder / "best.json"), "--json", str(folder / "tune.json"),
            "--plot", str(folder / "front.png"), "-q"]
    if args.budget_minutes:
        argv += ["--budget-minutes", str(args.budget_minutes)]
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "treegen", *argv[1:]], capture_output=True, text=True, env=env,
                          cwd=folder)
    seconds = time.monotonic() - t0
    (folder / "stdout.txt").write_text(proc.stdout)
    (folder / "stderr.txt").write_text(proc.stderr)
    shown = shlex.join(argv).replace(str(DATASETS), "../shared/datasets").replace(str(folder), "RUN")
    rec = {"dataset": name, "target": target, "command": shown,
           "exit": proc.returncode, "seconds": round(seconds, 1), "json_written": (folder / "tune.json").exists(),
           "plot_written": (folder / "front.png").exists(), "traceback": "Traceback" in proc.stderr,
           "stderr": proc.stderr.strip().splitlines()[-3:],
           "best_line": next((ln for ln in proc.stdout.splitlines() if ln.startswith("best: ")), None),
           "hil_line": next((ln for ln in proc.stdout.splitlines() if ln.startswith("HIL on ")), None)}
    rec["completed"] = proc.returncode in (0, 1, 2) and rec["json_written"] and not rec["traceback"]
    if rec["json_written"]:
        res = json.loads((folder / "tune.json").read_text())
        rec.update(outcome=res.get("outcome"), message=res.get("message"), points=len(res["points"]),
                   candidates=len(res["search"]["candidates"]), refused_values=res["search"].get("refused_values", []),
                   failures=[{k: f.get(k) for k in ("name", "stage", "layout", "variant", "reason")}
                             for f in res.get("failures", [])],
                   chosen=None if res["chosen"] is None else
                   {k: res["chosen"][k] for k in ("name", "layout", "variant", "accuracy", "flash_bytes",
                                                  "latency_us")})
    return rec


def markdown(records: list[dict], command: str, at_commit: str | None = None) -> str:
    lines = ["# `treegen tune` on datasets it was not developed on", "",
             f"Command: `{command}`  ", f"Commit: {at_commit or provenance.commit_of(REPO)}", "",
             "tune was developed and benched on irs, veh, pid and seg; these datasets are others of "
             "`../shared/datasets` (6 to 60 features, 2 to 7 classes, 101 to 699 rows). Each run is the command "
             "a user types, in its own process (the per-run commands below; `-o`/`--json`/`--plot` into a "
             "scratch folder, `RUN` below).", "",
             "The emulated Uno is simavr-uno (cycle-exact: its latencies are CPU cycles at 16 MHz); its budget "
             "is the issue's 2 KiB of flash.", "",
             "Exit status: 0 a model chosen and confirmed on the device; 2 nothing fits the budget (one line); "
             "1 no model within the budget passed its confirming HIL run. *Completed*: one of those, the JSON "
             "and the plot written, no traceback.", "",
             "| dataset | target | completed | exit | s | candidates | points | chosen | failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        chosen = "-" if not r.get("chosen") else (f"{r['chosen']['name']} ({r['chosen']['layout']}, "
                                                  f"{r['chosen']['variant']}) {100 * r['chosen']['accuracy']:.2f} %, "
                                                  f"{r['chosen']['flash_bytes']} B, "
                                                  f"{r['chosen']['latency_us']:.3g} µs")
        lines.append(f"| {r['dataset']} | {r['target']} | {'yes' if r['completed'] else 'NO'} | {r['exit']} | "
                     f"{r['seconds']:.0f} | {r.get('candidates', '-')} | {r.get('points', '-')} | {chosen} | "
                     f"{len(r.get('failures') or [])} |")
    lines += ["", "## Per run", ""]
    for r in records:
        lines += [f"### {r['dataset']} on {r['target']}", "", f"`{r['command']}`", ""]
        if r.get("best_line"):
            lines.append(f"    {r['best_line']}")
        if r.get("hil_line"):
            lines.append(f"    {r['hil_line']}")
        if r["exit"] != 0 and r["stderr"]:
            lines += [f"    {ln}" for ln in r["stderr"]]
        if r.get("outcome"):
            lines += ["", f"Outcome: {r['outcome']}."]
        if r.get("refused_values"):
            lines += ["", "Knob values the inducers refused on this shape (left out of the search):", ""]
            lines += [f"- {v}" for v in r["refused_values"]]
        if r.get("failures"):
            lines += ["", "Failed candidates (the search went on without them):", ""]
            lines += [f"- {f['name']} [{f['stage']}{', ' + f['layout'] if f.get('layout') else ''}"
                      f"{', ' + f['variant'] if f.get('variant') else ''}]: {f['reason']}" for f in r["failures"]]
        elif r.get("json_written"):
            lines += ["", "Failed candidates: none."]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=DEFAULT_DATASETS)
    ap.add_argument("--targets", default="qemu-m4,simavr-uno")
    ap.add_argument("--algos", default="cart,id3,de-pdt,rf")
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--budget-minutes", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (each its own process)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "tune_unseen"))
    ap.add_argument("--keep", default=None, help="keep every run's folder here")
    ap.add_argument("--render", metavar="JSON", help="only write <out>.md again from a results JSON of this script")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        text = markdown(saved["records"], saved["command"], saved["commit"])
        Path(args.out).with_suffix(".md").write_text(text + "\n")
        return 0
    command = "python bench/tune_unseen.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    records = []
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="treegen-tune-unseen-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        runs = [(name, target) for target in args.targets.split(",") for name in args.datasets.split(",")]
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {pool.submit(run_one, name, target, args, base / f"{name}-{target}"): (name, target)
                       for name, target in runs}
            for fut in concurrent.futures.as_completed(futures):
                rec = fut.result()
                records.append(rec)
                records.sort(key=lambda r: runs.index((r["dataset"], r["target"])))
                print(f"{rec['dataset']} {rec['target']}: exit {rec['exit']}, completed {rec['completed']}, "
                      f"{rec['seconds']:.0f} s, {len(rec.get('failures') or [])} failed", flush=True)
                # written after every run: a long bench cut short keeps what it measured
                out.with_suffix(".json").write_text(json.dumps({"command": command, "commit": provenance.commit_of(REPO),
                                                                "records": records}, indent=1) + "\n")
                out.with_suffix(".md").write_text(markdown(records, command) + "\n")
    return 0 if all(r["completed"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
