"""``treegen export``: a model -> fixed-point (Q15) or float32 C, from the Jinja templates.

Pipeline: float :class:`~treegen.core.model.Model` -> :func:`treegen.emit.quantize.quantize_tree` (the
integer tree and its documented semantics) -> plain template data (this module) -> C text
(``templates/c/*.j2``, rendered by :mod:`treegen.core.codegen`) -> ``<name>.h``, ``<name>.c`` (the library;
an example ``main.c`` only on request, in its own folder: see :data:`LIB_LAYOUTS`).

Validation happens here, once, before anything is written (unknown target/layout/dtype/variant,
a DSP variant on a core without the DSP extension, field widths, estimated flash); the generated C
has no run-time checks on its hot path.

Layouts:
``table``     const node arrays (struct of arrays, in flash) walked by a loop.
``unrolled``  one labelled block per internal node, connected by ``goto``; oblique nodes emit only
              their non-zero weight terms. No recursion in the generator or the generated code.

dtype ``f32`` (raw float32 inputs, no input scaling on the device):
``axis`` trees   each Q15 test ``q(x) <= T`` becomes a test of the raw input ``x <= t``, ``t`` the
                 largest float32 whose Q15 value (``InputScaling.to_q15``, float64) is ``<= T``,
                 found by binary search over the float32 values (:func:`f32_axis_split`): the same
                 branch as the Q15 model for *every* float32 input. The C compares IEEE-754 bit
                 patterns as integers (one load, one compare: no FPU or soft-float needed).
``oblique`` trees the scaling folded into float32 weights and thresholds (:func:`_f32_fold`); this
                 skips the Q15 snapping and clipping, so agreement is measured, not exact.
:func:`predict_f32` is the Python model of that C, bit for bit.

Variants (oblique q15 trees only; axis trees need no multiply-accumulate):
``scalar``    portable C99 multiply-accumulate.
``dsp``       ARMv7E-M dual 16-bit MAC (``__smlad`` / ``__smlald`` of ``<arm_acle.h>``, CMSIS's
              ``__SMLAD`` / ``__SMLALD``) when ``__ARM_FEATURE_DSP`` is defined, otherwise a portable
              static-inline emulation with the same semantics: bit-exact with ``scalar`` everywhere.
``mve``       Helium (ARMv8.1-M MVE, e.g. Cortex-M55): eight int16_t lanes multiplied and summed into
              the accumulator by one ``VMLADAVA.S16`` (int32) / ``VMLALDAVA.S16`` (int64) per vector
              (``vmladavaq_s16`` / ``vmlaldavaq_s16`` of ``<arm_mve.h>``), the last vector of the input
              tail-predicated (``vctp16q`` + ``vldrhq_z_s16``: no read beyond the row); the unrolled
              layout loads the input vectors once per tree and the weights from zero-padded rows, and
              skips all-zero vectors. Portable emulation elsewhere: bit-exact with ``scalar``.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from treegen.core import targets as _targets
from treegen.core.codegen import (c_identifier, check_overwrite, c_string_body, comment_text, f32_literal, int_type, prepare_out_dir,
                                  render, write_generated)
from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.core.scaling import Q15_MAX, Q15_ONE
from treegen.core.tree import LEAF
from treegen.core.version import __version__
from treegen.emit import quantize as _quantize
from treegen.emit.quantize import f32_below_above, grid_matches_raw, q15_of_raw  # noqa: F401 (re-exported)

LAYOUTS = ("table", "unrolled")
DTYPES = ("q15", "f32")
VARIANTS = ("auto", "scalar", "dsp", "mve")
VOTES = ("auto", "soft", "hard")
MVE_LANES = 8  # int16_t lanes of a 128-bit Helium vector
STRICT_CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic")
SIZE_CFLAGS = ("-ffunction-sections", "-fdata-sections")
EXAMPLE_ROWS = 4
TEMPLATES = {"header": "c/model.h.j2", "source": "c/model.c.j2", "main": "c/main.c.j2",
             "library.json": "library/library.json.j2", "library.properties": "library/library.properties.j2",
             "sketch": "library/sketch.ino.j2"}
#: how the files of an export are laid out (``export_model(lib_layout=...)``, ``treegen export --lib-layout``):
#: ``plain``       DIR/<name>.h, DIR/<name>.c; example: DIR/example/main.c
#: ``platformio``  a PlatformIO library: DIR/library.json, DIR/src/<name>.h, DIR/src/<name>.c (copy DIR into a
#:                 project's ``lib/``); example: DIR/examples/<name>/main.c (not compiled with the library)
#: ``arduino``     an Arduino library (1.5 format): DIR/library.properties, DIR/src/<name>.h, DIR/src/<name>.c;
#:                 example: the sketch DIR/examples/<name>/<name>.ino
#: The library folders never hold a ``main()``: the example is written only with ``example=True``.
LIB_LAYOUTS = ("plain", "platformio", "arduino")
LIB_VERSION = "1.0.0"      # version of the generated PlatformIO/Arduino library (the model hash identifies it)

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
    exact: bool | None                # the export predicts as the source / float model for every input of
                                      # the input contract (tests and vote); see ``guarantee`` and ``notes``
    unresolved_rows: list             # data rows that cannot keep their float side after quantisation
    field_types: dict                 # child reference / feature index C types
    estimated_bytes: int              # tables (+ an estimate of unrolled code), used for the flash check
    flash_bytes: int | None = None    # measured on the compiled object (size tool), None if no compiler
    ram_bytes: int | None = None
    flash_bytes_inference: int | None = None  # the classification path alone (no labels, no raw wrapper)
    sections: dict = field(default_factory=dict)
    size_note: str = ""
    agreement: dict | None = None     # with data: fixed-vs-float agreement and both accuracies (fractions 0..1)
    notes: list = field(default_factory=list)
    vote: str = "single tree"         # ensembles: soft / hard
    input_contract: str = "float32"   # float32 / integer / q15 (Model.contract)
    guarantee: str = ""               # what holds for every input of the contract
    thresholds_off_grid: int | None = None  # imported models: tests whose Q15 grid test differs from the source
    soft_vote_bound: float | None = None    # soft vote == float argmax unless class means differ by <= this

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------- validation helpers
def _choice(value: str, choices: tuple, what: str) -> str:
    if value not in choices:
        raise TreegenError(f"unknown {what} {value!r} (choose from {', '.join(choices)})")
    return value


def resolve_variant(variant: str, target: _targets.Target, dtype: str) -> str:
    """``auto`` -> ``mve`` on targets with Helium (``mve = true``), else ``dsp`` on targets with the DSP
    extension, else ``scalar``; ``dsp`` and ``mve`` need their extension."""
    _choice(variant, VARIANTS, "variant")
    if dtype == "f32":
        if variant in ("dsp", "mve"):
            raise TreegenError(f"variant {variant!r} applies to the q15 dtype only (f32 uses the FPU)")
        return "scalar"
    if variant == "auto":
        return "mve" if target.mve else ("dsp" if target.dsp else "scalar")
    if variant == "mve" and not target.mve:
        raise TreegenError(f"variant 'mve' needs the M-profile Vector Extension (Helium); target {target.name!r} "
                           f"({target.core}) has none")
    if variant == "dsp" and not target.dsp:
        raise TreegenError(f"variant 'dsp' needs the ARMv7E-M DSP extension; target {target.name!r} "
                           f"({target.core}) has none")
    return variant


def default_name(model: Model) -> str:
    dataset = str((model.metadata or {}).get("dataset") or "")
    stem = re.sub(r"(\.csv)?(\.gz)?$", "", Path(dataset).name) if dataset else ""
    return c_identifier(stem or "model")



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


def _mark_constant_tests(nodes: list, type_max: int | None, type_min: int | None = None) -> None:
    """Flag tests whose outcome is fixed: ``always_left`` (threshold >= the compared type's maximum),
    ``always_right`` (threshold < ``type_min``, when given) and the nodes they make unreachable. The
    unrolled layout emits a plain jump there (a literal comparison would be always true or false,
    which C compilers rightly warn about) and drops the dead blocks. Nodes that already carry
    ``always_left`` / ``always_right`` keep them (``type_max`` None: f32 nodes, flagged beforehand)."""
    for n in nodes:
        if type_max is not None:
            n["always_left"] = n["threshold"] >= type_max
            n["always_right"] = type_min is not None and n["threshold"] < type_min
        n.setdefault("always_left", False)
        n.setdefault("always_right", False)
        n["reachable"] = False
    if not nodes:
        return
    stack = [0]
    while stack:
        n = nodes[stack.pop()]
        n["reachable"] = True
        if n["always_left"]:
            children = [n["left"]]
        elif n["always_right"]:
            children = [n["right"]]
        else:
            children = [n["left"], n["right"]]
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
            padded = [int(v) for v in row] + [0] * (-len(row) % MVE_LANES)
            node["mve_padded"] = padded
            node["mve_chunks"] = [k for k in range(len(padded) // MVE_LANES)
                                  if any(padded[k * MVE_LANES:(k + 1) * MVE_LANES])]
            node["acc_bound"] = _acc_bound(row)
        nodes.append(node)
    acc_bits = int(qt.acc_bits) if kind == "oblique" else 16
    # axis tests compare the input as uint16_t (0..32767 by contract): T = -1 is a constant "right"
    _mark_constant_tests(nodes, (1 << (acc_bits - 1)) - 1, 0 if kind == "axis" else None)
    tested = [n for n in nodes if n["reachable"] and not n["always_left"] and not n["always_right"]]
    return {
        "mve_x_chunks": sorted({k for n in tested for k in n.get("mve_chunks", [])}),
        "index": index, "kind": kind, "root": int(qt.root), "n_internal": n_int,
        "n_leaves": tree.n_leaves, "depth": tree.depth, "leaf_class": int(-qt.root - 1) if qt.root < 0 else -1,
        "acc_bits": acc_bits,
        "acc_bound": max((n["acc_bound"] for n in nodes), default=0) if kind == "oblique" else 0,
        "exact": bool(qt.exact), "nodes": nodes,
        "uses_acc": kind == "oblique" and any(n["reachable"] and not n["always_left"] and not n["always_right"]
                                              for n in nodes),
    }


# ---------------------------------------------------------------------- f32: tests on raw inputs
# float32 values are searched through their *ordinals*: ..., -FLT_MAX, ..., -0 == +0 == 0, ...,
# FLT_MAX, +inf; consecutive ordinals are consecutive float32 values.
_F32_INF_ORD = 0x7F800000
_F32_MAX = float(np.finfo(np.float32).max)
_KEY_ALL = 0xFFFFFFFF  # the monotone key every input (NaN included) is <= : "always left"


def _f32_of_ordinal(o: int) -> np.float32:
    bits = o if o >= 0 else 0x80000000 | -o
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def f32_bits(v) -> int:
    """The IEEE-754 binary32 bit pattern of ``v`` (rounded to float32) as an unsigned int."""
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def f32_key(bits):
    """Monotone unsigned key of binary32 bit patterns (int or array): ``a <= b`` as floats (not NaN)
    implies ``key(a) <= key(b)``; -0 sorts just below +0, a NaN beyond +-inf on the side of its sign.
    The C table layout computes ``key - 2**31`` as int32_t (``tg_<name>_key``): the same order."""
    b = np.asarray(bits, dtype=np.int64)
    key = np.where(b >= 0x80000000, 0xFFFFFFFF - b, b | 0x80000000)
    return int(key) if key.ndim == 0 else key


def _f32_of_ordinals(o: np.ndarray) -> np.ndarray:
    o = np.asarray(o, dtype=np.int64)
    bits = np.where(o >= 0, o, 0x80000000 | -o).astype(np.uint32)
    return bits.view(np.float32)


def f32_axis_splits(offset, scale, T) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`f32_axis_split` over nodes: (ops array of "left"/"right"/"le"/"gt", t float32
    array; t is NaN where op is "left"/"right")."""
    offset = np.asarray(offset, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    T = np.asarray(T, dtype=np.int64)
    n = T.shape[0]
    ops = np.full(n, "", dtype=object)
    t = np.full(n, np.nan, dtype=np.float32)
    always_left = (T >= Q15_MAX) | ((scale == 0.0) & (T >= 0))
    always_right = ~always_left & (T < 0)
    ops[always_left], ops[always_right] = "left", "right"
    todo = np.flatnonzero(~always_left & ~always_right)

    def left(o, idx):
        return q15_of_raw(_f32_of_ordinals(o), offset[idx], scale[idx]) <= T[idx]

    lo = np.full(todo.size, -_F32_INF_ORD, dtype=np.int64)
    hi = np.full(todo.size, _F32_INF_ORD, dtype=np.int64)
    first, last = left(lo, todo), left(hi, todo)
    const = first == last
    ops[todo[const & first]] = "left"
    ops[todo[const & ~first]] = "right"
    keep = ~const
    todo, lo, hi, first = todo[keep], lo[keep], hi[keep], first[keep]
    while todo.size and np.any(hi - lo > 1):  # invariant: left(lo) == first != left(hi)
        mid = (lo + hi) // 2
        same = left(mid, todo) == first
        lo = np.where(same, mid, lo)
        hi = np.where(same, hi, mid)
    ops[todo] = np.where(scale[todo] > 0, "le", "gt")
    t[todo] = _f32_of_ordinals(lo)
    return ops, t


def f32_axis_split(offset: float, scale: float, T: int) -> tuple:
    """The Q15 test ``q(x) <= T`` (``q`` as :func:`q15_of_raw`) as a test of the raw float32 input.

    Returns ``("left", None)`` / ``("right", None)`` when every float32 input (+-inf included) takes
    that side, ``("le", t)``: left iff ``x <= t``, or ``("gt", t)``: left iff ``x > t`` (negative
    scale). ``t`` is found by binary search over the float32 ordinals: ``q`` is monotone in ``x``
    (every float64 operation in it is), so exactly the ordinals up to ``t`` take one side. For
    positive scales ``t`` is the largest float32 with ``q(t) <= T``. (:func:`f32_axis_splits` does
    the same for many nodes at once.)
    """
    ops, t = f32_axis_splits([offset], [scale], [T])
    op = str(ops[0])
    return (op, None) if op in ("left", "right") else (op, np.float32(t[0]))


def _f32_comment(t: np.float32) -> str:
    return "-inf" if np.isneginf(t) else ("inf" if np.isposinf(t) else f32_literal(t))


def _f32_axis_node(i: int, feature: int, T: int, left: int, right: int, scaling, split=None) -> dict:
    """One f32 axis test: the Q15 test ``q(x) <= T`` as a raw test (:func:`f32_axis_split`), or the
    given ``split`` (``("le", t)``: the source's own float32 test, imported models)."""
    op, t = split if split is not None else f32_axis_split(float(scaling.offset[feature]),
                                                             float(scaling.scale[feature]), int(T))
    if op == "gt":  # left iff x > t  <=>  right iff x <= t
        left, right = right, left
    node = {"index": i, "feature": int(feature), "left": int(left), "right": int(right), "q15_threshold": int(T),
            "always_left": op == "left", "always_right": op == "right"}
    if op in ("left", "right"):
        if op == "right":  # as a table entry: swap and take the key every input is <= of
            left, right = right, left
        node.update(key=_KEY_ALL, skey=_KEY_ALL - (1 << 31), table_left=int(left), table_right=int(right),
                    cmp="", bits="", t="")
        return node
    bits = f32_bits(t)
    # x <= t on the bits: for t >= +0 as signed int32 (every negative input is below), for t < 0 as
    # unsigned (x <= t < 0 <=> x is negative with at least t's magnitude <=> bits(x) >= bits(t))
    key = f32_key(bits)  # the table layout's C key is the same order, signed: key - 2^31
    node.update(key=key, skey=key - (1 << 31), table_left=int(left), table_right=int(right), t=_f32_comment(t),
                cmp="s" if bits < 0x80000000 else "u", bits=f"0x{bits:08X}")
    return node


def _f32_fold(tree, n: int, scaling) -> tuple[np.ndarray, np.float32]:
    """Oblique node ``n``: the input scaling folded into float32 weights and threshold,
    ``w'_i = w_i * scale_i``, ``theta' = theta + sum_i w_i * scale_i * offset_i`` (float64, then
    rounded to float32), so that the test runs on raw inputs."""
    w = np.asarray(tree.weights[n], dtype=np.float64) * scaling.scale
    theta = math.fsum([float(tree.threshold[n]), *(w * scaling.offset).tolist()])
    w32 = np.clip(w, -_F32_MAX, _F32_MAX).astype(np.float32)
    return w32, np.float32(min(max(theta, -_F32_MAX), _F32_MAX))


def _f32_tree_data(index: int, tree, scaling, leaf_ids=None, source_thresholds: bool = True) -> dict:
    """A float tree as f32 template data, in pre-order with the child references of the q15 trees.

    Axis trees with raw thresholds (imported): each test is the source's ``float32(x) <= t``, i.e.
    ``x <= `` the largest float32 not above ``t``. Other axis trees: each test becomes an exact test of
    the raw float32 input (:func:`f32_axis_split`) on the quantised tree's integer thresholds.
    Oblique trees: scaling folded into the weights. ``leaf_ids``: what leaves return (soft voting).
    ``source_thresholds=False``: the Q15 model's raw splits even where raw thresholds exist (the q15
    export's raw-input entry point).
    """
    axis = tree.is_axis_parallel()
    leaf_value = tree.leaf_class if leaf_ids is None else np.asarray(leaf_ids)
    if axis:
        qt = _quantize.quantize_tree(tree, leaf_ids=leaf_ids)
        feat = qt.feature.astype(np.int64)
        ops, ts = f32_axis_splits(scaling.offset[feat], scaling.scale[feat], qt.threshold)
        splits = [(str(o), None if o in ("left", "right") else np.float32(v)) for o, v in zip(ops, ts)]
        if tree.raw_threshold is not None and source_thresholds:
            order = [k for k in tree.preorder() if tree.left[k] != LEAF]
            below, _ = f32_below_above(tree.raw_threshold[order])
            splits = [("le", np.float32(b)) for b in below]
        nodes = [_f32_axis_node(i, int(qt.feature[i]), int(qt.threshold[i]), int(qt.left[i]), int(qt.right[i]),
                                scaling, splits[i]) for i in range(qt.n_internal)]
        root = int(qt.root)
    else:
        order = tree.preorder()
        internal = [n for n in order if tree.left[n] != LEAF]
        pos = {n: i for i, n in enumerate(internal)}

        def ref(n: int) -> int:
            return pos[n] if tree.left[n] != LEAF else -int(leaf_value[n]) - 1

        nodes = []
        for i, n in enumerate(internal):
            w32, thr32 = _f32_fold(tree, n, scaling)
            nz = [int(j) for j in np.flatnonzero(tree.weights[n])]
            nodes.append({"index": i, "left": ref(int(tree.left[n])), "right": ref(int(tree.right[n])),
                          "w32": w32, "thr32": thr32, "threshold": f32_literal(thr32),
                          "weights": [f32_literal(v) for v in w32],
                          "terms": [{"feature": j, "weight": f32_literal(w32[j])} for j in nz]})
        root = ref(0)
    _mark_constant_tests(nodes, None)
    kind = "leaf" if root < 0 else ("axis" if axis else "oblique")
    raw = axis and tree.raw_threshold is not None and source_thresholds
    return {"index": index, "kind": kind, "root": root, "n_internal": len(nodes), "n_leaves": tree.n_leaves,
            "depth": tree.depth, "leaf_class": -root - 1 if root < 0 else -1, "acc_bits": 0, "acc_bound": 0,
            "exact": kind != "oblique", "raw_thresholds": raw, "nodes": nodes}


def predict_f32(trees: list, X, n_classes: int, soft=None) -> np.ndarray:
    """Class indices computed exactly as the generated f32 C does (``trees``: the ``_f32_tree_data``
    of every tree; ``X``: raw rows, rounded to float32 as the C receives them). Majority vote, ties
    -> lowest index; with ``soft`` (a :class:`~treegen.emit.quantize.SoftVote`) the fixed-point soft
    vote."""
    leaves = f32_leaves(trees, X)
    if soft is not None:
        total = np.zeros((leaves.shape[0], n_classes), dtype=np.int64)
        for k in range(leaves.shape[1]):
            total += soft.table[leaves[:, k]]
        return total.argmax(axis=1)
    if leaves.shape[1] == 1:
        return leaves[:, 0]
    votes = np.zeros((leaves.shape[0], n_classes), dtype=np.int64)
    for k in range(leaves.shape[1]):
        votes[np.arange(leaves.shape[0]), leaves[:, k]] += 1
    return votes.argmax(axis=1)


def f32_leaves(trees: list, X) -> np.ndarray:
    """The value every tree's leaf returns (class index, or probability row with soft voting) for
    every row, as the f32 C computes it: int64 ``(rows, n_trees)``."""
    with np.errstate(over="ignore"):
        X32 = np.asarray(X, dtype=np.float32)
    if X32.ndim != 2:
        raise TreegenError(f"expected a 2-D array of rows, got shape {X32.shape}")
    keys = f32_key(X32.view(np.uint32).astype(np.int64))
    out = np.zeros((X32.shape[0], len(trees)), dtype=np.int64)
    for k, t in enumerate(trees):
        ref = np.full(X32.shape[0], t["root"], dtype=np.int64)
        if t["kind"] == "axis":
            feat = np.array([n["feature"] for n in t["nodes"]], dtype=np.int64)
            key = np.array([n["key"] for n in t["nodes"]], dtype=np.int64)
            left = np.array([n["table_left"] for n in t["nodes"]], dtype=np.int64)
            right = np.array([n["table_right"] for n in t["nodes"]], dtype=np.int64)
        elif t["kind"] == "oblique":
            W = np.array([n["w32"] for n in t["nodes"]], dtype=np.float32)
            thr = np.array([n["thr32"] for n in t["nodes"]], dtype=np.float32)
            left = np.array([n["left"] for n in t["nodes"]], dtype=np.int64)
            right = np.array([n["right"] for n in t["nodes"]], dtype=np.int64)
        active = np.flatnonzero(ref >= 0)
        while active.size:
            node = ref[active]
            if t["kind"] == "axis":
                go_left = keys[active, feat[node]] <= key[node]
            else:
                acc = np.zeros(active.size, dtype=np.float32)
                with np.errstate(all="ignore"):
                    for j in range(X32.shape[1]):  # left to right, every product and sum rounded to float32
                        acc = acc + W[node, j] * X32[active, j]
                go_left = acc <= thr[node]
            ref[active] = np.where(go_left, left[node], right[node])
            active = active[ref[active] >= 0]
        out[:, k] = -ref - 1
    return out


def _estimate_bytes(trees: list, layout: str, dtype: str, n_features: int, n_classes: int,
                    ref_bytes: int, feat_bytes: int) -> int:
    """Flash estimate: node tables (table layout) or a code-size model (unrolled), plus scaling and labels."""
    total = n_classes * 8  # label pointers and short strings
    if dtype == "q15":
        total += n_features * 8  # offset/scale floats of the raw-input wrapper (f32 has none)
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


def predict_fixed(qtrees: list, X_q15: np.ndarray, n_classes: int, soft=None) -> np.ndarray:
    """Class indices of the Python fixed-point model (majority vote, ties -> lowest index; with ``soft``
    the fixed-point soft vote of :class:`~treegen.emit.quantize.SoftVote`, ties -> lowest index)."""
    if soft is not None:
        return _quantize.soft_sums(qtrees, soft, X_q15).argmax(axis=1)
    return np.asarray(_quantize.predict_model_q15(qtrees, n_classes, np.asarray(X_q15)), dtype=np.int64)


def used_features(model: Model) -> list:
    """Features some test of the model reads (the raw wrapper scales only these)."""
    used = set()
    for t in model.trees:
        internal = t.left != LEAF
        used.update(int(j) for j in np.flatnonzero(np.any(t.weights[internal] != 0, axis=0)))
    return sorted(used)


def _c_double(v: float) -> str:
    """An exact C99 double literal (hexadecimal floating constant)."""
    return float(v).hex()


def build_context(model: Model, *, name: str, target: _targets.Target, layout: str, dtype: str, variant: str,
                  qtrees: list | None, examples: tuple | None = None, soft=None) -> dict:
    """Everything the templates need, as plain data (``soft``: the :class:`SoftVote` of a soft-voting
    ensemble, whose leaves then return probability rows instead of classes)."""
    n_features, n_classes = model.n_features, model.n_classes
    feat_t = int_type(0, max(n_features - 1, 0), f"feature index (model has {n_features} features)")
    n_leaf_values = n_classes if soft is None else soft.n_rows
    if dtype == "q15":
        trees = [_q15_tree_data(k, qt, t) for k, (qt, t) in enumerate(zip(qtrees, model.trees))]
        hi = max(max(qt.n_internal - 1, 0) for qt in qtrees)
    else:
        trees = [_f32_tree_data(k, t, model.scaling, None if soft is None else soft.leaf_ids[k])
                 for k, t in enumerate(model.trees)]
        hi = max(max(t["n_internal"] - 1, 0) for t in trees)
    lo = -n_leaf_values
    leaf_what = f"{n_classes} classes" if soft is None else f"{n_leaf_values} leaf probability rows"
    ref_t = int_type(lo, hi, f"child reference ({hi + 1} internal nodes, {leaf_what})")
    for t in trees:
        t["acc_c"] = "int64_t" if t["acc_bits"] == 64 else "int32_t"
    oblique = [t for t in trees if t["kind"] == "oblique"]
    scale = model.scaling
    # q15, axis trees only: the raw-input entry point tests each Q15 split on the raw float32 bits
    raw_split = dtype == "q15" and not oblique
    raw_trees = ([_f32_tree_data(k, t, scale, None if soft is None else soft.leaf_ids[k], source_thresholds=False)
                  for k, t in enumerate(model.trees)] if raw_split else [])
    if raw_split:
        hi_raw = max(max(t["n_internal"] - 1, 0) for t in raw_trees)
        if hi_raw > hi:
            ref_t = int_type(lo, hi_raw, f"child reference ({hi_raw + 1} internal nodes, {leaf_what})")
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
            "features": [{"index": i, "offset": _c_double(scale.offset[i]), "scale": _c_double(scale.scale[i]),
                          "name": comment_text(model.feature_names[i])} for i in used_features(model)],
        },
        "contract": model.contract,
        "vote": "soft" if soft is not None else "hard",
        "soft": None if soft is None else {
            "rows": [[int(v) for v in row] for row in soft.table], "n_rows": soft.n_rows,
            "exact": bool(soft.exact), "bound": f"{soft.bound:.3g}", "onehot": bool(soft.onehot)},
        "raw_thresholds": model.has_raw_thresholds,
        "raw_split": raw_split, "raw_trees": raw_trees,
        "has_raw_axis": any(t["kind"] == "axis" for t in raw_trees),
        "trees": trees,
        "ref_t": ref_t, "feat_t": feat_t,
        "acc_sizes": sorted({t["acc_bits"] for t in oblique}),
        "has_axis": any(t["kind"] == "axis" for t in trees),
        "has_oblique": bool(oblique),
        "odd_features": n_features % 2 == 1,
        # MVE: the input as whole 8-lane vectors, the last one tail-predicated (fewer lanes)
        "mve_padded": -(-n_features // MVE_LANES) * MVE_LANES,
        "mve_chunks": [{"k": k, "offset": k * MVE_LANES,
                        "load": f"tg_{name}_vld" if n_features - k * MVE_LANES >= MVE_LANES else f"tg_{name}_vldn",
                        "args": "" if n_features - k * MVE_LANES >= MVE_LANES
                        else f", {n_features - k * MVE_LANES}u"}
                       for k in range(-(-n_features // MVE_LANES))],
        "vote_t": "unsigned int",
    }
    if examples is not None:
        ctx["examples"] = _examples(*examples)
    return ctx


def _examples(X_raw: np.ndarray, X_q: np.ndarray, expected: np.ndarray) -> list:
    return [{"raw": [f32_literal(v) for v in X_raw[r]], "q15": [int(v) for v in X_q[r]], "expected": int(expected[r])}
            for r in range(X_raw.shape[0])]


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
    skip = {f".rodata.tg_{name}_class_labels", f".text.tg_{name}_predict", f".text.tg_{name}_predict_proba",
            f".text.tg_{name}_predict_proba_q15", f".text.tg_{name}_sums_raw", f".rodata.tg_{name}_trees_raw"}
    if dtype == "q15":
        skip |= {f".text.tg_{name}_scale_q15", f".rodata.tg_{name}_offset", f".rodata.tg_{name}_scale",
                 f".rodata.tg_{name}_used"}
    return sum(v for k, v in sections.items()
               if k.startswith((".text", ".rodata", ".data", ".sdata"))
               and k not in skip and not k.startswith(".rodata.str")  # .rodata.str*: the label strings
               and not k.startswith((f".rodata.tg_{name}_r", f".text.tg_{name}_raw")))  # q15's raw-input path


# ---------------------------------------------------------------------- the files
def library_src_dir(out_dir, lib_layout: str = "plain") -> Path:
    """Folder of ``<name>.h`` / ``<name>.c`` in an export of layout ``lib_layout``."""
    return Path(out_dir) if lib_layout == "plain" else Path(out_dir) / "src"


def example_path(out_dir, name: str, lib_layout: str = "plain") -> Path:
    """Where ``export_model(..., example=True)`` writes the example program of model ``name``."""
    out = Path(out_dir)
    if lib_layout == "plain":
        return out / "example" / "main.c"
    if lib_layout == "platformio":
        return out / "examples" / name / "main.c"
    return out / "examples" / name / f"{name}.ino"


def library_texts(ctx: dict, out_dir, *, lib_layout: str = "plain", example: bool = False) -> dict:
    """{path: text} of an export (see :data:`LIB_LAYOUTS`), rendered from the templates."""
    _choice(lib_layout, LIB_LAYOUTS, "library layout")
    out, ident = Path(out_dir), ctx["name"]
    src = library_src_dir(out, lib_layout)
    texts = {}
    lib_ctx = {**ctx, "lib_version": LIB_VERSION, "example": bool(example)}
    if lib_layout == "platformio":
        texts[out / "library.json"] = render(TEMPLATES["library.json"], lib_ctx)
    elif lib_layout == "arduino":
        texts[out / "library.properties"] = render(TEMPLATES["library.properties"], lib_ctx)
    texts[src / f"{ident}.h"] = render(TEMPLATES["header"], ctx)
    texts[src / f"{ident}.c"] = render(TEMPLATES["source"], ctx)
    if example:
        texts[example_path(out, ident, lib_layout)] = render(
            TEMPLATES["sketch" if lib_layout == "arduino" else "main"], ctx)
    return texts


# ---------------------------------------------------------------------- the export
def export_model(model: Model, out_dir, *, target, layout: str = "table", dtype: str = "q15",
                 variant: str = "auto", name: str | None = None, data=None, measure: bool = True,
                 vote: str = "auto", force: bool = False, lib_layout: str = "plain",
                 example: bool = False) -> ExportReport:
    """Write the library ``<name>.h`` and ``<name>.c`` into ``out_dir``; return an :class:`ExportReport`.

    ``lib_layout``: ``plain`` (the two files in ``out_dir``), ``platformio`` (``library.json`` +
    ``src/``) or ``arduino`` (``library.properties`` + ``src/``), see :data:`LIB_LAYOUTS`.
    ``example``: also write an example program (``example/main.c``; ``examples/<name>/main.c`` for
    platformio; the sketch ``examples/<name>/<name>.ino`` for arduino) that classifies a few rows and
    compares them with the Python model. The library files never define ``main``, so the folder can
    be dropped into an application as it is.

    Files already in ``out_dir`` are replaced only if treegen generated them (they carry its banner)
    or ``force`` is true; otherwise nothing is written and a :class:`TreegenError` names the file.

    ``target`` is a target name or :class:`~treegen.core.targets.Target`; ``data`` is an optional
    ``(X_raw, labels)`` pair: its rows resolve inexact thresholds during quantisation, give the
    fixed-vs-float agreement and both accuracies, and provide the example rows of ``main.c``.
    ``vote`` (ensembles): ``soft`` (mean leaf probabilities, fixed point; adds
    ``tg_<name>_predict_proba``), ``hard`` (majority of classes) or ``auto`` (the model's own vote).
    """
    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    _choice(layout, LAYOUTS, "layout")
    _choice(dtype, DTYPES, "dtype")
    _choice(vote, VOTES, "vote")
    _choice(lib_layout, LIB_LAYOUTS, "library layout")
    variant = resolve_variant(variant, tgt, dtype)
    ident = c_identifier(name) if name is not None else default_name(model)
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise TreegenError(f"output path {out_dir} is a file, not a directory")
    model.validate()
    vote = model.vote if vote == "auto" else vote
    soft = _quantize.soft_vote(model) if len(model.trees) > 1 and vote == "soft" else None
    if soft is not None and len(model.trees) >= (1 << 31) // _quantize.PROBA_ONE:
        raise TreegenError(f"soft voting sums {len(model.trees)} trees: more than a uint32_t sum holds")

    X_raw = labels = X_q = None
    if data is not None:
        X_raw = np.asarray(data[0], dtype=np.float64)
        labels = None if len(data) < 2 or data[1] is None else np.asarray(data[1], dtype=object)
        X_q = model.scaling.to_q15(X_raw)

    notes = []
    leaf_ids = None if soft is None else soft.leaf_ids
    qtrees = _quantize.quantize_model(model, X_q, leaf_ids) if dtype == "q15" else []
    unresolved = sorted({int(r) for qt in qtrees for r in qt.unresolved_rows})

    ex_raw, ex_q = _example_rows(model, None if data is None else (X_raw,))
    ctx = build_context(model, name=ident, target=tgt, layout=layout, dtype=dtype, variant=variant,
                        qtrees=qtrees if dtype == "q15" else None, soft=soft)
    if dtype == "q15":
        ex_expected = predict_fixed(qtrees, ex_q, model.n_classes, soft)
    else:
        ex_expected = predict_f32(ctx["trees"], ex_raw, model.n_classes, soft)
    ctx["examples"] = _examples(ex_raw, ex_q, ex_expected)

    estimated = _estimate_bytes(ctx["trees"], layout, dtype, model.n_features, model.n_classes,
                                ctx["ref_t"]["bits"] // 8, ctx["feat_t"]["bits"] // 8)
    if soft is not None:
        estimated += soft.table.size * 2
    if estimated > tgt.flash_bytes:
        raise TreegenError(f"model needs about {estimated} bytes of flash, more than target {tgt.name!r} has "
                           f"({tgt.flash_bytes} bytes)")

    out = Path(out_dir)
    texts = library_texts(ctx, out, lib_layout=lib_layout, example=example)
    check_overwrite(texts, force=force)
    out = prepare_out_dir(out)
    for path in texts:
        prepare_out_dir(path.parent)
    for path, text in texts.items():
        write_generated(path, text, force=force)

    src_dir = library_src_dir(out, lib_layout)
    size = (measure_size(src_dir / f"{ident}.c", tgt, src_dir) if measure
            else {"flash_bytes": None, "ram_bytes": None, "sections": {}, "note": "not measured (measure=False)"})

    agreement = None
    if data is not None and X_raw.shape[0] > 0:
        float_pred = model.predict_index(X_raw, vote=vote)
        agreement = {"rows": int(X_raw.shape[0])}
        if dtype == "q15":
            fixed_pred = predict_fixed(qtrees, X_q, model.n_classes, soft)
            agreement["fixed_vs_float"] = float(np.mean(fixed_pred == float_pred))
        else:  # the f32 C sees the rows rounded to float32
            f32_pred = predict_f32(ctx["trees"], X_raw, model.n_classes, soft)
            agreement["f32_vs_float"] = float(np.mean(f32_pred == float_pred))
        if labels is not None and labels.shape[0] == X_raw.shape[0]:
            known = {c: i for i, c in enumerate(model.classes)}
            y = np.array([known.get(v, -1) for v in labels.tolist()], dtype=np.int64)
            agreement["accuracy_float"] = float(np.mean(float_pred == y))
            if dtype == "q15":
                agreement["accuracy_fixed"] = float(np.mean(fixed_pred == y))
            else:
                agreement["accuracy_f32"] = float(np.mean(f32_pred == y))

    if dtype == "f32":
        if ctx["has_axis"] and model.has_raw_thresholds:
            notes.append("f32: axis trees compare the raw float32 inputs with the source model's own thresholds "
                         "(x <= the largest float32 not above t): its branch for every float32 input")
        elif ctx["has_axis"]:
            notes.append("f32: axis trees compare the raw float32 inputs with thresholds converted to raw units "
                         "at export: the same branch as the Q15 model for every float32 input, no scaling on "
                         "the device")
        if ctx["has_oblique"]:
            notes.append("f32: oblique trees fold the input scaling into float32 weights and thresholds (no Q15 "
                         "snapping, no clipping): agreement with the float model is measured, not exact")
        if agreement is not None and "f32_vs_float" in agreement:
            notes.append(f"f32: {100 * agreement['f32_vs_float']:.2f} % agreement with the float model "
                         f"({agreement['rows']} rows)")

    # ---- what is guaranteed, for every input of the model's input contract
    contract = model.contract
    off_grid = (int(sum(np.count_nonzero(~grid_matches_raw(t, model.scaling)) for t in model.trees))
                if model.has_raw_thresholds else None)
    if dtype == "q15":
        tests_exact = all(bool(qt.exact) for qt in qtrees)
        if model.has_raw_thresholds and contract == "float32":
            tests_exact = tests_exact and off_grid == 0
    else:
        tests_exact = all(t["kind"] != "oblique" for t in ctx["trees"])
    vote_exact = soft is None or soft.exact
    exact = bool(tests_exact and vote_exact)
    source = "the source model's float32 tests" if model.has_raw_thresholds else "the model"
    inputs = {"float32": "every float32 input", "integer": "every integer input",
              "q15": "every Q15 input"}[contract]
    if dtype == "q15":
        guarantee = (f"C == Python fixed-point model on every Q15 input (tg_{ident}_predict_q15) and on every "
                     f"float32 input (tg_{ident}_predict: the same Q15 values)")
        if not tests_exact:
            if model.has_raw_thresholds and off_grid:
                notes.append(f"q15: {off_grid} threshold(s) lie between two Q15 grid points: an input in the grid "
                             f"cell of such a threshold can take the other branch than {source}")
            else:
                notes.append("q15: inexact coefficients; thresholds fitted to the data given")
    else:
        if all(t["kind"] != "oblique" for t in ctx["trees"]):
            guarantee = (f"each test takes the branch of {source} for every float32 input "
                         "(compare on IEEE-754 bits; no scaling on the device)")
        else:
            guarantee = ("oblique trees: C == Python float32 evaluation (predict_f32, left to right, no FMA "
                         "contraction) on every float32 input; agreement with the model measured")
    if soft is not None:
        guarantee += ("; soft vote exact (every leaf probability is a multiple of 2^-15)" if soft.exact else
                      f"; soft vote == float argmax unless two class means differ by <= {soft.bound:.3g}")
    if exact:
        notes.insert(0, f"exact: predicts as {source} for {inputs} (input contract {contract})")
    elif agreement is not None:
        key = "fixed_vs_float" if dtype == "q15" else "f32_vs_float"
        notes.append(f"not exact for {inputs}: measured {100 * agreement[key]:.2f} % agreement with {source} "
                     f"on the {agreement['rows']} data rows given")
    if dtype == "q15" and contract == "integer":
        notes.append(f"input contract integer: tg_{ident}_predict rounds a non-integer input to the nearest integer "
                     "(half to even) before the test")
    if dtype == "q15" and variant in ("dsp", "mve") and not ctx["has_oblique"]:
        notes.append(f"variant {variant}: the model has no oblique tree, axis tests need no multiply-accumulate")
    if unresolved:
        notes.append(f"{len(unresolved)} data row(s) cannot keep their float side after quantisation")

    trees_info = [{k: t[k] for k in ("kind", "n_internal", "n_leaves", "depth", "acc_bits", "acc_bound", "exact")}
                  for t in ctx["trees"]]
    if dtype == "f32":
        for t in trees_info:
            t["acc_bits"] = t["acc_bound"] = None
        acc_bits = None
    else:
        acc_bits = max(t["acc_bits"] for t in ctx["trees"])
    return ExportReport(
        name=ident, target=tgt.name, layout=layout, dtype=dtype, variant=variant, model_hash=ctx["model_hash"],
        files=[str(p) for p in texts], n_features=model.n_features, n_classes=model.n_classes, trees=trees_info,
        acc_bits=acc_bits, exact=exact, unresolved_rows=unresolved,
        field_types={"child_ref": ctx["ref_t"]["c"], "feature_index": ctx["feat_t"]["c"]},
        estimated_bytes=estimated, flash_bytes=size["flash_bytes"], ram_bytes=size["ram_bytes"],
        flash_bytes_inference=inference_bytes(size["sections"], ident, dtype),
        sections=size["sections"], size_note=size["note"], agreement=agreement, notes=notes,
        vote=ctx["vote"] if len(model.trees) > 1 else "single tree", input_contract=contract,
        guarantee=guarantee, thresholds_off_grid=off_grid,
        soft_vote_bound=None if soft is None else float(soft.bound),
    )
