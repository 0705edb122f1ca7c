"""Targets are data: one TOML file per target in ``targets/`` (shipped inside the package).

Required keys: ``name``, ``description``, ``kind`` ("host" | "mcu" | "emulated" | "board"), ``core``,
``fpu`` (bool), ``dsp`` (bool: ARMv7E-M DSP extension), ``flash_kb``, ``ram_kb``, ``clock_hz``,
``cc`` (C compiler), ``cflags`` (list). Unknown keys are kept in ``extra``.

Optional keys (validated when present):

- ``uart`` (str): the firmware port kind, i.e. ``templates/firmware/tg_port_<uart>.c(pp)``:
  ``cmsdk_uart`` (QEMU mps2 boards), ``native_pty`` (host), ``arduino`` (real boards).
- ``mve`` (bool, default false): the M-profile Vector Extension (Helium, e.g. Cortex-M55); the
  export variant ``mve`` needs it.
- ``[emulator]`` (required for ``kind = "emulated"``): ``engine`` (``qemu``, the default, or ``simavr``);
  for simavr ``mcu`` (simavr's core name, e.g. ``atmega328p``; the clock is ``clock_hz``) and ``uart``
  (the USART's name, default ``0``); for QEMU ``machine`` (QEMU ``-M``), ``uart_base`` (int),
  optional ``qemu`` (executable, default ``qemu-system-arm``), ``uart_irq`` (int), ``args`` (list of
  str: extra QEMU arguments such as ``-icount``), ``flash_base`` / ``ram_base`` (int: where the
  linker script puts code and data, default 0x00000000 / 0x20000000).
- ``[platformio]`` (required for ``kind = "emulated"``, and for boards whose port is ``arduino``):
  ``platform`` (str); on boards it describes the online Arduino build (``--framework arduino``) and
  also needs ``board`` and ``framework``, and its ``platform`` must pin a version
  (``ststm32@~19.6.0``: PlatformIO's ``name@spec``, so a user's build is reproducible); other keys
  (``upload_protocol``, ``monitor_speed`` ...) are copied into the generated ``platformio.ini``.
- ``[soc]`` (required for boards with a bare-metal port, i.e. ``uart`` other than ``arduino``): the
  board-support data of the chip: ``flash_base`` / ``ram_base`` (int: where the linker script puts
  code and data), ``family`` (str, e.g. ``stm32f4``) and ``[soc.defines]``: C macros of the port
  (``TG_UART_BASE``, ``TG_UART_RX_IRQ``, clock-enable registers and bits, pins, clock; int or str);
  ``startup`` / ``ldscript`` (templates/firmware/ file names, default ``startup_cortexm.c`` /
  ``cortexm.ld``: another core family brings its own pair; ``""``: none, the C library's startup code /
  the compiler's default linker script, as avr-libc's on AVR); ``toolchain`` (the PlatformIO package
  wrapping the system compiler, default ``toolchain-gccarmnoneeabi``; RISC-V ``toolchain-riscv``, AVR
  ``toolchain-atmelavr``) and ``link_flags`` (list: the C runtime flags of the link, default
  ``-nostartfiles`` with newlib-nano's specs; ``[]`` on AVR: avr-libc's crt).
- ``progmem`` (bool, default false): constant tables go to program memory explicitly (AVR: PROGMEM,
  read with pgm_read_*; a plain ``const`` table would be copied to RAM).
- ``max_payload`` (int): the firmware harness's largest frame payload (default RAM/16, 256..1024).
- ``image`` (str, emulated targets): the board whose firmware image this QEMU machine runs unchanged
  (``qemu-netduinoplus2`` runs ``nucleo_f446re``'s); the image is built for that board.
- ``[upload]`` (boards): ``uploader`` (``pyocd``, ``openocd`` or ``avrdude``), ``pyocd_target``
  (pyOCD's part name, e.g. ``stm32f446retx``), ``openocd_config`` (OpenOCD's board config, e.g.
  ``board/sifive-hifive1.cfg``), ``avrdude_part`` / ``avrdude_programmer`` / ``avrdude_baud``
  (avrdude's ``-p`` / ``-c`` / ``-b``), ``probe`` (what the user connects, for messages).
- ``[emulator] firmware_option`` (str, default ``-kernel``): how QEMU is given the ELF (``-bios`` for
  the AVR machines); ``drain_quiet`` (float, seconds): the silence that ends a host-side flush, for
  a machine whose UART takes input slowly.
- ``[emulator] uart_index`` (int, default 0): which ``-serial`` option is the harness's UART (QEMU maps
  the n-th ``-serial`` to the machine's n-th UART; the ones before it get ``-serial null``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.core.limits import read_bounded
from treegen.core.resources import targets_dir

MAX_TARGET_BYTES = 1 << 20      # a target description is a few hundred bytes

KINDS = ("host", "mcu", "emulated", "board")

_REQUIRED = {"name": str, "description": str, "kind": str, "core": str, "fpu": bool, "dsp": bool,
             "flash_kb": int, "ram_kb": int, "clock_hz": int, "cc": str, "cflags": list}


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    kind: str
    core: str
    fpu: bool
    dsp: bool
    flash_kb: int
    ram_kb: int
    clock_hz: int
    cc: str
    cflags: tuple
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict:
        """Every field of the target's TOML file (the extra tables included), JSON-ready."""
        d = {k: getattr(self, k) for k in ("name", "description", "kind", "core", "fpu", "dsp", "flash_kb",
                                             "ram_kb", "clock_hz", "cc")}
        return {**d, "cflags": list(self.cflags), **self.extra}

    @property
    def flash_bytes(self) -> int:
        return self.flash_kb * 1024

    @property
    def ram_bytes(self) -> int:
        return self.ram_kb * 1024

    @property
    def stack_bytes(self) -> int:
        """Main stack the linker script reserves (optional key ``stack_bytes``, default 4096; small-RAM
        boards set less so that on-device training leaves more RAM to the engine)."""
        return int(self.extra.get("stack_bytes", 4096))

    @property
    def uart(self) -> str | None:
        """Firmware port kind (``tg_port_<uart>``), or None when the target has no harness port."""
        return self.extra.get("uart")

    @property
    def mve(self) -> bool:
        """Whether the core has the M-profile Vector Extension (Helium): key ``mve``, default false."""
        return bool(self.extra.get("mve", False))

    @property
    def progmem(self) -> bool:
        """Whether constant tables must be placed in program memory explicitly (key ``progmem``, default
        false): AVR (Harvard; avr-gcc copies plain ``const`` data to RAM), read with avr-libc's pgm_read_*."""
        return bool(self.extra.get("progmem", False))

    @property
    def emulator(self) -> dict:
        """The ``[emulator]`` table ({} when absent)."""
        return dict(self.extra.get("emulator", {}))

    @property
    def soc(self) -> dict:
        """The ``[soc]`` table ({} when absent): board-support data of a bare-metal port."""
        return dict(self.extra.get("soc", {}))

    @property
    def upload(self) -> dict:
        """The ``[upload]`` table ({} when absent)."""
        return dict(self.extra.get("upload", {}))

    @property
    def image(self) -> str:
        """Name of the target whose firmware image runs on this one (key ``image``; itself when absent)."""
        return str(self.extra.get("image", self.name))

    @property
    def platformio(self) -> dict:
        """The ``[platformio]`` table ({} when absent)."""
        return dict(self.extra.get("platformio", {}))


