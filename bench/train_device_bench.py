"""On-device training speed: instructions per EFTI iteration on emulated Cortex-M targets (any emulated
target by name, scalar or SMLALD/DSP dot products), by phase, and the RAM the engine uses.

Usage::

    python bench/train_device_bench.py [--datasets veh,pid,seg] [--iters 2000] [--seed 1]
                                       [--builds qemu-m4:scalar,qemu-m4:dsp] [--partial on|off|auto]
                                       [--rows ram|flash] [--no-profile] [--dot-cost] [--retest-cost]
                                       [--json OUT]

For each dataset and build (``TARGET:VARIANT``, TARGET any emulated target, e.g. qemu-m3, qemu-m4,
qemu-f446re, qemu-m33, qemu-m55 where present; VARIANT the dot product: scalar, dsp (SMLALD), mve (Helium
VMLALDAVA, qemu-m55) or auto): the firmware harness with on-device training
(treegen.device.train_firmware, engine sized exactly for the dataset: rows, attributes, classes, the EFTI
default depth 8) is built offline with PlatformIO, run in QEMU (``-icount shift=0``: SysTick counts
instructions), the rows are streamed (TRAIN_DATA) and TRAIN runs ``--iters`` iterations. The device times
every iteration (tg_port_counter() read between tg_efti_step(1) calls) and reports the total;
instructions per iteration = total / iterations (the initial evaluation, tg_efti_init, is reported
separately). The evolved tree is read back and checked identical to the host's (treegen.learn.engine.induce,
same seed), so the figures are for the exact computation the host does.

By phase: a second build of the same engine with TG_EFTI_PROFILE (the engine reads the counter between
the phases of every iteration: partial on/off switch, mutation, reclassification of the rows under
changed nodes, fitness, accept/revert/snapshot) answers TRAIN_PROFILE; its per-phase figures include the
counter reads (a few tens of instructions per iteration), so they add up to slightly more than the
unprofiled total printed beside them.

``--rows flash``: the rows are compiled into the firmware and the engine is fitted to the target (mode by
RAM with ``--partial auto``, depth lowered until it fits), as ``treegen hil --train`` builds it: for the
emulated twins of small boards (qemu-f103c8, qemu-l031k6), whose RAM holds no row buffer.

``--dot-cost``: a third build of the same engine with TG_EFTI_DOT_PROBE (every dot product computed twice,
the extra sum discarded: same tree) is run unprofiled; its instructions per iteration minus the normal
build's are what the dot products cost per iteration (``dot`` column; plus one call and a store per dot
product), and ``dot %`` their share of the normal build's iteration: the part a faster dot product
(DSP, MVE) can speed up at all (Amdahl: at best ``1 - dot share`` of the iteration remains).
``--retest-cost``: likewise a TG_EFTI_RETEST_PROBE build (partial reclassification's common re-test,
memorised sum + changed term compared with the threshold, computed twice): ``retest`` column; ``vec %``
is (dot + retest) / iteration, the share of the iteration that vector instructions can touch (the
rest: mutation, plans, row lists, routing control, class-count updates, fitness, accept/revert).
Both probes include a call or a reload and a store per probe, so they overstate the share slightly.

RAM: ``engine+buffers`` is what the device reports (sizeof of the engine's and the row buffer's static
objects, TRAIN_INFO), ``firmware`` the ELF's data + bss (harness, port, stack reserve included).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from shared_data import load_raw

from treegen import CARTClassifier
from treegen.core.targets import get as get_target
from treegen.device import train_firmware as tf
from treegen.device.emulator import QemuBoard
from treegen.device.protocol import DeviceClient
from treegen.device.train_hil import PROFILE_PHASES, TrainingClient, build_train_firmware, device_tree
from treegen.learn import engine
from treegen.learn.inducers.efti import EFTIParams

PARTIAL = {"on": True, "off": False, "auto": None}


def run_build(model, target, spec, build_dir, X, y, C, seed, iters):
    fw = build_train_firmware(model, target, build_dir, spec)
    n = X.shape[0]
    source = "flash" if fw.spec.flash_rows else "ram"
    with QemuBoard(target, fw.path) as board, DeviceClient.open(board.url, timeout=60) as client:
        tc = TrainingClient(client)
        if source == "ram":
            tc.send_data(X, y, C)
        t0 = time.perf_counter()
        res = tc.train(seed, iters, n, source=source)
        seconds = time.perf_counter() - t0
        ti = tc.info()
        prof = tc.profile()
        tree = device_tree(tc.tree(C), X / 32768.0, y)
    return fw, res, ti, prof, tree, seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", "--dataset", default="veh,pid,seg")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--builds", default="qemu-m4:scalar,qemu-m4:dsp")
    ap.add_argument("--partial", choices=sorted(PARTIAL), default="on")
    ap.add_argument("--rows", choices=("ram", "flash"), default="ram",
                    help="stream the rows into a RAM buffer (default) or compile them into flash")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-phase builds")
    ap.add_argument("--dot-cost", action="store_true",
                    help="also measure what the dot products cost per iteration (a TG_EFTI_DOT_PROBE build)")
    ap.add_argument("--retest-cost", action="store_true",
                    help="also measure what the common-case re-tests cost per iteration (TG_EFTI_RETEST_PROBE)")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args(argv)
    cmd = (f"python bench/train_device_bench.py --datasets {a.datasets} --iters {a.iters} --seed {a.seed} "
           f"--builds {a.builds} --partial {a.partial} --rows {a.rows}{' --no-profile' if a.no_profile else ''}"
           f"{' --dot-cost' if a.dot_cost else ''}{' --retest-cost' if a.retest_cost else ''}")
    print(f"# {cmd}")
    params = EFTIParams()
    results = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="treegen-train-bench-") as tmp:
        for ds in a.datasets.split(","):
            X, labels = load_raw(ds)
            classes, y = np.unique(labels, return_inverse=True)
            y, C = y.astype(np.int64), len(classes)
            n, A = X.shape
            print(f"# data {ds}: {n} rows x {A} attributes, {C} classes; EFTI defaults (depth {params.max_depth}), "
                  f"seed {a.seed}, {a.iters} iterations")
            model = CARTClassifier(max_depth=3).fit(X, labels).model_       # the harness's inference model
            print(f"{'build':16s} | {'insn/iter':>9s} {'init insn':>10s} | "
                  + " ".join(f"{p:>10s}" for p in PROFILE_PHASES)
                  + (f" | {'dot':>7s} {'dot %':>5s}" if a.dot_cost else "")
                  + (f" | {'retest':>7s} {'vec %':>5s}" if a.retest_cost else "")
                  + f" | {'engine+buf':>10s} {'fw RAM':>7s} {'board':>7s} {'fw flash':>8s} {'board':>7s} "
                  f"{'mode':>30s} | {'identical':>9s}")
            for item in a.builds.split(","):
                target, dsp = item.split(":")
                if a.rows == "flash":
                    spec = tf.make_train_spec(target, params, flash_data=(X, y, C), dsp=dsp,
                                              partial=PARTIAL[a.partial], depth_auto=True)
                else:
                    spec = tf.make_train_spec(target, params, max_rows=n, n_attr=A, n_classes=C, dsp=dsp,
                                              partial=PARTIAL[a.partial])
                base = Path(tmp) / f"{ds}-{item.replace(':', '-')}"
                fw, res, ti, _, tree, seconds = run_build(model, target, spec, base, X, y, C, a.seed, a.iters)
                run_params = replace(fw.spec.params, max_iter=a.iters)        # the depth the engine was fitted to
                t_host, i_host = engine.induce(X / 32768.0, y, C, run_params, seed=a.seed)
                identical = tree.equals(t_host) and res.fitness == i_host["fitness_int"]
                fw_target = get_target(target)

                def probe(suffix, **flag):
                    """The same training on a build with one instrumentation flag: (result, profile,
                    whether it trained the same tree to the same fitness)."""
                    _, pres, _, prof, ptree, _ = run_build(model, target, replace(fw.spec, **flag),
                                                           Path(f"{base}-{suffix}"), X, y, C, a.seed, a.iters)
                    return pres, prof, ptree.equals(t_host) and pres.fitness == res.fitness

                phases = None
                if not a.no_profile:
                    pres, prof, same = probe("profile", profile=True)
                    identical = identical and same
                    if prof is not None:
                        phases = {p: round(prof[p] / max(1, pres.iterations), 1) for p in PROFILE_PHASES}
                dot = None
                if a.dot_cost:
                    dres, _, same = probe("dot", dot_probe=True)
                    identical = identical and same
                    dot = round(dres.per_iteration - res.per_iteration, 1)
                retest = None
                if a.retest_cost:
                    rres, _, same = probe("retest", retest_probe=True)
                    identical = identical and same
                    retest = round(rres.per_iteration - res.per_iteration, 1)
                ok = ok and identical
                row = {"dataset": ds, "rows": n, "attributes": A, "classes": C, "build": item, "target": target,
                       "dsp": ti.dsp, "variant": ti.variant, "partial": ti.partial, "mode": tf.mode_name(fw.spec),
                       "max_depth": fw.spec.max_depth, "insn_per_iteration": round(res.per_iteration, 1),
                       "phases_per_iteration": phases, "dot_insn_per_iteration": dot,
                       "dot_share": None if dot is None else round(dot / res.per_iteration, 4),
                       "retest_insn_per_iteration": retest,
                       "vector_share": None if retest is None else round(((dot or 0) + retest) / res.per_iteration, 4),
                       "init_insn": res.init_counter, "counter_unit": res.unit_name,
                       "iterations": res.iterations, "engine_buffers_ram_bytes": ti.ram_bytes,
                       "firmware_ram_bytes": fw.ram_bytes, "firmware_flash_bytes": fw.flash_bytes,
                       "board_ram_bytes": fw_target.ram_bytes, "board_flash_bytes": fw_target.flash_bytes,
                       "identical_to_host": bool(identical), "fitness_int": res.fitness,
                       "qemu_seconds": round(seconds, 2)}
                results.append(row)
                ph = " ".join(f"{phases[p]:10.0f}" if phases else f"{'-':>10s}" for p in PROFILE_PHASES)
                dc = (f" | {dot:7.0f} {100 * dot / res.per_iteration:5.1f}" if dot is not None else "") if a.dot_cost else ""
                if retest is not None:
                    dc += f" | {retest:7.0f} {100 * ((dot or 0) + retest) / res.per_iteration:5.1f}"
                print(f"{item:16s} | {res.per_iteration:9.0f} {res.init_counter:10d} | {ph}{dc} | {ti.ram_bytes:10d} "
                      f"{fw.ram_bytes:7d} {fw_target.ram_bytes:7d} {fw.flash_bytes:8d} {fw_target.flash_bytes:7d} "
                      f"{tf.mode_name(fw.spec):>30s} | {str(identical):>9s}", flush=True)
                if res.unit_name != "instructions":
                    print(f"# warning: counter unit {res.unit_name}", file=sys.stderr)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"command": cmd, "results": results}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
