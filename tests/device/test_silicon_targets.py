"""Real microcontrollers' firmware on emulated silicon: the bare-metal board-support ports
(templates/firmware/tg_port_stm32_usart*.c, tg_port_nrf51_uart.c, tg_port_sifive_uart.c,
tg_port_avr_usart.c), built offline for the boards and run on QEMU's STM32, nRF51 and SiFive FE310
machines and simavr's ATmega328P.

- qemu-netduinoplus2 runs the nucleo_f446re image (same loadable bytes: the sha256 is compared),
  qemu-microbit the microbit_v1 image (a true Cortex-M0), qemu-stm32vldiscovery the STM32F1 port linked
  for the F100's 8 KiB RAM, qemu-hifive1 (sifive_e) the hifive1 image (RISC-V RV32IMAC, SiFive UART,
  minstret), simavr-uno the arduino_uno image (AVR, USART0, tables in flash): inference (PREDICT and
  PROBA of a soft-voting forest, and the float entry point through PREDICT_RAW), instruction counts
  (CPU cycles on simavr-uno), protocol robustness (bad CRC, garbage, truncated and
  oversized frames) and one on-device training case each (the Uno's 2 KiB in test_simavr.py), identical
  to the host engine.
- nucleo_l031k6 (no QEMU model of the STM32L0) and bluepill_f103c8: built and linked, not run.
- treegen flash: the pyOCD command per board (--dry-run) and the one-line "no probe" error; OpenOCD for
  the HiFive1; avrdude for the Uno (and the one-line error without it).

FAILS (never skips) when arm-none-eabi-gcc, riscv64-unknown-elf-gcc, avr-gcc, QEMU (qemu-system-arm,
qemu-system-riscv32), libsimavr or pyOCD is missing (scripts/setup.sh, the device extra).
"""

from __future__ import annotations

import shlex
import struct
import time

import numpy as np
import pytest
from pio_projects import require_tools
from raw_frames import error_fields, raw_response

from treegen import CARTClassifier, RFClassifier
from treegen.core import targets
from treegen.device import platformio as tpio
from treegen.device.commands import build_firmware as build_board
from treegen.device.hil import Firmware, build_firmware, open_device, run_hil
from treegen.device.image import image_sha256
from treegen.device.protocol import ErrorCode, FrameParser, MsgType, encode_frame

EMULATED = {"qemu-netduinoplus2": "nucleo_f446re", "qemu-microbit": "microbit_v1",
            "qemu-stm32vldiscovery": "qemu-stm32vldiscovery", "qemu-hifive1": "hifive1", "simavr-uno": "arduino_uno"}
#: what BENCH counts: instructions under QEMU (-icount), CPU cycles on simavr (Timer1 from its cycle count)
UNIT = {"simavr-uno": "cycles"}
#: RX ring bytes of each port (the AVR's 2 KiB RAM: 64, [soc.defines] TG_RX_BUFFER_SIZE)
RING = {"simavr-uno": 64}
#: on-device training of this file's data: not on the Uno (2 KiB RAM holds ~30 rows x 2 attributes at
#: depth 2: test_simavr.py trains there)
TRAINING = sorted(set(EMULATED) - {"simavr-uno"})


def _data(seed: int = 3, n: int = 120):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] > 7).astype(int) + (X[:, 2] > 6).astype(int)
    return X, y


@pytest.fixture(scope="module")
def forest():
    """A small soft-voting forest (PREDICT and PROBA on the device)."""
    import dataclasses

    X, y = _data()
    m = RFClassifier(n_trees=3, max_depth=4, random_state=1).fit(X, y).model_
    return dataclasses.replace(m, vote="soft"), X


@pytest.fixture(scope="module")
def built(forest, tmp_path_factory):
    """The forest's firmware for each emulated target (built once)."""
    require_tools()
    model, _ = forest
    root = tmp_path_factory.mktemp("silicon")
    return {name: build_firmware(model, name, root / name) for name in EMULATED}


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_emulated_target_builds_its_boards_image(name, built):
    t = targets.get(name)
    fw = built[name]
    assert t.image == EMULATED[name] and fw.target == EMULATED[name]
    assert t.uart in ("stm32_usart", "nrf51_uart", "sifive_uart", "avr_usart")
    assert fw.flash_bytes < t.flash_bytes and fw.ram_bytes < t.ram_bytes