def _check_table(fname: str, data: dict, table: str, spec: dict, required: tuple, may_be_empty: tuple = ()) -> None:
    section = data.get(table)
    if section is None:
        if required:
            raise TreegenError(f"target file {fname}: kind {data['kind']!r} needs a [{table}] table")
        return
    if not isinstance(section, dict):
        raise TreegenError(f"target file {fname}: {table!r} must be a table")
    for key in required:
        if key not in section:
            raise TreegenError(f"target file {fname}: [{table}] is missing key {key!r}")
    for key, typ in spec.items():
        if key not in section:
            continue
        value = section[key]
        if typ is list:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TreegenError(f"target file {fname}: [{table}] key {key!r} must be a list of strings")
        elif not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise TreegenError(f"target file {fname}: [{table}] key {key!r} must be {typ.__name__}")
        if typ is str and not value and key not in may_be_empty:
            raise TreegenError(f"target file {fname}: [{table}] key {key!r} must not be empty")


_EMULATOR_KEYS = {"machine": str, "qemu": str, "uart_base": int, "uart_irq": int, "args": list,
                  "flash_base": int, "ram_base": int, "uart_index": int, "firmware_option": str,
                  "drain_quiet": float, "engine": str, "mcu": str, "uart": str}
#: the emulators of ``[emulator] engine`` (default qemu) and the keys each needs
ENGINES = {"qemu": ("machine",), "simavr": ("mcu",)}
#: targets that were shipped once and are gone: the one-line reason and what to use instead
RETIRED = {"qemu-uno": "qemu-uno was removed: QEMU 7.2's AVR machine miscomputes libgcc's 16x16->32 multiply "
                       "(__mulhisi3) and cannot count instructions; use simavr-uno (the same arduino_uno image "
                       "on simavr, cycle-exact)"}
_SOC_KEYS = {"family": str, "flash_base": int, "ram_base": int, "defines": dict, "startup": str, "ldscript": str,
             "link_flags": list, "toolchain": str}
#: [soc] keys whose empty string means "none of ours": the toolchain's own crt / default linker script
_SOC_MAY_BE_EMPTY = ("startup", "ldscript")
_UPLOAD_KEYS = {"uploader": str, "pyocd_target": str, "probe": str, "openocd_config": str, "avrdude_part": str,
                "avrdude_programmer": str, "avrdude_baud": int}
#: the port of the online Arduino build (PlatformIO's official platforms); every other port is bare metal
ARDUINO_PORT = "arduino"
_PLATFORMIO_KEYS = {"platform": str, "board": str, "framework": str, "upload_protocol": str,
                    "upload_port": str, "monitor_speed": int}


