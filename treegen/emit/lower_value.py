"""Value leaves in the export: the leaf values of a regression model as a table, in fixed point for
q15 and in float32 for f32, and how the C combines the trees (vote ``mean``).

Every distinct leaf value of the model is one row of the table; ``leaf_ids[k][node]`` is the row of
leaf ``node`` of tree ``k`` (the trees' C returns it, as a class index or a soft vote's row).

Scaling and overflow behaviour (q15)
------------------------------------
A per-model Q format: ``v_q = round_half_even(v * 2**F)``, ``int32_t``, with ``F`` (``frac_bits``) the
largest integer (at most 62) such that every ``|v_q| <= 2**31 - 1``: the value of ``v_q`` is
``v_q * 2**-F`` and each stored value is within ``2**-(F+1)`` of ``v``. Leaf values beyond the int32
range at ``F = 0`` are refused (export f32). One tree: the prediction is the leaf's ``v_q``. A forest
(vote ``mean``): ``sum = v_q[0] + ... + v_q[n-1]`` in ``int64_t`` (at most ``n * 2**31`` in
magnitude: no overflow), then the mean rounded half away from zero,
``sign(sum) * ((|sum| + n / 2) / n)`` (integer division, ``n / 2`` rounded down): within
``2**-(F+1)`` of the exact mean of the stored values, so the result is within ``2**-F`` of the float
model's mean (plus its own float64 rounding).

f32: the leaf values rounded to float32 (nearest even); a forest sums them in float32 in tree
order, starting from 0.0f, and divides the sum by ``(float)n`` (one float32 division).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from treegen.core.errors import TreegenError

INT32_MAX = (1 << 31) - 1
MAX_FRAC_BITS = 62


@dataclass(eq=False)
class ValueVote:
    values: np.ndarray      # float64 (n_rows,): the distinct leaf values
    leaf_ids: list          # per tree: int64 (n_nodes,) row of each leaf, -1 for internal nodes
    frac_bits: int          # F: v_q = round(v * 2**F)
    q: np.ndarray           # int64 (n_rows,), int32-valued
    f32: np.ndarray         # float32 (n_rows,)
    n_trees: int
    mean: bool              # vote mean: divide the sum by n_trees
    bound: float            # |fixed-point prediction - float model| <= bound (+ the float model's rounding)

    @property
    def n_rows(self) -> int:
        return int(self.values.shape[0])

    def value_of(self, q) -> np.ndarray:
        """Fixed-point results -> float64 values (``q * 2**-F``, exact)."""
        return np.ldexp(np.asarray(q, dtype=np.float64), -self.frac_bits)


def frac_bits_for(max_abs: float) -> int:
    """The largest ``F <= 62`` with ``round(max_abs * 2**F) <= 2**31 - 1``."""
    if max_abs == 0.0:
        return 0
    if round(max_abs) > INT32_MAX:
        raise TreegenError(f"leaf values up to {max_abs:.6g} exceed the int32 range of the fixed-point export "
                           "(export with --dtype f32)")
    f = min(MAX_FRAC_BITS, max(0, math.floor(math.log2(INT32_MAX / max_abs))))
    while f < MAX_FRAC_BITS and round(math.ldexp(max_abs, f + 1)) <= INT32_MAX:
        f += 1
    while f > 0 and round(math.ldexp(max_abs, f)) > INT32_MAX:
        f -= 1
    return f


def value_vote(model) -> ValueVote:
    """The value table of a regression model (vote ``mean``; see the module docstring)."""
    if model.vote != "mean":
        raise TreegenError(f"the export of a model with vote {model.vote!r} (boosted) is not supported")
    rows: dict = {}
    table: list = []
    leaf_ids = []
    for tree in model.trees:
        ids = np.full(tree.n_nodes, -1, dtype=np.int64)
        for node in tree.leaves():
            v = float(tree.leaf_value[node])
            key = v.hex()
            if key not in rows:
                rows[key] = len(table)
                table.append(v)
            ids[node] = rows[key]
        leaf_ids.append(ids)
    values = np.array(table, dtype=np.float64)
    f = frac_bits_for(float(np.max(np.abs(values))))
    q = np.rint(np.ldexp(values, f)).astype(np.int64)
    n = len(model.trees)
    half = 2.0 ** -(f + 1)
    return ValueVote(values, leaf_ids, f, q, values.astype(np.float32), n, True, 2 * half if n > 1 else half)


def mean_round(total: np.ndarray, n: int) -> np.ndarray:
    """``sign(total) * ((|total| + n // 2) // n)``: the C's rounded mean of int64 sums."""
    total = np.asarray(total, dtype=np.int64)
    mag = (np.abs(total) + n // 2) // n
    return np.where(total < 0, -mag, mag)


def combine_fixed(vv: ValueVote, rows: np.ndarray) -> np.ndarray:
    """int64 fixed-point predictions from the table rows each tree reached (``rows``: ``(n, n_trees)``)."""
    total = vv.q[np.asarray(rows, dtype=np.int64)].sum(axis=1)
    return total if vv.n_trees == 1 else mean_round(total, vv.n_trees)


def combine_f32(vv: ValueVote, rows: np.ndarray) -> np.ndarray:
    """float32 predictions as the f32 C computes them (sum in tree order from 0.0f, then / (float)n)."""
    rows = np.asarray(rows, dtype=np.int64)
    if vv.n_trees == 1:
        return vv.f32[rows[:, 0]]
    acc = np.zeros(rows.shape[0], dtype=np.float32)
    for k in range(rows.shape[1]):
        acc = acc + vv.f32[rows[:, k]]
    return acc / np.float32(vv.n_trees)
