"""The vicinal risk in integers: the recursion the training engines run (Python reference of the C).

:mod:`treegen.learn.vicinal` defines the vicinal risk in float64; an engine that must give the same
tree in Python, in host-compiled C and on a microcontroller needs it in integers, with every rounding
written down. This module is that definition, for oblique trees in the EFTI engine's units, and the
C of ``templates/efti/tg_efti.c.j2`` (``TG_EFTI_VICINAL``) computes exactly the same integers.

Units
-----
* rows ``x``: Q15 integers (0..32767); weights ``w``: integers in Q15; thresholds ``t``: integers in
  units of 2**-30 (a node sends a row left when ``w.x <= t``), as in :mod:`treegen.learn.inducers.efti`;
* kernel widths: ``sigma_q15[a] = min(65535, round(32768 * sigma_a))`` with ``sigma_a`` from
  :func:`treegen.learn.vicinal.kernel_sigma` (0 = a hard test on that attribute);
* probabilities and masses: Q16 (65536 = 1).

One node (every node is treated as oblique: ``P(left) = Phi((t - w.x) / s)``)
---------------------------------------------------------------------------------
* ``v_a = (|w_a| * sigma_q15[a]) >> 8``; ``s = isqrt(sum_a v_a**2)`` (floor square root), so the
  kernel's spread along ``w`` is ``S = s << 8`` in the threshold's unit 2**-30 (the float
  definition's ``sqrt(sum_a w_a**2 sigma_a**2)``, each term truncated to 2**-22);
* ``m = t - w.x`` (exact, int64). ``S == 0``: a hard test, ``P = 65536`` if ``m >= 0`` else 0.
  ``m >= 4S``: ``P = 65536``; ``m <= -4S``: ``P = 0`` (beyond 4 sigma the test is hard: no leak);
* otherwise ``u = (m + 4S) * 1023``, ``i = u // 8S``, ``f = ((u % 8S) << 16) // 8S`` and
  ``P = PHI[i] + (((PHI[i+1] - PHI[i]) * f) >> 16)`` — linear interpolation in
  ``PHI[i] = round(65536 * Phi(-4 + 8 i / 1023))`` (:func:`treegen.learn.vicinal.phi_table_q16`).

The tree
--------
The root receives mass 65536; a node with mass ``M`` gives ``(M * P + 2**15) >> 16`` to its left
child and the rest, ``M - left``, to its right child (so a row's leaf masses always sum to 65536).
A row's *correct mass* is the mass reaching leaves of its class; the engine's vicinal "hits" are the
sum of the correct masses of all rows (an integer; ``hits / (65536 n) = 1 - vicinal risk``). An
axis-parallel node is one oblique node here: the float definition's tracking of intervals along a
path (the paper's refinement for axis-parallel trees) is not part of this recursion.
"""

from __future__ import annotations

import math

import numpy as np

from treegen.learn import vicinal

Q16_ONE = 1 << 16
PHI_SIZE = 1024
PHI_SPAN = 4            # the table covers z in [-4, 4]
SPREAD_SHIFT = 8        # v_a = (|w_a| * sigma_a) >> 8
SIGMA_MAX = 65535       # widest kernel (Q15): uint16_t in the engines


def phi_table() -> np.ndarray:
    """The Q16 Phi table of the recursion (int64, PHI_SIZE entries)."""
    return vicinal.phi_table_q16(PHI_SIZE, float(PHI_SPAN))


def sigma_q15(X01: np.ndarray, sigma2: float) -> np.ndarray:
    """Per-attribute kernel widths in Q15 (int64): ``round(32768 * sqrt(sigma2) * std_a)``, at most
    65535 (a kernel twice as wide as the whole input range; the bound keeps the engines' sums in 64 bits)."""
    return np.minimum(np.rint(vicinal.kernel_sigma(X01, sigma2) * 32768.0), SIGMA_MAX).astype(np.int64)


def spread(w: np.ndarray, sig_q15: np.ndarray) -> int:
    """``S`` of a node with integer weights ``w``: ``isqrt(sum ((|w_a| sigma_a) >> 8)**2) << 8``."""
    v = (np.abs(np.asarray(w, dtype=np.int64)) * sig_q15) >> SPREAD_SHIFT
    return math.isqrt(int(np.sum(v * v))) << SPREAD_SHIFT


def p_left(m: np.ndarray, S: int, phi: np.ndarray) -> np.ndarray:
    """Q16 probability of going left for margins ``m = t - w.x`` (int64 array) at spread ``S``."""
    m = np.asarray(m, dtype=np.int64)
    if S == 0:
        return np.where(m >= 0, Q16_ONE, 0).astype(np.int64)
    S8 = 8 * S
    num = np.clip(m + 4 * S, 0, S8 - 1)
    u = num * (PHI_SIZE - 1)
    i = u // S8
    f = ((u % S8) << 16) // S8
    p = phi[i] + (((phi[np.minimum(i + 1, PHI_SIZE - 1)] - phi[i]) * f) >> 16)
    return np.where(m >= 4 * S, Q16_ONE, np.where(m <= -4 * S, 0, p))


