"""Issue 26: the cost of vicinal-risk EFTI training on the device, against empirical-risk training on
the same device with the same engine configuration.

Usage::

    python bench/device_vicinal_bench.py [--targets qemu-m4,qemu-microbit,qemu-hifive1]
                                         [--datasets irs,pid,bcw] [--iters 2000] [--seed 0]
                                         [--sigma2 0.1] [--out bench/results/device_vicinal_bench]

Per target and data set, two training firmwares are built with the rows in flash (as ``treegen hil
--train`` builds them): first the vicinal one (``--risk vicinal``; the engine's mode and depth are
what fits the target's RAM, as ``hil --train`` picks them), then the empirical one at that same mode
and depth, so the two differ only by the risk. Each is run through
:func:`treegen.device.train_hil.run_train_hil` (the device against the host native engine and the
Python EFTI at the same risk: identical tree and integer fitness, PREDICT_TRAINED on every row).
Recorded: the linked flash and static RAM of the whole firmware (the ELF), the engine's static RAM
(TRAIN_INFO), instructions per iteration (QEMU ``-icount``: SysTick / minstret count instructions)
and ``init`` (the first full evaluation). A pair that does not fit the target is recorded with the
refusal line. Any difference from the host makes the script exit 1.

Output: ``<out>.json`` and ``<out>.md`` with the command and the commit.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from treegen.core.errors import TreegenError  # noqa: E402


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "treegen", "templates",
                                "bench"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _data(name: str):
    from treegen.core.data import load_csv
    from treegen.device.train_firmware import training_rows

    ds = load_csv(REPO.parent / "shared" / "datasets" / f"{name}.csv.gz")
    Xq, y, C, _ = training_rows(ds.X, ds.labels)
    return Xq, y, C


def _stump(Xq, y):
    from treegen import CARTClassifier

    return CARTClassifier(max_depth=1).fit(Xq, y).model_


def _run(target, name, Xq, y, C, spec, build_dir, iters, seed, risk_kw) -> dict:
    from treegen.device.hil import open_device
    from treegen.device.train_firmware import mode_name
    from treegen.device.train_hil import build_train_firmware, run_train_hil

    fw = build_train_firmware(_stump(Xq, y), target, build_dir, spec)
    s = fw.spec
    with open_device(target, firmware=fw, timeout=30) as dev:
        rep = run_train_hil(s.params, (Xq, y), dev.client, seed, iters, n_classes=C, source="flash", **risk_kw)
    t = rep["train"]
    return {"risk": risk_kw.get("risk", "empirical"), "mode": mode_name(s), "variant": s.variant,
            "partial": s.partial, "depth": s.max_depth, "identical": bool(rep["ok"]),
            "flash_bytes": fw.flash_bytes, "ram_bytes": fw.ram_bytes, "engine_ram_bytes": t["ram_bytes"],
            "insn_per_iteration": t["insn_per_iteration"], "init_insn": t["init_counter"],
            "fitness_int": t["device_fitness"], "fitness": t["fitness_fraction"], "hits": t["hits"],
            "leaves": t["n_leaves"], "train_seconds": rep["timings"].get("device_train_s")}


def bench_pair(target: str, name: str, iters: int, seed: int, sigma2: float, tmp: Path) -> dict:
    from treegen.device import train_firmware as tf
    from treegen.learn.inducers.efti import EFTIParams

    Xq, y, C = _data(name)
    row = {"target": target, "data": name, "rows": int(Xq.shape[0]), "attributes": int(Xq.shape[1]),
           "classes": int(C)}
    vic_kw = {"risk": "vicinal", "vicinity_sigma2": sigma2}
    try:
        spec = tf.make_train_spec(target, EFTIParams(), flash_data=(Xq, y, C), flash_source=name,
                                  depth_auto=True, **vic_kw)
        vic = _run(target, name, Xq, y, C, spec, tmp / f"{target}-{name}-vic", iters, seed, vic_kw)
    except TreegenError as exc:
        text = " ".join(str(exc).split())
        row["refused" if text.startswith("training needs") else "error"] = text
        print(f"{target:14s} {name:4s} {'refused' if 'refused' in row else 'ERROR'}: {text}", flush=True)
        return row
    # the empirical engine at the vicinal one's mode and depth: only the risk differs
    espec = tf.make_train_spec(target, replace(EFTIParams(), max_depth=vic["depth"]), flash_data=(Xq, y, C),
                               flash_source=name, partial=vic["partial"])
    emp = _run(target, name, Xq, y, C, espec, tmp / f"{target}-{name}-emp", iters, seed, {})
    row["vicinal"], row["empirical"] = vic, emp
    # what hil --train picks for the empirical risk on this target (it may afford a deeper engine)
    from treegen.device.firmware import plan_train
    from treegen.device.train_firmware import mode_name

    auto = tf.make_train_spec(target, EFTIParams(), flash_data=(Xq, y, C), depth_auto=True)
    row["empirical_auto_mode"] = mode_name(plan_train(_stump(Xq, y), tf._target(target), auto, None)[0])
    row["cost"] = {
        "flash_bytes": vic["flash_bytes"] - emp["flash_bytes"],
        "ram_bytes": vic["ram_bytes"] - emp["ram_bytes"],
        "engine_ram_bytes": vic["engine_ram_bytes"] - emp["engine_ram_bytes"],
        "insn_ratio": round(vic["insn_per_iteration"] / emp["insn_per_iteration"], 2),
    }
    c = row["cost"]
    print(f"{target:14s} {name:4s} {vic['mode']} (empirical alone: {row['empirical_auto_mode']}): flash "
          f"{emp['flash_bytes']} -> {vic['flash_bytes']} (+{c['flash_bytes']}), RAM {emp['ram_bytes']} -> "
          f"{vic['ram_bytes']} (+{c['ram_bytes']}), "
          f"insn/iteration {emp['insn_per_iteration']:.0f} -> {vic['insn_per_iteration']:.0f} "
          f"(x{c['insn_ratio']}), identical {emp['identical']}/{vic['identical']}", flush=True)
    return row


def _markdown(res: dict) -> str:
    lines = ["# Vicinal-risk EFTI training on the device: cost against empirical risk (issue 26)", "",
             f"Command: `{res['command']}`  ", f"Commit: {res['commit']}; {res['iters']} iterations, seed "
             f"{res['seed']}, vicinity_sigma2 {res['sigma2']}; every run checked against the host native engine "
             f"and the Python EFTI at the same risk (tree, integer fitness, PREDICT_TRAINED).", "",
             "Engine: the mode and depth the vicinal engine fits (the empirical run uses the same); in brackets "
             "what `hil --train` picks for the empirical risk alone where that differs.", "",
             "| target | data | engine | flash emp -> vic (B) | RAM emp -> vic (B) | engine RAM +B | "
             "insn/iter emp | insn/iter vic | x | identical |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["rows"]:
        if "refused" in r or "error" in r:
            what = f"refused: {r['refused']}" if "refused" in r else f"ERROR: {r['error']}"
            lines.append(f"| {r['target']} | {r['data']} | {what} | | | | | | | |")
            continue
        e, v, c = r["empirical"], r["vicinal"], r["cost"]
        alone = "" if r["empirical_auto_mode"] == v["mode"] else f" ({r['empirical_auto_mode']})"
        lines.append(f"| {r['target']} | {r['data']} ({r['rows']} x {r['attributes']}) | "
                     f"{v['mode']}, {v['variant']}{alone} | "
                     f"{e['flash_bytes']} -> {v['flash_bytes']} | {e['ram_bytes']} -> {v['ram_bytes']} | "
                     f"{c['engine_ram_bytes']} | {e['insn_per_iteration']:,.0f} | {v['insn_per_iteration']:,.0f} | "
                     f"{c['insn_ratio']} | {'yes' if e['identical'] and v['identical'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="qemu-m4,qemu-microbit,qemu-hifive1")
    ap.add_argument("--datasets", default="irs,pid,bcw")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sigma2", type=float, default=0.1)
    ap.add_argument("--out", default="bench/results/device_vicinal_bench")
    args = ap.parse_args(argv)
    shown = ["python", "bench/device_vicinal_bench.py", *(sys.argv[1:] if argv is None else argv)]
    res = {"command": shlex.join(shown), "commit": _commit(), "iters": args.iters, "seed": args.seed,
           "sigma2": args.sigma2, "rows": []}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="treegen-devvic-") as tmp:
        for target in args.targets.split(","):
            for name in args.datasets.split(","):
                res["rows"].append(bench_pair(target, name, args.iters, args.seed, args.sigma2, Path(tmp)))
    res["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out = REPO / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    out.with_suffix(".md").write_text(_markdown(res))
    bad = [r for r in res["rows"] if "error" in r or
           ("refused" not in r and not (r["vicinal"]["identical"] and r["empirical"]["identical"]))]
    print(f"wrote {out.with_suffix('.md')} ({res['wall_seconds']} s); {len(bad)} pair(s) differ from the host")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
