"""On-device training: the C EFTI engine (``templates/efti``) generated for a device, as part of the
firmware harness or as a library for the user's own firmware.

The engine's static memory is sized at generation time from the data and the target
(:func:`make_train_spec`): rows (``TG_EFTI_MAX_INST``), attributes, classes and ``max_depth`` are
exactly what the data need (no power-of-two rounding as for the host build), and the EFTI
parameters become const tables (``tg_efti_config.c``: topology, PEN, MISS, EXP, probabilities) for
every class count 2..C, computed by the same Python code as for the host engine
(:func:`treegen.learn.engine.config_tables`). Hence a device evolves, for a seed and data, the tree
``treegen.learn.engine.induce`` and ``treegen.learn.inducers.efti.induce`` evolve, bit for bit.

Files (:func:`render_train_sources` for the harness, :func:`export_train_library` for a library)::

    tg_efti.h / tg_efti.c              the engine (sizes as #defines; dot product: scalar, SMLALD on
                                       ARMv7E-M / ARMv8-M DSP, or Helium VMLALDAVA on ARMv8.1-M MVE)
    tg_efti_config.h / tg_efti_config.c   const tables from EFTIParams; tg_efti_config_init()
    tg_efti_data.h / tg_efti_data.c    optional: training rows compiled into flash
    tg_train.h / tg_train.c            harness only: the TRAIN_* protocol requests (docs/protocol.md)
    example/main.c                     library only, with example=True: (init, step within a budget, read
                                       the best tree back, classify with it)

RAM is checked *before* anything is built (:func:`check_ram`): the engine's static arrays, the
row buffer, the harness (parser, transmit buffer, port) and a stack reserve must fit the target's
``ram_kb``; otherwise ``TreegenError("training needs N KiB RAM, <target> has M KiB")``. With
``partial=None`` (auto) partial reclassification (the memorised projections: same result, faster,
``rows * depth * 10`` bytes) is dropped when only that makes the engine fit.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from treegen.core import targets as _targets
from treegen.core.codegen import check_overwrite, comment_text, prepare_out_dir, render, write_generated
from treegen.core.errors import TreegenError
from treegen.core.version import __version__
from treegen.emit.options import resolve_variant
from treegen.learn import vicinal as vicinal_risk
from treegen.learn import vicinal_q16
from treegen.learn.engine import config_tables, max_coef_mutations, render_engine
from treegen.learn.inducers.efti import MAX_COEF_MUTATIONS, EFTIParams

MAX_CLASSES = 255                  # uint8_t labels / leaf classes
MAX_ROWS = (1 << 32) - 1
HARNESS_TRAIN_FILES = ("tg_efti.h", "tg_efti.c", "tg_efti_config.h", "tg_efti_config.c", "tg_train.h", "tg_train.c")
DATA_FILES = ("tg_efti_data.h", "tg_efti_data.c")
DIGEST_BYTES = 8
#: EFTIParams fields that are run-time inputs, not part of the generated tables
_RUNTIME_FIELDS = ("max_iter", "partial_reclassification")
#: the linker scripts' stack reserve (templates/firmware/cortexm.ld TG_STACK_SIZE)
STACK_RESERVE = 4096
#: RAM of the C runtime besides the harness (newlib-nano impure data, Arduino core); estimates
RUNTIME_RAM = {"cmsdk_uart": 512, "native_pty": 0, "arduino": 2048, "avr_usart": 0}
#: static RAM of the port files (templates/firmware/tg_port_<kind>.c): receive buffers (avr_usart: the
#: 64-byte ring and the counter's state, 82 bytes linked)
PORT_RAM = {"cmsdk_uart": 256 + 8, "native_pty": 4096 + 40, "arduino": 64, "avr_usart": 96}
#: TREE_GET node record: i16 left, i16 right, u8 class, i64 threshold, then n_attr i16 weights
NODE_RECORD_FIXED = 13
TRAIN_DATA_HEADER = 10
TREE_GET_HEADER = 8


# ---------------------------------------------------------------------- the specification
@dataclass(eq=False)
class TrainSpec:
    """What the device-side engine is generated for (see :func:`make_train_spec`)."""

    params: EFTIParams
    max_rows: int                  # TG_EFTI_MAX_INST: rows one run can use
    n_attr: int                    # TG_EFTI_MAX_ATTR
    n_classes: int                 # tables for 2..n_classes classes
    buffer_rows: int               # RAM buffer of TRAIN_DATA (0: none)
    partial: bool                  # partial reclassification compiled in
    dsp: bool                      # SMLALD dot products where the compiler targets ARMv7E-M / ARMv8-M DSP
    flash_x: np.ndarray | None = None   # rows compiled into flash (int16, (n, A)), labels, classes
    flash_y: np.ndarray | None = None
    flash_classes: int = 0
    flash_source: str = ""
    notes: list = field(default_factory=list)
    profile: bool = False          # per-phase instruction totals (TRAIN_PROFILE; bench/train_device_bench.py)
    mve: bool = False              # Helium (MVE) VMLALDAVA dot products (Cortex-M55)
    dot_probe: bool = False        # benchmarks only: every dot product computed twice (its cost, same result)
    retest_probe: bool = False     # benchmarks only: every common-case re-test computed twice (likewise)
    vicinal_sigma: np.ndarray | None = None   # vicinal risk: kernel widths (Q15, uint16, one per attribute)
    vicinity_sigma2: float = 0.0   # ... and the kernel variance they were computed with

    @property
    def vicinal(self) -> bool:
        """The engine rates trees by the vicinal risk (TG_EFTI_VICINAL; widths const in flash)."""
        return self.vicinal_sigma is not None

    @property
    def risk(self) -> str:
        return "vicinal" if self.vicinal else "empirical"

    @property
    def variant(self) -> str:
        """The dot-product variant: ``mve``, ``dsp`` or ``scalar``."""
        return "mve" if self.mve else ("dsp" if self.dsp else "scalar")

    @property
    def flash_rows(self) -> int:
        return 0 if self.flash_x is None else int(self.flash_x.shape[0])

    @property
    def max_depth(self) -> int:
        return int(self.params.max_depth)

    def sizes(self) -> dict:
        """The engine's size configuration (the keys of :func:`treegen.learn.engine.engine_sizes`)."""
        max_nodes = (1 << (self.max_depth + 1)) - 1
        return {"max_inst": self.max_rows, "max_attr": self.n_attr, "max_classes": self.n_classes,
                "max_depth": self.max_depth, "max_nodes": max_nodes, "max_leaves": 1 << self.max_depth,
                "partial": self.partial, "dsp": self.dsp, "mve": self.mve, "profile": self.profile,
                "dot_probe": self.dot_probe, "retest_probe": self.retest_probe,
                "max_coef_mut": max_coef_mutations(self.max_depth, self.n_attr,
                                                   self.params.coefficient_mutation_rate),
                # the vicinal risk only when asked for: the empirical engine's sources stay byte-identical
                **({"vicinal": True, "phi": [int(v) for v in vicinal_q16.phi_table()]} if self.vicinal else {})}

    def summary(self) -> dict:
        return {"max_rows": self.max_rows, "n_attr": self.n_attr, "n_classes": self.n_classes,
                "max_depth": self.max_depth, "buffer_rows": self.buffer_rows, "flash_rows": self.flash_rows,
                "partial": self.partial, "dsp": self.dsp, "mve": self.mve, "variant": self.variant,
                "risk": self.risk, "params_digest": self.digest().hex(),
                **({"vicinity_sigma2": self.vicinity_sigma2} if self.vicinal else {})}

    def digest(self) -> bytes:
        """The engine's parameter digest (TRAIN_INFO): :func:`params_digest` with the risk."""
        return params_digest(self.params, risk=self.risk, vicinity_sigma2=self.vicinity_sigma2)