def correct_mass(W: np.ndarray, T: np.ndarray, L: np.ndarray, R: np.ndarray, root: int, leaf_class: dict,
                 Xq: np.ndarray, y: np.ndarray, sig_q15: np.ndarray, phi: np.ndarray | None = None) -> int:
    """Sum over the rows of the Q16 mass reaching a leaf of the row's class (see the module doc).

    ``W`` (nodes, A) and ``T`` (nodes,) hold integers (any numeric dtype holding them exactly), ``L``
    and ``R`` the children (negative = leaf), ``leaf_class`` maps each leaf's node id to its class;
    ``Xq`` (n, A) are the Q15 rows and ``y`` their class indices.
    """
    phi = phi_table() if phi is None else phi
    Xq = np.asarray(Xq, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    total = 0
    stack = [(int(root), np.full(Xq.shape[0], Q16_ONE, dtype=np.int64))]
    while stack:
        k, M = stack.pop()
        if L[k] < 0:
            total += int(np.sum(M[y == leaf_class[k]]))
            continue
        w = np.asarray(W[k], dtype=np.int64)
        m = int(T[k]) - Xq @ w
        left = (M * p_left(m, spread(w, sig_q15), phi) + (1 << 15)) >> 16
        stack.append((int(R[k]), M - left))
        stack.append((int(L[k]), left))
    return total


# ---------------------------------------------------------------------------------------- axis-parallel trees
def axis_wrong_mass(genome: list, Xq: np.ndarray, y: np.ndarray, sig_q15: np.ndarray,
                    phi: np.ndarray | None = None) -> int:
    """Sum over the rows of the Q16 mass reaching leaves of another class than the row's, for an
    axis-parallel tree with the paper's interval tracking (the GP's vicinal risk, its C twin in
    ``templates/gp/tg_gp.c.j2``).

    ``genome`` is the GP's pre-order node list: ``(attr, (k + 0.5) / 32768)`` for a test
    ``x_attr <= (k + 0.5) / 32768`` (left when true), ``(-1, class)`` for a leaf. Everything is in units
    of 2**-16 of the input: a row's value is ``2 xq``, a test's bound ``2k + 1``, a kernel width
    ``2 sigma_q15``. Along a path each attribute is confined to an interval ``(lo, hi]`` (at first
    unbounded); a test narrows the interval of its attribute on each side. The mass of an interval is
    ``P(hi) - P(lo)`` with ``P(b) = p_left(b - 2 xq, 2 sigma_q15)`` (``P(+inf) = 65536``,
    ``P(-inf) = 0``; an empty interval has mass 0), and a leaf's mass is the product of the intervals'
    masses in the order their attributes were first tested on the path, each product rounded
    ``(M * m + 2**15) >> 16``, starting from 65536.
    """
    phi = phi_table() if phi is None else phi
    Xq = np.asarray(Xq, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    n = Xq.shape[0]
    cache: dict[tuple[int, int], np.ndarray] = {}

    def below(a: int, b: int) -> np.ndarray:          # P(x_a <= b / 65536) per row
        v = cache.get((a, b))
        if v is None:
            v = cache[(a, b)] = p_left(b - 2 * Xq[:, a], 2 * int(sig_q15[a]), phi)
        return v

    def interval(a: int, lo, hi) -> np.ndarray:
        if lo is not None and hi is not None and hi <= lo:
            return np.zeros(n, dtype=np.int64)
        upper = below(a, hi) if hi is not None else Q16_ONE
        lower = below(a, lo) if lo is not None else 0
        return np.broadcast_to(np.asarray(upper - lower, dtype=np.int64), (n,))

    total = 0
    # pre-order walk; each stack entry: node position, the path's intervals {attr: (lo, hi)} in first-use order
    stack: list[tuple[int, dict]] = [(0, {})]
    ends = _subtree_ends(genome)
    while stack:
        i, limits = stack.pop()
        attr, value = genome[i]
        if attr < 0:
            wrong = y != int(value)
            if np.any(wrong):
                M = np.full(n, Q16_ONE, dtype=np.int64)
                for a, (lo, hi) in limits.items():
                    M = (M * interval(a, lo, hi) + (1 << 15)) >> 16
                total += int(np.sum(M[wrong]))
            continue
        b = 2 * int(math.floor(value * 32768.0)) + 1
        lo, hi = limits.get(attr, (None, None))
        left = dict(limits)
        left[attr] = (lo, b if hi is None else min(hi, b))
        right = dict(limits)
        right[attr] = (b if lo is None else max(lo, b), hi)
        stack.append((ends[i + 1], right))
        stack.append((i + 1, left))
    return total


def _subtree_ends(genome: list) -> list[int]:
    """``ends[i]``: one past the subtree rooted at node ``i`` of a pre-order genome (``ends[len]`` = len)."""
    m = len(genome)
    ends = [0] * (m + 1)
    ends[m] = m
    stack: list[int] = []          # (node) whose subtree is still open, with its pending children count
    need: list[int] = []
    for i, (attr, _) in enumerate(genome):
        stack.append(i)
        need.append(2 if attr >= 0 else 0)
        while stack and need[-1] == 0:
            done = stack.pop()
            need.pop()
            ends[done] = i + 1
            if need:
                need[-1] -= 1
    return ends
