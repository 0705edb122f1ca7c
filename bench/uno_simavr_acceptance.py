"""Issue #32 acceptance 1 on simavr-uno: `treegen hil` of EFTI, CART and a forest with --layout unrolled
and --layout table on irs, pid and bcw, each run twice (a fresh emulator each time); 0 mismatches and the
same BENCH cycle totals in both runs. Writes bench/results/uno_simavr_acceptance.{json,md}.

    nice -n 10 python bench/uno_simavr_acceptance.py [--out bench/results] [--work /tmp/uno-acc]

Models (`treegen fit D --seed 1`): efti (defaults), cart --max-depth 6, rf --n-trees 5 --max-depth 4.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
ALGOS = {"efti": ["--algo", "efti"], "cart": ["--algo", "cart", "--max-depth", "6"],
         "rf": ["--algo", "rf", "--n-trees", "5", "--max-depth", "4"]}
NAMES = ("irs", "pid", "bcw")
LAYOUTS = ("unrolled", "table")


def treegen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "treegen", *args], capture_output=True, text=True, cwd=ROOT)


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=ROOT).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--work", default="/tmp/uno-simavr-acceptance")
    ap.add_argument("--datasets", default=str(DATASETS))
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows, lines = [], []
    for name in NAMES:
        data = str(Path(args.datasets) / f"{name}.csv.gz")
        for algo, fit_args in ALGOS.items():
            model = work / f"{name}-{algo}.json"
            res = treegen("fit", data, *fit_args, "--seed", "1", "-o", str(model), "-q")
            if res.returncode != 0:
                raise SystemExit(f"fit {name} {algo}: {res.stderr.strip()}")
            for layout in LAYOUTS:
                runs = []
                for run in (1, 2):
                    report = work / f"{name}-{algo}-{layout}-{run}.json"
                    cmd = ["hil", str(model), "--target", "simavr-uno", "--data", data, "--layout", layout,
                           "-o", str(work / f"build-{name}-{algo}-{layout}"), "--json", str(report), "-q"]
                    res = treegen(*cmd)
                    rep = json.loads(report.read_text())
                    runs.append(rep)
                    lines.append(f"$ treegen {' '.join(cmd)}".replace(str(Path(args.datasets)), "../shared/datasets")
                                 .replace(str(work) + "/", ""))
                    lines += [ln for ln in res.stdout.splitlines()
                              if ln.split(" ")[0] in ("flash", "predictions", "bench", "result", "proba")]
                    if res.returncode != 0:
                        lines.append(f"exit {res.returncode}: {res.stderr.strip()}")
                totals = [[r["total"] for r in rep["bench"]["rows"]] for rep in runs]
                rows.append({"dataset": name, "algo": algo, "layout": layout, "rows": runs[0]["rows"],
                             "mismatches": [r["mismatches"] for r in runs], "ok": [r["ok"] for r in runs],
                             "cycles_per_inference": [r["insn_per_inference"] for r in runs],
                             "bench_totals_equal": totals[0] == totals[1], "bench_totals": totals[0],
                             "flash_bytes": runs[0]["flash_bytes"], "ram_bytes": runs[0]["ram_bytes"]})
                print(json.dumps(rows[-1]), flush=True)
    out = Path(args.out)
    (out / "uno_simavr_acceptance.json").write_text(json.dumps({"commit": commit(), "rows": rows}, indent=1) + "\n")
    md = ["# simavr-uno: HIL acceptance of issue #32 (point 1)", "",
          f"Commit `{commit()}`, simavr 1.6 (Debian libsimavr 1.6+dfsg), avr-gcc 5.4 / avr-libc 2.0; command: "
          "`nice -n 10 python bench/uno_simavr_acceptance.py`. Each model and layout ran twice on a fresh "
          "simavr-uno; BENCH is CPU cycles at 16 MHz (2000 calls per timed row).", "",
          "| data | model | layout | rows | mismatches (run 1, 2) | cycles / inference (run 1, 2) "
          "| BENCH totals identical | flash / RAM |",
          "|---|---|---|---:|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['dataset']} | {r['algo']} | {r['layout']} | {r['rows']} | {r['mismatches'][0]}, "
                  f"{r['mismatches'][1]} | {r['cycles_per_inference'][0]}, {r['cycles_per_inference'][1]} | "
                  f"{'yes' if r['bench_totals_equal'] else 'NO'} | {r['flash_bytes']} / {r['ram_bytes']} |")
    # the results file's "On-device training" section (hil --train, 30 rows x 2 attributes) is run by hand
    md += ["", "Output lines of every run:", "", "```", *lines, "```", ""]
    (out / "uno_simavr_acceptance.md").write_text("\n".join(md))
    bad = [r for r in rows if r["mismatches"] != [0, 0] or not all(r["ok"]) or not r["bench_totals_equal"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} model/layout pairs: 0 mismatches, identical cycles")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