def params_digest(params: EFTIParams, *, risk: str = "empirical", vicinity_sigma2: float = 0.0) -> bytes:
    """8 bytes identifying the EFTI parameters that shape the generated tables (max_iter and
    partial_reclassification excluded: they do not change the tables or the result); with
    ``risk='vicinal'`` also the risk and the kernel variance (the empirical digest is the one it
    always was)."""
    d = {k: v for k, v in asdict(params).items() if k not in _RUNTIME_FIELDS}
    if not d.get("node_features"):        # off (the only setting devices run): the digest it always had
        d.pop("node_features", None)
    if risk == "vicinal":
        d["risk"] = "vicinal"
        d["vicinity_sigma2"] = float(vicinity_sigma2)
    blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).digest()[:DIGEST_BYTES]


def _target(target) -> _targets.Target:
    return target if isinstance(target, _targets.Target) else _targets.get(str(target))


def _resolve_dsp(dsp, target: _targets.Target) -> str:
    """The training dot-product variant for ``target``: ``auto`` -> ``mve`` on targets with Helium,
    else ``dsp`` with the DSP extension, else ``scalar``; ``dsp`` and ``mve`` need their extension."""
    if isinstance(dsp, bool):
        dsp = "dsp" if dsp else "scalar"
    if dsp not in ("auto", "scalar", "dsp", "mve"):
        raise TreegenError(f"unknown training dot-product variant {dsp!r} (choose from auto, scalar, dsp, mve)")
    return resolve_variant(dsp, target, "q15")


