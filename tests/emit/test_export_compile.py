"""The generated C compiles cleanly with ``-std=c99 -Wall -Wextra -Werror -Wconversion -pedantic``.

Host (gcc: compile, link with the example main.c and run it) and arm-none-eabi-gcc for Cortex-M0+, M3, M4, M7,
M33 and M55 with each target's own flags (link main.c with newlib's nosys.specs); the DSP variant on
the host (emulation) and on M4/M7/M33/M55 (the instructions), the MVE variant on the host
(emulation) and on M55 (Helium); both layouts; q15 and f32. A missing compiler FAILS
these tests: they are the proof that the export works, never silently skipped.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from export_models import ARM_CPUS, DSP_CPUS, MVE_CPUS, make_model, random_tree, require, run_cc, small_models

from treegen.core import targets
from treegen.core.scaling import InputScaling
from treegen.emit.export import STRICT_CFLAGS, export_model


def _mixed_model():
    """11 features (odd: the dual-MAC loop has a tail), an ensemble of an axis tree, an int32 and an
    int64 oblique tree and a single leaf: every code path of the generator in one file."""
    rng = np.random.default_rng(7)
    trees = [random_tree(rng, 11, 5, 12, "axis"), random_tree(rng, 11, 5, 9, "pair"),
             random_tree(rng, 11, 5, 9, "efti"), random_tree(rng, 11, 5, 0, "axis")]
    return make_model(trees, 11, 5, classes=["walk", "run", "sit", "stand", "lie"], dataset="mixed.csv")


MODELS = {"axis": lambda: small_models()["axis"], "mixed": _mixed_model,
          "forest": lambda: small_models()["forest"]}   # soft vote, predict_proba, raw thresholds
CONFIGS = [("q15", "scalar"), ("q15", "dsp"), ("q15", "mve"), ("f32", "auto")]


@pytest.fixture(scope="module")
def compilers():
    return {"host": require("gcc"), "arm": require("arm-none-eabi-gcc")}


def _jobs(model_key: str, layout: str, dtype: str, variant: str, out, compilers) -> list:
    model = MODELS[model_key]()
    target = "cortex-m55" if variant == "mve" else "cortex-m4"
    export_model(model, out, target=target, layout=layout, dtype=dtype, variant=variant, measure=False, example=True)
    name = "mixed" if model_key == "mixed" else "demo"
    src, main = out / f"{name}.c", out / "example" / "main.c"
    jobs = [("run", [compilers["host"], *STRICT_CFLAGS, "-O2", "-I", str(out), str(src), str(main),
                     "-o", str(out / "host")])]
    cpus = {"dsp": DSP_CPUS, "mve": MVE_CPUS}.get(variant, ARM_CPUS)
    for cpu in cpus:
        flags = list(targets.get(cpu).cflags)
        jobs.append(("link", [compilers["arm"], *flags, *STRICT_CFLAGS, "--specs=nosys.specs", "-I", str(out),
                              str(src), str(main), "-o", str(out / f"{cpu}.elf")]))
    return jobs


@pytest.mark.parametrize("model_key", list(MODELS))
@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_compiles_everywhere(model_key, layout, compilers, tmp_path):
    jobs = []
    for dtype, variant in CONFIGS:
        jobs += _jobs(model_key, layout, dtype, variant, tmp_path / f"{dtype}-{variant}", compilers)
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda job: run_cc(job[1]), jobs))
    for kind, cmd in jobs:
        if kind == "run":
            exe = cmd[-1]
            proc = subprocess.run([exe], capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "0 of 4 rows differ from the Python model" in proc.stdout


def test_dsp_variant_uses_the_dual_mac_instructions(compilers, tmp_path):
    """On Cortex-M4 the DSP variant really emits SMLAD (int32 accumulators) and SMLALD (int64)."""
    objdump = require("arm-none-eabi-objdump")
    export_model(_mixed_model(), tmp_path, target="cortex-m4", layout="table", variant="dsp", measure=False)
    obj = tmp_path / "mixed.o"
    run_cc([compilers["arm"], *targets.get("cortex-m4").cflags, *STRICT_CFLAGS, "-c", str(tmp_path / "mixed.c"),
            "-o", str(obj)])
    asm = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "smlad\t" in asm and "smlald\t" in asm
    # and the scalar variant does not
    export_model(_mixed_model(), tmp_path / "s", target="cortex-m4", layout="table", variant="scalar", measure=False)
    run_cc([compilers["arm"], *targets.get("cortex-m4").cflags, *STRICT_CFLAGS, "-c", str(tmp_path / "s/mixed.c"),
            "-o", str(obj)])
    asm = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "smlad\t" not in asm


@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_mve_variant_uses_the_helium_instructions(compilers, layout, tmp_path):
    """On Cortex-M55 the MVE variant really emits VMLADAVA.S16 (int32 accumulators) and VMLALDAVA.S16
    (int64; objdump spells them vmlava / vmlalva), tail-predicated halfword loads for the 11th
    feature, and no scalar multiply-accumulate; the DSP variant on the same core does not use Helium."""
    objdump = require("arm-none-eabi-objdump")
    flags = targets.get("cortex-m55").cflags

    def disassemble(variant: str) -> str:
        out = tmp_path / variant
        export_model(_mixed_model(), out, target="cortex-m55", layout=layout, variant=variant, measure=False)
        obj = out / "mixed.o"
        run_cc([compilers["arm"], *flags, *STRICT_CFLAGS, "-c", str(out / "mixed.c"), "-o", str(obj)])
        return subprocess.run([objdump, "-d", "-marmv8.1-m.main", str(obj)], capture_output=True, text=True,
                              check=True).stdout

    asm = disassemble("mve")
    assert "vmlava.s16\t" in asm and "vmlalva.s16\t" in asm
    assert "vctp.16\t" in asm and ("vldrht.s16\t" in asm or "vldrht.u16\t" in asm)
    assert "smlad\t" not in asm and "smlald\t" not in asm and "smlal\t" not in asm
    dsp = disassemble("dsp")
    assert "vmlava" not in dsp and "vmlalva" not in dsp and "smlad\t" in dsp


def test_header_twice_two_models_and_cplusplus(compilers, tmp_path):
    """Declarations only in the header: included twice, two models in one program, valid C++."""
    a, b = small_models()["oblique"], small_models()["ensemble"]
    export_model(a, tmp_path / "a", target="native", name="alpha", measure=False, example=True)
    export_model(b, tmp_path / "b", target="native", name="beta", measure=False)
    exe = tmp_path / "both"
    run_cc([compilers["host"], *STRICT_CFLAGS, "-O2", "-I", str(tmp_path / "a"), "-I", str(tmp_path / "b"),
            "-include", "alpha.h", "-include", "beta.h", "-include", "beta.h",
            str(tmp_path / "a/alpha.c"), str(tmp_path / "b/beta.c"), str(tmp_path / "a/example/main.c"), "-o", str(exe)])
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout
    gxx = require("g++")
    run_cc([gxx, "-x", "c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only",
            str(tmp_path / "a/alpha.h")])


@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_q15_path_has_no_float(layout, compilers, tmp_path):
    """On Cortex-M0+ (no FPU) any float operation would be a call to a soft-float routine
    (__aeabi_f*/__aeabi_d*): none, the raw-input scaling tg_<name>_scale_q15 included (its binary64
    roundings are carried out on integers). Before that scaling was integer, it was the one user."""
    objdump = require("arm-none-eabi-objdump")
    export_model(_mixed_model(), tmp_path, target="cortex-m0plus", layout=layout, measure=False)
    obj = tmp_path / "mixed.o"
    run_cc([compilers["arm"], *targets.get("cortex-m0plus").cflags, *STRICT_CFLAGS, "-ffunction-sections",
            "-fdata-sections", "-c", str(tmp_path / "mixed.c"), "-o", str(obj)])
    relocs = subprocess.run([objdump, "-r", str(obj)], capture_output=True, text=True, check=True).stdout
    section, float_users = None, set()
    for line in relocs.splitlines():
        if line.startswith("RELOCATION RECORDS FOR ["):
            section = line.split("[", 1)[1].rstrip("]:")
        elif "__aeabi_f" in line or "__aeabi_d" in line:
            float_users.add(section)
    assert float_users == set(), float_users
    assert ".text.tg_mixed_scale_q15" in relocs  # the scaling is there, and uses no float routine


def _axis_minmax_model():
    """Axis trees on physical-unit features (min-max scaling, one negative scale, one constant feature)."""
    rng = np.random.default_rng(9)
    trees = [random_tree(rng, 6, 3, 20, "axis"), random_tree(rng, 6, 3, 7, "axis")]
    scaling = InputScaling(np.array([-40.0, 0.0, 1e5, 3.5, 0.0, -2.0]),
                           np.array([1e-2, 1 / 32768, 1e-3, 0.0, -0.25, 7.0]))
    return make_model(trees, 6, 3, scaling=scaling, dataset="axisraw.csv")


@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_f32_path_has_no_double_and_axis_trees_no_float(layout, compilers, tmp_path):
    """dtype f32: no double-precision arithmetic sneaks in -- on Cortex-M4 (single-precision FPU) and
    M0+ a double operation would be a call to a soft-float routine __aeabi_d*, and -Wdouble-promotion
    flags any implicit promotion. Axis-only models use no float routine at all on the FPU-less M0+:
    their tests compare bit patterns (and no input scaling runs on the device)."""
    objdump = require("arm-none-eabi-objdump")
    cases = [(_mixed_model(), "mixed", "cortex-m4", ("__aeabi_d",)),
             (_mixed_model(), "mixed", "cortex-m0plus", ("__aeabi_d",)),
             (_axis_minmax_model(), "axisraw", "cortex-m4", ("__aeabi_",)),
             (_axis_minmax_model(), "axisraw", "cortex-m0plus", ("__aeabi_",))]
    for k, (model, name, cpu, forbidden) in enumerate(cases):
        out = tmp_path / f"c{k}"
        export_model(model, out, target=cpu, layout=layout, dtype="f32", measure=False)
        obj = out / f"{name}.o"
        run_cc([compilers["arm"], *targets.get(cpu).cflags, *STRICT_CFLAGS, "-Wdouble-promotion",
                "-ffunction-sections", "-fdata-sections", "-c", str(out / f"{name}.c"), "-o", str(obj)])
        relocs = subprocess.run([objdump, "-r", str(obj)], capture_output=True, text=True, check=True).stdout
        calls = sorted({w for line in relocs.splitlines() for w in line.split()
                        if w.startswith((*forbidden, "memcpy"))})
        assert calls == [], f"{name} on {cpu}: {calls}"
        asm = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
        assert ".f64" not in asm
        if name == "axisraw":
            assert "vcmp" not in asm and "vldr" not in asm  # integer compares only
            assert "_offset" not in relocs and "_scale" not in relocs
