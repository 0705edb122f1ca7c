"""Targets as data: every shipped target file parses and is consistent; ``treegen targets`` lists
them; a bad target file is a one-line error."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from treegen import cli
from treegen.core import targets
from treegen.core.errors import TreegenError
from treegen.core.resources import targets_dir, templates_dir

EMULATED = {"qemu-m3": ("mps2-an385", "cortex-m3"), "qemu-m4": ("mps2-an386", "cortex-m4"),
            "qemu-m7": ("mps2-an500", "cortex-m7")}
BOARDS = {
    # name: (platform, board, core, fpu, dsp, flash_kb, ram_kb, clock_hz)
    # (the bare-metal boards run from their reset clock: HSI 16 MHz, HSI 8 MHz, MSI 2.097 MHz)
    "nucleo_f446re": ("ststm32@~19.6.0", "nucleo_f446re", "cortex-m4", True, True, 512, 128, 16_000_000),
    "bluepill_f103c8": ("ststm32@~19.6.0", "bluepill_f103c8", "cortex-m3", False, False, 64, 20, 8_000_000),
    "nucleo_l031k6": ("ststm32@~19.6.0", "nucleo_l031k6", "cortex-m0plus", False, False, 32, 8, 2_097_152),
    "teensy41": ("teensy@~5.2.0", "teensy41", "cortex-m7", True, True, 7936, 512, 600_000_000),
}

GOOD = """
name = "{name}"
description = "a test target"
kind = "emulated"
core = "cortex-m4"
fpu = true
dsp = true
flash_kb = 256
ram_kb = 64
clock_hz = 25000000
cc = "arm-none-eabi-gcc"
cflags = ["-mcpu=cortex-m4", "-mthumb"]
uart = "cmsdk_uart"

[emulator]
machine = "mps2-an386"
uart_base = 0x40004000