def _flash_data(flash_data):
    X, y, C = flash_data
    Xq = np.asarray(X)
    y = np.asarray(y)
    if Xq.ndim != 2 or y.ndim != 1 or Xq.shape[0] != y.shape[0] or Xq.shape[0] < 2:
        raise TreegenError(f"flash training data: expected (rows, attributes) and (rows,) arrays, got "
                           f"{Xq.shape} and {y.shape}")
    if Xq.size and (not np.issubdtype(Xq.dtype, np.integer) or Xq.min() < 0 or Xq.max() > 32767):
        raise TreegenError("flash training data: rows must be Q15 integers 0..32767")
    C = int(C)
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= C:
        raise TreegenError(f"flash training data: labels must be class indices 0..{C - 1}")
    if np.unique(y).size < 2:
        raise TreegenError("flash training data: EFTI needs at least two classes")
    return Xq.astype(np.int16), y.astype(np.uint8), C


def make_train_spec(target, params: EFTIParams | None = None, *, max_rows: int | None = None,
                    n_attr: int | None = None, n_classes: int | None = None, buffer_rows: int | None = None,
                    flash_data=None, partial: bool | None = None, dsp="auto", flash_source: str = "",
                    depth_auto: bool = False, risk: str = "empirical",
                    vicinity_sigma2: float = vicinal_risk.DEFAULT_SIGMA2) -> TrainSpec:
    """The engine configuration for ``target``.

    ``max_rows`` / ``n_attr`` / ``n_classes``: the largest data set one run takes (rows, attributes,
    classes; fitness tables are generated for every class count 2..n_classes). ``flash_data``:
    ``(X_q15 int array (n, A), y class indices, n_classes)`` compiled into flash (TRAIN source 1);
    the limits grow to hold it; on ``progmem`` targets (AVR) without ``buffer_rows`` they size a RAM
    buffer instead (the harness streams them). ``buffer_rows``: rows of the RAM buffer for TRAIN_DATA (default:
    ``max_rows``, or 0 when flash data are given and ``max_rows`` is not). ``partial``: compile
    partial reclassification in (None: when RAM allows, see :func:`check_ram`). ``dsp``: ``auto``
    (``mve`` on targets with Helium, else ``dsp`` with the DSP extension, else ``scalar``), ``scalar``,
    ``dsp`` or ``mve``. ``depth_auto``: ``params.max_depth`` is the
    largest depth; :func:`check_ram` lowers it until the engine fits the target. ``risk='vicinal'``:
    the engine rates trees by the vicinal risk (:mod:`treegen.learn.vicinal_q16`) with kernel widths
    computed here from the flash data (``vicinity_sigma2`` per attribute variance) and compiled into
    flash beside them, with the Phi table: it needs ``flash_data`` (at most 65535 rows).
    """
    tgt = _target(target)
    params = (params or EFTIParams()).validate()
    if params.node_features:
        raise TreegenError("the device EFTI engine has no attribute sampling per node (node_features / "
                           "max_features): train on the host (engine python or native)")
    fx = fy = None
    fc = 0
    if flash_data is not None:
        fx, fy, fc = _flash_data(flash_data)
    if fx is not None and tgt.progmem and buffer_rows is None:
        # AVR: a const array is copied to RAM at start-up and the engine reads rows through plain
        # pointers, so "rows in flash" would be rows in RAM twice over: the harness takes them into its
        # RAM buffer (TRAIN_DATA) instead; the engine's exp table is in program memory (TG_EFTI_EXP_TABLE).
        # (An exported library, buffer_rows given, keeps its data as the caller asked.)
        if risk == "vicinal":
            raise TreegenError(f"vicinal-risk training on the device needs the rows in flash, which {tgt.name} "
                               "(AVR) does not hold them in: use the empirical risk there")
        max_rows = max(int(max_rows or 0), fx.shape[0])
        n_attr, n_classes = max(int(n_attr or 0), fx.shape[1]), max(int(n_classes or 0), fc)
        buffer_rows = max_rows if buffer_rows is None else buffer_rows
        fx = fy = None
        fc = 0
        flash_source = ""
    explicit_rows = max_rows is not None
    rows = max(int(max_rows or 0), 0 if fx is None else fx.shape[0])
    attr = max(int(n_attr or 0), 0 if fx is None else fx.shape[1])
    classes = max(int(n_classes or 0), fc)
    if rows < 2:
        raise TreegenError(f"on-device training needs max_rows >= 2, got {rows}")
    if rows > MAX_ROWS:
        raise TreegenError(f"max_rows {rows} exceeds {MAX_ROWS}")
    if attr < 1:
        raise TreegenError("on-device training needs at least one attribute")
    if attr > 0x7FFF:
        raise TreegenError(f"{attr} attributes exceed the engine's limit of 32767")
    if not 2 <= classes <= MAX_CLASSES:
        raise TreegenError(f"on-device training supports 2..{MAX_CLASSES} classes, got {classes}")
    if buffer_rows is None:
        buffer_rows = rows if (fx is None or explicit_rows) else 0
    buffer_rows = int(buffer_rows)
    if not 0 <= buffer_rows <= rows:
        raise TreegenError(f"buffer_rows must be 0..{rows} (the engine's max_rows), got {buffer_rows}")
    if fx is None and buffer_rows == 0:
        raise TreegenError("on-device training needs a RAM buffer (buffer_rows > 0) or data compiled into flash")
    variant = _resolve_dsp(dsp, tgt)
    sigma = _vicinal_widths(risk, vicinity_sigma2, fx, rows)
    spec = TrainSpec(params, rows, attr, classes, buffer_rows, True if partial is None else bool(partial),
                     variant == "dsp", fx, fy, fc, flash_source, mve=variant == "mve", vicinal_sigma=sigma,
                     vicinity_sigma2=float(vicinity_sigma2) if sigma is not None else 0.0)
    spec.notes.append("partial=auto" if partial is None else f"partial={bool(partial)}")
    if depth_auto:
        spec.notes.append("depth=auto")
    return spec


