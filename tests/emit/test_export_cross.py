"""The generated C beyond Arm: AVR (ATmega328P, avr-gcc: 16-bit int, 32-bit double, no FPU) and
RISC-V RV32IMAC (riscv64-unknown-elf-gcc -march=rv32imac -mabi=ilp32, picolibc).

- every layout x dtype of the hand-built models compiles with the strict flags (-Wall -Wextra
  -Werror -Wconversion -pedantic, C99) and the example program links;
- the ABI facts the exactness argument must survive are checked at compile time;
- on RISC-V the example program runs (QEMU sifive_e, semihosting: exit status and output), and the
  raw-input scaling on the RV32 core equals InputScaling.to_q15 around every Q15 breakpoint;
- ``treegen export`` prints ``exact yes`` for a float-contract model on both, with the linked sizes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from export_models import make_model, require, run_cc, small_models, small_oblique_tree

from treegen.core import targets
from treegen.core.scaling import InputScaling
from treegen.emit.export import STRICT_CFLAGS, export_model
from treegen.emit.lower_f32 import f32_axis_splits, q15_of_raw

TESTS = Path(__file__).resolve().parents[1]
CROSS = ("atmega328p", "rv32imac")
# QEMU sifive_e (HiFive1, FE310): code in flash at 0x20400000, 16 KiB DTIM at 0x80000000
RV_RUN = ("--oslib=semihost", "--crt0=hosted", "-Wl,--defsym=__flash=0x20400000", "-Wl,--defsym=__flash_size=0x400000",
          "-Wl,--defsym=__ram=0x80000000", "-Wl,--defsym=__ram_size=0x4000")
QEMU_RV = ("-M", "sifive_e", "-bios", "none", "-display", "none", "-monitor", "none", "-serial", "none",
           "-semihosting-config", "enable=on,target=native", "-kernel")


@pytest.mark.parametrize("tname", CROSS)
def test_every_export_compiles_strict_and_links(tname, tmp_path):
    tgt = targets.get(tname)
    cc = require(tgt.cc)
    n = 0
    for key, model in small_models().items():
        for layout in ("table", "unrolled"):
            for dtype in ("q15", "f32"):
                out = tmp_path / f"{key}-{layout}-{dtype}"
                export_model(model, out, target=tname, layout=layout, dtype=dtype, measure=False, example=True)
                extra = RV_RUN if tname == "rv32imac" else ()
                run_cc([cc, *tgt.cflags, *STRICT_CFLAGS, *extra, "-I", str(out), str(out / "demo.c"),
                        str(out / "example" / "main.c"), "-o", str(out / "demo.elf")])
                n += 1
    assert n == 16


@pytest.mark.parametrize("tname,int_bytes,double_bytes", [("atmega328p", 2, 4), ("rv32imac", 4, 8)])
def test_target_abi(tname, int_bytes, double_bytes, tmp_path):
    """The ABI the portable C is written for: int and double as narrow as C allows on AVR."""
    tgt = targets.get(tname)
    src = tmp_path / "abi.c"
    src.write_text(f"typedef char int_size[sizeof(int) == {int_bytes} ? 1 : -1];\n"
                   f"typedef char double_size[sizeof(double) == {double_bytes} ? 1 : -1];\n"
                   "typedef char float_size[sizeof(float) == 4 ? 1 : -1];\n")
    run_cc([require(tgt.cc), *tgt.cflags, *STRICT_CFLAGS, "-c", str(src), "-o", str(tmp_path / "abi.o")])


def _rv_build(cc: str, out: Path, sources: list, exe: Path, defines: tuple = ()) -> None:
    run_cc([cc, *targets.get("rv32imac").cflags, *STRICT_CFLAGS, *RV_RUN, *defines, "-I", str(out),
            *map(str, sources), "-o", str(exe)])


def test_example_runs_on_rv32(tmp_path):
    qemu = require("qemu-system-riscv32")
    cc = require("riscv64-unknown-elf-gcc")
    for key in ("oblique", "ensemble", "forest"):
        out = tmp_path / key
        export_model(small_models()[key], out, target="rv32imac", measure=False, example=True)
        _rv_build(cc, out, [out / "demo.c", out / "example" / "main.c"], out / "demo.elf")
        proc = subprocess.run([qemu, *QEMU_RV, str(out / "demo.elf")], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        text = proc.stdout + proc.stderr  # QEMU writes the semihosting console to its stderr
        assert "0 of 4 rows differ from the Python model" in text, text


def test_scale_q15_on_rv32_equals_to_q15(tmp_path):
    """The integer Q15 scaling executed by the RV32IMAC core: +-2 float32 ulps around every breakpoint of
    a min-max feature crossing zero and of a negative-scale feature (the host C is checked with +-64
    in test_portable_scaling.py; the emulated core is slower)."""
    qemu = require("qemu-system-riscv32")
    cc = require("riscv64-unknown-elf-gcc")
    scaling = InputScaling(np.array([-3.25, 0.1]), np.array([0.1234567, -2.5e-3]), "minmax")
    model = make_model([small_oblique_tree().compact()], 3, 3,
                       scaling=InputScaling(np.array([-3.25, 0.1, 0.0]), np.array([0.1234567, -2.5e-3, 0.0])))
    export_model(model, tmp_path, target="rv32imac", measure=False)
    xs = []
    for f in range(2):
        ops, t = f32_axis_splits(np.full(32767, scaling.offset[f]), np.full(32767, scaling.scale[f]),
                                 np.arange(32767))
        bits = t[np.isin(ops, ["le", "gt"])].astype(np.float32).view(np.uint32).astype(np.int64)
        xs.append(((bits[:, None] + np.arange(-2, 3)[None, :]).ravel() & 0xFFFFFFFF).astype(np.uint32))
    x = np.concatenate(xs).view(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    exe = tmp_path / "scale.elf"
    _rv_build(cc, tmp_path, [tmp_path / "demo.c", TESTS / "c" / "tg_scale_stream.c"], exe,
              ('-DTG_HEADER="demo.h"', "-DTG_SCALE=tg_demo_scale_q15", "-DTG_N_FEATURES=3",
               '-DTG_IN_PATH="in.bin"', '-DTG_OUT_PATH="out.bin"'))
    proc = subprocess.run([qemu, *QEMU_RV, str(exe)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.int16).reshape(-1, 3)
    assert got.shape[0] == x.size > 2 * 32000 * 5
    want = model.scaling.to_q15(np.repeat(x[:, None].astype(np.float64), 3, axis=1))
    bad = np.flatnonzero(np.any(got[:, :2] != want[:, :2], axis=1))
    assert bad.size == 0, [(float(x[i]), got[i].tolist(), want[i].tolist()) for i in bad[:5]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        assert chunk, f"the AVR closed the connection after {len(buf)} of {n} bytes"
        buf += chunk
    return bytes(buf)


def test_scale_q15_on_avr_equals_to_q15(tmp_path):
    """The integer Q15 scaling executed by the ATmega328P (QEMU arduino-uno, USART0 over a TCP socket;
    16-bit int, 8-bit registers): +-1 ulp around every 32nd breakpoint of a min-max feature crossing
    zero and of a negative-scale feature, and the special values (about 750 inputs per second)."""
    qemu = require("qemu-system-avr")
    cc = require("avr-gcc")
    scaling = InputScaling(np.array([-3.25, 0.1, 0.0]), np.array([0.1234567, -2.5e-3, 1 / 32768]))
    model = make_model([small_oblique_tree()], 3, 3, scaling=scaling)
    export_model(model, tmp_path, target="atmega328p", measure=False)
    elf = tmp_path / "scale.elf"
    run_cc([cc, *targets.get("atmega328p").cflags, *STRICT_CFLAGS, "-I", str(tmp_path), '-DTG_HEADER="demo.h"',
            "-DTG_SCALE=tg_demo_scale_q15", "-DTG_N_FEATURES=3", str(tmp_path / "demo.c"),
            str(TESTS / "c" / "tg_scale_avr_uart.c"), "-o", str(elf)])
    xs = [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38], dtype=np.float32)
          .view(np.uint32)]
    for f in range(2):
        ops, t = f32_axis_splits(np.full(32767, scaling.offset[f]), np.full(32767, scaling.scale[f]),
                                 np.arange(32767))
        bits = t[np.isin(ops, ["le", "gt"])][::32].astype(np.float32).view(np.uint32).astype(np.int64)
        xs.append(((bits[:, None] + np.arange(-1, 2)[None, :]).ravel() & 0xFFFFFFFF).astype(np.uint32))
    x = np.concatenate(xs).view(np.float32)
    port = _free_port()
    proc = subprocess.Popen([qemu, "-M", "arduino-uno", "-bios", str(elf), "-display", "none", "-monitor", "none",
                             "-chardev", f"socket,id=u0,host=127.0.0.1,port={port},server=on,wait=on,nodelay=on",
                             "-serial", "chardev:u0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "QEMU's UART socket never opened"
                time.sleep(0.05)
        with conn:
            assert _recv_exact(conn, 1) == b"R"
            out = bytearray()
            for k in range(0, x.size, 64):
                chunk = x[k:k + 64]
                conn.sendall(chunk.astype("<f4").tobytes())
                out += _recv_exact(conn, 6 * chunk.size)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    got = np.frombuffer(bytes(out), dtype="<i2").reshape(-1, 3)
    finite = np.isfinite(x)
    want = np.zeros_like(got)
    want[finite] = scaling.to_q15(np.repeat(x[finite, None].astype(np.float64), 3, axis=1))
    with np.errstate(invalid="ignore"):  # +-inf saturate by the sign of scale, NaN -> 0
        want[~finite] = np.stack([q15_of_raw(x[~finite].astype(np.float64), scaling.offset[f], scaling.scale[f])
                                  for f in range(3)], axis=1).astype(np.int16)
    assert x.size > 2000
    bad = np.flatnonzero(np.any(got != want, axis=1))
    assert bad.size == 0, [(float(x[i]), got[i].tolist(), want[i].tolist()) for i in bad[:5]]


@pytest.mark.parametrize("tname", CROSS)
def test_cli_export_float_contract_prints_exact_yes_and_linked_sizes(tname, tmp_path):
    """A min-max (float32-contract) q15 model: exact for every float32 input on AVR and RV32 too,
    since the raw-input scaling is integer code; the linked sizes are printed beside the object's."""
    from treegen.core.model import save
    model = make_model([small_oblique_tree()], 3, 3,
                       scaling=InputScaling(np.array([-3.25, 0.1, 2.0]), np.array([0.1234567, 2.5e-3, 0.5])))
    assert model.contract == "float32"
    path = save(model, tmp_path / "m.json")
    proc = subprocess.run([sys.executable, "-m", "treegen", "export", str(path), "--target", tname,
                           "--name", "demo", "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("exact           yes, for every float32 input") for ln in lines), proc.stdout
    linked = [ln for ln in lines if ln.startswith("linked ")]
    assert len(linked) == 1 and "Q15 entry tg_demo_predict_q15: " in linked[0] \
        and "float entry tg_demo_predict: " in linked[0], proc.stdout
    assert any("not linked so library" in ln or "not linked, so library" in ln for ln in lines), proc.stdout


def test_f32_oblique_guarantee_names_avr_float(tmp_path):
    rep = export_model(make_model([small_oblique_tree()], 3, 3), tmp_path, target="atmega328p", dtype="f32",
                       measure=False)
    assert rep.exact is False and "not IEEE-754" in rep.guarantee
    rep = export_model(make_model([small_oblique_tree()], 3, 3), tmp_path / "rv", target="rv32imac", dtype="f32",
                       measure=False)
    assert "C == Python float32 evaluation" in rep.guarantee and "not IEEE" not in rep.guarantee



def test_avr_tables_live_in_flash(tmp_path):
    """atmega328p (progmem = true): every model table is PROGMEM and read with pgm_read_*, so the entry
    points cost no RAM in a linked image (a plain const table is copied to RAM by avr-libc's startup
    code); other targets' C has none of it."""
    require("avr-gcc")
    for key in ("forest", "ensemble"):
        model = small_models()[key]
        measure = key == "forest"                     # linking takes seconds: one model measured
        rep = export_model(model, tmp_path / key, target="atmega328p", layout="table", dtype="q15", measure=measure)
        src = (tmp_path / key / "demo.c").read_text()
        assert "#include <avr/pgmspace.h>" in src and "PROGMEM = {" in src and "pgm_read_" in src
        if measure:
            assert rep.linked_q15["ram_bytes"] == 0 and rep.linked_float["ram_bytes"] == 0, rep.linked_q15
        export_model(model, tmp_path / f"{key}-m4", target="cortex-m4", layout="table", dtype="q15", measure=False)
        assert "PROGMEM" not in (tmp_path / f"{key}-m4" / "demo.c").read_text()
