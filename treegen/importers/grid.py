"""The Q15 grid of an imported float model: an input scaling aligned to the source's thresholds and each
threshold's grid boundary (used by the scikit-learn importer and by the value-tree importers).

See :mod:`treegen.importers.sklearn` ("How the thresholds are carried over") for what is exact.
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.scaling import Q15_MAX, Q15_ONE, InputScaling

__all__ = ["f32_split"]


def _choose_scaling(X: np.ndarray | None, n_features: int, feat: np.ndarray, thr: np.ndarray,
                    force_minmax: bool = False) -> InputScaling:
    if X is None:
        ok = (thr >= 0) & (thr <= Q15_MAX) & (thr * 2 == np.round(thr * 2))
        if not np.all(ok):
            bad = float(thr[~ok][0])
            raise TreegenError(
                f"the model's thresholds (e.g. {bad!r}) do not come from integer data in 0..32767; "
                "pass the training data (X= in Python, --data CSV on the command line) to fit a min-max input "
                "scaling")
        return InputScaling.fit(np.zeros((1, n_features)), "q15")
    scaling = InputScaling.fit(X, "minmax" if force_minmax else "auto")
    if scaling.method == "q15":
        return scaling
    lo = X.min(axis=0)
    hi = X.max(axis=0)
    offset = np.zeros(n_features)
    scale = np.zeros(n_features)     # a constant feature (no threshold on it) keeps scale 0
    for f in range(n_features):  # widen each range to cover the thresholds tested on that feature
        t = thr[feat == f]
        if t.size:
            lo[f] = min(lo[f], t.min())
            hi[f] = max(hi[f], t.max())
        offset[f] = lo[f]
        if hi[f] > lo[f]:
            offset[f], scale[f] = _aligned_affine(float(lo[f]), float(hi[f]), list(dict.fromkeys(t.tolist())))
    return InputScaling(offset, scale, "minmax")


ALIGN_MARGIN = 2.0 ** -6   # share of the Q15 range given up so the first boundary can be placed freely
ALIGN_STEP = 256           # that boundary's Q + 1 is a multiple of this (a Thumb-2 modified immediate)
ALIGN_SECOND_LOSS = 1 / 16  # resolution given up at most to make the second boundary's Q + 1 = k * 2^p


def f32_split(t: float) -> tuple[float, float]:
    """The two float32 values around scikit-learn's threshold ``t``: the largest float32 ``<= t`` (the
    last input its test ``float32(x) <= t`` sends left) and the next float32 (the first sent right)."""
    t32 = np.float32(t)
    below = t32 if float(t32) <= t else np.nextafter(t32, np.float32(-np.inf))
    return float(below), float(np.nextafter(below, np.float32(np.inf)))


def _f32_gap_midpoint(t: float) -> float:
    """Midpoint of :func:`f32_split`: the point that separates exactly the float32 inputs
    scikit-learn sends left from those it sends right."""
    below, above = f32_split(t)
    return (below + above) / 2.0


def _aligned_affine(lo: float, hi: float, thresholds: list[float]) -> tuple[float, float]:
    """Offset and scale of one feature (``q = rint((x - offset) * scale * 32768)``) mapping [lo, hi]
    into 0..32767 with the feature's first one or two thresholds *on* grid-cell boundaries.

    A threshold ``t`` whose float32 gap midpoint ``m`` (see :func:`_f32_gap_midpoint`) maps to
    ``Q + 0.5`` is carried over exactly: every float32 input scikit-learn sends left rounds to a grid
    value ``<= Q``, every other one to ``> Q``, so the Q15 test ``q <= Q`` (and the f32 export derived
    from it) decides as scikit-learn does for *every* input, not only the rows of ``X``. Two degrees
    of freedom (offset, scale) align the first two thresholds (in tree order, root first); further
    ones fall back to the grid rounding of :func:`_grid_threshold`. The first boundary is placed at
    ``Q + 1 = k * 256``, a constant Cortex-M compares against in one 4-byte instruction (``cmp.w``
    with a modified immediate, instead of ``movw`` + ``cmp``); the second at a distance ``j * 2^p``
    from it (largest ``p <= 8`` costing at most ``ALIGN_SECOND_LOSS`` of the resolution). The cost
    is at most 1.6 % (``ALIGN_MARGIN``) + 6.25 % of the grid resolution of a feature.
    """
    span = hi - lo
    s_max = Q15_MAX * (1.0 - ALIGN_MARGIN) / span     # grid steps per raw unit
    if not thresholds:
        return lo, (Q15_MAX / Q15_ONE) / span
    m1 = _f32_gap_midpoint(thresholds[0])
    s = s_max
    if len(thresholds) > 1:
        m2 = _f32_gap_midpoint(thresholds[1])
        steps = s_max * abs(m2 - m1)   # grid steps between the two boundaries, at most
        for p in range(8, -1, -1):      # Q2 - Q1 = j * 2^p: Q2 + 1 a cheap constant too, if that
            j = np.floor(steps / 2 ** p)  # costs at most 1/16 of the resolution
            if j >= 1 and (j * 2 ** p >= steps * (1 - ALIGN_SECOND_LOSS) or p == 0):
                s = float(j * 2 ** p / abs(m2 - m1))
                break
    # Q1 + 0.5 = (m1 - offset) * s with lo and hi inside [0, 32767]:  Q1 + 1 in [a, b]
    a = (m1 - lo) * s + 0.5
    b = Q15_MAX + 0.5 - (hi - m1) * s
    k = np.ceil(a / ALIGN_STEP)
    q1_plus_1 = k * ALIGN_STEP if k * ALIGN_STEP <= b else np.ceil(a)
    offset = m1 - (q1_plus_1 - 0.5) / s
    return float(offset), float(s / Q15_ONE)


def _grid_threshold(t: float, f: int, scaling: InputScaling, Xq: np.ndarray, X32: np.ndarray) -> tuple[int, bool]:
    """Integer grid boundary Q for ``x_raw <= t`` on feature ``f``: the node tests ``q <= Q``.

    Start from the grid point at or below the exact image of ``t`` (of the middle of the float32 gap
    containing it: the point scikit-learn's float32 test really splits at) -- or, when ``t`` is itself a
    float32 value (scikit-learn 1.9.1 puts some thresholds on a data value), the grid point of ``t``, so
    that value stays left; move it, if needed, so that every row of ``X`` keeps scikit-learn's side.
    Returns (Q, every row of X kept its side).
    """
    # image of the float32 gap around t (no float32 input lies strictly between t and that midpoint)
    u = (_f32_gap_midpoint(t) - scaling.offset[f]) * scaling.scale[f] * Q15_ONE
    Q0 = int(np.clip(np.floor(u), -1, Q15_MAX))
    below, _ = f32_split(t)
    if below == t:   # the threshold is itself a float32 value (a data value scikit-learn sends left): keep it left
        Q0 = max(Q0, int(scaling.to_q15(np.full((1, scaling.n_features), below))[0, f]))
    goes_left = X32[:, f] <= t
    q = Xq[:, f]
    qa = int(q[goes_left].max()) if goes_left.any() else -1          # every left row needs q <= Q
    qb = int(q[~goes_left].min()) if (~goes_left).any() else Q15_MAX + 1  # every right row needs q > Q
    if qa < qb:
        return int(np.clip(Q0, qa, qb - 1)), True
    # conflict: rows of both sides share grid cells; pick the boundary misplacing the fewest rows
    candidates = np.arange(qb - 1, qa + 1)
    errors = [np.count_nonzero(goes_left & (q > c)) + np.count_nonzero(~goes_left & (q <= c)) for c in candidates]
    return int(candidates[int(np.argmin(errors))]), False
