"""Float32 lowering: the tests of a tree on raw float32 inputs, and how float32 inputs meet the Q15 grid.

dtype ``f32`` (raw float32 inputs, no input scaling on the device):

``axis`` trees    each Q15 test ``q(x) <= T`` becomes a test of the raw input ``x <= t``, ``t`` the
                  largest float32 whose Q15 value (``InputScaling.to_q15``, float64; :func:`q15_of_raw`)
                  is ``<= T``, found by binary search over the float32 values (:func:`f32_axis_split`):
                  the same branch as the Q15 model for *every* float32 input. The C compares IEEE-754
                  bit patterns as integers (one load, one compare: no FPU or soft-float needed).
                  Imported trees (raw thresholds) keep their source's own float32 test.
``oblique`` trees the scaling folded into float32 weights and thresholds (:func:`_f32_fold`); this
                  skips the Q15 snapping and clipping, so agreement is measured, not exact.

:func:`treegen.emit.check.predict_f32` executes these nodes, bit for bit as the C. The q15 export uses
the same axis tests for its raw-input entry point (``source_thresholds=False``).
"""

from __future__ import annotations

import math

import numpy as np

from treegen.core.codegen import f32_literal
from treegen.core.scaling import Q15_MAX
from treegen.core.float32 import f32_below_above, grid_matches_raw, q15_of_raw
from treegen.core.tree import LEAF


# float32 values are searched through their *ordinals*: ..., -FLT_MAX, ..., -0 == +0 == 0, ...,
# FLT_MAX, +inf; consecutive ordinals are consecutive float32 values.
_F32_INF_ORD = 0x7F800000
_F32_MAX = float(np.finfo(np.float32).max)
_KEY_ALL = 0xFFFFFFFF  # the monotone key every input (NaN included) is <= : "always left"


def f32_bits(v) -> int:
    """The IEEE-754 binary32 bit pattern of ``v`` (rounded to float32) as an unsigned int."""
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def f32_key(bits):
    """Monotone unsigned key of binary32 bit patterns (int or array): ``a <= b`` as floats (not NaN)
    implies ``key(a) <= key(b)``; -0 sorts just below +0, a NaN beyond +-inf on the side of its sign.
    The C table layout computes ``key - 2**31`` as int32_t (``tg_<name>_key``): the same order."""
    b = np.asarray(bits, dtype=np.int64)
    key = np.where(b >= 0x80000000, 0xFFFFFFFF - b, b | 0x80000000)
    return int(key) if key.ndim == 0 else key