def test_netduinoplus2_runs_the_nucleo_image(forest, built, tmp_path):
    """treegen build --target nucleo_f446re and the image hil runs on netduinoplus2: same loadable bytes."""
    model, _ = forest
    board = build_board(model, "nucleo_f446re", tmp_path / "nucleo")
    assert board.bin is not None and board.bin.stat().st_size > 1000
    assert board.image_sha256 == built["qemu-netduinoplus2"].image_sha256 == image_sha256(board.elf)
    # the vector table sits at the F446's flash (0x08000000): initial SP at the top of its 128 KiB SRAM
    seg = sorted(__import__("treegen.device.image", fromlist=["x"]).loadable_segments(board.elf))[0]
    assert seg[0] == 0x08000000 and struct.unpack_from("<I", seg[1], 0)[0] == 0x20000000 + 128 * 1024


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_inference_predict_and_proba_identical(name, forest, built):
    model, X = forest
    fw = built[name]
    report = run_hil(model, name, data=(X, None), build_dir=fw.project, bench_iters=200, float_ulps=1)
    assert report["ok"], report["error"] or report["checks"]
    assert report["mismatches"] == 0 and report["proba_mismatches"] == 0 and report["firmware_reused"]
    # the float entry point (PREDICT_RAW) on float32 inputs next to every threshold == the fixed-point model
    fe = report["float_entry"]
    assert fe["mismatches"] == 0 and fe["breakpoints"] >= 5 and fe["rows"] == 3 * fe["breakpoints"]
    assert report["device"]["target"] == EMULATED[name] and report["image_sha256"] == fw.image_sha256
    # instructions per inference, counted by the port's tick source under -icount (repeatable); on
    # simavr-uno CPU cycles
    assert report["counter_unit"] == UNIT.get(name, "instructions") and 10 < report["insn_per_inference"] < 20000


def test_hifive1_counts_instructions_with_minstret_repeatably(forest, built):
    """qemu-hifive1's BENCH counts minstret under -icount shift=0: instructions, the same total on every
    run of the same rows (two BENCHes on one device, one on a fresh device)."""
    model, X = forest
    rows = np.asarray(model.scaling.to_q15(X[:3]), dtype=np.int64)
    totals = []
    for _ in range(2):
        with open_device("qemu-hifive1", firmware=built["qemu-hifive1"], timeout=5, model=model) as dev:
            totals.append([dev.client.bench(r[None, :], 500).total for r in rows])
            res = dev.client.bench(rows[:1], 500)
            assert res.unit == 0 and res.total == totals[-1][0]      # unit 0: instructions
    assert totals[0] == totals[1] and len(set(totals[0])) > 1 and all(t > 500 * 10 for t in totals[0])


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_protocol_robustness(name, forest, built):
    """Bad CRC, garbage, a truncated frame and an oversized LEN on the real UART IPs' ports."""
    model, X = forest
    fw = built[name]
    with open_device(name, firmware=fw, timeout=5, model=model) as dev:
        client = dev.client
        info = client.info()
        frame = bytearray(encode_frame(MsgType.PING, 77, b"hello"))
        frame[-1] ^= 0x40
        assert error_fields(raw_response(client, bytes(frame), 5.0)) == (ErrorCode.BAD_CRC, MsgType.PING, 77)
        assert client.ping(b"after crc") == b"after crc"
        garbage = bytes(b for b in np.random.default_rng(5).integers(0, 256, 400, dtype=np.uint8).tobytes()
                        if b != 0xA5)
        client.port.write(garbage)
        assert client.ping(b"after garbage") == b"after garbage"
        client.port.write(encode_frame(MsgType.PING, 9, b"cut short")[:7])
        client.flush_device()
        assert client.ping(b"after truncation") == b"after truncation"
        header = bytes([0xA5, 0x5A]) + struct.pack("<H", info.max_payload + 1) + bytes([MsgType.PREDICT, 9])
        assert error_fields(raw_response(client, header, 5.0)) == (ErrorCode.BAD_LENGTH, MsgType.PREDICT, 9)
        assert client.ping(b"after oversize") == b"after oversize"
        assert list(client.predict(model.scaling.to_q15(X[:5]))) == list(model.predict_index(X[:5]))


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_a_full_rx_ring_does_not_livelock_the_uart_interrupt(name, forest, built):
    """A long BENCH followed at once by a PING larger than the 256-byte RX ring: the ring fills
    while the device computes (the throttle path of tg_rx_ring.h), and both answers must come.
    Re-enabling the RX interrupt before the room check used to livelock the handler here."""
    model, X = forest
    with open_device(name, firmware=built[name], timeout=5, model=model) as dev:
        client = dev.client
        info = client.info()
        row = np.asarray(model.scaling.to_q15(X[:1]), dtype="<i2")
        echo = bytes(range(256)) * 3
        echo = echo[:min(len(echo), info.max_payload)]
        assert len(echo) > RING.get(name, 256)
        client.port.write(encode_frame(MsgType.BENCH, 201, struct.pack("<H", 0xFFFF) + row.tobytes())
                          + encode_frame(MsgType.PING, 202, echo))
        parser, events = FrameParser(info.max_payload), []
        deadline = time.monotonic() + 30.0
        while len(events) < 2 and time.monotonic() < deadline:
            events += parser.feed(client.port.read(parser.needed))
        assert [(e.type, e.seq) for e in events] == [(MsgType.BENCH | 0x80, 201), (MsgType.PING | 0x80, 202)]
        assert events[1].payload == echo
        assert client.ping(b"after a full ring") == b"after a full ring"


