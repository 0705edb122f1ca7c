"""``treegen export``: a model -> fixed-point (Q15) or float32 C, from the Jinja templates.

Pipeline: float :class:`~treegen.model.Model` -> :func:`treegen.quantize.quantize_tree` (the
integer tree and its documented semantics) -> plain template data (this module) -> C text
(``templates/c/*.j2``, rendered by :mod:`treegen.codegen`) -> ``<name>.h``, ``<name>.c``, ``main.c``.

Validation happens here, once, before anything is written (unknown target/layout/dtype/variant,
a DSP variant on a core without the DSP extension, field widths, estimated flash); the generated C
has no run-time checks on its hot path.

Layouts:
``table``     const node arrays (struct of arrays, in flash) walked by a loop.
``unrolled``  one labelled block per internal node, connected by ``goto``; oblique nodes emit only
              their non-zero weight terms. No recursion in the generator or the generated code.

Variants (oblique q15 trees only; axis trees need no multiply-accumulate):
``scalar``    portable C99 multiply-accumulate.
``dsp``       ARMv7E-M dual 16-bit MAC (``__smlad`` / ``__smlald`` of ``<arm_acle.h>``, CMSIS's
              ``__SMLAD`` / ``__SMLALD``) when ``__ARM_FEATURE_DSP`` is defined, otherwise a portable
              static-inline emulation with the same semantics: bit-exact with ``scalar`` everywhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import __version__
from . import quantize as _quantize
from . import targets as _targets
from .codegen import c_identifier, c_string_body, comment_text, f32_literal, int_type, render
from .errors import TreegenError
from .model import Model
from .scaling import Q15_MAX, Q15_ONE
from .tree import LEAF

LAYOUTS = ("table", "unrolled")
DTYPES = ("q15", "f32")
VARIANTS = ("auto", "scalar", "dsp")
STRICT_CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic")
SIZE_CFLAGS = ("-ffunction-sections", "-fdata-sections")
EXAMPLE_ROWS = 4
TEMPLATES = {"header": "c/model.h.j2", "source": "c/model.c.j2", "main": "c/main.c.j2"}

# rough code-size model of the unrolled layout (Thumb-2 bytes), only for the up-front flash check
_UNROLLED_NODE_BYTES = 10
_UNROLLED_TERM_BYTES = 8


@dataclass
class ExportReport:
    """What :func:`export_model` wrote and measured. ``to_dict()`` is JSON-ready."""

    name: str
    target: str
    layout: str
    dtype: str
    variant: str
    model_hash: str
    files: list
    n_features: int
    n_classes: int
    trees: list                       # per tree: kind, internal nodes, leaves, depth, acc_bits, acc_bound, exact
    acc_bits: int | None              # widest accumulator (q15 oblique), 16 = no accumulator, None for f32
    exact: bool | None                # every integer test provably equals its float test (q15)
    unresolved_rows: list             # data rows that cannot keep their float side after quantisation
    field_types: dict                 # child reference / feature index C types
    estimated_bytes: int              # tables (+ an estimate of unrolled code), used for the flash check
    flash_bytes: int | None = None    # measured on the compiled object (size tool), None if no compiler
    ram_bytes: int | None = None
    flash_bytes_inference: int | None = None  # the classification path alone (no labels, no raw wrapper)
    sections: dict = field(default_factory=dict)
    size_note: str = ""
    agreement: dict | None = None     # with data: fixed-vs-float agreement and both accuracies (percent)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------- validation helpers
def _choice(value: str, choices: tuple, what: str) -> str:
    if value not in choices:
        raise TreegenError(f"unknown {what} {value!r} (choose from {', '.join(choices)})")
    return value


def resolve_variant(variant: str, target: _targets.Target, dtype: str) -> str:
    """``auto`` -> ``dsp`` on targets with the DSP extension, else ``scalar``; ``dsp`` needs the extension."""
    _choice(variant, VARIANTS, "variant")
    if dtype == "f32":
        if variant == "dsp":
            raise TreegenError("variant 'dsp' applies to the q15 dtype only (f32 uses the FPU)")
        return "scalar"
    if variant == "auto":
        return "dsp" if target.dsp else "scalar"
    if variant == "dsp" and not target.dsp:
        raise TreegenError(f"variant 'dsp' needs the ARMv7E-M DSP extension; target {target.name!r} "
                           f"({target.core}) has none")
    return variant


def default_name(model: Model) -> str:
    dataset = str((model.metadata or {}).get("dataset") or "")
    stem = re.sub(r"(\.csv)?(\.gz)?$", "", Path(dataset).name) if dataset else ""
    return c_identifier(stem or "model")


def _prepare_out_dir(out_dir: Path) -> Path:
    if out_dir.exists() and not out_dir.is_dir():
        raise TreegenError(f"output path {out_dir} is a file, not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TreegenError(f"cannot create output directory {out_dir}: {exc.strerror or exc}") from None
    return out_dir


# ---------------------------------------------------------------------- template data
def _ref_range(qtrees: list) -> tuple[int, int]:
    lo = min(-qt.n_classes for qt in qtrees)
    hi = max(max(qt.n_internal - 1, 0) for qt in qtrees)
    return lo, hi


def _acc_bound(weights_row: np.ndarray) -> int:
    return int(np.abs(weights_row).sum()) * Q15_MAX


def _pairs(weights_row: np.ndarray) -> tuple[list, list]:
    """Non-zero terms of an oblique node split into adjacent pairs (dual MAC) and single terms."""
    nz = [int(j) for j in np.flatnonzero(weights_row)]
    pairs, singles = [], []
    k = 0
    while k < len(nz):
        j = nz[k]
        if k + 1 < len(nz) and nz[k + 1] == j + 1:
            pairs.append({"feature": j, "w0": int(weights_row[j]), "w1": int(weights_row[j + 1])})
            k += 2
        else:
            singles.append({"feature": j, "weight": int(weights_row[j])})
            k += 1
    return pairs, singles


def _mark_constant_tests(nodes: list, type_max: int) -> None:
    """Flag tests that hold for every value of the compared type (threshold == its maximum) and the
    nodes they make unreachable: the unrolled layout emits a plain jump there (a literal comparison
    would be always true, which C compilers rightly warn about) and drops the dead blocks."""
    for n in nodes:
        n["always_left"] = n["threshold"] >= type_max
        n["reachable"] = False
    if not nodes:
        return
    stack = [0]
    while stack:
        n = nodes[stack.pop()]
        n["reachable"] = True
        children = [n["left"]] if n["always_left"] else [n["left"], n["right"]]
        stack.extend(c for c in children if c >= 0)


def _q15_tree_data(index: int, qt, tree) -> dict:
    n_int = qt.n_internal
    kind = "leaf" if qt.root < 0 else qt.kind
    nodes = []
    for i in range(n_int):
        node = {"index": i, "threshold": int(qt.threshold[i]), "left": int(qt.left[i]), "right": int(qt.right[i])}
        if qt.kind == "axis":
            node["feature"] = int(qt.feature[i])
        else:
            row = np.asarray(qt.weights[i], dtype=np.int64)
            node["weights"] = [int(v) for v in row]
            node["terms"] = [{"feature": int(j), "weight": int(row[j])} for j in np.flatnonzero(row)]
            node["pairs"], node["singles"] = _pairs(row)
            node["shift"] = int(qt.shift[i])
            node["acc_bound"] = _acc_bound(row)
        nodes.append(node)
    acc_bits = int(qt.acc_bits) if kind == "oblique" else 16
    _mark_constant_tests(nodes, (1 << (acc_bits - 1)) - 1)
    return {
        "index": index, "kind": kind, "root": int(qt.root), "n_internal": n_int,
        "n_leaves": tree.n_leaves, "depth": tree.depth, "leaf_class": int(-qt.root - 1) if qt.root < 0 else -1,
        "acc_bits": acc_bits,
        "acc_bound": max((n["acc_bound"] for n in nodes), default=0) if kind == "oblique" else 0,
        "exact": bool(qt.exact), "nodes": nodes,
        "uses_acc": kind == "oblique" and any(n["reachable"] and not n["always_left"] for n in nodes),
    }


def _f32_tree_data(index: int, tree) -> dict:
    """The float tree in pre-order with the same child-reference convention as the q15 trees."""
    order = tree.preorder()
    internal = [n for n in order if tree.left[n] != LEAF]
    pos = {n: i for i, n in enumerate(internal)}

    def ref(n: int) -> int:
        return pos[n] if tree.left[n] != LEAF else -int(tree.leaf_class[n]) - 1

    axis = tree.is_axis_parallel()
    nodes = []
    for i, n in enumerate(internal):
        w = tree.weights[n]
        nz = [int(j) for j in np.flatnonzero(w)]
        node = {"index": i, "threshold": f32_literal(tree.threshold[n]),
                "left": ref(int(tree.left[n])), "right": ref(int(tree.right[n])),
                "terms": [{"feature": j, "weight": f32_literal(w[j])} for j in nz]}
        if axis:
            j = nz[0] if nz else 0
            node["feature"] = j
            node["weight"] = f32_literal(w[j])
        else:
            node["weights"] = [f32_literal(v) for v in w]
        nodes.append(node)
    root = ref(0)
    kind = "leaf" if root < 0 else ("axis" if axis else "oblique")
    return {"index": index, "kind": kind, "root": root, "n_internal": len(internal), "n_leaves": tree.n_leaves,
            "depth": tree.depth, "leaf_class": -root - 1 if root < 0 else -1, "acc_bits": 0, "acc_bound": 0,
            "exact": False, "nodes": nodes}


def _estimate_bytes(trees: list, layout: str, dtype: str, n_features: int, n_classes: int,
                    ref_bytes: int, feat_bytes: int) -> int:
    """Flash estimate: node tables (table layout) or a code-size model (unrolled), plus scaling and labels."""
    total = n_features * 8 + n_classes * 8  # offset/scale floats; label pointers and short strings
    for t in trees:
        for node in t["nodes"]:
            if layout == "table":
                total += 2 * ref_bytes
                if t["kind"] == "axis":
                    total += (8 if dtype == "f32" else 2) + feat_bytes
                else:
                    total += n_features * (4 if dtype == "f32" else 2)
                    total += 4 if dtype == "f32" else t["acc_bits"] // 8
            else:
                total += _UNROLLED_NODE_BYTES + _UNROLLED_TERM_BYTES * len(node.get("terms", [1]))
    return int(total)


def _example_rows(model: Model, data) -> tuple[np.ndarray, np.ndarray]:
    """(raw float32-representable rows, their Q15 rows) for main.c: data rows if given, else synthetic."""
    if data is not None and len(data[0]) > 0:
        X = np.asarray(data[0], dtype=np.float64)[:EXAMPLE_ROWS]
    else:
        fractions = np.linspace(0.2, 0.8, EXAMPLE_ROWS)[:, None]
        rng = np.random.default_rng(20260101)
        q = np.clip(np.round((fractions + rng.uniform(-0.15, 0.15, (EXAMPLE_ROWS, model.n_features)))
                             * Q15_ONE), 0, Q15_MAX)
        scale = model.scaling.scale
        safe = np.where(scale != 0, scale, 1.0)
        X = np.where(scale != 0, model.scaling.offset + (q / Q15_ONE) / safe, model.scaling.offset)
    big = float(np.finfo(np.float32).max)
    X = np.clip(X, -big, big).astype(np.float32).astype(np.float64)  # exactly the float literals of main.c
    return X, model.scaling.to_q15(X)


def predict_fixed(qtrees: list, X_q15: np.ndarray, n_classes: int) -> np.ndarray:
    """Class indices of the Python fixed-point model (majority vote, ties -> lowest index)."""
    return np.asarray(_quantize.predict_model_q15(qtrees, n_classes, np.asarray(X_q15)), dtype=np.int64)


def build_context(model: Model, *, name: str, target: _targets.Target, layout: str, dtype: str, variant: str,
                  qtrees: list | None, examples: tuple | None = None) -> dict:
    """Everything the templates need, as plain data."""
    n_features, n_classes = model.n_features, model.n_classes
    feat_t = int_type(0, max(n_features - 1, 0), f"feature index (model has {n_features} features)")
    if dtype == "q15":
        trees = [_q15_tree_data(k, qt, t) for k, (qt, t) in enumerate(zip(qtrees, model.trees))]
        lo, hi = _ref_range(qtrees)
    else:
        trees = [_f32_tree_data(k, t) for k, t in enumerate(model.trees)]
        lo = -n_classes
        hi = max(max(t["n_internal"] - 1, 0) for t in trees)
    ref_t = int_type(lo, hi, f"child reference ({hi + 1} internal nodes, {n_classes} classes)")
    for t in trees:
        t["acc_c"] = "int64_t" if t["acc_bits"] == 64 else "int32_t"
    oblique = [t for t in trees if t["kind"] == "oblique"]
    scale = model.scaling
    ctx = {
        "version": __version__,
        "model_hash": model.hash(),
        "name": name,
        "NAME": name.upper(),
        "target": {"name": target.name, "core": target.core, "dsp": target.dsp, "fpu": target.fpu},
        "layout": layout, "dtype": dtype, "variant": variant,
        "n_features": n_features, "n_classes": n_classes, "n_trees": len(trees),
        "features": [{"index": i, "name": comment_text(n)} for i, n in enumerate(model.feature_names)],
        "classes": [{"index": i, "label": c_string_body(c), "comment": comment_text(c)}
                    for i, c in enumerate(model.classes)],
        "scaling": {
            "method": scale.method,
            "features": [{"index": i, "offset": f32_literal(o), "scale": f32_literal(s * Q15_ONE)}
                         for i, (o, s) in enumerate(zip(scale.offset, scale.scale))],
        },
        "trees": trees,
        "ref_t": ref_t, "feat_t": feat_t,
        "acc_sizes": sorted({t["acc_bits"] for t in oblique}),
        "has_axis": any(t["kind"] == "axis" for t in trees),
        "has_oblique": bool(oblique),
        "odd_features": n_features % 2 == 1,
        "vote_t": "unsigned int",
    }
    if examples is not None:
        X_raw, X_q, expected = examples
        ctx["examples"] = [
            {"raw": [f32_literal(v) for v in X_raw[r]], "q15": [int(v) for v in X_q[r]],
             "expected": int(expected[r])}
            for r in range(X_raw.shape[0])
        ]
    return ctx


# ---------------------------------------------------------------------- size measurement
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


def inference_bytes(sections: dict, name: str, dtype: str) -> int | None:
    """Flash of the classification path alone: the measured sections minus the class-label table and
    its strings and, for q15, the raw-input wrapper with its scaling tables."""
    if not sections:
        return None
    skip = {f".rodata.tg_{name}_class_labels"}
    if dtype == "q15":
        skip |= {f".text.tg_{name}_predict", f".text.tg_{name}_scale_q15", f".rodata.tg_{name}_offset",
                 f".rodata.tg_{name}_scale"}
    return sum(v for k, v in sections.items()
               if k.startswith((".text", ".rodata", ".data", ".sdata"))
               and k not in skip and not k.startswith(".rodata.str"))  # .rodata.str*: the label strings


# ---------------------------------------------------------------------- the export
def export_model(model: Model, out_dir, *, target, layout: str = "table", dtype: str = "q15",
                 variant: str = "auto", name: str | None = None, data=None, measure: bool = True) -> ExportReport:
    """Write ``<name>.h``, ``<name>.c`` and ``main.c`` into ``out_dir``; return an :class:`ExportReport`.

    ``target`` is a target name or :class:`~treegen.targets.Target`; ``data`` is an optional
    ``(X_raw, labels)`` pair: its rows resolve inexact thresholds during quantisation, give the
    fixed-vs-float agreement and both accuracies, and provide the example rows of ``main.c``.
    """
    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    _choice(layout, LAYOUTS, "layout")
    _choice(dtype, DTYPES, "dtype")
    variant = resolve_variant(variant, tgt, dtype)
    ident = c_identifier(name) if name is not None else default_name(model)
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise TreegenError(f"output path {out_dir} is a file, not a directory")
    model.validate()

    X_raw = labels = X_q = None
    if data is not None:
        X_raw = np.asarray(data[0], dtype=np.float64)
        labels = None if len(data) < 2 or data[1] is None else np.asarray(data[1], dtype=object)
        X_q = model.scaling.to_q15(X_raw)

    notes = []
    qtrees = _quantize.quantize_model(model, X_q) if dtype == "q15" else []
    unresolved = sorted({int(r) for qt in qtrees for r in qt.unresolved_rows})

    ex_raw, ex_q = _example_rows(model, None if data is None else (X_raw,))
    if dtype == "q15":
        ex_expected = predict_fixed(qtrees, ex_q, model.n_classes)
    else:
        ex_expected = model.predict_index(ex_raw)
    ctx = build_context(model, name=ident, target=tgt, layout=layout, dtype=dtype, variant=variant,
                        qtrees=qtrees if dtype == "q15" else None, examples=(ex_raw, ex_q, ex_expected))

    estimated = _estimate_bytes(ctx["trees"], layout, dtype, model.n_features, model.n_classes,
                                ctx["ref_t"]["bits"] // 8, ctx["feat_t"]["bits"] // 8)
    if estimated > tgt.flash_bytes:
        raise TreegenError(f"model needs about {estimated} bytes of flash, more than target {tgt.name!r} has "
                           f"({tgt.flash_bytes} bytes)")

    out = _prepare_out_dir(Path(out_dir))
    texts = {
        out / f"{ident}.h": render(TEMPLATES["header"], ctx),
        out / f"{ident}.c": render(TEMPLATES["source"], ctx),
        out / "main.c": render(TEMPLATES["main"], ctx),
    }
    for path, text in texts.items():
        try:
            path.write_text(text, encoding="utf-8", newline="\n")
        except OSError as exc:
            raise TreegenError(f"cannot write {path}: {exc.strerror or exc}") from None

    size = (measure_size(out / f"{ident}.c", tgt, out) if measure
            else {"flash_bytes": None, "ram_bytes": None, "sections": {}, "note": "not measured (measure=False)"})

    agreement = None
    if data is not None and X_raw.shape[0] > 0:
        float_pred = model.predict_index(X_raw)
        agreement = {"rows": int(X_raw.shape[0])}
        if dtype == "q15":
            fixed_pred = predict_fixed(qtrees, X_q, model.n_classes)
            agreement["fixed_vs_float_pct"] = 100.0 * float(np.mean(fixed_pred == float_pred))
        if labels is not None and labels.shape[0] == X_raw.shape[0]:
            known = {c: i for i, c in enumerate(model.classes)}
            y = np.array([known.get(v, -1) for v in labels.tolist()], dtype=np.int64)
            agreement["accuracy_float_pct"] = 100.0 * float(np.mean(float_pred == y))
            if dtype == "q15":
                agreement["accuracy_fixed_pct"] = 100.0 * float(np.mean(fixed_pred == y))
    if dtype == "f32":
        notes.append("f32: float32 weights, thresholds and arithmetic; decisions within float32 rounding of a "
                     "threshold can differ from the float64 model")
    if dtype == "q15" and variant == "dsp" and not ctx["has_oblique"]:
        notes.append("variant dsp: the model has no oblique tree, axis tests need no multiply-accumulate")
    if unresolved:
        notes.append(f"{len(unresolved)} data row(s) cannot keep their float side after quantisation")

    trees_info = [{k: t[k] for k in ("kind", "n_internal", "n_leaves", "depth", "acc_bits", "acc_bound", "exact")}
                  for t in ctx["trees"]]
    if dtype == "f32":
        for t in trees_info:
            t["acc_bits"] = t["acc_bound"] = t["exact"] = None
        acc_bits = exact = None
    else:
        acc_bits = max(t["acc_bits"] for t in ctx["trees"])
        exact = all(bool(qt.exact) for qt in qtrees)
    return ExportReport(
        name=ident, target=tgt.name, layout=layout, dtype=dtype, variant=variant, model_hash=ctx["model_hash"],
        files=[str(p) for p in texts], n_features=model.n_features, n_classes=model.n_classes, trees=trees_info,
        acc_bits=acc_bits, exact=exact, unresolved_rows=unresolved,
        field_types={"child_ref": ctx["ref_t"]["c"], "feature_index": ctx["feat_t"]["c"]},
        estimated_bytes=estimated, flash_bytes=size["flash_bytes"], ram_bytes=size["ram_bytes"],
        flash_bytes_inference=inference_bytes(size["sections"], ident, dtype),
        sections=size["sections"], size_note=size["note"], agreement=agreement, notes=notes,
    )