[platformio]
platform = "treegen-qemu"
"""


def test_all_targets_parse():
    names = targets.available()
    assert set(EMULATED) | set(BOARDS) | {"native", "cortex-m4"} <= set(names)
    for t in targets.all_targets():
        assert t.kind in targets.KINDS
        assert t.flash_kb > 0 and t.ram_kb > 0
        assert all(isinstance(f, str) for f in t.cflags)


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_emulated_targets(name):
    machine, core = EMULATED[name]
    t = targets.get(name)
    assert t.kind == "emulated" and t.core == core and t.uart == "cmsdk_uart"
    assert f"-mcpu={core}" in t.cflags
    assert t.fpu == t.dsp == (core != "cortex-m3")
    assert t.emulator["machine"] == machine and t.emulator["uart_base"] == 0x40004000
    assert "shift=0,align=off,sleep=on" in t.emulator["args"]
    assert t.platformio["platform"] == "treegen-qemu"
    assert t.ram_kb == 4096 and t.clock_hz == 25_000_000   # mps.ssram23 at 0x20000000 (QEMU info mtree)


# name: (machine, core, clock_hz, uart_base, uart_irq, flash_base, ram_base, flash_kb, ram_kb, mve), read from
# QEMU 7.2 (hw/arm/mps2-tz.c, "info mtree"; the RX IRQ is the pending bit after a received byte)
TRUSTZONE = {
    "qemu-m33": ("mps2-an505", "cortex-m33", 20_000_000, 0x50200000, 32, 0x10000000, 0x38000000, 4096, 4096, False),
    "qemu-m55": ("mps3-an547", "cortex-m55", 32_000_000, 0x59303000, 33, 0x10000000, 0x31000000, 512, 4096, True),
}


@pytest.mark.parametrize("name", sorted(TRUSTZONE))
def test_trustzone_emulated_targets(name):
    machine, core, clock, uart, irq, flash_base, ram_base, flash_kb, ram_kb, mve = TRUSTZONE[name]
    t = targets.get(name)
    assert t.kind == "emulated" and t.core == core and t.uart == "cmsdk_uart" and f"-mcpu={core}" in t.cflags
    assert t.fpu and t.dsp and t.mve == mve
    emu = t.emulator
    assert (emu["machine"], emu["uart_base"], emu["uart_irq"], emu["flash_base"], emu["ram_base"]) == \
        (machine, uart, irq, flash_base, ram_base)
    assert (t.clock_hz, t.flash_kb, t.ram_kb) == (clock, flash_kb, ram_kb)
    assert "shift=0,align=off,sleep=on" in emu["args"]
    generic = targets.get(core)        # the generic export target of the same core
    assert generic.kind == "mcu" and generic.core == core and generic.dsp and generic.mve == mve
    assert targets.get("cortex-m4").mve is False


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_board_targets(name):
    platform, board, core, fpu, dsp, flash_kb, ram_kb, clock = BOARDS[name]
    t = targets.get(name)
    #: the bare-metal port of each board (one per UART IP); teensy41 is Arduino only
    port = {"nucleo_f446re": "stm32_usart", "bluepill_f103c8": "stm32_usart", "nucleo_l031k6": "stm32_usart_v2",
            "teensy41": "arduino"}[name]
    assert t.kind == "board" and t.uart == port
    if port != "arduino":
        assert t.soc["flash_base"] == 0x08000000 and t.upload["uploader"] == "pyocd"
    assert (t.core, t.fpu, t.dsp, t.flash_kb, t.ram_kb, t.clock_hz) == (core, fpu, dsp, flash_kb, ram_kb, clock)
    pio = t.platformio
    assert (pio["platform"], pio["board"], pio["framework"]) == (platform, board, "arduino")
    assert pio["monitor_speed"] == 115200 and pio["upload_protocol"]
    assert f"-mcpu={core}" in t.cflags
    assert ("-mfloat-abi=hard" in t.cflags) == fpu


def test_every_uart_has_a_port():
    ports = tomllib.loads((templates_dir() / "firmware" / "ports.toml").read_text())
    for t in targets.all_targets():
        if t.uart is None:
            continue
        assert t.uart in ports, t.name
        assert any((templates_dir() / "firmware" / f"tg_port_{t.uart}{ext}").is_file() for ext in (".c", ".cpp"))


def test_cli_lists_the_targets(capsys):
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    listed = {line.split()[0] for line in lines[1:]}
    assert listed == set(targets.available())
    row = next(line for line in lines if line.startswith("qemu-m4 "))
    assert "emulated" in row and "cortex-m4" in row
    assert "board" in next(line for line in lines if line.startswith("teensy41 "))


def test_target_from_a_file(tmp_path):
    path = tmp_path / "my-board.toml"
    path.write_text(GOOD.format(name="my-board"))
    t = targets.get(str(path))
    assert t.name == "my-board" and t.flash_kb == 256 and t.emulator["machine"] == "mps2-an386"


BAD = [
    ("missing key", lambda s: s.replace('core = "cortex-m4"\n', ""), "missing key 'core'"),
    ("wrong type", lambda s: s.replace("flash_kb = 256", 'flash_kb = "256"'), "key 'flash_kb' must be int"),
    ("bool as int", lambda s: s.replace("ram_kb = 64", "ram_kb = true"), "key 'ram_kb' must be int"),
    ("unknown kind", lambda s: s.replace('kind = "emulated"', 'kind = "toaster"'), "kind 'toaster' is not one of"),
    ("no emulator", lambda s: s.replace("[emulator]", "[unused]"), "needs a [emulator] table"),
    ("no machine", lambda s: s.replace('machine = "mps2-an386"', ""), "[emulator] is missing key 'machine'"),
    ("bad base", lambda s: s.replace("uart_base = 0x40004000", 'uart_base = "x"'),
     "[emulator] key 'uart_base' must be int"),
    ("no platformio", lambda s: s.replace('[platformio]\nplatform = "treegen-qemu"', ""),
     "needs a [platformio] table"),
    ("bad uart", lambda s: s.replace('uart = "cmsdk_uart"', 'uart = "CMSDK UART!"'), "key 'uart' must be a port name"),
    ("no uart", lambda s: s.replace('uart = "cmsdk_uart"\n', ""), "needs the key 'uart'"),
    ("board without board", lambda s: s.replace('kind = "emulated"', 'kind = "board"'),
     "[platformio] is missing key 'board'"),
    ("board platform unpinned", lambda s: s.replace('kind = "emulated"', 'kind = "board"').replace(
        'platform = "treegen-qemu"', 'platform = "ststm32"\nboard = "b"\nframework = "arduino"'),
     "[platformio] platform 'ststm32' must pin a version, like 'ststm32@~19.6.0'"),
    ("toml syntax", lambda s: s + "\n= oops\n", "target file bad.toml:"),
    ("name mismatch", lambda s: s.replace('name = "bad"', 'name = "other"'), "does not match the file name"),
    ("mve not bool", lambda s: s.replace("dsp = true", 'dsp = true\nmve = "yes"'), "key 'mve' must be bool"),
    ("bad ram base", lambda s: s.replace("uart_base = 0x40004000", 'uart_base = 0x40004000\nram_base = "x"'),
     "[emulator] key 'ram_base' must be int"),
    # board support ([soc], image, [upload]): the bare-metal ports' data
    ("bare-metal board without soc", lambda s: s.replace('kind = "emulated"', 'kind = "board"').replace(
        'uart = "cmsdk_uart"', 'uart = "stm32_usart"').replace('[platformio]\nplatform = "treegen-qemu"', ""),
     "needs a [soc] table"),
    ("soc without ram_base", lambda s: s.replace('kind = "emulated"', 'kind = "board"').replace(
        'uart = "cmsdk_uart"', 'uart = "stm32_usart"').replace(
        '[platformio]\nplatform = "treegen-qemu"', "[soc]\nflash_base = 0x08000000"),
     "[soc] is missing key 'ram_base'"),
    ("bad soc define", lambda s: s + "\n[soc]\nflash_base = 0\nram_base = 0\n[soc.defines]\nUART_BASE = 1\n",
     "[soc.defines] 'UART_BASE' must be TG_NAME = int or string"),
    ("image on a board", lambda s: s.replace('kind = "emulated"', 'kind = "board"\nimage = "nucleo_f446re"'),
     "key 'image' (a board's name) is for emulated targets only"),
    ("bad uart_index", lambda s: s.replace("uart_base = 0x40004000", 'uart_base = 0x40004000\nuart_index = "1"'),
     "[emulator] key 'uart_index' must be int"),
    ("bad pyocd target", lambda s: s + "\n[upload]\npyocd_target = 446\n", "[upload] key 'pyocd_target' must be str"),
]


@pytest.mark.parametrize("what,edit,message", BAD, ids=[b[0] for b in BAD])
def test_bad_target_file_is_one_line_error(tmp_path, capsys, what, edit, message):
    path = tmp_path / "bad.toml"
    path.write_text(edit(GOOD.format(name="bad")))
    with pytest.raises(TreegenError) as info:
        targets.get(str(path))
    assert message in str(info.value)
    # through the command line: one line on stderr, exit status 2 (before the model is even read)
    assert cli.main(["build", str(tmp_path / "no-model.json"), "--target", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("treegen: error: target file bad.toml") and message in err


def test_missing_target_file(tmp_path):
    with pytest.raises(TreegenError, match="target file .*nope.toml not found"):
        targets.get(str(tmp_path / "nope.toml"))
    with pytest.raises(TreegenError, match=r"unknown target 'nope' \(available: .*qemu-m4"):
        targets.get("nope")


def test_shipped_files_match_their_names():
    for path in Path(targets_dir()).glob("*.toml"):
        assert tomllib.loads(path.read_text())["name"] == path.stem


def test_hifive1_and_its_qemu_machine():
    """The HiFive1 (FE310-G000) and QEMU's sifive_e running its image: RISC-V data only, no new code path."""
    board, qemu = targets.get("hifive1"), targets.get("qemu-hifive1")
    assert board.kind == "board" and qemu.kind == "emulated" and qemu.image == "hifive1"
    for t in (board, qemu):
        assert (t.core, t.fpu, t.dsp, t.ram_kb, t.uart) == ("rv32imac", False, False, 16, "sifive_uart")
        assert t.cc == "riscv64-unknown-elf-gcc" and {"-march=rv32imac", "-mabi=ilp32"} <= set(t.cflags)
    # the image sits after the Rev A bootloader (0x20400000, where sifive_e's reset vector jumps); RAM = DTIM
    assert (board.soc["flash_base"], board.soc["ram_base"]) == (0x20400000, 0x80000000)
    assert (board.soc["startup"], board.soc["ldscript"], board.soc["toolchain"]) == \
        ("startup_riscv.c", "riscv.ld", "toolchain-riscv")
    assert board.soc["defines"]["TG_UART_BASE"] == 0x10013000
    assert board.upload == {"uploader": "openocd", "openocd_config": "board/sifive-hifive1.cfg",
                            "probe": board.upload["probe"]}
    assert qemu.emulator["qemu"] == "qemu-system-riscv32" and qemu.emulator["machine"] == "sifive_e"
    assert "shift=0,align=off,sleep=on" in qemu.emulator["args"]


def test_soc_toolchain_and_link_flags_are_checked(tmp_path):
    bad = tmp_path / "x.toml"
    text = (targets_dir() / "hifive1.toml").read_text().replace('name = "hifive1"', 'name = "x"')
    bad.write_text(text.replace('link_flags = ["-nostartfiles"]', 'link_flags = "-nostartfiles"'))
    with pytest.raises(TreegenError, match=r"\[soc\] key 'link_flags' must be a list of strings"):
        targets.get(str(bad))
    bad.write_text(text.replace('toolchain = "toolchain-riscv"', 'toolchain = 3'))
    with pytest.raises(TreegenError, match=r"\[soc\] key 'toolchain' must be str"):
        targets.get(str(bad))