def f32_ordinals(x) -> np.ndarray:
    """float32 values -> ordinals: consecutive float32 values have consecutive int64 ordinals, -0 == +0
    (the inverse of :func:`f32_of_ordinals`; a walk of n ulps is ordinal +- n)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    return np.where(bits >= 0x80000000, -(bits & 0x7FFFFFFF), bits)


def f32_of_ordinals(o: np.ndarray) -> np.ndarray:
    """Ordinals (see :func:`f32_ordinals`) -> float32 values."""
    o = np.asarray(o, dtype=np.int64)
    bits = np.where(o >= 0, o, 0x80000000 | -o).astype(np.uint32)
    return bits.view(np.float32)


def f32_axis_splits(offset, scale, T) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`f32_axis_split` over nodes: (ops array of "left"/"right"/"le"/"gt", t float32
    array; t is NaN where op is "left"/"right")."""
    offset = np.asarray(offset, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    T = np.asarray(T, dtype=np.int64)
    n = T.shape[0]
    ops = np.full(n, "", dtype=object)
    t = np.full(n, np.nan, dtype=np.float32)
    always_left = (T >= Q15_MAX) | ((scale == 0.0) & (T >= 0))
    always_right = ~always_left & (T < 0)
    ops[always_left], ops[always_right] = "left", "right"
    todo = np.flatnonzero(~always_left & ~always_right)

    def left(o, idx):
        return q15_of_raw(f32_of_ordinals(o), offset[idx], scale[idx]) <= T[idx]

    lo = np.full(todo.size, -_F32_INF_ORD, dtype=np.int64)
    hi = np.full(todo.size, _F32_INF_ORD, dtype=np.int64)
    first, last = left(lo, todo), left(hi, todo)
    const = first == last
    ops[todo[const & first]] = "left"
    ops[todo[const & ~first]] = "right"
    keep = ~const
    todo, lo, hi, first = todo[keep], lo[keep], hi[keep], first[keep]
    while todo.size and np.any(hi - lo > 1):  # invariant: left(lo) == first != left(hi)
        mid = (lo + hi) // 2
        same = left(mid, todo) == first
        lo = np.where(same, mid, lo)
        hi = np.where(same, hi, mid)
    ops[todo] = np.where(scale[todo] > 0, "le", "gt")
    t[todo] = f32_of_ordinals(lo)
    return ops, t


def f32_axis_split(offset: float, scale: float, T: int) -> tuple:
    """The Q15 test ``q(x) <= T`` (``q`` as :func:`q15_of_raw`) as a test of the raw float32 input.

    Returns ``("left", None)`` / ``("right", None)`` when every float32 input (+-inf included) takes
    that side, ``("le", t)``: left iff ``x <= t``, or ``("gt", t)``: left iff ``x > t`` (negative
    scale). ``t`` is found by binary search over the float32 ordinals: ``q`` is monotone in ``x``
    (every float64 operation in it is), so exactly the ordinals up to ``t`` take one side. For
    positive scales ``t`` is the largest float32 with ``q(t) <= T``. (:func:`f32_axis_splits` does
    the same for many nodes at once.)
    """
    ops, t = f32_axis_splits([offset], [scale], [T])
    op = str(ops[0])
    return (op, None) if op in ("left", "right") else (op, np.float32(t[0]))


def _f32_comment(t: np.float32) -> str:
    return "-inf" if np.isneginf(t) else ("inf" if np.isposinf(t) else f32_literal(t))


def _f32_axis_node(i: int, feature: int, T: int, left: int, right: int, scaling, split=None) -> dict:
    """One f32 axis test: the Q15 test ``q(x) <= T`` as a raw test (:func:`f32_axis_split`), or the
    given ``split`` (``("le", t)``: the source's own float32 test, imported models)."""
    op, t = split if split is not None else f32_axis_split(float(scaling.offset[feature]),
                                                             float(scaling.scale[feature]), int(T))
    if op == "gt":  # left iff x > t  <=>  right iff x <= t
        left, right = right, left
    node = {"index": i, "feature": int(feature), "left": int(left), "right": int(right), "q15_threshold": int(T),
            "always_left": op == "left", "always_right": op == "right"}
    if op in ("left", "right"):
        if op == "right":  # as a table entry: swap and take the key every input is <= of
            left, right = right, left
        node.update(key=_KEY_ALL, skey=_KEY_ALL - (1 << 31), table_left=int(left), table_right=int(right),
                    cmp="", bits="", t="")
        return node
    bits = f32_bits(t)
    # x <= t on the bits: for t >= +0 as signed int32 (every negative input is below), for t < 0 as
    # unsigned (x <= t < 0 <=> x is negative with at least t's magnitude <=> bits(x) >= bits(t))
    key = f32_key(bits)  # the table layout's C key is the same order, signed: key - 2^31
    node.update(key=key, skey=key - (1 << 31), table_left=int(left), table_right=int(right), t=_f32_comment(t),
                cmp="s" if bits < 0x80000000 else "u", bits=f"0x{bits:08X}")
    return node


def _f32_fold(tree, n: int, scaling) -> tuple[np.ndarray, np.float32]:
    """Oblique node ``n``: the input scaling folded into float32 weights and threshold,
    ``w'_i = w_i * scale_i``, ``theta' = theta + sum_i w_i * scale_i * offset_i`` (float64, then
    rounded to float32), so that the test runs on raw inputs."""
    w = np.asarray(tree.weights[n], dtype=np.float64) * scaling.scale
    theta = math.fsum([float(tree.threshold[n]), *(w * scaling.offset).tolist()])
    w32 = np.clip(w, -_F32_MAX, _F32_MAX).astype(np.float32)
    return w32, np.float32(min(max(theta, -_F32_MAX), _F32_MAX))


def _f32_tree(index: int, tree, scaling, leaf_ids=None, qt=None, source_thresholds: bool = True) -> dict:
    """A float tree as float32 nodes, in pre-order with the child references of the q15 trees.

    Axis trees with raw thresholds (imported): each test is the source's ``float32(x) <= t``, i.e.
    ``x <= `` the largest float32 not above ``t``. Other axis trees: each test becomes an exact test of
    the raw float32 input (:func:`f32_axis_split`) on the integer thresholds of ``qt``, the tree
    quantised (:func:`treegen.emit.lower_fixed.quantize_tree`, with ``leaf_ids``). Oblique trees
    (``qt`` None): scaling folded into the weights. ``leaf_ids``: what leaves return (soft voting).
    ``source_thresholds=False``: the Q15 model's raw splits even where raw thresholds exist (the q15
    export's raw-input entry point).
    """
    axis = tree.is_axis_parallel()
    leaf_value = tree.leaf_class if leaf_ids is None else np.asarray(leaf_ids)
    if axis:
        feat = qt.feature.astype(np.int64)
        ops, ts = f32_axis_splits(scaling.offset[feat], scaling.scale[feat], qt.threshold)
        splits = [(str(o), None if o in ("left", "right") else np.float32(v)) for o, v in zip(ops, ts)]
        if tree.raw_threshold is not None and source_thresholds:
            order = [k for k in tree.preorder() if tree.left[k] != LEAF]
            below, _ = f32_below_above(tree.raw_threshold[order])
            splits = [("le", np.float32(b)) for b in below]
        nodes = [_f32_axis_node(i, int(qt.feature[i]), int(qt.threshold[i]), int(qt.left[i]), int(qt.right[i]),
                                scaling, splits[i]) for i in range(len(qt.threshold))]
        root = int(qt.root)
    else:
        order = tree.preorder()
        internal = [n for n in order if tree.left[n] != LEAF]
        pos = {n: i for i, n in enumerate(internal)}

        def ref(n: int) -> int:
            return pos[n] if tree.left[n] != LEAF else -int(leaf_value[n]) - 1

        nodes = []
        for i, n in enumerate(internal):
            w32, thr32 = _f32_fold(tree, n, scaling)
            nz = [int(j) for j in np.flatnonzero(tree.weights[n])]
            nodes.append({"index": i, "left": ref(int(tree.left[n])), "right": ref(int(tree.right[n])),
                          "w32": w32, "thr32": thr32, "threshold": f32_literal(thr32),
                          "weights": [f32_literal(v) for v in w32],
                          "terms": [{"feature": j, "weight": f32_literal(w32[j])} for j in nz]})
        root = ref(0)
    kind = "leaf" if root < 0 else ("axis" if axis else "oblique")
    raw = axis and tree.raw_threshold is not None and source_thresholds
    return {"index": index, "kind": kind, "root": root, "n_internal": len(nodes), "n_leaves": tree.n_leaves,
            "depth": tree.depth, "leaf_class": -root - 1 if root < 0 else -1, "acc_bits": 0, "acc_bound": 0,
            "exact": kind != "oblique", "raw_thresholds": raw, "nodes": nodes}


def thresholds_off_grid(model) -> int:
    """Tests of an imported model (raw thresholds) whose Q15 grid test differs from the source's
    float32 test for some input (:func:`grid_matches_raw`), over all trees."""
    return int(sum(np.count_nonzero(~grid_matches_raw(t, model.scaling)) for t in model.trees))


def lower_f32(model, *, soft=None, qtrees: list, trees: bool = True,
              source_thresholds: bool = True) -> tuple[list, int | None]:
    """(float32 trees, tests off the Q15 grid) of ``model``.

    ``qtrees``: per tree, the quantised tree of an axis tree (None for an oblique one), quantised with
    the leaf values of ``soft``; ``trees=False``: only the count. The count is None unless the model
    carries raw thresholds."""
    out = []
    if trees:
        out = [_f32_tree(k, t, model.scaling, None if soft is None else soft.leaf_ids[k], qtrees[k],
                         source_thresholds=source_thresholds) for k, t in enumerate(model.trees)]
    return out, (thresholds_off_grid(model) if model.has_raw_thresholds else None)
