"""How the peer benchmarks measure one generated C model (bench/import_exactness.py, bench/boosted.py):
its agreement with the library on the host (gcc) and, on qemu-m4 (mps2-an386 with -icount), the flash it
adds to a linked image and its instructions per inference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "qemu"))
import harness  # noqa: E402
from peers import C_TYPES, c_literal  # noqa: E402

NP_TYPES = {"q15": np.int16, "int16": np.int16, "float": np.float32, "double": np.float64}

HOST_DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include "bench_config.h"
static TG_INPUT_T row[TG_N_FEATURES];
int main(int argc, char **argv)
{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    if (argc != 3 || in == NULL || out == NULL) return 2;
    while (fread(row, sizeof row, 1, in) == 1) {
        int32_t c = (int32_t)TG_PREDICT(row);
        fwrite(&c, sizeof c, 1, out);
    }
    fclose(in);
    return fclose(out) != 0;
}
"""


def inputs_for(kind: str, rows: np.ndarray, model) -> np.ndarray:
    if kind == "q15":
        return model.scaling.to_q15(rows).astype(np.int16)
    if kind == "int16":  # C cast (int16_t)value: truncation (out-of-range values wrap as on the target)
        return np.trunc(np.clip(rows, -2**31, 2**31 - 1)).astype(np.int64).astype(np.int16)
    return rows.astype(NP_TYPES[kind])


def host_agreement(sources, config: str, extra: list, kind: str, model, sets: dict, expect: dict, d: Path,
                   libs=()) -> dict:
    (d / "bench_config.h").write_text(config)
    (d / "host_driver.c").write_text(HOST_DRIVER)
    exe = d / "host_driver"
    objs = []
    for src in sources:
        obj = d / (src.name + ".host.o")
        if src.suffix == ".cpp":
            cmd = ["g++", "-O2", "-fno-exceptions", "-fno-rtti", "-w", f"-I{d}", "-c", str(src), "-o", str(obj)]
        else:
            cmd = ["gcc", "-O2", "-std=c99", f"-I{d}", "-c", str(src), "-o", str(obj)]
        subprocess.run(cmd, check=True, capture_output=True)
        objs.append(obj)
    subprocess.run(["gcc", "-O2", "-std=c99", f"-I{d}", str(d / "host_driver.c"), *map(str, objs), "-o", str(exe),
                    *libs, "-lm"], check=True, capture_output=True)     # -lm: peers calling exp (boosted models)
    out = {}
    for name, rows in sets.items():
        inputs_for(kind, rows, model).tofile(d / "rows.bin")
        subprocess.run([str(exe), str(d / "rows.bin"), str(d / "pred.bin")], check=True, timeout=600)
        pred = np.fromfile(d / "pred.bin", dtype=np.int32)
        out[f"agree_{name}_pct"] = 100.0 * float(np.mean(pred == expect[name]))
        out[f"disagree_{name}_rows"] = int(np.count_nonzero(pred != expect[name]))
    return out


def measure(impl: str, kind: str, est, model, name: str, sets: dict, expect: dict, work: Path, generate,
            target_runs: bool = True, opt: str = "-Os") -> dict:
    """Host agreement and, with ``target_runs``, linked flash and instructions per inference on qemu-m4 of
    the C that ``generate(impl, est, model, name, n_features, out)`` writes (returns (sources,
    bench_config.h text, extra cflags); a treegen generator sets ``generate.last_report``)."""
    d = work / impl
    sources, config, extra = generate(impl, est, model, name, sets["test"].shape[1], d)
    libs = [f for f in extra if f.startswith("-l")]        # link libraries (-lstdc++), after the objects
    extra = [f for f in extra if not f.startswith("-l")]
    out = host_agreement(sources, config, extra, kind, model, sets, expect, d, libs)
    if impl.startswith("treegen"):
        rep = generate.last_report
        out.update(exact=rep.exact, thresholds_off_grid=rep.thresholds_off_grid,
                   soft_vote_bound=rep.soft_vote_bound, child_ref=rep.field_types["child_ref"])
    if not target_runs:
        return out
    (d / "bench_config.h").write_text(config)
    inc = [d]
    elf_model = harness.build([harness.HERE / "driver_size.c", *sources], d / "size_model.elf", opt=opt,
                              include_dirs=inc, extra_cflags=extra, libs=libs)
    elf_stub = harness.build([harness.HERE / "driver_size.c"], d / "size_stub.elf", opt=opt, include_dirs=inc,
                             defines=["TG_STUB"])
    own = set()
    for src in sources:
        own |= harness.object_symbols(harness.compile_object(src, d / (src.stem + ".o"), opt=opt, include_dirs=inc,
                                                             extra_cflags=extra))
    syms, stub_syms = harness.symbol_sizes(elf_model), harness.symbol_sizes(elf_stub)
    added = {s: n for s, n in syms.items() if n > stub_syms.get(s, 0)}
    out["flash_bytes"] = sum(n - stub_syms.get(s, 0) for s, n in added.items())
    out["flash_symbols_bytes"] = sum(syms.get(s, 0) for s in own)
    out["library_helpers"] = sorted(s for s in added if s not in own)
    rows = inputs_for(kind, sets["test"], model)
    lines = [f"#define TG_N_ROWS {rows.shape[0]}u",
             f"static const {C_TYPES[kind]} tg_rows[TG_N_ROWS][TG_N_FEATURES] = {{"]
    lines += ["    {" + ", ".join(c_literal(v, kind) for v in row) + "}," for row in rows]
    (d / "bench_rows.h").write_text("\n".join(lines + ["};"]) + "\n")
    elf = harness.build([harness.HERE / "driver_predict.c", *sources], d / "run.elf", opt=opt, include_dirs=inc,
                        defines=["TG_TIME=1"], extra_cflags=extra, libs=libs)
    res = harness.run(elf, timeout=600)
    pred = np.array(res.predictions)
    out["agree_test_on_target_pct"] = 100.0 * float(np.mean(pred == expect["test"]))
    out["instructions_per_inference"] = round(res.instructions_per_call("predict"), 1)
    return out