@pytest.mark.parametrize("name", TRAINING)
def test_on_device_training_identical(name, tmp_path):
    """One training case per target: irs-like rows in flash, lean where RAM needs it, == the host."""
    from treegen.device.train_firmware import make_train_spec, params_from_model, training_rows
    from treegen.device.train_hil import build_train_firmware, run_train_hil

    require_tools()
    X, y = _data(7, 90)
    model = CARTClassifier(max_depth=2).fit(X, y).model_
    Xq, yy, C, _ = training_rows(X, y, model=model)
    params = params_from_model(model)
    spec = make_train_spec(name, params, flash_data=(Xq, yy, C), depth_auto=True)
    fw = build_train_firmware(model, name, tmp_path / "train", spec)
    with open_device(name, firmware=Firmware(fw.target if hasattr(fw, "target") else name, fw.path, "table", "auto",
                                             fw.flash_bytes, fw.ram_bytes, 0.0, tmp_path / "train"),
                     timeout=20, model=model) as dev:
        result = run_train_hil(fw.spec.params, (Xq, yy), dev.client, 0, 150, n_classes=C, source="flash")
    assert result["ok"] and result["train"]["identical"], result
    assert result["predict_trained"]["identical"]


@pytest.mark.parametrize("board", ["nucleo_l031k6", "bluepill_f103c8"])
def test_boards_without_their_own_qemu_machine_build_offline(board, forest, tmp_path):
    """nucleo_l031k6 (USART v2 port, no QEMU STM32L0) and the Blue Pill: built and linked, not run."""
    require_tools()
    model, _ = forest
    t0 = time.perf_counter()
    res = build_board(model, board, tmp_path / board)
    assert time.perf_counter() - t0 < 10
    assert res.elf is not None and res.bin is not None and res.flash_bytes <= targets.get(board).flash_bytes
    ini = (res.project / "platformio.ini").read_text()
    assert "platforms_dir = offline/platforms" in ini and "framework" not in ini.split("[env:")[1]
    port = {"nucleo_l031k6": "tg_port_stm32_usart_v2.c", "bluepill_f103c8": "tg_port_stm32_usart.c"}[board]
    assert (res.project / "src" / port).is_file()


