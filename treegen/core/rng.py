"""A small deterministic PRNG that C code can reproduce bit for bit.

PCG32 (O'Neill, "PCG: A family of simple fast space-efficient statistically good algorithms
for random number generation", XSH-RR variant, 64-bit state, 32-bit output). Every stochastic
choice of treegen's EFTI goes through :class:`Pcg32` using integer operations only, so the same
seed gives the same sequence on the host (Python), in host-compiled C and on a microcontroller.

Derived draws (all integer, all reproducible in C):

``below(m)``   ``(u32 * m) >> 32`` (Lemire's multiply-shift; bias < m / 2**32).
``normal_q16`` Irwin-Hall(4) approximation of N(0, 1) in Q16: the sum of four 16-bit uniforms,
               centred and scaled by sqrt(3): ``((sum - 2**17) * 113512) >> 16`` (range about
               +-3.46 sigma).
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
PCG_MULT = 6364136223846793005
PCG_INC = 1442695040888963407  # default stream (odd)
SQRT3_Q16 = 113512  # round(sqrt(3) * 65536)


class Pcg32:
    __slots__ = ("state", "inc")

    def __init__(self, seed: int, stream: int | None = None) -> None:
        # pcg32_srandom_r(seed, stream); the default stream is PCG's default increment
        self.inc = PCG_INC if stream is None else ((int(stream) << 1) | 1) & MASK64
        self.state = 0
        self.next_u32()
        self.state = (self.state + (int(seed) & MASK64)) & MASK64
        self.next_u32()

    def next_u32(self) -> int:
        old = self.state
        self.state = (old * PCG_MULT + self.inc) & MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & MASK32
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & MASK32

    def below(self, m: int) -> int:
        """Integer in [0, m)."""
        return (self.next_u32() * m) >> 32

    def chance(self, threshold_u32: int) -> bool:
        """True with probability threshold_u32 / 2**32."""
        return self.next_u32() < threshold_u32

    def normal_q16(self) -> int:
        """Approximately N(0, 1) scaled by 65536 (Irwin-Hall of four 16-bit uniforms)."""
        s = ((self.next_u32() >> 16) + (self.next_u32() >> 16)
             + (self.next_u32() >> 16) + (self.next_u32() >> 16))
        return ((s - (1 << 17)) * SQRT3_Q16) >> 16


def prob_u32(p: float) -> int:
    """Probability -> 32-bit comparison threshold (clamped to [0, 2**32])."""
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return 1 << 32
    return int(p * 4294967296.0)


# ---------------------------------------------------------------------------------------- block draws
_JUMP_CACHE: dict[tuple[int, int], tuple] = {}


def _jump_tables(inc: int, k: int):
    """``A[j], C[j]`` (uint64) with ``state_j = A[j] * state_0 + C[j]`` (mod 2**64), j = 0..k."""
    import numpy as np

    key = (inc, k)
    tables = _JUMP_CACHE.get(key)
    if tables is None:
        a, c = [1], [0]
        for _ in range(k):
            a.append((a[-1] * PCG_MULT) & MASK64)
            c.append((c[-1] * PCG_MULT + inc) & MASK64)
        tables = (np.array(a, dtype=np.uint64), np.array(c, dtype=np.uint64))
        if len(_JUMP_CACHE) > 8:
            _JUMP_CACHE.clear()
        _JUMP_CACHE[key] = tables
    return tables


def take_u32(rng: Pcg32, k: int):
    """The next ``k`` outputs of ``rng`` as a numpy uint64 array, advancing ``rng`` by ``k`` steps.

    Bit for bit the values ``[rng.next_u32() for _ in range(k)]`` (PCG's closed-form jump
    ``state_j = MULT**j * state + inc * (MULT**j - 1) / (MULT - 1)``), computed without a Python loop
    per draw; used by the population-based inducers, whose C counterparts call ``next_u32`` k times.
    """
    import numpy as np

    k = int(k)
    if k <= 0:
        return np.zeros(0, dtype=np.uint64)
    block = 4096
    out = np.empty(k, dtype=np.uint64)
    A, C = _jump_tables(rng.inc, block)
    s59, s18, s27, m32 = (np.uint64(v) for v in (59, 18, 27, MASK32))
    done = 0
    while done < k:
        m = min(block, k - done)
        old = A[:m] * np.uint64(rng.state) + C[:m]          # wraps mod 2**64 (numpy uint64 arrays)
        xs = (((old >> s18) ^ old) >> s27) & m32
        rot = old >> s59
        out[done:done + m] = ((xs >> rot) | (xs << ((np.uint64(64) - rot) & np.uint64(31)))) & m32
        rng.state = (int(A[m]) * rng.state + int(C[m])) & MASK64
        done += m
    return out
