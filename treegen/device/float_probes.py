"""Raw float32 inputs around every threshold of a model: what checks the float entry point
(``tg_<name>_predict``) on a device (PREDICT_RAW) against the Python fixed-point model.

The float entry scales each raw float32 input to Q15 (``InputScaling.to_q15``, done on integers in C)
and runs the Q15 trees, or tests raw-unit thresholds on the float32 bits (axis trees); either way it
must give the fixed-point model's class for every float32 input. Where a Q15 test flips, one Q15 step
is the width of a few float32 ulps or of millions: the inputs that matter are the float32 values next
to each breakpoint. :func:`threshold_probes` finds, for every internal node of every tree, the Q15
value ``T`` where the test flips (``q <= T`` left):

- axis node: its threshold ``T`` on its feature;
- oblique node: along each feature with a non-zero weight, from a data row that reaches the node,
  ``T`` where the integer dot product crosses the node's threshold (the other features fixed);

and, for each, the float32 breakpoint ``t`` (the last float32 with ``q(t) <= T``, from the exporter's
:func:`treegen.emit.lower_f32.f32_axis_splits`), then the ``2 * ulps + 1`` float32 values around it
put into that data row. Deterministic: no randomness, the same rows for the same model and data.
"""

from __future__ import annotations

import numpy as np

from treegen.core.model import Model
from treegen.emit.lower_f32 import f32_axis_splits, f32_of_ordinals, f32_ordinals
from treegen.emit.quantize import quantize_model

DEFAULT_ULPS = 64


def _reach(qt, Xq: np.ndarray) -> np.ndarray:
    """For every internal node of a quantised tree, the first row of ``Xq`` that reaches it (-1: none)."""
    first = np.full(qt.n_internal, -1, dtype=np.int64)
    for r in range(Xq.shape[0]):
        node = int(qt.root)
        x = [int(v) for v in Xq[r]]
        while node >= 0:
            if first[node] < 0:
                first[node] = r
            if qt.kind == "axis":
                left = x[int(qt.feature[node])] <= int(qt.threshold[node])
            else:
                left = sum(int(w) * v for w, v in zip(qt.weights[node], x)) <= int(qt.threshold[node])
            node = int(qt.left[node] if left else qt.right[node])
    return first


def breakpoints(model: Model, Xq: np.ndarray) -> list[tuple[int, int, int]]:
    """``(feature, T, base row)`` for every flip of every internal node (see the module docstring),
    without duplicates, in tree and node order; nodes no row of ``Xq`` reaches use row 0."""
    Xq = np.asarray(Xq, dtype=np.int64)
    out: dict[tuple[int, int, int], None] = {}
    for qt in quantize_model(model):
        if qt.root < 0:
            continue
        reach = _reach(qt, Xq)
        for k in range(qt.n_internal):
            b = max(int(reach[k]), 0)
            if qt.kind == "axis":
                out[(int(qt.feature[k]), int(qt.threshold[k]), b)] = None
                continue
            w = [int(v) for v in qt.weights[k]]
            acc = sum(wi * int(v) for wi, v in zip(w, Xq[b]))
            for f, wf in enumerate(w):
                if wf == 0:
                    continue
                rest = int(qt.threshold[k]) - (acc - wf * int(Xq[b, f]))
                # left iff wf * q <= rest: q <= floor(rest / wf) (wf > 0), q >= ceil(rest / wf) (wf < 0)
                T = rest // wf if wf > 0 else -((-rest) // wf) - 1
                if 0 <= T < 32767:
                    out[(f, T, b)] = None
    return list(out)


def threshold_probes(model: Model, X_raw: np.ndarray, ulps: int = DEFAULT_ULPS) -> tuple[np.ndarray, int]:
    """Raw float32 rows around every breakpoint (``2 * ulps + 1`` per breakpoint) and the number of
    breakpoints. ``X_raw``: the data rows (raw units) the probes are built from."""
    X32 = np.asarray(X_raw, dtype=np.float64).astype(np.float32)
    Xq = np.asarray(model.scaling.to_q15(X32.astype(np.float64)), dtype=np.int64)
    pts = breakpoints(model, Xq)
    if not pts:
        return np.empty((0, model.n_features), dtype=np.float32), 0
    feat = np.array([p[0] for p in pts], dtype=np.int64)
    T = np.array([p[1] for p in pts], dtype=np.int64)
    base = np.array([p[2] for p in pts], dtype=np.int64)
    ops, t = f32_axis_splits(model.scaling.offset[feat], model.scaling.scale[feat], T)
    keep = np.isin(ops, ["le", "gt"])            # "left"/"right": no float32 input flips the test
    feat, base, t = feat[keep], base[keep], t[keep]
    steps = np.arange(-ulps, ulps + 1, dtype=np.int64)
    walk = np.clip(f32_ordinals(t)[:, None] + steps[None, :], -0x7F800000, 0x7F800000)   # at most +-inf
    values = f32_of_ordinals(walk)                                            # (n_points, 2 * ulps + 1)
    rows = np.repeat(X32[base], steps.size, axis=0)
    rows[np.arange(rows.shape[0]), np.repeat(feat, steps.size)] = values.ravel()
    return rows, int(feat.size)


def raw_threshold_probes(model: Model, X_raw: np.ndarray, ulps: int = DEFAULT_ULPS) -> tuple[np.ndarray, int]:
    """A model imported with its source's float32 thresholds (``Tree.raw_threshold``: left iff
    ``float32(x) <= t``): the ``2 * ulps + 1`` float32 values around every distinct ``(feature, t)``,
    each put into a data row (the rows taken in turn), and the number of thresholds. An infinite
    threshold's walk stops at the infinity: ``+inf`` itself is probed (a library's every-value-left test
    sends it left)."""
    X32 = np.asarray(X_raw, dtype=np.float64).astype(np.float32)
    pts: dict[tuple[int, float], None] = {}
    for tree in model.trees:
        feat = tree.test_feature()
        for k in np.flatnonzero(np.asarray(tree.left) >= 0):
            pts[(int(feat[k]), float(np.float32(tree.raw_threshold[k])))] = None
    if not pts or X32.shape[0] == 0:
        return np.empty((0, model.n_features), dtype=np.float32), 0
    feat = np.array([p[0] for p in pts], dtype=np.int64)
    t = np.array([p[1] for p in pts], dtype=np.float32)
    base = np.arange(feat.size) % X32.shape[0]
    steps = np.arange(-ulps, ulps + 1, dtype=np.int64)
    walk = np.clip(f32_ordinals(t)[:, None] + steps[None, :], -0x7F800000, 0x7F800000)
    values = f32_of_ordinals(walk)
    rows = np.repeat(X32[base], steps.size, axis=0)
    rows[np.arange(rows.shape[0]), np.repeat(feat, steps.size)] = values.ravel()
    return rows, int(feat.size)