#: a PlatformIO platform with a pinned version: ``name@X.Y.Z``, ``name@~X.Y.Z`` or ``name@^X.Y.Z``
PINNED_PLATFORM = re.compile(r"([a-z0-9][a-z0-9_.-]*)@([~^]?)(\d+)\.(\d+)\.(\d+)")


def _check_optional(fname: str, data: dict) -> None:
    kind = data["kind"]
    if kind not in KINDS:
        raise TreegenError(f"target file {fname}: kind {kind!r} is not one of {', '.join(KINDS)}")
    for key in ("mve", "progmem"):
        if key in data and not isinstance(data[key], bool):
            raise TreegenError(f"target file {fname}: key {key!r} must be bool")
    if "stack_bytes" in data:
        sb = data["stack_bytes"]
        if not isinstance(sb, int) or isinstance(sb, bool) or not 512 <= sb <= data["ram_kb"] * 1024:
            raise TreegenError(f"target file {fname}: key 'stack_bytes' must be an integer 512..RAM bytes")
    if "uart" in data:
        uart = data["uart"]
        if not isinstance(uart, str) or not uart.replace("_", "").isalnum() or not uart.islower():
            raise TreegenError(f"target file {fname}: key 'uart' must be a port name like 'cmsdk_uart'")
    if "image" in data and (kind != "emulated" or not isinstance(data["image"], str) or not data["image"]):
        raise TreegenError(f"target file {fname}: key 'image' (a board's name) is for emulated targets only")
    baremetal_board = kind == "board" and data.get("uart") not in (None, ARDUINO_PORT)
    own_uart = kind == "emulated" and "image" not in data and "soc" not in data
    engine = data.get("emulator", {}).get("engine", "qemu") if isinstance(data.get("emulator"), dict) else "qemu"
    if engine not in ENGINES:
        raise TreegenError(f"target file {fname}: [emulator] engine {engine!r} is not one of {', '.join(ENGINES)}")
    _check_table(fname, data, "emulator", _EMULATOR_KEYS,
                 (*ENGINES[engine], "uart_base") if own_uart else ENGINES[engine] if kind == "emulated" else ())
    pio_required = {"emulated": ("platform",), "board": ("platform", "board", "framework")}.get(kind, ())
    if baremetal_board and "platformio" not in data:
        pio_required = ()
    _check_table(fname, data, "platformio", _PLATFORMIO_KEYS, pio_required)
    if kind == "board" and "platformio" in data and \
            not PINNED_PLATFORM.fullmatch(str(data["platformio"].get("platform", ""))):
        raise TreegenError(f"target file {fname}: [platformio] platform {data['platformio']['platform']!r} must "
                           "pin a version, like 'ststm32@~19.6.0'")
    _check_table(fname, data, "soc", _SOC_KEYS, ("flash_base", "ram_base") if baremetal_board else (),
                 _SOC_MAY_BE_EMPTY)
    for name, value in data.get("soc", {}).get("defines", {}).items():
        if not re.fullmatch(r"TG_[A-Z0-9_]+", name) or isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TreegenError(f"target file {fname}: [soc.defines] {name!r} must be TG_NAME = int or string")
    _check_table(fname, data, "upload", _UPLOAD_KEYS, ())
    if kind in ("emulated", "board") and "uart" not in data:
        raise TreegenError(f"target file {fname}: kind {kind!r} needs the key 'uart' (firmware port)")


def _parse(path: Path) -> Target:
    try:
        with open(path, "rb") as fh:
            raw = read_bounded(fh, MAX_TARGET_BYTES, f"target file {path.name}")
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TreegenError(f"target file {path.name}: not UTF-8 text") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TreegenError(f"target file {path.name}: {getattr(exc, 'strerror', None) or exc}") from None
    for key, typ in _REQUIRED.items():
        if key not in data:
            raise TreegenError(f"target file {path.name}: missing key {key!r}")
        if not isinstance(data[key], typ) or (typ is int and isinstance(data[key], bool)):
            raise TreegenError(f"target file {path.name}: key {key!r} must be {typ.__name__}")
    if data["name"] != path.stem:
        raise TreegenError(f"target file {path.name}: name {data['name']!r} does not match the file name")
    _check_optional(path.name, data)
    extra = {k: v for k, v in data.items() if k not in _REQUIRED}
    return Target(**{k: data[k] for k in _REQUIRED if k != "cflags"}, cflags=tuple(data["cflags"]), extra=extra)


def available() -> list[str]:
    return sorted(p.stem for p in targets_dir().glob("*.toml"))


def get(name: str) -> Target:
    """The shipped target ``name``, or the target file ``name`` when it is a path ending in ``.toml``."""
    if str(name).endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise TreegenError(f"target file {path} not found")
        return _parse(path)
    path = targets_dir() / f"{name}.toml"
    if not path.is_file():
        if name in RETIRED:
            raise TreegenError(RETIRED[name])
        raise TreegenError(f"unknown target {name!r} (available: {', '.join(available())})")
    return _parse(path)


def all_targets() -> list[Target]:
    return [get(n) for n in available()]
