"""The C GP engine (``templates/gp``) compiled for the host and called through ctypes.

It runs :mod:`treegen.learn.inducers.gp` draw for draw (the PCG32 stream, the integer objectives, the
population's list order), so for the same data, parameters and seed it returns the identical tree
(tested); Python stays the readable reference. One source, one library for every dataset (the
memory is allocated at ``tg_gp_init``), compiled once and cached under ``$TREEGEN_CACHE``.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.native import NativeKernel
from treegen.learn import vicinal_q16
from treegen.learn.inducers import gp

KERNEL = NativeKernel("GP engine", ("gp/tg_gp.c.j2",), "libtg_gp.so", opt_flags=("-O2",))
CHUNK = 256                 # iterations per engine call (the Python reference's callback interval)
MEMORY_LIMIT = 1 << 28      # bytes of genome storage the engine may allocate (population x complete tree)
MAX_CLASSES = 256           # class indices are uint8_t
_ERRORS = {1: "sizes out of range", 2: "out of memory", 3: "not initialised"}


def _library():
    lib = KERNEL.load_for({})
    P = ctypes.c_void_p
    lib.tg_gp_init.argtypes = [P, P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, P, P, P, ctypes.c_uint64,
                               ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]
    lib.tg_gp_init.restype = ctypes.c_int
    lib.tg_gp_step.argtypes = [ctypes.c_uint32]
    lib.tg_gp_step.restype = ctypes.c_int
    lib.tg_gp_best.argtypes = [ctypes.c_int, P, P, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)]
    lib.tg_gp_best.restype = ctypes.c_uint32
    lib.tg_gp_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]
    lib.tg_gp_stats.restype = None
    return lib


def _best(lib, max_nodes: int, front_only: bool) -> tuple[list, int, int]:
    attr = np.zeros(max_nodes, dtype=np.int32)
    val = np.zeros(max_nodes, dtype=np.int32)
    risk, front = ctypes.c_uint64(), ctypes.c_uint32()
    m = lib.tg_gp_best(1 if front_only else 0, attr.ctypes.data, val.ctypes.data, ctypes.byref(risk),
                       ctypes.byref(front))
    genome = [(int(a), float(v)) if a < 0 else (int(a), (int(v) + 0.5) / gp.Q15_ONE)
              for a, v in zip(attr[:m].tolist(), val[:m].tolist())]
    return genome, int(risk.value), int(front.value)


def genome_bytes(params: gp.GPParams) -> int:
    """The engine's genome storage: (population + 1) complete trees of ``max_depth`` (8 bytes a node)."""
    return (params.population + 1) * ((2 << params.max_depth) - 1) * 8


def supports(params: gp.GPParams, n_classes: int) -> bool:
    """The native engine takes this problem (else ``engine='auto'`` runs the Python reference)."""
    return n_classes <= MAX_CLASSES and genome_bytes(params) <= MEMORY_LIMIT


def induce(X: np.ndarray, y: np.ndarray, n_classes: int, params: gp.GPParams | None = None, *, seed: int = 0,
           callback=None) -> tuple[gp.Tree, dict]:
    """Same contract (and, for the same seed, the same tree) as :func:`treegen.learn.inducers.gp.induce`."""
    params = (params or gp.GPParams()).validate()
    X, y = gp.check_inputs(X, y)
    seed = gp.check_seed(seed)
    if n_classes > MAX_CLASSES:
        raise TreegenError(f"the native GP engine supports at most {MAX_CLASSES} classes, got {n_classes} "
                           f"(use engine='python')")
    if genome_bytes(params) > MEMORY_LIMIT:
        raise TreegenError(f"the native GP engine would need {genome_bytes(params) >> 20} MiB for population "
                           f"{params.population} at max_depth {params.max_depth} (at most {MEMORY_LIMIT >> 20} MiB; "
                           f"use engine='python')")
    t0 = time.perf_counter()
    prob = gp._Problem(X, y, int(n_classes), params)
    lib = _library()
    keep = {
        "x": np.ascontiguousarray(prob.Xq, dtype=np.int16),
        "y": np.ascontiguousarray(y, dtype=np.uint8),
        "std": np.ascontiguousarray(prob.std_q15, dtype=np.int32),
        "phi": np.ascontiguousarray(prob.phi, dtype=np.uint32),
        "sig": None if prob.sigma_q15 is None else np.ascontiguousarray(prob.sigma_q15, dtype=np.uint16),
    }
    rc = lib.tg_gp_init(keep["x"].ctypes.data, keep["y"].ctypes.data, prob.n, prob.A, prob.C,
                        None if keep["sig"] is None else keep["sig"].ctypes.data, keep["std"].ctypes.data,
                        keep["phi"].ctypes.data, seed, params.population, params.max_depth,
                        params.init_min_depth, params.init_max_depth)
    if rc != 0:
        raise TreegenError(f"the native GP engine rejected the problem ({_ERRORS.get(rc, rc)})")
    max_nodes = (2 << params.max_depth) - 1
    done = 0
    while done < params.max_iter:
        step = min(CHUNK - done % CHUNK, params.max_iter - done)
        lib.tg_gp_step(step)
        done += step
        if callback and done % CHUNK == 0:
            g, risk, _ = _best(lib, max_nodes, front_only=False)
            t = gp.to_tree(g, prob.A, prob.C)
            callback(done, risk / prob.unit, t.n_leaves, float(np.mean(t.predict_index(X) == y)))
    g, risk, front = _best(lib, max_nodes, front_only=True)
    evals, inserted = ctypes.c_uint64(), ctypes.c_uint64()
    lib.tg_gp_stats(ctypes.byref(evals), ctypes.byref(inserted))
    tree, info = gp.finish(g, risk, prob, params, X, y, callback, t0, front_size=front,
                           evaluations=int(evals.value), inserted=int(inserted.value))
    info["engine"] = "native"
    return tree, info
