"""The measure pass: how much flash an export needs — estimated before anything is written (the
target's flash is checked up front), measured afterwards with the target's compiler and ``size`` tool
(when installed) twice:

``object``  the compiled ``<name>.c`` alone (sections of the object file): the model's own code and
            tables, without the library routines it calls;
``linked``  what the model costs in a linked program: a minimal program (``templates/c/size_probe.c.j2``)
            linked with ``--gc-sections`` once calling an entry point and once not, and the difference
            of the two images taken (flash = text + data, RAM = data + bss of ``size``): library code
            the model pulls in (soft-float helpers, 64-bit arithmetic) is counted. Per entry point:
            ``q15`` (``tg_<name>_predict_q15``, dtype q15 only) and ``float``
            (``tg_<name>_predict``, raw float32 inputs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from treegen.core import targets as _targets
from treegen.core.codegen import render
from treegen.core.errors import TreegenError
from treegen.core.native import STRICT_CFLAGS

SIZE_CFLAGS = ("-ffunction-sections", "-fdata-sections")

# rough code-size model of the unrolled layout (Thumb-2 bytes), only for the up-front flash check
_UNROLLED_NODE_BYTES = 10
_UNROLLED_TERM_BYTES = 8


def _estimate_bytes(trees: list, layout: str, dtype: str, n_features: int, n_classes: int,
                    ref_bytes: int, feat_bytes: int) -> int:
    """Flash estimate: node tables (table layout) or a code-size model (unrolled), plus scaling and labels."""
    total = n_classes * 8  # label pointers and short strings
    if dtype == "q15":
        total += n_features * 8  # per-feature scaling constants of the raw-input wrapper (f32 has none)
    for t in trees:
        for node in t["nodes"]:
            if layout == "table":
                total += 2 * ref_bytes
                if t["kind"] == "axis":
                    total += (4 if dtype == "f32" else 2) + feat_bytes
                else:
                    total += n_features * (4 if dtype == "f32" else 2)
                    total += 4 if dtype == "f32" else t["acc_bits"] // 8
            else:
                total += _UNROLLED_NODE_BYTES + _UNROLLED_TERM_BYTES * len(node.get("terms", [1]))
    return int(total)


def check_flash(ctx: dict, soft, target: _targets.Target) -> int:
    """The estimated flash of the export whose template context is ``ctx`` (``soft``: its soft vote,
    whose probability table adds to it); raises :class:`TreegenError` when it exceeds the target's."""
    estimated = _estimate_bytes(ctx["trees"], ctx["layout"], ctx["dtype"], ctx["n_features"], ctx["n_classes"],
                                ctx["ref_t"]["bits"] // 8, ctx["feat_t"]["bits"] // 8)
    if soft is not None:
        estimated += soft.table.size * 2
    if ctx.get("value") is not None:
        estimated += ctx["value"]["n_rows"] * 4
    if estimated > target.flash_bytes:
        raise TreegenError(f"model needs about {estimated} bytes of flash, more than target {target.name!r} has "
                           f"({target.flash_bytes} bytes)")
    return estimated


def _size_tool(cc: str) -> str:
    base = os.path.basename(cc)
    if base.endswith("gcc"):
        return cc[: len(cc) - 3] + "size"
    return "size"


def measure_size(source: Path, target: _targets.Target, include_dir: Path) -> dict:
    """Compile ``source`` with the target's flags (+ strict flags, -ffunction/-fdata-sections) and read
    section sizes with the matching ``size`` tool. Returns flash/ram/sections/note."""
    cc = shutil.which(target.cc)
    size = shutil.which(_size_tool(target.cc))
    if cc is None or size is None:
        missing = target.cc if cc is None else _size_tool(target.cc)
        return {"flash_bytes": None, "ram_bytes": None, "sections": {},
                "note": f"not measured: {missing} not found"}
    # absolute: a relative name starting with - or @ would be read as an option or a response file
    source, include_dir = Path(source).absolute(), Path(include_dir).absolute()
    with tempfile.TemporaryDirectory(prefix="treegen-size-") as tmp:
        obj = Path(tmp) / "model.o"
        cmd = [cc, *target.cflags, *STRICT_CFLAGS, *SIZE_CFLAGS, "-I", str(include_dir), "-c", str(source),
               "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["?"])[0]
            return {"flash_bytes": None, "ram_bytes": None, "sections": {},
                    "note": f"not measured: {target.cc} failed: {first}"}
        proc = subprocess.run([size, "-A", str(obj)], capture_output=True, text=True)
    sections = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit() and int(parts[1]) > 0:
            if parts[0].startswith((".text", ".rodata", ".data", ".bss", ".sdata", ".sbss")):
                sections[parts[0]] = int(parts[1])
    flash = sum(v for k, v in sections.items() if k.startswith((".text", ".rodata", ".data", ".sdata")))
    ram = sum(v for k, v in sections.items() if k.startswith((".data", ".bss", ".sdata", ".sbss")))
    return {"flash_bytes": flash, "ram_bytes": ram, "sections": sections,
            "note": f"{os.path.basename(size)} of the object compiled with {' '.join(target.cflags)}; not linked, "
                    "so library routines (e.g. soft-float) are not counted"}


#: the C runtime a probe is linked with, per compiler (a target's ``ldflags`` key overrides it)
_LINK_RUNTIME = {"arm-none-eabi-gcc": ("--specs=nosys.specs",)}
PROBE_TEMPLATE = "c/size_probe.c.j2"


def _link_size(cc: str, size: str, flags: list, sources: list, include_dir: Path, tmp: Path, tag: str) -> tuple:
    """(flash, RAM, None) of the linked program, or (None, None, the compiler's first error line)."""
    elf = tmp / f"{tag}.elf"
    proc = subprocess.run([cc, *flags, "-I", str(include_dir), *map(str, sources), "-o", str(elf)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None, None, (proc.stderr.strip().splitlines() or ["?"])[0]
    out = subprocess.run([size, str(elf)], capture_output=True, text=True).stdout.splitlines()
    text, data, bss = (int(v) for v in out[-1].split()[:3])  # Berkeley format: text data bss dec hex
    return text + data, data + bss, None


#: outputs a size probe can call an entry point for (one row in, a class or a value out)
_PROBE_OUTPUTS = ("class", "value_int32", "value_f32", "value_f64")


def probe_entries(entry_points: list) -> tuple:
    """((key, C function, input element type), ...) the size probes call: the first Q15 and the first
    float32 entry point of an export's recorded ``entry_points`` (:mod:`treegen.emit.entry_points`)
    returning a class or a value; an export without a float entry (the boosted Q15 C) has no probe
    for it."""
    out = ()
    for key, inp, c_type in (("q15", "q15", "int16_t"), ("float", "float32", "float")):
        e = next((e for e in entry_points if e["input"] == inp and e["output"] in _PROBE_OUTPUTS), None)
        if e is not None:
            out += ((key, e["name"], c_type),)
    return out


def measure_linked(src_dir: Path, name: str, target: _targets.Target, dtype: str, n_features: int,
                   value: bool = False, entry_points: list | None = None) -> dict:
    """Flash and RAM an entry point of the export costs in a linked program for ``target`` (see the
    module docstring): ``{"q15": {"flash_bytes", "ram_bytes", "image_flash_bytes", "image_ram_bytes"},
    "float": {...}, "note": ...}`` (the model's cost, and the whole probe image with it), an entry None
    when it could not be measured (the note says why). ``value``: a regression export (entry points
    ``tg_<name>_predict_value_q15`` and ``tg_<name>_predict_value``). ``entry_points``: the export's
    recorded entry points (:attr:`ExportReport.entry_points`): the probes call those
    (:func:`probe_entries`) instead of the names derived from ``dtype`` and ``value``."""
    cc, size = shutil.which(target.cc), shutil.which(_size_tool(target.cc))
    if entry_points is not None:
        entries = probe_entries(entry_points)
    else:
        predict = f"tg_{name}_predict_value" if value else f"tg_{name}_predict"
        entries = (("q15", f"{predict}_q15", "int16_t"),) if dtype == "q15" else ()
        entries += (("float", predict, "float"),)
    result = {key: None for key, _, _ in entries}
    if cc is None or size is None:
        return {**result, "note": f"not linked: {target.cc if cc is None else _size_tool(target.cc)} not found"}
    src_dir = Path(src_dir).absolute()          # a relative name starting with - or @ is an option to gcc
    runtime = target.extra.get("ldflags", _LINK_RUNTIME.get(os.path.basename(target.cc), ()))
    flags = [*target.cflags, *runtime, "-std=c99", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections"]
    with tempfile.TemporaryDirectory(prefix="treegen-link-") as tmp:
        tmp = Path(tmp)
        for key, entry, in_t in entries:
            sizes = []
            for with_model in (False, True):
                probe = tmp / f"probe_{key}_{int(with_model)}.c"
                probe.write_text(render(PROBE_TEMPLATE, {"name": name, "entry": entry, "in_t": in_t,
                                                         "n_features": n_features, "with_model": with_model}))
                sources = [probe, Path(src_dir) / f"{name}.c"] if with_model else [probe]
                flash, ram, err = _link_size(cc, size, flags, sources, Path(src_dir), tmp, f"{key}{int(with_model)}")
                if err is not None:
                    return {**result, "note": f"not linked: {target.cc} failed: {err}"}
                sizes.append((flash, ram))
            result[key] = {"flash_bytes": sizes[1][0] - sizes[0][0], "ram_bytes": sizes[1][1] - sizes[0][1],
                           "image_flash_bytes": sizes[1][0], "image_ram_bytes": sizes[1][1]}
    return {**result, "note": f"linked image with the model minus the same program without it ({target.cc} "
                              f"{' '.join(target.cflags)}, --gc-sections): library routines included"}


_CLONE_SUFFIX = re.compile(r"\.(constprop|isra|part|cold|lto_priv)(\.\d+)?$")


def section_function(section: str) -> str:
    """The section of the function a compiler clone's section belongs to (``.text.f.constprop.0`` ->
    ``.text.f``: GCC specialises a static function called with constant arguments)."""
    while True:
        base = _CLONE_SUFFIX.sub("", section)
        if base == section:
            return base
        section = base


def inference_bytes(sections: dict, name: str, dtype: str) -> int | None:
    """Flash of the classification path alone: the measured sections minus the class-label table and
    its strings and, for q15, the raw-input wrapper with its scaling tables."""
    if not sections:
        return None
    skip = {f".rodata.tg_{name}_class_labels", f".text.tg_{name}_predict", f".text.tg_{name}_predict_proba",
            f".text.tg_{name}_predict_value",
            f".text.tg_{name}_predict_proba_q15", f".text.tg_{name}_sums_raw", f".rodata.tg_{name}_trees_raw"}
    if dtype == "q15":
        skip |= {f".text.tg_{name}_scale_q15", f".text.tg_{name}_q15", f".text.tg_{name}_shr",
                 f".text.tg_{name}_rne", f".text.tg_{name}_round53"}
    return sum(v for k, v in sections.items()
               if k.startswith((".text", ".rodata", ".data", ".sdata"))
               and section_function(k) not in skip and not k.startswith(".rodata.str")  # the label strings
               and not k.startswith((f".rodata.tg_{name}_r", f".text.tg_{name}_raw")))  # q15's raw-input path


def measure(src_dir: Path, name: str, target: _targets.Target, dtype: str, n_features: int,
            link: bool = True, value: bool = False) -> dict:
    """:func:`measure_size` of the library ``<name>.c`` in ``src_dir``, with ``inference`` (the
    classification path alone, :func:`inference_bytes`) and ``linked`` (:func:`measure_linked`, when
    ``link``)."""
    size = measure_size(Path(src_dir) / f"{name}.c", target, Path(src_dir))
    linked = (measure_linked(Path(src_dir), name, target, dtype, n_features, value) if link
              else {"note": "not linked (link=False)"})
    return {**size, "inference": inference_bytes(size["sections"], name, dtype), "linked": linked}
