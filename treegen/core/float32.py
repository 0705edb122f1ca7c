"""How float32 inputs meet the Q15 grid: the float64 Q15 scaling of one raw input, the float32
neighbours of a threshold, and whether a tree's Q15 tests take its source's float32 branch for every
float32 input. Shared by the importers (which report it) and emit's float32 lowering."""

from __future__ import annotations

import numpy as np

from treegen.core.scaling import Q15_MAX
from treegen.core.tree import LEAF, Tree


def q15_of_raw(x, offset, scale):
    """``InputScaling.to_q15`` of one feature, the same float64 operations in the same order
    (``rint((x - offset) * scale * 32768)`` clipped to 0..32767), extended to +-inf inputs (a NaN,
    i.e. +-inf with scale 0, or a NaN input, gives 0 as in the C Q15 scaling). Vectorised."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.rint((np.asarray(x, dtype=np.float64) - offset) * scale * 32768)
    return np.clip(np.where(np.isnan(v), 0.0, v), 0, Q15_MAX)


def f32_below_above(t):
    """The float32 values around a float64 threshold ``t`` (vectorised): the largest float32 ``<= t``
    (the last input scikit-learn's ``float32(x) <= t`` sends left) and the next float32."""
    t = np.asarray(t, dtype=np.float64)
    with np.errstate(over="ignore"):
        t32 = t.astype(np.float32)
    below = np.where(t32.astype(np.float64) <= t, t32, np.nextafter(t32, np.float32(-np.inf)))
    return below.astype(np.float32), np.nextafter(below.astype(np.float32), np.float32(np.inf))


def grid_matches_raw(tree: Tree, scaling) -> np.ndarray:
    """For a tree with raw (source) thresholds: per internal node in pre-order, does the Q15 test
    ``q(x) <= T`` of :func:`treegen.emit.lower_fixed.quantize_tree` take the source's branch (``float32(x) <= raw``) for
    *every* float32 input? ``q`` is monotone, so it suffices that the last float32 the source sends
    left has ``q <= T`` and the first it sends right ``q > T``."""
    order = [k for k in tree.preorder() if tree.left[k] != LEAF]
    if not order or tree.raw_threshold is None:
        return np.ones(len(order), dtype=bool)
    order = np.array(order)
    feat = tree.test_feature()[order]
    c = tree.weights[order, feat]
    T = np.floor(tree.threshold[order] * 32768 / c)   # exact for the importer's (Q + 0.5) / 32768 and t / 32768
    below, above = f32_below_above(tree.raw_threshold[order])
    off, sc = scaling.offset[feat], scaling.scale[feat]
    # a +inf threshold sends every input left: no float32 input on the right to check
    return (q15_of_raw(below, off, sc) <= T) & (np.isposinf(below) | (q15_of_raw(above, off, sc) > T))
