"""Input scaling: raw feature values -> normalised features on the Q15 grid.

Every model stores, per feature, an ``offset`` and a ``scale``::

    x_norm = clip((x_raw - offset) * scale, 0, 32767/32768)
    x_q15  = round(x_norm * 32768)            (int16, 0..32767)
    x      = x_q15 / 32768                    (what the tree is trained on and tested with)

Trees are trained on ``x`` — the normalised value *snapped to the Q15 grid* — so the float tree on
the host and the fixed-point tree on a device see exactly the same inputs; only the tree's own
coefficients can differ between the two.

Methods:

``q15``     the data are already 15-bit integers 0..32767 (the shared UCI sets): offset 0,
            scale 1/32768, so ``x_q15 == x_raw``.
``minmax``  offset = column minimum, scale = (32767/32768) / (max - min); a constant column gets
            scale 0.
``auto``    ``q15`` when every value is an integer in 0..32767, otherwise ``minmax``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from treegen.core.errors import TreegenError

Q15_ONE = 32768
Q15_MAX = 32767
METHODS = ("auto", "q15", "minmax")


@dataclass(eq=False)
class InputScaling:
    offset: np.ndarray
    scale: np.ndarray
    method: str = "minmax"

    def __post_init__(self) -> None:
        self.offset = np.asarray(self.offset, dtype=np.float64)
        self.scale = np.asarray(self.scale, dtype=np.float64)
        if self.offset.shape != self.scale.shape or self.offset.ndim != 1:
            raise TreegenError("input scaling: offset and scale must be 1-D arrays of equal length")
        if not (np.all(np.isfinite(self.offset)) and np.all(np.isfinite(self.scale))):
            raise TreegenError("input scaling: non-finite offset or scale")

    @property
    def n_features(self) -> int:
        return int(self.offset.shape[0])

    @classmethod
    def fit(cls, X: np.ndarray, method: str = "auto") -> "InputScaling":
        X = np.asarray(X, dtype=np.float64)
        if method not in METHODS:
            raise TreegenError(f"unknown scaling method {method!r} (choose from {', '.join(METHODS)})")
        n_features = X.shape[1]
        is_q15 = bool(np.all((X >= 0) & (X <= Q15_MAX) & (X == np.round(X))))
        if method == "q15" and not is_q15:
            raise TreegenError("scaling 'q15' needs every value to be an integer in 0..32767")
        if method == "q15" or (method == "auto" and is_q15):
            return cls(np.zeros(n_features), np.full(n_features, 1.0 / Q15_ONE), "q15")
        lo = X.min(axis=0)
        span = X.max(axis=0) - lo
        with np.errstate(divide="ignore"):
            scale = np.where(span > 0, (Q15_MAX / Q15_ONE) / np.where(span > 0, span, 1.0), 0.0)
        return cls(lo, scale, "minmax")

    def to_q15(self, X: np.ndarray) -> np.ndarray:
        """Raw features -> int16 Q15 values 0..32767 (round half to even, saturating)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise TreegenError(f"expected {self.n_features} features, got data with shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise TreegenError("input contains NaN or infinite values")
        q = np.rint((X - self.offset) * self.scale * Q15_ONE)
        return np.clip(q, 0, Q15_MAX).astype(np.int16)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Raw features -> normalised features on the Q15 grid (float64 in [0, 1))."""
        return self.to_q15(X).astype(np.float64) / Q15_ONE

    def to_dict(self) -> dict:
        return {"method": self.method, "offset": self.offset.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "InputScaling":
        try:
            return cls(np.array(d["offset"], dtype=np.float64), np.array(d["scale"], dtype=np.float64),
                       str(d.get("method", "minmax")))
        except (KeyError, TypeError, ValueError) as exc:
            raise TreegenError(f"malformed input scaling: {exc}") from None
