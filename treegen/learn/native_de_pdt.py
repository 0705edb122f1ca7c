"""The DE-PDT evaluation kernel (``templates/de_pdt``) compiled for the host, called through ctypes.

Routes a batch of rows through a batch of complete perceptron trees with integer arithmetic only —
the same decisions as :meth:`treegen.learn.inducers.de_pdt.Population.route` (numpy, float64 holding
exact integers), so both paths give the identical tree for a seed (tested). It evaluates only the
``h - 1`` nodes on each row's path instead of every node, which makes the paper's defaults (50
individuals, 2000 generations) fast on 60-attribute data. Compiled once, cached under
``$TREEGEN_CACHE`` (default ``~/.cache/treegen``) by source hash.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from treegen.core.native import NativeKernel, have_compiler

KERNEL = NativeKernel("DE-PDT kernel", ("de_pdt/tg_de_pdt_route.c.j2",), "libtg_de_pdt.so", opt_flags=("-O3",))


def available() -> bool:
    return have_compiler()


def source() -> str:
    return KERNEL.render({})["tg_de_pdt_route.c"]


@lru_cache(maxsize=1)
def _library():
    fn = KERNEL.load_for({}).tg_de_pdt_route
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    return fn


def route(Xq16: np.ndarray, W: np.ndarray, T: np.ndarray, levels: int) -> np.ndarray:
    """Leaf index ``(rows, trees)`` of every row of ``Xq16`` (int16 Q15, C-contiguous) in every tree
    (``W`` (Q, M, A) integer-valued, ``T`` (Q, M) integer-valued)."""
    fn = _library()
    Q, M, A = W.shape
    w = np.ascontiguousarray(W, dtype=np.int16)
    t = np.ascontiguousarray(T, dtype=np.int64)
    x = np.ascontiguousarray(Xq16, dtype=np.int16)
    out = np.empty((x.shape[0], Q), dtype=np.uint16)
    fn(x.ctypes.data, x.shape[0], A, w.ctypes.data, t.ctypes.data, Q, M, levels, out.ctypes.data)
    return out.astype(np.int64)