def _vicinal_widths(risk: str, sigma2, fx, rows: int) -> np.ndarray | None:
    """The vicinal risk's kernel widths (Q15, uint16) of the flash rows ``fx``, or None (empirical risk)."""
    if vicinal_risk.check_risk(risk) != "vicinal":
        return None
    if fx is None:
        raise TreegenError("vicinal-risk training on the device needs the rows in flash (the kernel widths are "
                           "computed from them when the firmware is generated): give the training data at build time")
    if rows > 65535:
        raise TreegenError(f"vicinal-risk training on the device supports at most 65535 rows (the integer fitness "
                           f"stays within 64 bits), got {rows}")
    if isinstance(sigma2, str) or not (float(sigma2) > 0.0 and math.isfinite(float(sigma2))):
        raise TreegenError(f"vicinal-risk training on the device needs a kernel variance > 0 (a number), "
                           f"got {sigma2!r}")
    X01 = fx.astype(np.int64) / float(1 << 15)
    return vicinal_q16.sigma_q15(X01, float(sigma2)).astype(np.uint16)


# ---------------------------------------------------------------------- memory
def engine_static_bytes(sizes: dict, ptr_bytes: int = 4) -> int:
    """Static RAM of tg_efti.c for ``sizes`` (what its tg_efti_static_bytes() returns; ``ptr_bytes``
    is the target's pointer size)."""
    N, A, C, I = sizes["max_nodes"], sizes["max_attr"], sizes["max_classes"], sizes["max_inst"]
    D, Lv = sizes["max_depth"], sizes["max_leaves"]
    slot = 1 if N <= 255 else 2                                    # slot_t: a node slot stored per row
    M = sizes.get("max_coef_mut", MAX_COEF_MUTATIONS)              # undo buffer (coefficient mutations)
    row = 2 if I <= 65535 else 4                                   # row_t and count_t
    n = 8 + 2 * ptr_bytes + 4 + 4                                  # rng_state, cfg, dat, ready, best_valid
    n += N * A * 2 + N * 8 + 3 * N * 2 + 2 + N * 2 + 2             # current pool
    n += N * A * 2 + N * 8 + 2 * N * 2 + 2 + N + 8 + 4             # best (no parents, no free list)
    n += (Lv + 1) * 2 + N * 2 + 2 + 2 + N + 1                      # structure
    n += I * slot + N * C * row + 8 + 4 + N + N + 4                # leaf_of, counts, fitness, marked, aff
    n += N * 2 + (Lv + 1) * 2 + 2 + N * row + I * row              # pstart, affected leaves, row lists
    if sizes["partial"]:                                           # change list, plan, memorised sums
        n += I * row + I * slot + 4 + 2 * (M + 2) * 10 + M * 8 + N + N + I * D * 8
    else:                                                          # lean: one new-leaf slot per row
        n += I * slot
    n += M * 24 + 2 + 4 + 6 * 2                                    # undo record
    n += 4 + 4 + 4 + 8 + 8                                         # evolution state
    if sizes.get("profile"):
        n += 5 * 8 + 4
    if sizes.get("vicinal"):                                       # widths pointer, spreads, leaf classes, purity
        n += ptr_bytes + N * 8 + N + N * 2                         # (the Phi table is const: flash)
    return n


