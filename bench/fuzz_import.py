"""Fuzz ``treegen import`` for a given time (issue #33): structure-aware mutations of real XGBoost JSON and
UBJSON, LightGBM model text, ONNX and scikit-learn pickle (``--trust-pickle``) files, plus random bytes, in
turn; each case ends refused with one line, or imported as a model that predicts as its library on random
rows (see ``tests/importers/import_fuzz.py``). CI runs a bounded, seeded number of cases
(``tests/importers/test_import_fuzz.py``); this script runs the same engine for minutes.

Usage::

    nice -n 10 python bench/fuzz_import.py --minutes 30 [--seed 33] [--out bench/results/fuzz_import.md]

The report records the command, the commit, the cases per format and outcome, and every failing case
(traceback, crash, hang, different) with its file kept under ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "importers"))

import import_fuzz  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--formats", default=",".join(import_fuzz.FORMATS))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "fuzz_import.md"))
    ap.add_argument("--keep", default=None, help="folder for the cases (default: a temporary folder)")
    ap.add_argument("--commit", default=None,
                    help="the commit under test, for a run from an exported copy (default: git rev-parse HEAD)")
    args = ap.parse_args(argv)
    formats = tuple(f for f in args.formats.split(",") if f)
    unknown = [f for f in formats if f not in import_fuzz.FORMATS]
    if unknown:
        ap.error(f"unknown formats {unknown} (choose from {', '.join(import_fuzz.FORMATS)})")
    commit = args.commit or subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
    dirty = "" if args.commit else subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "treegen",
                                                   "tests"], capture_output=True, text=True).stdout.strip()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fuzz_import_"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    counts, bad = import_fuzz.fuzz(formats, None, args.seed, folder, seconds=args.minutes * 60,
                                   log=lambda s: print(s, file=sys.stderr, flush=True))
    elapsed = time.monotonic() - t0
    command = "nice -n 10 python bench/fuzz_import.py " + " ".join(argv if argv is not None else sys.argv[1:])
    outcomes = ("refused", "accepted-same", "traceback", "crash", "hang", "different")
    lines = [
        "# Fuzzing `treegen import` (issue #33)",
        "",
        f"Command: `{command}`  ",
        f"Commit: `{commit}`{' (with uncommitted changes)' if dirty else ''}  ",
        f"Run time: {elapsed / 60:.1f} min, seed {args.seed}, one worker process (see "
        "`tests/importers/import_fuzz.py` for the mutations and the verdicts)",
        "",
        "| format | cases | " + " | ".join(outcomes) + " |",
        "|---|---:|" + "---:|" * len(outcomes),
    ]
    total = {o: 0 for o in outcomes}
    for f in formats:
        c = counts[f]
        n = sum(c.values())
        for o in outcomes:
            total[o] += c.get(o, 0)
        lines.append(f"| {f} | {n} | " + " | ".join(str(c.get(o, 0)) for o in outcomes) + " |")
    lines.append(f"| **all** | {sum(total.values())} | " + " | ".join(str(total[o]) for o in outcomes) + " |")
    lines += ["", "`refused`: exit 2 with one line `treegen: error: ...`; `accepted-same`: imported, and the model's "
              "raw scores / values (bit for bit) and classes equal the library's own prediction on 200 random "
              "float32 rows (NaN cells where the model routes missing values); `traceback`: any other exit or "
              "output; `crash`: treegen's process died; `hang`: no verdict within "
              f"{import_fuzz.CASE_TIMEOUT:g} s; `different`: imported, but the library predicts otherwise, "
              "refuses the file or crashes on it.", ""]
    if bad:
        lines += ["## Failing cases", ""]
        lines += [f"- {b['format']} case {b['case']} ({b['file']}): {b['outcome']}: "
                  f"{' '.join(b['detail'].split())[:400]}" for b in bad]
    else:
        lines.append("No failing case.")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"command": command, "commit": commit, "seconds": elapsed, "seed": args.seed, "counts": counts,
         "failures": bad}, indent=1) + "\n")
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
