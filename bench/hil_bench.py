"""Hardware-in-the-loop figures on the emulated boards: UART throughput, firmware size, instructions
per inference on Cortex-M3/M4/M7/M33/M55 (scalar vs DSP vs MVE multiply-accumulate) for EFTI trees.

Usage::

    python bench/hil_bench.py [--datasets veh,seg,pid] [--targets qemu-m3,qemu-m4,qemu-m7,qemu-m33,qemu-m55]
                              [--layouts table,unrolled] [--iters 20000] [--seed 1]
                              [--bench-iters 10000] [--out bench/results/hil_bench] [--keep DIR]

For every dataset one EFTI tree is fitted on all rows (``max_iter`` = ``--iters``, ``random_state``
= ``--seed``, other parameters default). For every target, layout and variant (M3: scalar only, it
has no DSP extension; M4, M7 and M33: scalar and dsp; M55: scalar, dsp and mve -- Helium) the
firmware harness is built offline with
PlatformIO (treegen.device.hil.build_firmware) and run in QEMU (``-icount shift=0,align=off,sleep=off``),
then measured over the serial protocol (treegen.device.hil), never asserted:

- correctness: every row of the dataset goes through PREDICT and must equal the Python fixed-point
  model (mismatches are counted and reported; any mismatch makes the script exit 1);
- rows/s: those PREDICT requests (``max_batch`` rows per frame) over QEMU's socket UART, wall clock
  -- a property of QEMU's UART feed (about one byte per main-loop pass), not of the core;
- flash / RAM: ``arm-none-eabi-size`` of the whole firmware (harness + port + model: text + data,
  data + bss incl. the linker script's stack reserve), and the model's inference code alone
  (``treegen export`` measure: ``flash_bytes_inference``);
- instructions per inference: BENCH (``--bench-iters`` calls) on one representative row per
  distinct path through the quantised tree, weighted by the number of rows taking that path -- the
  exact mean over the dataset's rows (the instruction count depends only on the path), plus the
  cheapest and the dearest path. SysTick counts one tick per 40 instructions on the mps2 boards
  under ``-icount shift=0`` (25 MHz clock, 1 ns per instruction; 50 on AN505 at 20 MHz, 31.25 on
  AN547 at 32 MHz); the firmware measures that ratio at start-up against a loop of exactly 2^21
  instructions (the cmsdk_uart port's tg_calibrate(), as bench/qemu does) and reports
  instructions, with a resolution of one tick per timing chunk (about 14 chunks for 10000 calls:
  +-0.06 instructions per call at 40). The figure includes the
  benchmark loop (docs/protocol.md: nothing is subtracted): 7 instructions per call in these
  builds (cmp, bne, ldr row pointer, bl, adds, str class, b) besides the model function itself.

Output: ``<out>.md`` and ``<out>.json``; the exact command is in the header of both.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"

from treegen import EFTIClassifier, __version__  # noqa: E402
from treegen.core import targets as tg_targets  # noqa: E402
from treegen.core.data import load_csv  # noqa: E402
from treegen.device import hil  # noqa: E402
from treegen.emit.export import export_model  # noqa: E402
from treegen.emit.quantize import quantize_model  # noqa: E402

LOOP_INSNS = 7


def paths(qt, Xq: np.ndarray) -> list[tuple]:
    """The node sequence each row takes through the quantised tree ``qt``."""
    out = []
    for row in Xq:
        ref, seq = qt.root, []
        while ref >= 0:
            seq.append(ref)
            if qt.kind == "axis":
                left = row[qt.feature[ref]] <= qt.threshold[ref]
            else:
                left = int(np.dot(row, qt.weights[ref])) <= qt.threshold[ref]
            ref = qt.left[ref] if left else qt.right[ref]
        seq.append(int(ref))
        out.append(tuple(int(v) for v in seq))
    return out


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return "?"
    return out.splitlines()[0].strip() if out else "?"


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.strip() or "?"
    except OSError:
        return "?"


def measure(model, ds_name: str, X_raw, labels, target: str, layout: str, variant: str, work: Path,
            bench_iters: int, timeout: float) -> dict:
    tgt = tg_targets.get(target)
    ref = hil.reference(model, X_raw, labels)
    qt = quantize_model(model)[0]
    groups: dict = {}
    for i, p in enumerate(paths(qt, ref.X_q15)):
        groups.setdefault(p, []).append(i)
    fw = hil.build_firmware(model, tgt, work / f"{ds_name}-{target}-{layout}-{variant}", layout=layout,
                            variant=variant, reuse=False)    # build time is part of the figures
    with tempfile.TemporaryDirectory() as tmp:
        exp = export_model(model, tmp, target=tgt, layout=layout, variant=variant, name="m", measure=True)
    with hil.open_device(tgt, firmware=fw, timeout=timeout, model=model) as dev:
        info = dev.client.info()
        hil.check_identity(info, model, tgt, fw.variant_string)
        t0 = time.perf_counter()
        got = hil.predict_rows(dev.client, ref.X_q15)
        seconds = time.perf_counter() - t0
        per_path = []
        for p, rows in groups.items():
            r = dev.client.bench(ref.X_q15[rows[0]], bench_iters)
            if r.cls != ref.fixed[rows[0]] or r.unit != 0:
                raise SystemExit(f"BENCH on {target}: class {r.cls} / unit {r.unit} for row {rows[0]} "
                                 f"(expected class {ref.fixed[rows[0]]}, unit 0 = instructions)")
            per_path.append((len(p) - 1, len(rows), r.total / r.n_iter))
    weights = np.array([n for _, n, _ in per_path], dtype=float)
    costs = np.array([c for _, _, c in per_path])
    return {
        "dataset": ds_name, "target": target, "core": tgt.core, "layout": layout, "variant": variant,
        "device_variant": info.variant, "rows": int(ref.X_q15.shape[0]),
        "mismatches": int(np.count_nonzero(got != ref.fixed)),
        "float_agreement_pct": round(100.0 * float(np.mean(got == ref.floating)), 3),
        "rows_per_s": round(ref.X_q15.shape[0] / seconds, 1), "predict_seconds": round(seconds, 3),
        "max_batch": info.max_batch, "flash_bytes": fw.flash_bytes, "ram_bytes": fw.ram_bytes,
        "model_flash_bytes": exp.flash_bytes_inference, "build_seconds": round(fw.build_seconds, 2),
        "paths": len(per_path),
        "insn_per_inference_mean": round(float(np.dot(weights, costs) / weights.sum()), 2),
        "insn_per_inference_min": round(float(costs.min()), 2),
        "insn_per_inference_max": round(float(costs.max()), 2),
        "bench_iters": bench_iters,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="veh,seg,pid")
    p.add_argument("--targets", default="qemu-m3,qemu-m4,qemu-m7,qemu-m33,qemu-m55")
    p.add_argument("--layouts", default="table,unrolled")
    p.add_argument("--iters", type=int, default=20000, help="EFTI iterations (default 20000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bench-iters", type=int, default=10000, help="calls per BENCH (default 10000)")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--out", default=str(REPO / "bench" / "results" / "hil_bench"))
    p.add_argument("--keep", metavar="DIR", help="build here and keep the projects (default: a temp dir)")
    args = p.parse_args(argv)
    command = "python bench/hil_bench.py" + ("" if argv is None and len(sys.argv) == 1 else
                                             " " + shlex.join(sys.argv[1:] if argv is None else argv))
    t_all = time.perf_counter()
    rows, models = [], {}
    with tempfile.TemporaryDirectory(prefix="hil-bench-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        for ds_name in args.datasets.split(","):
            ds = load_csv(DATASETS / f"{ds_name}.csv.gz")
            t0 = time.perf_counter()
            est = EFTIClassifier(max_iter=args.iters, random_state=args.seed).fit(ds.X, ds.labels,
                                                                                feature_names=ds.feature_names)
            model = est.model_
            models[ds_name] = {"hash": model.hash(), "leaves": est.tree_.n_leaves, "depth": est.tree_.depth,
                               "train_accuracy_pct": round(100.0 * est.score(ds.X, ds.labels), 2),
                               "fit_seconds": round(time.perf_counter() - t0, 2), "rows": ds.n_rows,
                               "features": ds.n_features}
            print(f"{ds_name}: {est.tree_.n_leaves} leaves, depth {est.tree_.depth}, sha256 {model.hash()[:16]}",
                  file=sys.stderr)
            for target in args.targets.split(","):
                tgt = tg_targets.get(target)
                variants = ["scalar"] + (["dsp"] if tgt.dsp else []) + (["mve"] if tgt.mve else [])
                for layout in args.layouts.split(","):
                    for variant in variants:
                        r = measure(model, ds_name, ds.X, ds.labels, target, layout, variant, work,
                                    args.bench_iters, args.timeout)
                        rows.append(r)
                        print(f"  {target:8} {layout:8} {variant:6} {r['insn_per_inference_mean']:8.2f} insn "
                              f"({r['insn_per_inference_min']:g}-{r['insn_per_inference_max']:g}), "
                              f"{r['rows_per_s']:6.0f} rows/s, flash {r['flash_bytes']} B, "
                              f"mismatches {r['mismatches']}", file=sys.stderr)
    total = time.perf_counter() - t_all
    env = {"treegen": __version__, "commit": _git_commit(), "python": platform.python_version(),
           "qemu": _tool_version(["qemu-system-arm", "--version"]),
           "gcc": _tool_version(["arm-none-eabi-gcc", "--version"]), "machine": platform.machine(),
           "seconds": round(total, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"command": command, "environment": env, "params": vars(args), "models": models, "results": rows,
           "loop_instructions_per_call": LOOP_INSNS}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(render_md(doc))
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')} ({total:.0f} s)", file=sys.stderr)
    return 1 if any(r["mismatches"] for r in rows) else 0


def render_md(doc: dict) -> str:
    env = doc["environment"]
    lines = [
        "# HIL bench: emulated Cortex-M3/M4/M7/M33/M55 over the serial protocol",
        "",
        f"Command: `{doc['command']}`  ",
        f"treegen {env['treegen']} (commit {env['commit']}), Python {env['python']}, {env['qemu']}, "
        f"{env['gcc']}; {env['seconds']} s in total.",
        "",
        "EFTI trees fitted on all rows (fixed seed); firmware = treegen's harness + model, built offline by "
        "PlatformIO (`-Os`), run by QEMU with `-icount shift=0`. Every row of each dataset went through "
        "PREDICT and was compared with the Python fixed-point model (column *mism.*).",
        "",
        "- *insn/inference*: BENCH instructions per call, exact mean over the dataset's rows (one BENCH per "
        "distinct path, weighted by its rows), with the cheapest and dearest path. SysTick ticks once per 40 "
        "instructions on the mps2 boards (M3/M4/M7), 50 on AN505 (M33), 31.25 on AN547 (M55); the firmware "
        "calibrates that ratio at start-up against a loop of 2^21 "
        f"instructions. Includes the benchmark loop ({doc['loop_instructions_per_call']} instructions per call "
        "besides the model function).",
        "  These are instructions, not cycles: QEMU models no pipeline, so M4 and M7 give the same count for "
        "the same code (M3 lacks the DSP extension: scalar only; only the M55 has Helium, variant mve).",
        "- *rows/s*: PREDICT throughput over QEMU's socket UART, wall clock (a QEMU property, ~1 byte per "
        "main-loop pass; on a shared host it varies up to 3x between rows and runs with the host's load, "
        "not with the core).",
        "- *flash / RAM*: the whole firmware (`arm-none-eabi-size`: text+data / data+bss incl. stack reserve); "
        "*model*: the model's inference code and tables alone.",
        "",
        "| dataset | tree | target | layout | variant | insn/inference (min-max) | rows/s | flash B | RAM B "
        "| model B | mism. |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        m = doc["models"][r["dataset"]]
        lines.append(
            f"| {r['dataset']} | {m['leaves']} leaves, depth {m['depth']} | {r['target']} ({r['core']}) | "
            f"{r['layout']} | {r['variant']} | {r['insn_per_inference_mean']:.1f} ({r['insn_per_inference_min']:.0f}"
            f"-{r['insn_per_inference_max']:.0f}) | {r['rows_per_s']:.0f} | {r['flash_bytes']} | {r['ram_bytes']} "
            f"| {r['model_flash_bytes']} | {r['mismatches']}/{r['rows']} |")
    # DSP vs scalar summary
    pairs = []
    for r in doc["results"]:
        if r["variant"] != "dsp":
            continue
        s = next((x for x in doc["results"] if x["variant"] == "scalar" and
                  (x["dataset"], x["target"], x["layout"]) == (r["dataset"], r["target"], r["layout"])), None)
        if s:
            pairs.append(f"| {r['dataset']} | {r['target']} | {r['layout']} | {s['insn_per_inference_mean']:.1f} | "
                         f"{r['insn_per_inference_mean']:.1f} | "
                         f"{s['insn_per_inference_mean'] / r['insn_per_inference_mean']:.2f}x |")
    if pairs:
        lines += ["", "DSP (`__SMLAD`/`__SMLALD`) vs scalar multiply-accumulate, mean instructions per inference:", "",
                  "| dataset | target | layout | scalar | dsp | scalar/dsp |", "|---|---|---|---|---|---|", *pairs]
    # MVE vs DSP vs scalar summary (M55)
    trios = []
    for r in doc["results"]:
        if r["variant"] != "mve":
            continue
        same = {x["variant"]: x for x in doc["results"]
                if (x["dataset"], x["target"], x["layout"]) == (r["dataset"], r["target"], r["layout"])}
        if "dsp" in same and "scalar" in same:
            d, sc = same["dsp"]["insn_per_inference_mean"], same["scalar"]["insn_per_inference_mean"]
            m = r["insn_per_inference_mean"]
            trios.append(f"| {r['dataset']} ({doc['models'][r['dataset']]['features']} attributes) | {r['target']} | "
                         f"{r['layout']} | {sc:.1f} | {d:.1f} | {m:.1f} | {m / d:.2f}x |")
    if trios:
        lines += ["", "MVE (Helium `VMLADAVA`/`VMLALDAVA`, 8 lanes) vs DSP vs scalar on the same tree and core, mean "
                  "instructions per inference:", "",
                  "| dataset | target | layout | scalar | dsp | mve | mve/dsp |", "|---|---|---|---|---|---|---|",
                  *trios]
    lines += ["", "Models:", "", "| dataset | rows | features | leaves | depth | train accuracy % | sha256 |",
              "|---|---|---|---|---|---|---|"]
    for name, m in doc["models"].items():
        lines.append(f"| {name} | {m['rows']} | {m['features']} | {m['leaves']} | {m['depth']} | "
                     f"{m['train_accuracy_pct']} | {m['hash'][:16]} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
