"""Issue #34 point 4: library layouts that build where they claim.

- Every model kind (a tree, a soft forest, a regression forest, boosted f32 and boosted q15) exports in
  every library layout with its example; the host examples run and report "0 of N rows differ".
- The Arduino library (``architectures=*``) compiles for AVR (avr-gcc, ATmega328P), ARM (Cortex-M0+ and
  Cortex-M4F) and RISC-V (rv32imc, the ESP32-C3's ISA; picolibc): its C as C with the strict flags, its
  example sketch as C++ against the Arduino.h stand-in (tests/c/arduino_stub). On AVR the tables and
  the sketch's rows sit in program memory (``.progmem.data``), not in RAM.
- The Zephyr layout's example is a Zephyr sample (CMakeLists.txt with find_package(Zephyr), prj.conf,
  sample.yaml, src/main.c with printk), whose main.c compiles and runs against minimal stubs of the two
  Zephyr headers it includes (tests/c/zephyr_stub).
- ``.treegen-manifest.json``: re-exporting into a folder with another layout removes the files only the
  previous export wrote; a user's file and a generated file the user changed are kept (and overwriting a
  changed generated file is refused without --force).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from export_models import require, small_models

from treegen.core.errors import TreegenError
from treegen.emit.export import STRICT_CFLAGS, export_model
from treegen.emit.library import example_path, library_src_dir
from treegen.emit.options import LIB_LAYOUTS

yaml = pytest.importorskip("yaml")
sklearn = pytest.importorskip("sklearn")
xgb = pytest.importorskip("xgboost")

C = Path(__file__).resolve().parents[1] / "c"
ARDUINO_STUB, ZEPHYR_STUB = C / "arduino_stub", C / "zephyr_stub"
CROSS = {"avr": ("avr-gcc", "-mmcu=atmega328p", "-Os"),
         "cortex-m0plus": ("arm-none-eabi-gcc", "-mcpu=cortex-m0plus", "-mthumb", "-Os"),
         "cortex-m4": ("arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                       "-mfpu=fpv4-sp-d16", "-Os"),
         "rv32imc (ESP32-C3)": ("riscv64-unknown-elf-gcc", "-march=rv32imc", "-mabi=ilp32",
                                "--specs=picolibc.specs", "-Os")}


@pytest.fixture(scope="module")
def kinds():
    """name -> (model, data or None, dtype) for every model kind."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestRegressor

    from treegen.importers import from_sklearn, from_xgboost

    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[::3, :12], y[::3]
    xc = xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1, random_state=0).fit(X, y)
    rr = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, X[:, 0] * 2 + X[:, 3] / 100)
    boosted = from_xgboost(xc, X=X)
    return {"tree": (small_models()["axis"], None, "q15"), "forest": (small_models()["forest"], None, "q15"),
            "regression": (from_sklearn(rr, X=X), (X, None), "auto"), "boosted_f32": (boosted, (X, y), "f32"),
            "boosted_q15": (boosted, (X, y), "q15")}


def _export(kinds, kind: str, out: Path, layout: str, target: str = "cortex-m4", **kw):
    model, data, dtype = kinds[kind]
    return export_model(model, out, target=target, dtype=dtype, data=data, lib_layout=layout, example=True,
                        measure=False, name="demo", **kw)