def _config_struct_bytes(ptr_bytes: int) -> int:
    # u64 seed, 4 x u8 (+ 4 bytes padding), 4 x u64, 4 pointers; aligned to 8
    raw = 8 + 4 + 4 + 32 + 4 * ptr_bytes
    return -(-raw // 8) * 8


def _data_struct_bytes(ptr_bytes: int) -> int:
    raw = 2 * ptr_bytes + 4 + 2 + 2
    return -(-raw // ptr_bytes) * ptr_bytes


def train_static_bytes(spec: TrainSpec, ptr_bytes: int = 4) -> int:
    """Static RAM of the engine + tg_train.c (what TRAIN_INFO reports as ram_bytes)."""
    n = engine_static_bytes(spec.sizes(), ptr_bytes)
    n += spec.buffer_rows * spec.n_attr * 2 + spec.buffer_rows
    n += 4 + 2 + 2 + _config_struct_bytes(ptr_bytes) + _data_struct_bytes(ptr_bytes) + 4 + spec.n_attr * 2 + 8
    if spec.profile:
        n += 8                                                     # the profiling clock
    return n


def estimate_ram(spec: TrainSpec, target, *, max_payload: int, n_features: int = 0) -> dict:
    """RAM the training firmware needs on ``target`` (bytes): engine + buffers (exact), harness
    statics (parser and transmit buffer of ``max_payload``, port buffers), C runtime allowance and
    the stack reserve (at least the linker script's, and what the engine's deepest call needs)."""
    tgt = _target(target)
    ptr = pointer_bytes(tgt)
    kind = tgt.extra.get("uart") or ""
    engine = engine_static_bytes(spec.sizes(), ptr)
    train = train_static_bytes(spec, ptr) - engine
    harness = (max_payload + 16) + (max_payload + 8) + 2 * n_features + 64 + PORT_RAM.get(kind, 256)
    runtime = RUNTIME_RAM.get(kind, 1024)
    stack = max(tgt.stack_bytes if tgt.kind != "host" else STACK_RESERVE, stack_need(spec, ptr))
    total = engine + train + harness + runtime + stack
    return {"engine": engine, "train_buffers": train, "harness": harness, "runtime": runtime, "stack": stack,
            "total": total, "ram_bytes": tgt.ram_bytes, "partial": spec.partial}


def pointer_bytes(target) -> int:
    """A data pointer's size on ``target``: 8 on the host, 2 on AVR, else 4."""
    tgt = _target(target)
    return 8 if tgt.kind == "host" else 2 if tgt.core.startswith("avr") else 4


def stack_need(spec: TrainSpec, ptr_bytes: int = 4) -> int:
    """Stack the training firmware's deepest call needs (an allowance: harness frames + the engine's
    per-node and per-level locals). With 2-byte pointers (AVR) half of it: frames hold 16-bit
    addresses and saved registers, and the harness's frames are smaller (on simavr-uno depth 2 ran
    with 363 bytes left for the stack, tree and fitness identical to the host)."""
    vicinal = 8 * (spec.max_depth + 2) + 64 if spec.vicinal else 0     # vic_hits' mass stack
    need = 1024 + 2 * spec.sizes()["max_nodes"] + 64 * (spec.max_depth + 2) + vicinal
    return need // 2 if ptr_bytes == 2 else need


def _kib(n: int) -> int:
    return math.ceil(n / 1024)


def _with_depth(spec: TrainSpec, depth: int) -> TrainSpec:
    if depth == spec.max_depth:
        return spec
    return replace(spec, params=replace(spec.params, max_depth=depth))


def _with_rows(spec: TrainSpec, rows: int) -> TrainSpec:
    """The spec for the first ``rows`` rows (RAM buffer and flash data shrunk alike)."""
    fx = None if spec.flash_x is None else spec.flash_x[:rows]
    fy = None if spec.flash_y is None else spec.flash_y[:rows]
    return replace(spec, max_rows=rows, buffer_rows=min(spec.buffer_rows, rows), flash_x=fx, flash_y=fy)


def flash_need(spec: TrainSpec) -> dict:
    """Flash for the code, the const tables and the flash data (an estimate; the linker has the last word)."""
    L = spec.sizes()["max_leaves"] + 1
    tables = 4 * 1024 + sum(L * 12 + (c + 1) * 4 for c in range(2, spec.n_classes + 1))
    data = spec.flash_rows * (2 * spec.n_attr + 1)
    code = 12 * 1024
    if spec.vicinal:                       # Phi table (1024 x u32), the widths, the recursion's code
        tables += 4 * vicinal_q16.PHI_SIZE
        data += 2 * spec.n_attr
        code += 2 * 1024
    return {"tables": tables, "data": data, "code": code, "total": tables + data + code}


def mode_name(spec: TrainSpec) -> str:
    """How the engine trains: ``partial`` (memorised projections) or ``lean``, and where the rows live."""
    rows = "rows in flash" if spec.flash_rows and not spec.buffer_rows else \
        ("rows in flash + RAM buffer" if spec.flash_rows else "rows in RAM")
    return f"{'partial' if spec.partial else 'lean'}, depth {spec.max_depth}, {rows}"


def check_ram(spec: TrainSpec, target, *, max_payload: int, n_features: int = 0,
              partial_auto: bool | None = None) -> tuple[TrainSpec, dict]:
    """Fit the training firmware to the target's RAM and flash: returns the spec and its RAM estimate.

    Modes, in order of preference, at the requested depth: partial reclassification (memorised
    projections), then, with ``partial=auto``, the lean engine (one leaf slot per row); with
    ``depth=auto`` (make_train_spec(depth_auto=True)) the depth (hence the node pool, 2^(d+1) - 1 nodes)
    is then lowered one level at a time, partial before lean at every depth. When nothing fits, one
    line names rows x attributes, the need of the leanest mode against the target's RAM/flash and the
    largest row count that would fit."""
    tgt = _target(target)
    auto = partial_auto if partial_auto is not None else ("partial=auto" in spec.notes)
    depth_auto = "depth=auto" in spec.notes
    depths = list(range(spec.max_depth, 0, -1)) if depth_auto else [spec.max_depth]
    partials = [True, False] if (auto and spec.partial) else [spec.partial]

    def fits(s: TrainSpec) -> tuple[bool, dict, dict]:
        est = estimate_ram(s, tgt, max_payload=max_payload, n_features=n_features)
        fl = flash_need(s)
        return est["total"] <= tgt.ram_bytes and fl["total"] <= tgt.flash_bytes, est, fl

    for depth in depths:
        for partial in partials:
            cand = _with_depth(replace(spec, partial=partial), depth)
            ok, est, _ = fits(cand)
            if ok:
                notes = list(spec.notes)
                if depth != spec.max_depth:
                    notes.append(f"max_depth {spec.max_depth} -> {depth} (RAM)")
                if spec.partial and not partial:
                    notes.append("partial reclassification off (RAM)")
                return replace(cand, notes=notes), est
    leanest = _with_depth(replace(spec, partial=partials[-1]), depths[-1])
    _, est, fl = fits(leanest)
    lo, hi = 1, spec.max_rows          # the largest row count that fits in the leanest mode
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(_with_rows(leanest, mid))[0]:
            lo = mid
        else:
            hi = mid - 1
    most = lo if lo >= 2 and fits(_with_rows(leanest, lo))[0] else 0
    where = "flash" if spec.flash_rows else "RAM"
    tail = f"at most {most} rows would fit"
    if not depth_auto:                 # a fixed depth: the deepest tree that would take every row
        for depth in range(spec.max_depth - 1, 0, -1):
            if fits(_with_depth(replace(spec, partial=partials[-1]), depth))[0]:
                tail += f"; all {spec.max_rows} fit with --max-depth {depth}"
                break
    if spec.vicinal:
        try:
            emp, _ = check_ram(replace(spec, vicinal_sigma=None, vicinity_sigma2=0.0), tgt, max_payload=max_payload,
                               n_features=n_features, partial_auto=partial_auto)
            tail += f" (with the empirical risk all {spec.max_rows} fit: {mode_name(emp)})"
        except TreegenError:
            pass
    raise TreegenError(f"training needs {_kib(est['total'])} KiB RAM, {tgt.name} has {tgt.ram_kb} KiB "
                       f"(and {_kib(fl['total'])} KiB flash of {tgt.flash_kb} KiB): {spec.max_rows} rows x "
                       f"{spec.n_attr} attributes, {spec.n_classes} classes, rows in {where}"
                       f"{', vicinal risk' if spec.vicinal else ''}, leanest mode ({mode_name(leanest)}: engine "
                       f"{_kib(est['engine'])} KiB, training buffers {_kib(est['train_buffers'])} KiB); {tail}")


def check_flash(spec: TrainSpec, target) -> int:
    """Flash for the const tables and flash data (an estimate; the linker has the last word)."""
    tgt = _target(target)
    fl = flash_need(spec)
    if fl["total"] > tgt.flash_bytes:
        raise TreegenError(f"training needs {_kib(fl['total'])} KiB flash (tables {_kib(fl['tables'])} KiB, data "
                           f"{_kib(fl['data'])} KiB), {tgt.name} has {tgt.flash_kb} KiB")
    return fl["total"]


def train_payload_need(spec: TrainSpec) -> int:
    """Smallest max_payload serving the training requests: one TRAIN_DATA row, one TREE_GET node."""
    return max(TRAIN_DATA_HEADER + 2 * spec.n_attr + 1, TREE_GET_HEADER + NODE_RECORD_FIXED + 2 * spec.n_attr, 64)


# ---------------------------------------------------------------------- rendering
def _config_context(spec: TrainSpec) -> dict:
    sizes = spec.sizes()
    params = spec.params
    tables = []
    first = None
    for c in range(2, spec.n_classes + 1):
        t = config_tables(params, c, sizes)
        first = first or t
        tables.append({"n_classes": c, "topo": t["topo"], "pen": t["pen"], "miss": t["miss"]})
    digest = spec.digest()
    lines = [comment_text(f"{k} = {v!r}") for k, v in asdict(params).items() if k not in _RUNTIME_FIELDS]
    if spec.vicinal:
        lines.append(comment_text(f"risk = 'vicinal', vicinity_sigma2 = {spec.vicinity_sigma2!r}"))
    return {
        "version": __version__, "params_lines": lines, "digest": list(digest), "digest_hex": digest.hex(),
        "max_classes": spec.n_classes, "max_depth": spec.max_depth, "max_leaves": sizes["max_leaves"],
        "cfg_partial": spec.partial and params.partial_reclassification,
        "tables": tables, "exp": first["exp"], "dipole_node": params.dipole == "node",
        "use_missing": bool(params.missing_weight), "thr_share": first["thr_share"], "rtb": first["rtb"],
        "alpha": first["alpha"], "raise_q32": first["raise_q32"],
    }


def render_engine_files(out_dir, spec: TrainSpec, *, force: bool = False) -> list[Path]:
    """tg_efti.h/.c, tg_efti_config.h/.c and (with flash data) tg_efti_data.h/.c."""
    out = prepare_out_dir(out_dir)
    files = [write_generated(out / name, text, force=force) for name, text in render_engine(spec.sizes()).items()]
    ctx = _config_context(spec)
    for name in ("tg_efti_config.h", "tg_efti_config.c"):
        files.append(write_generated(out / name, render(f"efti/{name}.j2", ctx), force=force))
    if spec.flash_x is not None:
        dctx = {"version": __version__, "n_rows": spec.flash_rows, "n_attr": int(spec.flash_x.shape[1]),
                "n_classes": spec.flash_classes, "source": comment_text(spec.flash_source or "arrays"),
                "rows": spec.flash_x.astype(np.int64).tolist(), "labels": spec.flash_y.astype(np.int64).tolist(),
                "sigma": None if spec.vicinal_sigma is None else spec.vicinal_sigma.astype(np.int64).tolist(),
                "sigma2": spec.vicinity_sigma2}
        for name in DATA_FILES:
            files.append(write_generated(out / name, render(f"efti/{name}.j2", dctx), force=force))
    return files


def render_train_sources(out_dir, spec: TrainSpec) -> list[Path]:
    """Everything the harness needs for on-device training: the engine files and tg_train.h/.c."""
    out = prepare_out_dir(out_dir)
    files = render_engine_files(out, spec)
    ctx = {"version": __version__, "buffer_rows": spec.buffer_rows, "flash_rows": spec.flash_rows,
           "dsp": spec.dsp, "mve": spec.mve, "vicinal": spec.vicinal}
    for name in ("tg_train.h", "tg_train.c"):
        files.append(write_generated(out / name, render(f"firmware/{name}", ctx)))
    return files


# ---------------------------------------------------------------------- library export
@dataclass
class TrainExportReport:
    target: str
    files: list
    spec: dict
    ram: dict
    flash_estimate: int
    params: dict
    example_budget: int
    notes: list

    def to_dict(self) -> dict:
        return asdict(self)


def export_train_library(out_dir, target, params: EFTIParams | None = None, *, max_rows: int, n_attr: int,
                         n_classes: int, data=None, partial: bool | None = None, dsp="auto",
                         budget: int = 1000, data_source: str = "", force: bool = False,
                         example: bool = False, risk: str = "empirical",
                         vicinity_sigma2: float = vicinal_risk.DEFAULT_SIGMA2) -> TrainExportReport:
    """Write the engine as a library for the user's own firmware: ``tg_efti.h/.c``,
    ``tg_efti_config.h/.c`` (const tables), with ``data`` (``(X_q15, y, n_classes)``) also
    ``tg_efti_data.h/.c`` (rows in flash); with ``example`` also ``example/main.c`` (init, steps of
    ``budget`` iterations, the best tree read back node by node, classification with it), kept out
    of the library folder so that it can be dropped into an application as it is. RAM is checked
    first (the engine, no harness: a 1 KiB allowance for the caller's own statics). ``risk='vicinal'``
    (needs ``data``): the engine with TG_EFTI_VICINAL and the rows' kernel widths in tg_efti_data.c
    (``tg_efti_vicinal(tg_efti_data_sigma_q15)`` before ``tg_efti_init``, as the example does)."""
    tgt = _target(target)
    spec = make_train_spec(tgt, params, max_rows=max_rows, n_attr=n_attr, n_classes=n_classes,
                           buffer_rows=0 if data is not None else max_rows, flash_data=data, partial=partial,
                           dsp=dsp, flash_source=data_source, risk=risk, vicinity_sigma2=vicinity_sigma2)
    auto = partial is None
    spec, est = _check_library_ram(spec, tgt, auto)
    flash = check_flash(spec, tgt)
    names = ["tg_efti.h", "tg_efti.c", "tg_efti_config.h", "tg_efti_config.c",
             *(["example/main.c"] if example else []), *(DATA_FILES if spec.flash_x is not None else ())]
    check_overwrite([Path(out_dir) / n for n in names], force=force)   # refuse before writing anything
    out = prepare_out_dir(out_dir)
    files = render_engine_files(out, spec, force=force)
    ctx = {"version": __version__, "has_data": spec.flash_x is not None, "buffer_rows": spec.buffer_rows,
           "budget": int(budget), "max_iter": int(spec.params.max_iter), "target_name": tgt.name,
           "n_classes": spec.n_classes, "n_attr": spec.n_attr, "vicinal": spec.vicinal}
    if example:
        prepare_out_dir(out / "example")
        files.append(write_generated(out / "example" / "main.c", render("efti/tg_efti_main.c.j2", ctx), force=force))
    return TrainExportReport(tgt.name, [p.relative_to(out).as_posix() for p in files], spec.summary(), est, flash,
                             asdict(spec.params), int(budget), list(spec.notes))


def _check_library_ram(spec: TrainSpec, tgt: _targets.Target, auto: bool) -> tuple[TrainSpec, dict]:
    ptr = 8 if tgt.kind == "host" else 4

    def estimate(s: TrainSpec) -> dict:
        engine = engine_static_bytes(s.sizes(), ptr)
        buffers = s.buffer_rows * (2 * s.n_attr + 1) + _config_struct_bytes(ptr) + _data_struct_bytes(ptr)
        stack = max(STACK_RESERVE, 1024 + 2 * s.sizes()["max_nodes"])
        total = engine + buffers + 1024 + stack
        return {"engine": engine, "train_buffers": buffers, "harness": 0, "runtime": 1024, "stack": stack,
                "total": total, "ram_bytes": tgt.ram_bytes, "partial": s.partial}

    est = estimate(spec)
    if est["total"] <= tgt.ram_bytes:
        return spec, est
    if auto and spec.partial:
        lean = replace(spec, partial=False, notes=[*spec.notes, "partial reclassification off (RAM)"])
        est2 = estimate(lean)
        if est2["total"] <= tgt.ram_bytes:
            return lean, est2
        est = est2
    raise TreegenError(f"training needs {_kib(est['total'])} KiB RAM, {tgt.name} has {tgt.ram_kb} KiB "
                       f"({spec.max_rows} rows x {spec.n_attr} attributes, {spec.n_classes} classes, depth "
                       f"{spec.max_depth})")


# ---------------------------------------------------------------------- from models and CSV files
def params_from_model(model, *, max_depth: int | None = None) -> EFTIParams:
    """The EFTI parameters a model was trained with (``metadata["efti_params"]``), else the defaults;
    ``max_depth`` overrides."""
    from dataclasses import fields

    meta = (getattr(model, "metadata", None) or {}).get("efti_params") or {}
    names = {f.name for f in fields(EFTIParams)}
    params = EFTIParams(**{k: v for k, v in meta.items() if k in names})
    if max_depth is not None:
        params = replace(params, max_depth=int(max_depth))
    return params.validate()


def training_rows(X_raw, labels, *, model=None):
    """(Q15 rows, class indices, n_classes, scaling) for training data: scaled with the model's input
    scaling and encoded with its classes when ``model`` is given, else with a fresh ``auto`` scaling."""
    from treegen.core.data import class_list, encode
    from treegen.core.scaling import InputScaling

    if labels is None or len(labels) == 0:
        raise TreegenError("on-device training needs labelled data (a label column)")
    if model is not None:
        scaling = model.scaling
        y = encode(np.asarray(labels, dtype=object), list(model.classes))
        C = model.n_classes
    else:
        scaling = InputScaling.fit(np.asarray(X_raw, dtype=np.float64), "auto")
        classes = class_list(np.asarray(labels, dtype=object))
        y = encode(np.asarray(labels, dtype=object), classes)
        C = len(classes)
    Xq = np.asarray(scaling.to_q15(np.asarray(X_raw, dtype=np.float64)), dtype=np.int64)
    if np.unique(y).size < 2:
        raise TreegenError("on-device training needs at least two classes in the data")
    return Xq, y, C, scaling
