"""Flash and RAM of treegen's two entry points in a linked image, per target, before and after the
double-free raw-input scaling (issue 23).

Usage::

    python bench/linked_sizes.py [--before 22e599b] [--out bench/results/linked_sizes]

``--before``: the git revision whose generated C is the "before" (default: main at the commit the
double-free scaling branched from, whose ``tg_<n>_scale_q15`` computed in IEEE double). Its tree is
taken with ``git archive`` into a temporary folder and run there (``python -m treegen export``); the
"after" is this checkout. Both exports are sized the same way, by this checkout's
:func:`treegen.emit.size.measure_linked`: a minimal program (``templates/c/size_probe.c.j2``) linked
with ``--gc-sections`` once calling the entry point and once not; the difference is what the entry
point costs, library routines (soft-float, 64-bit helpers) included; the image columns are the whole
probe program with the model.

Models (deterministic, seed 1):

- ``irs-float``  EFTI on irs converted to physical-looking float units (x / 3276.8 - 1.5: min-max
                 scaling, input contract float32), oblique: the float entry scales every used feature;
- ``pid``        EFTI on pid (integers 0..32767: scaling q15, contract integer), oblique;
- ``bcw-cart``   CART (depth 6) on bcw: axis-parallel, so the float entry tests the raw float32 bits
                 and never scales (before and after alike).

Targets: cortex-m0plus (no FPU), cortex-m4 (single-precision FPU), atmega328p (AVR: 16-bit int, 32-bit
double) and rv32imac (ilp32, no FPU). The before revision has no AVR/RISC-V target: its C is exported
for cortex-m0plus (variant scalar, the same C as any scalar target bar the banner) and compiled with
the AVR/RISC-V flags. On AVR the before C's ``double`` is 32 bits, so its float entry was not exact
there unless the scaling is exact in binary32 too (q15 method: offset 0, scale 2^-15); a `*` marks
the figures without the guarantee.

Writes ``OUT.md`` and ``OUT.json``, stamped with the commit and command.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from treegen.core import targets as _targets  # noqa: E402
from treegen.core.model import load  # noqa: E402
from treegen.emit.size import measure_linked  # noqa: E402

DATA = ROOT.parent / "shared" / "datasets"
TARGETS = ("cortex-m0plus", "cortex-m4", "atmega328p", "rv32imac")
BEFORE_TARGETS = ("cortex-m0plus", "cortex-m4")


def _git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _models(tmp: Path) -> dict:
    """The three models, fitted with ``treegen fit`` (seed 1) on the shared datasets."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    specs = {"irs-float": ("irs", ["--algo", "efti", "--max-iter", "2000"], True),
             "pid": ("pid", ["--algo", "efti", "--max-iter", "2000"], False),
             "bcw-cart": ("bcw", ["--algo", "cart", "--max-depth", "6"], False)}
    out = {}
    for key, (ds, algo, to_float) in specs.items():
        csv = DATA / f"{ds}.csv.gz"
        if to_float:  # the same rows in float units: min-max scaling, input contract float32
            rows = [line.split(",") for line in gzip.open(csv, "rt").read().splitlines()]
            text = [",".join(rows[0])] + [",".join([*(f"{int(v) / 3276.8 - 1.5:.6g}" for v in r[:-1]), r[-1]])
                                          for r in rows[1:]]
            csv = tmp / f"{key}.csv"
            csv.write_text("\n".join(text) + "\n")
        out[key] = tmp / f"{key}.json"
        subprocess.run([sys.executable, "-m", "treegen", "fit", *algo, "--seed", "1", "-q", "-o", str(out[key]),
                        str(csv)], env=env, check=True, capture_output=True)
    return out


def _binary32_exact(scaling) -> bool:
    """Whether the double scaling stays exact with a 32-bit double: offset 0 and power-of-two scales
    (the q15 method: every operation exact in binary32 too). Min-max scalings are not."""
    return all(o == 0.0 and s > 0 and math.frexp(s)[0] == 0.5 for o, s in zip(scaling.offset, scaling.scale))


def _export_before(before: Path, model: Path, target: str, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(before)}
    subprocess.run([sys.executable, "-m", "treegen", "export", str(model), "--target", target, "--variant", "scalar",
                    "-o", str(out), "--force"], env=env, check=True, capture_output=True, cwd=before)


def _export_after(model: Path, target: str, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "treegen", "export", str(model), "--target", target, "--variant", "scalar",
                    "-o", str(out), "--force"], env=env, check=True, capture_output=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="22e599b")
    ap.add_argument("--out", default="bench/results/linked_sizes")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tg-linked-") as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        before.mkdir()
        tar = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        tarfile.open(fileobj=io.BytesIO(tar)).extractall(before)
        for key, path in _models(tmp).items():
            model = load(path)
            for tname in TARGETS:
                tgt = _targets.get(tname)
                for when in ("before", "after"):
                    out = tmp / f"{key}-{tname}-{when}"
                    if when == "before":
                        _export_before(before, path, tname if tname in BEFORE_TARGETS else "cortex-m0plus", out)
                    else:
                        _export_after(path, tname, out)
                    name = key.replace("-", "_")
                    linked = measure_linked(out, name, tgt, "q15", model.n_features)
                    for entry in ("q15", "float"):
                        d = linked[entry]
                        assert d is not None, linked["note"]
                        exact = not (entry == "float" and when == "before" and tname == "atmega328p"
                                     and not all(t.is_axis_parallel() for t in model.trees)
                                     and not _binary32_exact(model.scaling))
                        rows.append({"model": key, "target": tname, "entry": entry, "when": when, **d,
                                     "exact": exact})
                        print(key, tname, entry, when, d, flush=True)
    commit = _git("rev-parse", "--short", "HEAD")
    command = "python bench/linked_sizes.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"commit": commit, "before": args.before, "command": command.strip()}
    out.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    lines = [f"# Linked flash / RAM of the entry points, before and after the double-free scaling",
             "", f"commit `{commit}` (after) vs `{args.before}` (before); command `{meta['command']}`", "",
             "Cost of the entry point in a linked image (program with the call minus the same program without "
             "it, `--gc-sections`, library routines included), bytes; image: the whole probe program with "
             "the model. `*`: not exact (32-bit double: min-max scaling computed in binary32).", "",
             "| model | target | entry | flash before | flash after | RAM before | RAM after "
             "| image flash before | image flash after |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    index = {(r["model"], r["target"], r["entry"], r["when"]): r for r in rows}
    for key in ("irs-float", "pid", "bcw-cart"):
        for tname in TARGETS:
            for entry in ("q15", "float"):
                b, a = index[(key, tname, entry, "before")], index[(key, tname, entry, "after")]
                star = "" if b["exact"] else "*"
                lines.append(f"| {key} | {tname} | {entry} | {b['flash_bytes']}{star} | {a['flash_bytes']} | "
                             f"{b['ram_bytes']} | {a['ram_bytes']} | {b['image_flash_bytes']} | "
                             f"{a['image_flash_bytes']} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
