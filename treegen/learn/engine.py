"""The C EFTI engine (``templates/efti``) compiled for the host and called through ctypes.

This is treegen's fast path for host induction (``treegen fit --engine native``) and the same
source that runs on a microcontroller. It implements :mod:`treegen.learn.inducers.efti` bit for bit, so
for the same data, parameters and seed it returns the identical tree (tested).

The shared library is generated for a size configuration (instances, attributes, classes, depth,
each rounded up so that a few builds serve many datasets), compiled once with the host C compiler
and cached under ``$TREEGEN_CACHE`` (default ``~/.cache/treegen``).
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.native import STRICT_CFLAGS as STRICT_FLAGS  # noqa: F401 - this module's name for them
from treegen.core.native import NativeKernel
from treegen.core.rng import prob_u32
from treegen.core.tree import LEAF, Tree
from treegen.learn import vicinal as vicinal_risk
from treegen.learn import vicinal_q16
from treegen.learn.inducers.efti import (EXP_STEPS, MAX_COEF_MUTATIONS, W_ONE, EFTIParams, FitnessTables,
                                         check_inputs, fit_info, topology_thresholds)

T_ONE = 1 << 30
FIRST_CHUNK = 1024          # iterations per engine call at first; adapted to about CHUNK_SECONDS per call
MAX_CHUNK = 1 << 24
CHUNK_SECONDS = 0.05


def _round_up_pow2(n: int, minimum: int) -> int:
    v = minimum
    while v < n:
        v *= 2
    return v


def max_coef_mutations(max_depth: int, n_attr: int, coefficient_mutation_rate: float | None) -> int:
    """The most coefficient mutations one iteration makes (the engine's undo buffer): ``1 + alpha *
    total / 2**32`` for the largest tree (``total`` = internal nodes x (attributes + 1)), at most
    ``MAX_COEF_MUTATIONS``; the cap itself when the rate is not known (None)."""
    if coefficient_mutation_rate is None:
        return MAX_COEF_MUTATIONS
    total = ((1 << max_depth) - 1) * (n_attr + 1)
    return min(MAX_COEF_MUTATIONS, total, 1 + ((prob_u32(coefficient_mutation_rate) * total) >> 32))


def engine_sizes(n: int, n_attr: int, n_classes: int, max_depth: int, partial: bool = True,
                 dsp: bool = True, coefficient_mutation_rate: float | None = None, vicinal: bool = False,
                 node_sampling: bool = False) -> dict:
    max_nodes = (1 << (max_depth + 1)) - 1
    if max_nodes > 32767:
        raise TreegenError(f"EFTI engine: max_depth {max_depth} needs {max_nodes} nodes (int16 node index)")
    return {
        "max_inst": _round_up_pow2(n, 1024),
        "max_attr": (n_attr + 7) // 8 * 8,
        "max_classes": _round_up_pow2(n_classes, 4),
        "max_depth": max_depth,
        "max_nodes": max_nodes,
        "max_leaves": 1 << max_depth,
        "partial": bool(partial),
        "dsp": bool(dsp),   # use SMLALD where the compiler targets ARMv7E-M (no effect elsewhere)
        # host builds: sorted per-node row lists for single-coefficient mutations (TG_EFTI_WINDOW; RAM
        # ~(depth + 1) * 8 bytes per row, so device builds, which size their own engine, leave it off)
        "window": bool(partial) and _round_up_pow2(n, 1024) <= 65536,
        "max_coef_mut": max_coef_mutations(max_depth, (n_attr + 7) // 8 * 8, coefficient_mutation_rate),
        # the vicinal risk (TG_EFTI_VICINAL, treegen.learn.vicinal_q16) is built only when asked for:
        # the empirical engine's source stays what it was
        **({"vicinal": True, "phi": [int(v) for v in vicinal_q16.phi_table()]} if vicinal else {}),
        # attribute sampling per node (TG_EFTI_NODE_SAMPLING, EFTIParams.node_features), likewise only when
        # asked for
        **({"node_sampling": True} if node_sampling else {}),
    }


# -O3: the vectorised full-reclassification loop is ~1.5x faster than -O2 on small trees (pid, bench/
# train_bench.py). Integer-only code without undefined behaviour: the results do not depend on the flags.
KERNEL = NativeKernel("EFTI engine", ("efti/tg_efti.h.j2", "efti/tg_efti.c.j2"), "libtg_efti.so",
                      cache_name="engine", opt_flags=("-O3",))


def _note(sizes: dict) -> str:
    return (f"Sizes: {sizes['max_inst']} instances, {sizes['max_attr']} attributes, "
            f"{sizes['max_classes']} classes, depth {sizes['max_depth']}.")


def render_engine(sizes: dict) -> dict[str, str]:
    """The engine's C sources for a size configuration: ``{"tg_efti.h": ..., "tg_efti.c": ...}``."""
    return KERNEL.render(sizes, note=_note(sizes))


def build_library(sizes: dict, cc: str | None = None) -> Path:
    """Compile the engine as a shared library (cached by source hash)."""
    return KERNEL.build(render_engine(sizes), cc)


def _structs(sizes: dict):
    class Data(ctypes.Structure):
        _fields_ = [("x", ctypes.POINTER(ctypes.c_int16)), ("y", ctypes.POINTER(ctypes.c_uint8)),
                    ("n", ctypes.c_uint32), ("n_attr", ctypes.c_uint16), ("n_classes", ctypes.c_uint16)]

    class Config(ctypes.Structure):
        _fields_ = [("seed", ctypes.c_uint64), ("max_depth", ctypes.c_uint8), ("dipole_node", ctypes.c_uint8),
                    ("partial", ctypes.c_uint8), ("use_missing", ctypes.c_uint8),
                    ("thr_share", ctypes.c_uint64), ("rtb", ctypes.c_uint64), ("alpha", ctypes.c_uint64),
                    ("raise_q32", ctypes.c_uint64),
                    ("topo", ctypes.POINTER(ctypes.c_uint64)), ("pen", ctypes.POINTER(ctypes.c_uint32)),
                    ("miss", ctypes.POINTER(ctypes.c_uint32)), ("exp_tab", ctypes.POINTER(ctypes.c_uint32))]
        if sizes.get("node_sampling"):
            _fields_ = _fields_ + [("node_features", ctypes.c_uint16)]

    nn, na = sizes["max_nodes"], sizes["max_attr"]

    class TreeOut(ctypes.Structure):
        _fields_ = [("n_nodes", ctypes.c_uint16), ("left", ctypes.c_int16 * nn), ("right", ctypes.c_int16 * nn),
                    ("cls", ctypes.c_uint8 * nn), ("t", ctypes.c_int64 * nn),
                    ("w", (ctypes.c_int16 * na) * nn), ("fitness", ctypes.c_uint64),
                    ("hits", ctypes.c_uint32), ("iterations", ctypes.c_uint32)]

    return Data, Config, TreeOut


def config_tables(params: EFTIParams, n_classes: int, sizes: dict) -> dict:
    """The integer tables the engine needs (identical to the Python EFTI's)."""
    tables = FitnessTables(params, n_classes)
    max_leaves = sizes["max_leaves"]
    return {
        "topo": topology_thresholds(params, n_classes, max_leaves),
        "pen": [tables.pen(k) for k in range(max_leaves + 1)],
        "miss": tables.miss,
        "exp": tables.exp,
        "raise_q32": tables.raise_q32,
        "thr_share": prob_u32(params.threshold_mutation_share),
        "rtb": prob_u32(params.return_to_best_probability),
        "alpha": prob_u32(params.coefficient_mutation_rate),
    }


def induce(X: np.ndarray, y: np.ndarray, n_classes: int, params: EFTIParams | None = None, *, seed: int = 0,
           callback=None, risk: str = "empirical",
           vicinity_sigma2: float = vicinal_risk.DEFAULT_SIGMA2) -> tuple[Tree, dict]:
    """Same contract (and, for the same seed, the same tree) as :func:`treegen.learn.inducers.efti.induce`,
    ``risk='vicinal'`` included (at most 65535 rows then: the integer fitness stays within 64 bits)."""
    params = (params or EFTIParams()).validate()
    vicinal = vicinal_risk.check_risk(risk) == "vicinal"
    X, Xq, y = check_inputs(X, y)
    if n_classes > 255:
        raise TreegenError(f"the native EFTI engine supports at most 255 classes, got {n_classes}")
    n, A = Xq.shape
    if vicinal and n > 65535:
        raise TreegenError(f"the native EFTI engine's vicinal risk supports at most 65535 rows, got {n} "
                           f"(use engine='python')")
    sampling = 0 < params.node_features < A      # otherwise no draws: the build without sampling
    sizes = engine_sizes(n, A, n_classes, params.max_depth, params.partial_reclassification,
                         coefficient_mutation_rate=params.coefficient_mutation_rate, vicinal=vicinal,
                         node_sampling=sampling)
    lib = KERNEL.load_for(sizes, note=_note(sizes))
    Data, Config, TreeOut = _structs(sizes)
    sigma_q15 = None
    if vicinal:
        sigma_q15 = np.ascontiguousarray(vicinal_q16.sigma_q15(X, vicinity_sigma2), dtype=np.uint16)
        lib.tg_efti_vicinal.argtypes = [ctypes.POINTER(ctypes.c_uint16)]
        lib.tg_efti_vicinal.restype = None
        lib.tg_efti_vicinal(sigma_q15.ctypes.data_as(ctypes.POINTER(ctypes.c_uint16)))
    lib.tg_efti_init.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Data)]
    lib.tg_efti_step.argtypes = [ctypes.c_uint32]
    lib.tg_efti_best.argtypes = [ctypes.POINTER(TreeOut)]

    x_arr = np.ascontiguousarray(Xq, dtype=np.int16)
    y_arr = np.ascontiguousarray(y, dtype=np.uint8)
    tabs = config_tables(params, n_classes, sizes)
    keep = {
        "topo": np.array(tabs["topo"], dtype=np.uint64), "pen": np.array(tabs["pen"], dtype=np.uint32),
        "miss": np.array(tabs["miss"], dtype=np.uint32), "exp": np.array(tabs["exp"], dtype=np.uint32),
    }
    assert keep["exp"].shape[0] == EXP_STEPS
    data = Data(x_arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int16)),
                y_arr.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), n, A, n_classes)
    cfg = Config(seed & ((1 << 64) - 1), params.max_depth, 1 if params.dipole == "node" else 0,
                 1 if params.partial_reclassification else 0, 1 if params.missing_weight else 0,
                 tabs["thr_share"], tabs["rtb"], tabs["alpha"], tabs["raise_q32"],
                 keep["topo"].ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                 keep["pen"].ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
                 keep["miss"].ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
                 keep["exp"].ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)))
    if sampling:
        cfg.node_features = params.node_features
    t0 = time.perf_counter()
    rc = lib.tg_efti_init(ctypes.byref(cfg), ctypes.byref(data))
    if rc != 0:
        raise TreegenError(f"the native EFTI engine rejected the data (error {rc})")
    out = TreeOut()
    done = 0
    fit_scale = n * float(1 << 32) * (vicinal_q16.Q16_ONE if vicinal else 1)
    if callback:
        lib.tg_efti_best(ctypes.byref(out))
        callback(0, out.fitness / fit_scale, _leaves(out), out.hits / n)
    # The engine runs in chunks of iterations and returns to Python after each one (about every
    # CHUNK_SECONDS), so a signal handler or Ctrl-C takes effect promptly; tg_efti_step(a) then
    # tg_efti_step(b) is exactly tg_efti_step(a + b), so the result does not depend on the chunking.
    chunk = FIRST_CHUNK
    while done < params.max_iter:
        step = min(chunk, params.max_iter - done)
        t_step = time.perf_counter()
        lib.tg_efti_step(step)
        done += step
        if callback:
            lib.tg_efti_best(ctypes.byref(out))
            callback(done, out.fitness / fit_scale, _leaves(out), out.hits / n)
        took = time.perf_counter() - t_step
        if took < CHUNK_SECONDS / 4 and chunk < MAX_CHUNK:
            chunk *= 2
        elif took > CHUNK_SECONDS and chunk > FIRST_CHUNK:
            chunk //= 2
    lib.tg_efti_best(ctypes.byref(out))
    elapsed = time.perf_counter() - t0
    rerouted, evals = ctypes.c_uint64(), ctypes.c_uint64()
    lib.tg_efti_stats(ctypes.byref(rerouted), ctypes.byref(evals))
    tree = tree_from_result(out, A, n_classes).refit_counts(X, y, relabel=False).validate()
    info = fit_info(out.fitness, n, out.iterations, elapsed, params, rerouted.value, evals.value)
    info["engine"] = "native"
    if vicinal:
        info["fitness"] = out.fitness / fit_scale
        info["risk"] = "vicinal"
        info["vicinity_sigma2"] = float(vicinity_sigma2)
        info["training_vicinal_risk"] = vicinal_risk.vicinal_risk(
            tree, X, y, vicinal_risk.kernel_sigma(X, vicinity_sigma2))
    return tree, info


def _leaves(out) -> int:
    return sum(1 for j in range(out.n_nodes) if out.left[j] < 0)


def tree_from_result(out, n_attr: int, n_classes: int) -> Tree:
    m = out.n_nodes
    left = np.array(out.left[:m], dtype=np.int32)
    right = np.array(out.right[:m], dtype=np.int32)
    W = np.array([[out.w[j][a] for a in range(n_attr)] for j in range(m)], dtype=np.float64) / W_ONE
    T = np.array(out.t[:m], dtype=np.float64) / T_ONE
    cls = np.array(out.cls[:m], dtype=np.int32)
    leaf = left == LEAF
    W[leaf] = 0.0
    T[leaf] = 0.0
    return Tree(W, T, left, right, cls, np.zeros((m, n_classes), dtype=np.int64))
