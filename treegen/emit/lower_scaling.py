"""Lowering of the input scaling: :class:`~treegen.core.scaling.InputScaling` -> the integer constants
of the raw-input entry point's Q15 scaling, which needs no floating-point arithmetic on the device.

The Python model computes, per feature (``InputScaling.to_q15``, IEEE-754 binary64)::

    q = clip(rint(fl(fl(x - offset) * scale) * 32768), 0, 32767)

The C (``templates/c/scaling.c.j2``) performs these very operations on integers: the float32 input
``x`` is taken apart from its bits (sign, 24-bit significand, exponent), ``offset`` and ``scale`` are
stored as sign, 53-bit significand and exponent (this module), and

1. ``d = fl(x - offset)``: both significands aligned in a 64-bit word (at least 10 guard bits, the
   bits shifted out kept as a sticky bit), added or subtracted, rounded to 53 bits, half to even;
2. ``v = fl(d * scale)``: the 106-bit product of the significands from four 32 x 32-bit partial
   products, rounded to 53 bits, half to even;
3. ``q = rint(v * 32768)``: ``v``'s significand shifted to an integer, half to even, saturated.

Each step is IEEE-754 round-to-nearest-even of the exact result, as binary64 does it, so ``q`` is
the Python model's value for every float32 input, whatever the width of ``int`` or ``double`` on the
target. What binary64 has and the integer steps lack is its exponent range: it does not matter
while ``x - offset`` can neither overflow nor become subnormal, which holds when ``|offset|`` is 0 or
in ``[2^-900, 2^1000]`` (checked here); a product beyond binary64's range saturates both ways, one
below its normal range is below 1/65536 and gives 0 both ways. NaN gives 0 (as before), +-inf
saturates by the sign of ``scale`` (0 for a zero scale, where binary64 gives NaN -> 0).
"""

from __future__ import annotations

import math

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF

OFFSET_MIN_EXP = -900   # |offset| below 2^-900 (and not 0): x - offset could be subnormal in binary64
OFFSET_MAX_EXP = 1000   # |offset| from 2^1000: x - offset could overflow binary64


def used_features(model) -> list:
    """Features some test of the model reads (the raw-input entry point scales only these)."""
    used = set()
    for t in model.trees:
        internal = t.left != LEAF
        used.update(int(j) for j in np.flatnonzero(np.any(t.weights[internal] != 0, axis=0)))
    return sorted(used)


def split_double(v: float, top_bit: int) -> tuple[int, int, int]:
    """(negative, significand, exponent) of ``v`` with ``v == (-1)**negative * significand * 2**exponent``
    and the significand's highest set bit at ``top_bit`` (0 for ``v == 0``: significand 0, exponent 0)."""
    if v == 0.0:
        return 0, 0, 0
    m, e = math.frexp(abs(v))          # abs(v) = m * 2**e, 0.5 <= m < 1, m has <= 53 significant bits
    sig = int(math.ldexp(m, 53))        # exact: 53-bit integer, top bit 52
    exp = e - 53
    shift = top_bit - 52
    return int(v < 0), sig << shift, exp - shift


def lower_scaling(scaling, features: list) -> list:
    """Per used feature (``features``: indices), the constants of the integer scaling: ``om``/``oe``/``oneg``
    (offset: significand with its top bit at 62, exponent, sign) and ``sm``/``se``/``sneg`` (scale:
    top bit at 52). Raises :class:`TreegenError` for an offset outside the supported range."""
    out = []
    for i in features:
        off, sc = float(scaling.offset[i]), float(scaling.scale[i])
        if off != 0.0 and not (OFFSET_MIN_EXP <= math.frexp(abs(off))[1] - 1 < OFFSET_MAX_EXP):
            raise TreegenError(f"input scaling of feature {i}: offset {off!r} is outside the range the "
                               f"integer Q15 scaling supports (0 or 2^{OFFSET_MIN_EXP} <= |offset| < "
                               f"2^{OFFSET_MAX_EXP})")
        oneg, om, oe = split_double(off, 62)
        sneg, sm, se = split_double(sc, 52)
        out.append({"index": int(i), "offset": off, "scale": sc, "oneg": oneg, "om": om, "oe": oe,
                    "sneg": sneg, "sm": sm, "se": se})
    return out
