"""Lower an additive (vote "sum", boosted) model for the float32 C export, and its Python mirror.

The description (:class:`BoostTables`) is a struct of arrays over every node of every tree, each tree in
pre-order (the left child of node ``i`` is ``i + 1``):

``feat``   internal node: ``2 * feature + missing_left`` (uint8_t up to 127 features, else uint16_t);
           leaf: the all-ones value of the type (``LEAF``);
``thr``    internal node: the float32 threshold ``t32`` of the test ``x <= t32`` (the library's own test,
           exact for every float32 input: :func:`treegen.core.tree.float32_below` / ``float32_floor``);
           leaf of a float32 sum: the leaf value itself;
``right``  internal node: the distance to the right child; leaf of a float64 sum: the row of its value
           in ``values`` (doubles).

What the C computes, for every float32 input (``x`` NaN allowed when the model routes missing values):
a node sends ``x`` left iff ``x <= t32`` (``missing_left`` = 0: NaN right) or ``!(x > t32)``
(``missing_left`` = 1: NaN left); ``raw[k] = base[k]``, then ``raw[out[t]] += leaf value`` tree by tree
in the model's sum precision (``float`` or ``double``, IEEE-754 binary32 / binary64, round to nearest;
no contraction: additions only); then, for a model with ``boost.scale`` / ``boost.bias`` (CatBoost),
``raw[k] = raw[k] * scale`` (only when scale is not 1) and ``raw[k] = raw[k] + bias[k]``, one rounding
each (a scale other than 1 with a bias is a multiply-add a compiler may contract with
``-ffp-contract=fast`` on an FPU with FMA: the export keeps them two statements; C99 mode keeps
contraction off in GCC). That is :meth:`treegen.core.model.Model.decision_function` bit for bit,
hence the source library's raw score (margin / decision function / regression output). The class is
``raw[0] > v`` or ``raw[0] >= v`` (one output: the model's ``boost.decision_threshold``, ``v`` a constant
of the sum precision, so the comparison is the library's own, bit for bit) or the first largest ``raw[k]``;
probabilities are not exported (they need ``exp``: the decision does not).

Where it holds: any C99 compiler with IEEE binary32 ``float`` (and binary64 ``double`` for a double sum),
``FLT_EVAL_METHOD`` 0 or 1 for a float sum (x86-64 SSE, ARM with or without an FPU, RISC-V), denormals
not flushed (no ``-ffast-math``). A target whose ``double`` is 32 bits (AVR) cannot hold a double sum
exactly: the export says so instead of ``exact``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF


@dataclass(eq=False)
class BoostTables:
    n_features: int
    n_outputs: int
    task: str
    sum_dtype: str              # "float32" | "float64"
    feat: np.ndarray            # int64 (n_nodes,)
    thr: np.ndarray             # float32 (n_nodes,)
    right: np.ndarray           # int64 (n_nodes,)
    values: np.ndarray          # float64 (n_values,): leaf values of a float64 sum
    roots: np.ndarray           # int64 (n_trees,)
    outputs: np.ndarray         # int64 (n_trees,)
    base: np.ndarray            # float64 (n_outputs,) in the sum precision
    feat_bits: int
    right_bits: int
    leaf_code: int
    routes_missing: bool
    decision_value: float = 0.0     # one output: class 1 iff raw[0] decision_rule decision_value
    decision_rule: str = ">"
    scale: float = 1.0              # after the trees: raw = scale * raw (skipped when 1) + bias
    bias: np.ndarray | None = None  # float64 (n_outputs,) in the sum precision, or None

    @property
    def n_nodes(self) -> int:
        return int(self.feat.shape[0])

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])


def lower_boost(model) -> BoostTables:
    """The tables of a vote-'sum' model (see the module documentation)."""
    if model.vote != "sum" or model.boost is None:
        raise TreegenError("lower_boost needs a model with vote 'sum'")
    if not model.has_raw_thresholds:
        raise TreegenError("the f32 export of a boosted model needs its source thresholds (an imported model)")
    f32_sum = model.boost["sum_dtype"] == "float32"
    feat_bits = 8 if 2 * model.n_features + 1 < 255 else 16
    leaf_code = (1 << feat_bits) - 1
    if 2 * model.n_features + 1 >= (1 << 16) - 1:
        raise TreegenError(f"{model.n_features} features: more than the f32 boosted export's uint16_t field holds")
    feat, thr, right, values, roots = [], [], [], [], []
    for tree in model.trees:
        order = tree.preorder()
        if order != list(range(tree.n_nodes)):
            tree = tree.compact()
        base = len(feat)
        roots.append(base)
        fidx = np.argmax(tree.weights != 0, axis=1)
        for i in range(tree.n_nodes):
            if tree.left[i] == LEAF:
                feat.append(leaf_code)
                v = float(tree.leaf_value[i])
                if f32_sum:
                    thr.append(np.float32(v))
                    right.append(0)
                else:
                    thr.append(np.float32(0.0))
                    right.append(len(values))
                    values.append(v)
            else:
                if tree.left[i] != i + 1:
                    raise TreegenError("internal error: a tree not in pre-order")
                ml = int(tree.missing_left[i]) if tree.missing_left is not None else 0
                feat.append(2 * int(fidx[i]) + ml)
                thr.append(np.float32(tree.raw_threshold[i]))
                right.append(int(tree.right[i]) - i)
    right_arr = np.asarray(right, dtype=np.int64)
    right_bits = 16 if right_arr.max(initial=0) <= 0xFFFF else 32
    dt = np.float32 if f32_sum else np.float64
    base = np.asarray(model.boost["base_score"], dtype=np.float64).astype(dt).astype(np.float64)
    bias = None
    if "bias" in model.boost:
        bias = np.asarray(model.boost["bias"], dtype=np.float64).astype(dt).astype(np.float64)
    return BoostTables(model.n_features, model.n_outputs, model.task, model.boost["sum_dtype"],
                       np.asarray(feat, dtype=np.int64), np.asarray(thr, dtype=np.float32), right_arr,
                       np.asarray(values, dtype=np.float64), np.asarray(roots, dtype=np.int64),
                       np.asarray(model.boost["tree_output"], dtype=np.int64), base, feat_bits, right_bits, leaf_code,
                       model.handles_missing, *_decision(model),
                       scale=float(dt(model.boost.get("scale", 1.0))), bias=bias)


def _decision(model) -> tuple[float, str]:
    return model.decision_threshold if model.task == "classification" and model.n_outputs == 1 else (0.0, ">")


def predict_raw(tb: BoostTables, X) -> np.ndarray:
    """What the C computes (the mirror of ``tg_<name>_raw``): ``(n_rows, n_outputs)`` float64 holding the
    float32 / float64 sums exactly. ``X``: raw rows (rounded to float32 as the C receives them)."""
    X = np.asarray(X, dtype=np.float64).astype(np.float32)
    n = X.shape[0]
    dt = np.float32 if tb.sum_dtype == "float32" else np.float64
    acc = np.empty((n, tb.n_outputs), dtype=dt)
    acc[:] = tb.base.astype(dt)
    rows = np.arange(n)
    for root, out in zip(tb.roots, tb.outputs):
        node = np.full(n, root, dtype=np.int64)
        live = tb.feat[node] != tb.leaf_code
        while live.any():
            r = rows[live]
            nd = node[r]
            f = tb.feat[nd]
            x = X[r, f >> 1]
            t = tb.thr[nd]
            with np.errstate(invalid="ignore"):
                go_left = np.where((f & 1) == 1, ~(x > t), x <= t)
            node[r] = np.where(go_left, nd + 1, nd + tb.right[nd])
            live = tb.feat[node] != tb.leaf_code
        leaf = tb.thr[node].astype(dt) if tb.sum_dtype == "float32" else tb.values[tb.right[node]]
        acc[:, out] = acc[:, out] + leaf
    if tb.scale != 1.0:
        acc = acc * dt(tb.scale)
    if tb.bias is not None:
        acc = acc + tb.bias.astype(dt)
    return acc.astype(np.float64)


def predict_class(tb: BoostTables, raw: np.ndarray) -> np.ndarray:
    """The C's class: ``raw[0] rule v`` for one output (the model's decision threshold), else the first
    largest output."""
    if raw.shape[1] == 1:
        r, v = raw[:, 0], tb.decision_value
        return ((r >= v) if tb.decision_rule == ">=" else (r > v)).astype(np.int64)
    return raw.argmax(axis=1).astype(np.int64)


def c_float(v: float, double: bool) -> str:
    """An exact C literal of ``v`` (a float32 value when ``double`` is false): hexadecimal floating."""
    v = float(v)
    if np.isinf(v) and not double:   # a +-inf threshold (the library's every-value-left test): <math.h>
        return "INFINITY" if v > 0 else "-INFINITY"
    if not np.isfinite(v):
        raise TreegenError("internal error: a non-finite constant in the boosted export")
    text = v.hex()
    return text if double else text + "f"


# ---------------------------------------------------------------------------------------------- q15
INT32_MAX = (1 << 31) - 1


@dataclass(eq=False)
class BoostQ15:
    """The integer form of a vote-'sum' model for Q15 inputs (``dtype q15``).

    Tests: ``q[f] <= Q`` on the Q15 grid of the model's input scaling (the model's ``threshold``,
    ``Q = floor(threshold * 32768)``). Leaf values ``v_q = round(v * 2**F)`` (half to even) in
    ``int32_t``; ``raw_q[k] = base_q[k] + sum of v_q`` in ``int32_t``, which cannot overflow:
    ``F`` is the largest integer with ``|base_q[k]| + sum over the trees of output k of max |v_q|
    <= 2**31 - 1``. Each of the ``n_k + 1`` roundings moves the sum by at most ``2**-(F+1)``, so
    ``|raw_q * 2**-F - raw_grid| <= (n_k + 1) * 2**-(F+1)`` where ``raw_grid`` is the exact sum of the
    grid model's leaf values; the source library's float sum differs from that exact sum by at most
    ``sum_err`` (``n_k * u * sum max|v|``, ``u`` = 2^-24 for float32 sums, 2^-53 for double). The
    class therefore equals the grid model's class unless ``|raw - v| <= bound`` (one output, ``v`` the
    decision threshold) or the two largest outputs differ by ``<= 2 * bound``, with ``bound`` = the sum
    of both terms.

    The binary decision: class 1 iff ``raw_q > decision_q``, with ``decision_q = floor(v * 2**F)`` for
    the rule ``>`` and ``ceil(v * 2**F) - 1`` for ``>=`` (clamped to int32): exactly the library's rule
    applied to the integer model's value ``raw_q * 2**-F`` (``v * 2**F`` is exact in double: a power of
    two scaling), so the threshold adds no rounding of its own.
    """

    feat: np.ndarray        # int64: feature index, leaf_code at leaves
    thr: np.ndarray         # int64: Q (internal), 0 at leaves
    right: np.ndarray       # int64: right-child distance (internal) / row of the leaf value (leaves)
    values: np.ndarray      # int64 (n_values,), int32-valued
    roots: np.ndarray
    outputs: np.ndarray
    base: np.ndarray        # int64 (n_outputs,)
    frac_bits: int
    bound: float
    n_outputs: int
    feat_bits: int
    right_bits: int
    leaf_code: int
    decision_q: int = 0     # one output: class 1 iff raw_q[0] > decision_q


def decision_q(value: float, rule: str, frac_bits: int) -> int:
    """The int32 ``T`` with ``raw_q > T``  <=>  ``raw_q * 2**-frac_bits rule value`` for every int32 ``raw_q``."""
    scaled = math.ldexp(float(value), frac_bits)   # exact (a power of two), unless it overflows to inf
    if math.isinf(scaled) or abs(scaled) > 2.0 ** 40:
        return INT32_MAX if scaled > 0 else -INT32_MAX - 1
    t = math.floor(scaled) if rule == ">" else math.ceil(scaled) - 1
    return int(min(max(t, -INT32_MAX - 1), INT32_MAX))


def lower_boost_q15(model) -> BoostQ15:
    if model.vote != "sum" or model.boost is None:
        raise TreegenError("lower_boost_q15 needs a model with vote 'sum'")
    k_out = model.n_outputs
    outs = np.asarray(model.boost["tree_output"], dtype=np.int64)
    # scale and bias (CatBoost) fold into the integer model: scale * (base + sum v) + bias
    scale = float(model.boost.get("scale", 1.0))
    base = scale * np.asarray(model.boost["base_score"], dtype=np.float64) + \
        np.asarray(model.boost.get("bias", [0.0] * k_out), dtype=np.float64)
    max_abs = np.abs(base).copy()
    n_k = np.zeros(k_out, dtype=np.int64)
    for tree, k in zip(model.trees, outs):
        leaves = tree.left == LEAF
        max_abs[k] += abs(scale) * float(np.abs(tree.leaf_value[leaves]).max())
        n_k[k] += 1
    worst = float(max_abs.max())
    F = 62
    if worst > 0:
        F = min(62, int(np.floor(np.log2(INT32_MAX / (worst + 1e-300)))) - 1)
        while F > -64 and np.any(np.abs(np.round(max_abs * 2.0 ** F)) + n_k + 1 > INT32_MAX):
            F -= 1
    feat_bits = 8 if model.n_features < 255 else 16
    leaf_code = (1 << feat_bits) - 1
    feat, thr, right, values, roots = [], [], [], [], []
    for tree in model.trees:
        if tree.preorder() != list(range(tree.n_nodes)):
            tree = tree.compact()
        roots.append(len(feat))
        fidx = np.argmax(tree.weights != 0, axis=1)
        for i in range(tree.n_nodes):
            if tree.left[i] == LEAF:
                feat.append(leaf_code)
                thr.append(0)
                right.append(len(values))
                values.append(int(np.round(scale * float(tree.leaf_value[i]) * 2.0 ** F)))
            else:
                feat.append(int(fidx[i]))
                thr.append(int(np.floor(tree.threshold[i] * 32768.0)))
                right.append(int(tree.right[i]) - i)
    u = 2.0 ** -24 if model.boost["sum_dtype"] == "float32" else 2.0 ** -53
    extra = int(scale != 1.0) + int("bias" in model.boost)   # the library's roundings after the trees
    sum_err = float(np.max((n_k + extra) * u * max_abs)) if k_out else 0.0
    bound = float(np.max((n_k + 1) * 2.0 ** -(F + 1))) + sum_err
    right_arr = np.asarray(right, dtype=np.int64)
    return BoostQ15(np.asarray(feat, dtype=np.int64), np.clip(np.asarray(thr, dtype=np.int64), -1, 32767),
                    right_arr, np.asarray(values, dtype=np.int64), np.asarray(roots, dtype=np.int64), outs,
                    np.round(base * 2.0 ** F).astype(np.int64), F, bound, k_out, feat_bits,
                    16 if right_arr.max(initial=0) <= 0xFFFF else 32, leaf_code, decision_q(*_decision(model), F))


def predict_raw_q15(tq: BoostQ15, Q: np.ndarray) -> np.ndarray:
    """What the q15 C computes: ``(n_rows, n_outputs)`` int64 sums (int32-valued) for Q15 rows."""
    Q = np.asarray(Q, dtype=np.int64)
    n = Q.shape[0]
    acc = np.tile(tq.base, (n, 1))
    rows = np.arange(n)
    for root, out in zip(tq.roots, tq.outputs):
        node = np.full(n, root, dtype=np.int64)
        live = tq.feat[node] != tq.leaf_code
        while live.any():
            r = rows[live]
            nd = node[r]
            go_left = Q[r, tq.feat[nd]] <= tq.thr[nd]
            node[r] = np.where(go_left, nd + 1, nd + tq.right[nd])
            live = tq.feat[node] != tq.leaf_code
        acc[:, out] += tq.values[tq.right[node]]
    return acc


def predict_class_q15(tq: BoostQ15, raw_q: np.ndarray) -> np.ndarray:
    """The q15 C's class from its int32 sums: ``raw_q[0] > decision_q`` for one output, else the first
    largest output."""
    if raw_q.shape[1] == 1:
        return (raw_q[:, 0] > tq.decision_q).astype(np.int64)
    return raw_q.argmax(axis=1).astype(np.int64)