def test_arduino_framework_stays_reachable(forest, tmp_path):
    model, _ = forest
    t = tpio.for_framework("nucleo_f446re", "arduino")
    assert t.uart == "arduino" and not tpio.offline(t)
    out = tpio.write_project(model, tmp_path / "ard", target=t, layout="table", variant="auto")
    ini = (out / "platformio.ini").read_text()
    assert "framework = arduino" in ini and "ststm32@~19.6.0" in ini
    assert (out / "src" / "tg_port_arduino.cpp").is_file()


@pytest.mark.parametrize("board", ["nucleo_f446re", "bluepill_f103c8", "nucleo_l031k6", "microbit_v1", "hifive1"])
def test_ports_are_strict_c99(board, forest, tmp_path):
    """Each port, the shared headers and the startup code: C99, -Wall -Wextra -Werror -Wconversion
    -pedantic, with the board's own macros (the [soc.defines] of its target file)."""
    import subprocess

    require_tools()
    t = targets.get(board)
    out = tpio.write_project(forest[0], tmp_path / board, target=t, layout="table", variant="auto")
    defines = [f"-D{name}={value}" for name, value in tpio.firmware_defines(t)]
    for src in (f"tg_port_{t.uart}.c", tpio.baremetal_files(t)[0]):
        proc = subprocess.run([t.cc, *t.cflags, "-std=c99", "-Wall", "-Wextra", "-Werror",
                               "-Wconversion", "-pedantic", "-c", "-o", str(tmp_path / "o.o"), *defines,
                               "-I", str(out / "src"), str(out / "src" / src)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{board} {src}: {proc.stderr}"


# ---------------------------------------------------------------------- treegen flash (pyOCD)
PARTS = {"nucleo_f446re": "stm32f446retx", "bluepill_f103c8": "stm32f103c8", "nucleo_l031k6": "stm32l031x6",
         "microbit_v1": "nrf51822"}


@pytest.fixture(scope="module")
def model_file(forest, tmp_path_factory):
    from treegen.core.model import save

    path = tmp_path_factory.mktemp("flash") / "m.json"
    save(forest[0], path)
    return path


def _cli(capsys, *argv):
    from treegen.cli.main import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_uno_image_keeps_its_tables_in_flash(forest, built):
    """arduino_uno: avr-libc's crt and default linker script (no startup file or .ld of ours), the
    model's tables in program memory (PROGMEM): the RAM is the harness's buffers, not the model."""
    fw = built["simavr-uno"]
    src = fw.project / "src"
    assert not (src / "startup_cortexm.c").exists() and not (src / "cortexm.ld").exists()
    model_c = (src / "model.c").read_text()
    assert "#include <avr/pgmspace.h>" in model_c and "PROGMEM = {" in model_c and "pgm_read_word(" in model_c
    assert fw.ram_bytes < 1024 and fw.flash_bytes < 16 * 1024


def test_avr_port_is_strict_c99(forest, tmp_path):
    """The AVR port with avr-gcc: C99, -Wall -Wextra -Werror -Wconversion -pedantic."""
    import subprocess

    require_tools()
    t = targets.get("arduino_uno")
    out = tpio.write_project(forest[0], tmp_path / "uno", target=t, layout="table", variant="auto")
    defines = [f"-D{name}={value}" for name, value in tpio.firmware_defines(t)]
    for src in ("tg_port_avr_usart.c", "tg_harness.c", "model.c"):
        proc = subprocess.run(["avr-gcc", *t.cflags, "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion",
                               "-pedantic", "-c", "-o", str(tmp_path / "o.o"), *defines, "-I", str(out / "src"),
                               str(out / "src" / src)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{src}: {proc.stderr}"


def test_flash_dry_run_prints_the_avrdude_command(model_file, built, capsys):
    """The Uno's uploader is avrdude through its bootloader on --port; the project simavr-uno ran is the
    arduino_uno build of the same model: reused, not rebuilt."""
    project = built["simavr-uno"].project
    code, out, err = _cli(capsys, "flash", str(model_file), "--target", "arduino_uno", "-o", str(project),
                          "--dry-run", "--port", "/dev/ttyUSB3")
    assert code == 0, err
    assert "(up to date)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("upload"))
    elf = (project / ".pio" / "build" / "arduino_uno" / "firmware.elf").resolve()
    # avrdude runs in the firmware's folder: the path is never a word of its -U memtype:op:file:format
    assert line.split(None, 1)[1] == (f"cd {shlex.quote(str(elf.parent))} && avrdude -p atmega328p -c arduino "
                                      "-P /dev/ttyUSB3 -b 115200 -D -U flash:w:firmware.elf:e")


def test_flash_uno_without_avrdude_is_one_line_exit_2(model_file, tmp_path, capsys, monkeypatch):
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "avrdude" else real_which(name, *a, **k))
    code, out, err = _cli(capsys, "flash", str(model_file), "--target", "arduino_uno", "-o", str(tmp_path / "p"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("treegen: error: avrdude not found: install it (Debian package avrdude)")


@pytest.mark.parametrize("board", sorted(PARTS))
def test_flash_dry_run_prints_the_pyocd_command(board, model_file, tmp_path, capsys):
    require_tools()
    code, out, err = _cli(capsys, "flash", str(model_file), "--target", board, "-o", str(tmp_path / "p"), "--dry-run")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("upload"))
    elf_dir = (tmp_path / "p" / ".pio" / "build" / board).resolve()
    assert line.split(None, 1)[1] == (f"cd {shlex.quote(str(elf_dir))} && pyocd flash --target {PARTS[board]} "
                                      "--format elf firmware.elf")


def test_flash_without_a_probe_is_one_line_exit_2(model_file, tmp_path, capsys):
    import importlib.util

    assert importlib.util.find_spec("pyocd") is not None, "pyocd missing: pip install 'treegen[device]'"
    t0 = time.perf_counter()
    code, out, err = _cli(capsys, "flash", str(model_file), "--target", "nucleo_f446re", "-o", str(tmp_path / "p"))
    assert time.perf_counter() - t0 < 5
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("treegen: error: no debug probe found for nucleo_f446re: connect the Nucleo's on-board "
                          "ST-LINK")


# ---------------------------------------------------------------------- treegen flash (OpenOCD: HiFive1)
def test_flash_dry_run_prints_the_openocd_command(model_file, built, capsys):
    """The HiFive1's uploader is OpenOCD with its FTDI board config; it runs in the firmware's folder, so
    the Tcl names the image firmware.elf, never the project path (OpenOCD's program evaluates it twice).
    The project qemu-hifive1 ran is the hifive1 build of the same model: reused, not rebuilt."""
    project = built["qemu-hifive1"].project
    code, out, err = _cli(capsys, "flash", str(model_file), "--target", "hifive1", "-o", str(project), "--dry-run")
    assert code == 0, err
    assert "(up to date)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("upload"))
    elf = (project / ".pio" / "build" / "hifive1" / "firmware.elf").resolve()
    assert line.split(None, 1)[1] == (f"cd {shlex.quote(str(elf.parent))} && openocd -f board/sifive-hifive1.cfg "
                                      "-c 'program firmware.elf verify reset exit'")
    # the image starts at the address the HiFive1's bootloader (and QEMU sifive_e) jumps to
    from treegen.device.image import loadable_segments

    assert loadable_segments(elf)[0][0] == 0x20400000
    board = (project / "offline" / "platforms" / "treegen-qemu" / "boards" / "hifive1.json").read_text()
    assert '"program $SOURCE verify reset exit"' in board          # pio run -t upload: relative to the project


def test_flash_without_openocd_is_one_line_exit_2(model_file, tmp_path, capsys, monkeypatch):
    from treegen.device import upload

    real_which = upload.shutil.which
    monkeypatch.setattr(upload.shutil, "which", lambda name, *a, **k: None if name == "openocd" else real_which(name))
    code, out, err = _cli(capsys, "flash", str(model_file), "--target", "hifive1", "-o", str(tmp_path / "p"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("treegen: error: openocd not found: install OpenOCD (Debian package openocd)")
    assert not (tmp_path / "p").exists()                          # checked before building
