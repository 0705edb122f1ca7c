"""The probe rows the boosted-import and boosted-export tests check against each source library."""

from __future__ import annotations

import numpy as np

from treegen.importers.ensemble import le_threshold

F32_MAX = float(np.finfo(np.float32).max)


def check_rows(ens, X, n_random=1000, nan=True, seed=1, inf=False):
    """Random rows in the data range, rows at +-1 and +-64 float32 ulps of every finite threshold, the
    data, (``nan``) rows with 30 % NaN cells and (``inf``: libraries that take infinite inputs) rows
    with +inf / -inf in each feature in turn -- where a library's ``+inf`` threshold (every value
    left) differs from the largest finite float32: float32 values in float64."""
    rng = np.random.default_rng(seed)
    filled = np.where(np.isnan(X), 0.0, X)
    out = [rng.uniform(np.nanmin(X, 0), np.nanmax(X, 0), (n_random, X.shape[1])), filled]
    pts = list(dict.fromkeys((f, t) for f, t in ens.split_points() if abs(t) < F32_MAX))   # each test once
    base = filled[rng.integers(0, len(X), len(pts))]
    for k in (-64, -1, 0, 1, 64):
        B = base.copy()
        for i, (f, t) in enumerate(pts):
            x = np.float32(le_threshold(t, "<="))
            for _ in range(abs(k)):
                x = np.nextafter(x, np.float32(np.inf if k > 0 else -np.inf))
            B[i, f] = x
        out.append(B)
    if nan:
        Xn = filled[:100].copy()
        Xn[rng.random(Xn.shape) < 0.3] = np.nan
        out.append(Xn)
    Z = np.clip(np.vstack(out).astype(np.float32), -F32_MAX, F32_MAX)
    if inf:
        rows = []
        for v in (np.inf, -np.inf, F32_MAX, -F32_MAX):
            for f in range(X.shape[1]):
                B = filled[rng.integers(0, len(X), 4)].copy()
                B[:, f] = v
                rows.append(B)
        Z = np.vstack([Z, np.vstack(rows).astype(np.float32)])
    return Z.astype(np.float64)