@pytest.mark.parametrize("layout", LIB_LAYOUTS)
@pytest.mark.parametrize("kind", ["tree", "forest", "regression", "boosted_f32", "boosted_q15"])
def test_every_kind_in_every_layout_with_its_example(kinds, tmp_path, kind, layout):
    """Boosted models exported only the plain layout, without --example; now every kind in every layout.
    The C examples run on the host (strict flags) and match the Python model."""
    out = tmp_path / "lib"
    rep = _export(kinds, kind, out, layout)
    ex = example_path(out, "demo", layout)
    assert all(Path(f).is_file() for f in rep.files) and str(ex) in rep.files
    src = library_src_dir(out, layout)
    if layout == "arduino":
        cmd = ["g++", "-x", "c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-I", str(ARDUINO_STUB), "-I",
               str(src), "-c", str(ex), "-o", str(tmp_path / "sketch.o")]
        _run(cmd)
        _run([require("gcc"), *STRICT_CFLAGS, "-I", str(src), "-c", str(src / "demo.c"), "-o", str(tmp_path / "m.o")])
        _run(["g++", "-I", str(ARDUINO_STUB), str(ARDUINO_STUB / "main.cpp"), str(tmp_path / "sketch.o"),
              str(tmp_path / "m.o"), "-o", str(tmp_path / "app")])
    else:
        inc = ["-I", str(ZEPHYR_STUB)] if layout == "zephyr" else []
        _run([require("gcc"), *STRICT_CFLAGS, *inc, "-I", str(src), str(src / "demo.c"), str(ex),
              "-o", str(tmp_path / "app")])
    proc = subprocess.run([str(tmp_path / "app")], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and re.search(r"^0 of [1-9]\d* rows differ from the Python model$", proc.stdout,
                                              re.M), proc.stdout


def _run(cmd: list) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stderr


@pytest.mark.parametrize("kind", ["forest", "regression", "boosted_f32", "boosted_q15"])
def test_arduino_library_builds_for_avr_arm_and_riscv(kinds, tmp_path, kind):
    """architectures=* with an unconditional <avr/pgmspace.h> built for AVR only: the library's C and
    its sketch now compile for AVR, Cortex-M0+, Cortex-M4F and rv32imc; exported for an ARM target it
    still keeps its tables in AVR program memory when built for AVR."""
    out = tmp_path / "lib"
    _export(kinds, kind, out, "arduino", target="cortex-m4")
    src, ino = out / "src", out / "examples" / "demo" / "demo.ino"
    props = (out / "library.properties").read_text()
    assert "architectures=*" in props and "\nurl=\n" not in props
    for arch, (cc, *flags) in CROSS.items():
        cc = require(cc)
        obj = tmp_path / f"{arch.split()[0]}.o"
        _run([cc, *flags, *STRICT_CFLAGS, "-I", str(src), "-c", str(src / "demo.c"), "-o", str(obj)])
        cxx = cc[:-3] + "g++"
        _run([cxx, *flags, "-x", "c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-I", str(ARDUINO_STUB),
              "-I", str(src), "-c", str(ino), "-o", str(tmp_path / f"{arch.split()[0]}.ino.o")])
        if arch == "avr":
            for o in (obj, tmp_path / "avr.ino.o"):
                sections = _sections(o)
                # the rows and expected results of the sketch and the tree tables: program memory
                if kind in ("forest", "regression") or o.name.endswith(".ino.o"):
                    assert sections.get(".progmem.data", 0) > 0, (o.name, sections)
                if o.name.endswith(".ino.o"):
                    assert sections.get(".data", 0) + sections.get(".rodata", 0) < 16, sections


def _sections(obj: Path) -> dict:
    out = subprocess.run([require("avr-size"), "-A", str(obj)], capture_output=True, text=True, check=True).stdout
    return {p[0]: int(p[1]) for p in (ln.split() for ln in out.splitlines()) if len(p) >= 2 and p[1].isdigit()}


def test_zephyr_layout_example_is_a_zephyr_sample(kinds, tmp_path):
    out = tmp_path / "mod"
    rep = _export(kinds, "boosted_f32", out, "zephyr")
    sample = out / "example"
    assert sorted(p.relative_to(sample).as_posix() for p in sample.rglob("*") if p.is_file()) == \
        ["CMakeLists.txt", "prj.conf", "sample.yaml", "src/main.c"]
    cmake = [ln for ln in (sample / "CMakeLists.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    assert cmake[0].startswith("cmake_minimum_required(VERSION 3.20")
    # the module one folder up is added before Zephyr is found; the app target gets src/main.c
    assert cmake.index("list(APPEND ZEPHYR_EXTRA_MODULES ${CMAKE_CURRENT_SOURCE_DIR}/..)") < \
        cmake.index("find_package(Zephyr REQUIRED HINTS $ENV{ZEPHYR_BASE})") < \
        next(i for i, ln in enumerate(cmake) if ln.startswith("project("))
    assert "target_sources(app PRIVATE src/main.c)" in cmake
    conf = [ln for ln in (sample / "prj.conf").read_text().splitlines() if ln and not ln.startswith("#")]
    assert conf == ["CONFIG_TG_DEMO=y", "CONFIG_PRINTK=y"]
    kconfig = (out / "zephyr" / "Kconfig").read_text()
    assert "config TG_DEMO" in kconfig                      # the symbol prj.conf sets exists
    doc = yaml.safe_load((sample / "sample.yaml").read_text())
    assert doc["sample"]["name"] and doc["tests"] and doc["common"]["harness"] == "console"
    n = len(kinds["boosted_f32"][1][0][:4])
    assert doc["common"]["harness_config"]["regex"] == [f"0 of {n} rows differ from the Python model"]
    main = (sample / "src" / "main.c").read_text()
    assert "#include <zephyr/kernel.h>" in main and "printk(" in main and "printf" not in main
    assert str(sample / "src" / "main.c") in rep.files


def test_manifest_reexport_removes_only_what_treegen_wrote(kinds, tmp_path):
    out = tmp_path / "lib"
    _export(kinds, "tree", out, "cmake")
    manifest = json.loads((out / ".treegen-manifest.json").read_text())
    assert sorted(manifest["files"]) == ["CMakeLists.txt", "example/main.c", "src/demo.c", "src/demo.h"]
    (out / "notes.txt").write_text("mine\n")                    # a user's file
    (out / "example" / "keep.c").write_text("int x;\n")         # a user's file in a generated folder
    rep = _export(kinds, "tree", out, "arduino")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == [".treegen-manifest.json", "example/keep.c", "examples/demo/demo.ino", "library.properties",
                     "notes.txt", "src/demo.c", "src/demo.h"]
    assert any("removed 2 file(s)" in n and "CMakeLists.txt" in n for n in rep.notes), rep.notes
    # a generated file the user changed: kept when another layout no longer writes it ...
    ino = out / "examples" / "demo" / "demo.ino"
    ino.write_text(ino.read_text() + "// my change\n")
    rep = _export(kinds, "tree", out, "plain")
    assert ino.is_file() and any("kept examples/demo/demo.ino" in n for n in rep.notes), rep.notes
    assert not (out / "library.properties").exists() and (out / "notes.txt").is_file()
    # ... and not overwritten without force when this export writes it again
    (out / "demo.c").write_text((out / "demo.c").read_text() + "/* tuned */\n")
    with pytest.raises(TreegenError, match="changed since treegen wrote it"):
        _export(kinds, "tree", out, "plain")
    assert "/* tuned */" in (out / "demo.c").read_text()
    _export(kinds, "tree", out, "plain", force=True)
    assert "/* tuned */" not in (out / "demo.c").read_text()
