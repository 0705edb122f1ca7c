"""On-device training speed: instructions per EFTI iteration on the emulated Cortex-M3 and Cortex-M4
(scalar and SMLALD/DSP dot products), and the RAM the engine uses, for veh-sized data.

Usage::

    python bench/train_device_bench.py [--dataset veh] [--iters 2000] [--seed 1]
                                       [--builds qemu-m3:scalar,qemu-m4:scalar,qemu-m4:dsp] [--json OUT]

For each build: the firmware harness with on-device training (treegen.device.train_firmware, engine sized
exactly for the dataset: rows, attributes, classes, depth 8, partial reclassification on) is built
offline with PlatformIO, run in QEMU (``-icount shift=0``: SysTick counts instructions, resolution
40 instructions), the rows are streamed (TRAIN_DATA) and TRAIN runs ``--iters`` iterations. The
device times every iteration (tg_port_counter() read between tg_efti_step(1) calls) and reports the
total; instructions per iteration = total / iterations (the initial evaluation, tg_efti_init, is
reported separately). The evolved tree is read back and checked identical to the host's
(treegen.learn.engine.induce, same seed), so the figures are for the exact computation the host does.

RAM: ``engine+buffers`` is what the device reports (sizeof of the engine's and the row buffer's
static objects, TRAIN_INFO), ``firmware`` the ELF's data + bss (harness, port, stack reserve
included), ``estimate`` treegen's pre-build estimate (treegen.device.train_firmware.estimate_ram).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from shared_data import load_raw

from treegen import CARTClassifier
from treegen.device import train_firmware as tf
from treegen.device.emulator import QemuBoard
from treegen.device.protocol import DeviceClient
from treegen.device.train_hil import TrainingClient, build_train_firmware, device_tree
from treegen.learn import engine
from treegen.learn.inducers.efti import EFTIParams


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="veh")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--builds", default="qemu-m3:scalar,qemu-m4:scalar,qemu-m4:dsp")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args(argv)
    cmd = (f"python bench/train_device_bench.py --dataset {a.dataset} --iters {a.iters} --seed {a.seed} "
           f"--builds {a.builds}")
    print(f"# {cmd}")
    X, labels = load_raw(a.dataset)
    classes, y = np.unique(labels, return_inverse=True)
    y, C = y.astype(np.int64), len(classes)
    n, A = X.shape
    params = EFTIParams()
    print(f"# data {a.dataset}: {n} rows x {A} attributes, {C} classes; EFTI defaults (depth {params.max_depth}), "
          f"seed {a.seed}, {a.iters} iterations")
    model = CARTClassifier(max_depth=3).fit(X, labels).model_       # the harness's inference model
    t_host, i_host = engine.induce(X / 32768.0, y, C, EFTIParams(max_iter=a.iters), seed=a.seed)
    print(f"{'build':16s} | {'insn/iteration':>14s} {'init insn':>10s} | {'engine+buffers':>14s} "
          f"{'firmware RAM':>12s} {'estimate':>9s} | {'identical':>9s} {'QEMU s':>6s}")
    results = []
    with tempfile.TemporaryDirectory(prefix="treegen-train-bench-") as tmp:
        for item in a.builds.split(","):
            target, dsp = item.split(":")
            spec = tf.make_train_spec(target, params, max_rows=n, n_attr=A, n_classes=C, dsp=dsp, partial=True)
            fw = build_train_firmware(model, target, Path(tmp) / item.replace(":", "-"), spec)
            est = tf.estimate_ram(fw.spec, target, max_payload=1024, n_features=model.n_features)
            with QemuBoard(target, fw.path) as board, DeviceClient.open(board.url, timeout=30) as client:
                tc = TrainingClient(client)
                tc.send_data(X, y, C)
                t0 = time.perf_counter()
                res = tc.train(a.seed, a.iters, n)
                seconds = time.perf_counter() - t0
                ti = tc.info()
                tree = device_tree(tc.tree(C), X / 32768.0, y)
            identical = tree.equals(t_host) and res.fitness == i_host["fitness_int"]
            row = {"build": item, "target": target, "dsp": ti.dsp, "partial": ti.partial,
                   "insn_per_iteration": round(res.per_iteration, 1), "init_insn": res.init_counter,
                   "counter_unit": res.unit_name, "iterations": res.iterations,
                   "engine_buffers_ram_bytes": ti.ram_bytes, "firmware_ram_bytes": fw.ram_bytes,
                   "firmware_flash_bytes": fw.flash_bytes, "estimated_ram_bytes": est["total"],
                   "identical_to_host": bool(identical), "fitness_int": res.fitness, "qemu_seconds": round(seconds, 2)}
            results.append(row)
            print(f"{item:16s} | {res.per_iteration:14.0f} {res.init_counter:10d} | {ti.ram_bytes:14d} "
                  f"{fw.ram_bytes:12d} {est['total']:9d} | {str(identical):>9s} {seconds:6.2f}")
            if res.unit_name != "instructions":
                print(f"# warning: counter unit {res.unit_name}", file=sys.stderr)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"command": cmd, "dataset": a.dataset, "rows": n, "attributes": A,
                                                "classes": C, "results": results}, indent=1))
    return 0 if all(r["identical_to_host"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
