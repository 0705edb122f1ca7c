"""Bare-metal QEMU harness: build a Cortex-M program, run it under instruction counting, read its output.

Files beside this module:

``cm4.ld``        linker script: code/rodata at 0x00000000 (512 KiB), RAM at 0x20000000 (64 KiB)
``startup.c``     vector table, Reset_Handler (FPU on, copy .data, zero .bss, semihosting, main, exit)
``tg_bench.[ch]`` SysTick tick counter (24-bit counter + wrap count) and a timed call loop
``selfcheck.c``   harness self-check (known-length loop, 64-element Q15 dot product with SMLAD)

Instruction counting: QEMU runs with ``-icount shift=0,align=off,sleep=off`` (one instruction = 1 ns
of virtual time) and SysTick is clocked from the CPU clock. On the mps2 boards that clock is 25 MHz,
so one SysTick tick = 40 instructions; the ratio is *measured* at start-up by every program
(``tg_calib``: ticks for a loop of exactly 2**21 instructions) and applied here, so per-call figures
are averages over many calls with a resolution of ``40 / n_calls`` instructions.

Output protocol (semihosting stdout, one item per line): ``tg_calib <ticks> <instructions>``,
``tg_result <name> <ticks> <calls>`` (net of the loop/call overhead), ``tg_value <name> <int>``,
``tg_pred <i> <class>``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINKER_SCRIPT = HERE / "cm4.ld"
HARNESS_SOURCES = (HERE / "startup.c", HERE / "tg_bench.c")

CC = "arm-none-eabi-gcc"
SIZE = "arm-none-eabi-size"
NM = "arm-none-eabi-nm"
QEMU = "qemu-system-arm"
BOARD = "mps2-an386"  # Cortex-M4 with the DSP extension and the single-precision FPU

CPU_FLAGS_M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")


@dataclass(frozen=True)
class Board:
    """A QEMU machine the harness runs on: its core's flags, where code and RAM start, and the
    instructions per SysTick tick under ``-icount shift=0`` (1 ns per instruction / the CPU clock)."""
    name: str                  # treegen target (targets/<name>.toml)
    machine: str
    cpu_flags: tuple
    flash_origin: int = 0x00000000
    ram_origin: int = 0x20000000
    insns_per_tick: float = 40.0


def board(target: str) -> Board:
    """The harness board of an emulated treegen target (``qemu-m4``, ``qemu-m33``, ``qemu-m55``, ...):
    machine, flags (without the optimisation level), memory origins and SysTick ratio from its file."""
    from treegen.core import targets

    t = targets.get(target)
    emu = t.emulator
    return Board(t.name, emu["machine"], tuple(f for f in t.cflags if not f.startswith("-O")),
                 emu.get("flash_base", 0x00000000), emu.get("ram_base", 0x20000000), 1e9 / t.clock_hz)


M4 = Board("qemu-m4", BOARD, CPU_FLAGS_M4)
COMMON_FLAGS = ("-std=c99", "-Wall", "-ffunction-sections", "-fdata-sections")
LINK_FLAGS = ("-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs", "-Wl,--gc-sections",
              "-lm")       # libm after the sources: peers whose C calls exp (m2cgen's boosted models)
QEMU_ICOUNT = ("-icount", "shift=0,align=off,sleep=off")


class HarnessError(RuntimeError):
    """The cross toolchain or QEMU is missing, a build failed, or a program misbehaved."""


def missing_tools() -> list[str]:
    return [t for t in (CC, SIZE, NM, QEMU) if shutil.which(t) is None]


def require_tools() -> None:
    missing = missing_tools()
    if missing:
        raise HarnessError(
            f"missing tools: {', '.join(missing)}. Install the Debian packages gcc-arm-none-eabi "
            "libnewlib-arm-none-eabi qemu-system-arm (scripts/setup.sh does this)")


def build(sources, out_elf: Path, *, cpu_flags=None, opt: str = "-Os", include_dirs=(), defines=(),
          extra_cflags=(), map_file: bool = True, board: Board = M4, libs=()) -> Path:
    """Compile and link ``sources`` + the harness into ``out_elf`` (``--gc-sections``) for ``board``
    (default: mps2-an386, Cortex-M4); ``cpu_flags`` overrides the board's; ``libs`` (``-lstdc++``)
    come after the objects."""
    require_tools()
    out_elf = Path(out_elf)
    out_elf.parent.mkdir(parents=True, exist_ok=True)
    cpu_flags = board.cpu_flags if cpu_flags is None else cpu_flags
    cmd = [CC, *cpu_flags, opt, *COMMON_FLAGS, *extra_cflags, f"-I{HERE}",
           f"-Wl,--defsym=TG_FLASH_ORIGIN={board.flash_origin:#x}", f"-Wl,--defsym=TG_RAM_ORIGIN={board.ram_origin:#x}"]
    cmd += [f"-I{d}" for d in include_dirs]
    cmd += [f"-D{d}" for d in defines]
    cmd += [str(s) for s in (*HARNESS_SOURCES, *sources)]
    cmd += ["-T", str(LINKER_SCRIPT), *LINK_FLAGS, *libs, "-o", str(out_elf)]
    if map_file:
        cmd.append(f"-Wl,-Map={out_elf.with_suffix('.map')}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"cross build failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    return out_elf


@dataclass
class RunResult:
    stdout: str
    returncode: int
    instructions_per_tick: float        # 40 on mps2 (25 MHz), 50 on AN505, 31.25 on AN547
    results: dict = field(default_factory=dict)     # name -> (ticks, calls)
    values: dict = field(default_factory=dict)      # name -> int
    predictions: list = field(default_factory=list)

    def instructions_per_call(self, name: str) -> float:
        ticks, calls = self.results[name]
        return ticks * self.instructions_per_tick / calls


def run(elf: Path, *, board: Board | str = M4, timeout: float = 120.0, icount: bool = True) -> RunResult:
    """Run ``elf`` on ``board`` (a :class:`Board`, or a QEMU machine name with the mps2 SysTick ratio)
    with semihosting; the program's exit status is QEMU's."""
    require_tools()
    if isinstance(board, str):
        board = Board(board, board, CPU_FLAGS_M4)
    cmd = [QEMU, "-M", board.machine, "-nographic", "-monitor", "none", "-serial", "none",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    if icount:
        cmd += list(QEMU_ICOUNT)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        raise HarnessError(f"QEMU timed out after {timeout} s running {elf}; output so far:\n{out[-2000:]}") from None
    if proc.returncode != 0:
        raise HarnessError(f"{elf.name} exited with status {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return parse(proc.stdout, proc.returncode, board.insns_per_tick)


def parse(stdout: str, returncode: int = 0, insns_per_tick: float | None = None) -> RunResult:
    """Parse a program's output. ``insns_per_tick``: the board's nominal SysTick ratio (1e9 / clock);
    the calibration must agree with it to +-1.5 ticks. None: a whole number, from the calibration."""
    m = re.search(r"^tg_calib (\d+) (\d+)$", stdout, re.M)
    if not m:
        raise HarnessError(f"no tg_calib line in the program output:\n{stdout[-2000:]}")
    ticks, instructions = int(m.group(1)), int(m.group(2))
    ratio = insns_per_tick if insns_per_tick is not None else round(instructions / ticks)
    if ratio == int(ratio):
        ratio = int(ratio)
    # the calibration loop is exact to +-1 tick
    if ratio <= 0 or abs(instructions / ratio - ticks) > 1.5:
        raise HarnessError(f"SysTick does not count instructions: {ticks} ticks for {instructions} "
                           "instructions (is QEMU running with -icount shift=0?)")
    res = RunResult(stdout, returncode, ratio)
    for name, t, c in re.findall(r"^tg_result (\S+) (-?\d+) (\d+)$", stdout, re.M):
        res.results[name] = (int(t), int(c))
    for name, v in re.findall(r"^tg_value (\S+) (-?\d+)$", stdout, re.M):
        res.values[name] = int(v)
    preds = re.findall(r"^tg_pred (\d+) (-?\d+)$", stdout, re.M)
    res.predictions = [int(p) for _, p in sorted(((int(i), p) for i, p in preds))]
    return res


def section_sizes(elf: Path) -> dict:
    """Bytes of the flash image: text (code + rodata + vectors), data (initialised, copied from flash), bss."""
    proc = subprocess.run([SIZE, "-B", "-d", str(elf)], capture_output=True, text=True, check=True)
    text, data, bss = (int(v) for v in proc.stdout.splitlines()[1].split()[:3])
    return {"text": text, "data": data, "bss": bss, "flash": text + data}


def symbol_sizes(elf: Path) -> dict:
    """name -> size of every sized symbol (functions and objects) in the linked ELF."""
    proc = subprocess.run([NM, "-S", "--size-sort", str(elf)], capture_output=True, text=True, check=True)
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4:
            out[parts[3]] = out.get(parts[3], 0) + int(parts[1], 16)
    return out


def object_symbols(obj: Path) -> set[str]:
    """Names of the functions and objects *defined* by a compiled object file."""
    proc = subprocess.run([NM, "--defined-only", str(obj)], capture_output=True, text=True, check=True)
    return {p[2] for p in (line.split() for line in proc.stdout.splitlines())
            if len(p) == 3 and p[1] in "TtRrDdBb"}


def compile_object(source: Path, out_obj: Path, *, cpu_flags=None, opt: str = "-Os",
                   include_dirs=(), defines=(), extra_cflags=(), board: Board = M4) -> Path:
    require_tools()
    cpu_flags = board.cpu_flags if cpu_flags is None else cpu_flags
    cmd = [CC, *cpu_flags, opt, *COMMON_FLAGS, *extra_cflags, "-c", str(source), "-o", str(out_obj)]
    cmd += [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"cross compile failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    return out_obj
