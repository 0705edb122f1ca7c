"""Issue 23 (RISC-V) acceptance on qemu-hifive1 (QEMU sifive_e running the hifive1 image), through the CLI.

Usage::

    python bench/hifive1_acceptance.py [--datasets irs,pid,bcw] [--train irs,pid,bcw] [--forest pid]
                                       [--out bench/results/hifive1_acceptance] [--keep DIR]

Every step is a ``treegen`` command (run with this interpreter, ``python -m treegen``), recorded with
its output lines:

- ``treegen fit D --algo efti --max-iter 50000 --seed 1`` and ``--algo cart --seed 1`` per dataset, then
  ``treegen hil MODEL --target qemu-hifive1 --data D --json R``: PREDICT on every row == the Python
  fixed-point model (mismatches), BENCH instructions per inference (minstret under -icount);
- a soft-voting forest: scikit-learn ``RandomForestClassifier(n_estimators=10, max_depth=6,
  random_state=1)`` on the forest dataset, imported (``treegen.importers.sklearn.from_sklearn``,
  soft vote), then the same ``hil`` (PREDICT and PROBA);
- ``treegen hil EFTI_MODEL --target qemu-hifive1 --data D --train --json R`` per training dataset:
  on-device EFTI (2000 iterations, seed 0) identical to the host engine.

Any mismatch or failed check makes the script exit 1. Output: ``<out>.md`` and ``<out>.json`` with the
commit and the exact commands.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
TARGET = "qemu-hifive1"
KEEP_LINES = ("hash", "predictions", "bench", "proba", "engine", "board memory", "train", "speed",
              "PREDICT_TRAINED", "result")


#: folder names replaced in the recorded commands (no machine-specific paths in the results)
_SHOWN: dict[str, str] = {}


def _shown(text: str) -> str:
    for path, name in _SHOWN.items():
        text = text.replace(path, name)
    return text


def _treegen(args: list[str], log: list) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "treegen", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800)
    text = proc.stdout + proc.stderr
    lines = [_shown(ln) for ln in text.splitlines() if ln.startswith(KEEP_LINES)]
    log.append({"command": _shown("treegen " + shlex.join(args)), "exit": proc.returncode, "lines": lines})
    print(f"$ {log[-1]['command']}  -> exit {proc.returncode}", flush=True)
    for ln in lines:
        print("  " + ln, flush=True)
    return proc.returncode, text


def _forest(data: Path, out: Path) -> None:
    from sklearn.ensemble import RandomForestClassifier

    from treegen.core.data import load_csv
    from treegen.core.model import save
    from treegen.importers.sklearn import from_sklearn

    ds = load_csv(data)
    rf = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=1).fit(ds.X, ds.labels.astype(int))
    model = from_sklearn(rf, X=ds.X)
    assert model.vote == "soft", model.vote
    save(model, out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="irs,pid,bcw")
    ap.add_argument("--train", default="irs,pid,bcw")
    ap.add_argument("--forest", default="pid")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "hifive1_acceptance"))
    ap.add_argument("--keep", default=None, help="folder for models and builds (default: a temporary one)")
    args = ap.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tg_hifive1_"))
    work.mkdir(parents=True, exist_ok=True)
    _SHOWN.update({str(work): "WORK", str(DATASETS): "../shared/datasets"})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip() or "?"
    log: list = []
    rows: list = []
    ok = True

    def hil(model: Path, ds: str, kind: str, extra: list[str]) -> dict:
        nonlocal ok
        report = work / f"hil_{model.stem}{'_train' if '--train' in extra else ''}.json"
        rc, _ = _treegen(["hil", str(model), "--target", TARGET, "--data", str(DATASETS / f"{ds}.csv.gz"),
                          "-o", str(work / f"fw_{report.stem}"), "--json", str(report), *extra], log)
        data = json.loads(report.read_text()) if report.is_file() else {}
        ok = ok and rc == 0 and bool(data.get("ok"))
        return data

    models = {}
    for ds in args.datasets.split(","):
        for algo, opts in (("efti", ["--max-iter", "50000"]), ("cart", [])):
            path = work / f"{ds}_{algo}.json"
            rc, _ = _treegen(["fit", str(DATASETS / f"{ds}.csv.gz"), "--algo", algo, *opts, "--seed", "1",
                              "-o", str(path)], log)
            ok = ok and rc == 0
            models[(ds, algo)] = path
            r = hil(path, ds, algo, [])
            rows.append({"dataset": ds, "model": algo.upper(), "rows": r.get("rows"),
                         "mismatches": r.get("mismatches"), "proba_mismatches": r.get("proba_mismatches"),
                         "insn_per_inference": r.get("insn_per_inference"), "ok": r.get("ok")})
    fpath = work / f"{args.forest}_rf.json"
    _forest(DATASETS / f"{args.forest}.csv.gz", fpath)
    log.append({"command": f"python: scikit-learn RandomForestClassifier(n_estimators=10, max_depth=6, "
                           f"random_state=1) on {args.forest}, from_sklearn (soft vote) -> WORK/{fpath.name}",
                "exit": 0, "lines": []})
    r = hil(fpath, args.forest, "rf", [])
    rows.append({"dataset": args.forest, "model": "RandomForest (10 trees, soft vote)", "rows": r.get("rows"),
                 "mismatches": r.get("mismatches"), "proba_mismatches": r.get("proba_mismatches"),
                 "insn_per_inference": r.get("insn_per_inference"), "ok": r.get("ok")})
    train = []
    for ds in args.train.split(","):
        path = models.get((ds, "efti"))
        if path is None:
            path = work / f"{ds}_efti.json"
            rc, _ = _treegen(["fit", str(DATASETS / f"{ds}.csv.gz"), "--algo", "efti", "--max-iter", "50000",
                              "--seed", "1", "-o", str(path)], log)
            ok = ok and rc == 0
        hil(path, ds, "efti", ["--train"])
        train.append({"dataset": ds, "lines": log[-1]["lines"], "exit": log[-1]["exit"]})

    command = _shown("python bench/hifive1_acceptance.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    result = {"commit": commit, "target": TARGET, "command": command, "inference": rows, "train": train, "log": log,
              "ok": ok}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    md = ["# qemu-hifive1 acceptance (issue 23, RISC-V)", "",
          f"commit `{commit}`; command `{result['command']}`; QEMU sifive_e running the hifive1 image; "
          "WORK = the --keep folder (models, builds, reports)", "",
          "| dataset | model | rows | PREDICT mismatches | PROBA mismatches | instructions per inference |",
          "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        proba = "-" if r["proba_mismatches"] is None else r["proba_mismatches"]
        md.append(f"| {r['dataset']} | {r['model']} | {r['rows']} | {r['mismatches']} | {proba} | "
                  f"{r['insn_per_inference']} |")
    md += ["", "On-device training (`treegen hil EFTI_MODEL --target qemu-hifive1 --data D --train`):", ""]
    for t in train:
        md.append(f"- {t['dataset']} (exit {t['exit']}):")
        md += [f"  `{ln}`" for ln in t["lines"]]
    md += ["", "Commands, in order:", ""] + [f"- `{e['command']}` (exit {e['exit']})" for e in log]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(f"{'PASS' if ok else 'FAIL'}: {out.with_suffix('.md')}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
