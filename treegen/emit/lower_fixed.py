"""Fixed-point lowering: float tree -> integer tree (Q15 inputs, int16 weights, integer thresholds),
the fixed-point soft vote, and the integer nodes the q15 templates render.

The integer semantics are executed in Python by :mod:`treegen.emit.check` (the reference the
generated C must equal); :mod:`treegen.emit.lower` assembles the description of an export.

Scaling and overflow behaviour
------------------------------
Inputs are Q15: ``x_q = round(x * 32768)`` in 0..32767 (``int16_t``), ``x`` the normalised
feature of :mod:`treegen.core.scaling`.

``axis`` trees (every internal test has exactly one non-zero weight)::

    go left  <=>  x_q[feature] <= threshold          (threshold: int16_t, -1..32767)

  A test ``c * x <= theta`` becomes ``x_q <= floor(theta * 32768 / c)`` for ``c > 0``; for ``c < 0``
  the comparison flips, so the threshold is ``ceil(theta * 32768 / c) - 1`` and the children are
  swapped. Computed with exact rational arithmetic, so every input on the Q15 grid takes exactly the
  branch the float tree takes (agreement 100 %).

``oblique`` trees::

    acc = sum_i w_q[i] * x_q[i]     (w_q: int16_t, per-node shift s: w_q = round(w * 2**s))
    go left  <=>  acc <= threshold  (threshold in units of 2**-(s + 15))

  ``s`` is the largest shift with ``max |w_q| <= 32767`` (full int16 range). The accumulator can
  never overflow: ``|acc| <= sum_i |w_q[i]| * 32767``; when that bound is < 2**31 for every node
  the accumulator is ``int32_t``, otherwise ``int64_t`` (``acc_bits``). Thresholds are clamped to
  the accumulator's range (a clamped threshold still decides exactly as the unclamped one since
  ``|acc|`` never reaches the clamp). When ``w * 2**s`` and ``theta * 2**(s+15)`` are integers (always
  the case for EFTI trees) the integer test is *exactly* the float test. Otherwise the threshold is
  chosen so that every training row given keeps the side it had in float where one integer
  threshold can do that, and rows that cannot keep their side are reported.

Children are references: ``>= 0`` an internal node index (pre-order, root 0), ``< 0`` a leaf
predicting class ``-ref - 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree

INT16_MAX = 32767
Q15_MAX = 32767
ACC32_LIMIT = (1 << 31) - 1


@dataclass(eq=False)
class QuantizedTree:
    n_features: int
    n_classes: int
    kind: str                  # "axis" or "oblique"
    feature: np.ndarray        # int64 (n_internal,): axis tests' feature; -1 for oblique trees
    weights: np.ndarray        # int64 (n_internal, n_features) int16-valued; shape (n_internal, 0) for axis
    shift: np.ndarray          # int64 (n_internal,): per-node weight shift s (oblique); 0 for axis
    threshold: np.ndarray      # int64 (n_internal,)
    left: np.ndarray           # int64 (n_internal,) child references (see module doc)
    right: np.ndarray          # int64 (n_internal,)
    root: int                  # reference of the root: 0, or a leaf reference for a single-leaf tree
    acc_bits: int              # 32 or 64 (oblique); 16 for axis trees (no accumulator)
    exact: bool                # integer tests provably equal the float tests on every Q15 input
    unresolved_rows: list = field(default_factory=list)  # training rows that cannot keep their side

    @property
    def n_internal(self) -> int:
        return int(self.threshold.shape[0])


def _floor(fr: Fraction) -> int:
    return fr.numerator // fr.denominator


def _ceil(fr: Fraction) -> int:
    return -((-fr.numerator) // fr.denominator)


def _clamp_acc(t: int) -> int:
    """Keep a threshold inside int64 (the accumulator range clip follows); beyond +-2**62 no
    accumulator value can reach it, so the decision is unchanged."""
    return max(-(1 << 62), min(t, 1 << 62))


def _leaf_ref(cls: int) -> int:
    return -int(cls) - 1


def _weight_shift(max_abs: float) -> int:
    """Largest s with round(max_abs * 2**s) <= 32767 (full int16 range)."""
    s = math.floor(math.log2(INT16_MAX / max_abs))
    while round(math.ldexp(max_abs, s + 1)) <= INT16_MAX:
        s += 1
    while round(math.ldexp(max_abs, s)) > INT16_MAX:
        s -= 1
    return s


def _fit_threshold(acc: np.ndarray, left: np.ndarray, t0: int) -> tuple[int, np.ndarray]:
    """Integer T keeping ``acc <= T`` exactly for the ``left`` rows where possible.

    Returns T and a boolean mask of rows that still end on the wrong side. Among the thresholds
    with the fewest wrong rows, the one closest to the float threshold ``t0`` is taken.
    """
    if acc.size == 0:
        return t0, np.zeros(0, dtype=bool)
    acc_l, acc_r = acc[left], acc[~left]
    max_l = int(acc_l.max()) if acc_l.size else None
    min_r = int(acc_r.min()) if acc_r.size else None
    if max_l is None or min_r is None or max_l < min_r:
        lo = max_l if max_l is not None else -(1 << 62)
        hi = (min_r - 1) if min_r is not None else (1 << 62)
        return min(max(t0, lo), hi), np.zeros(acc.size, dtype=bool)
    # no separating threshold: minimise the number of rows on the wrong side
    cand = np.unique(np.concatenate([acc, acc - 1, [t0]]))
    sl, sr = np.sort(acc_l), np.sort(acc_r)
    wrong = (sl.size - np.searchsorted(sl, cand, side="right")) + np.searchsorted(sr, cand, side="right")
    best = wrong.min()
    options = cand[wrong == best]
    t = int(options[np.argmin(np.abs(options - t0))])
    bad = np.where(left, acc > t, acc <= t)
    return t, bad


def quantize_tree(tree: Tree, X_q15: np.ndarray | None = None, leaf_ids: np.ndarray | None = None) -> QuantizedTree:
    """Integer version of ``tree`` (see the module docstring for the exact semantics).

    ``X_q15`` (optional, int rows on the Q15 grid, e.g. the training data) is used only for
    oblique nodes whose coefficients are not exactly representable: their thresholds are then
    fitted so these rows keep their float side, and rows that cannot are reported in
    ``unresolved_rows`` (row indices into ``X_q15``).

    ``leaf_ids`` (optional, int per node): what a leaf returns instead of its class index (e.g. the
    index of its class-probability row for soft voting); leaf references become ``-leaf_id - 1``.
    """
    tree.validate()
    leaf_value = tree.leaf_class if leaf_ids is None else np.asarray(leaf_ids, dtype=np.int64)
    order = [k for k in tree.preorder() if tree.left[k] != LEAF]
    index = {k: i for i, k in enumerate(order)}
    n_int, A = len(order), tree.n_features

    def ref(k: int) -> int:
        return index[k] if tree.left[k] != LEAF else _leaf_ref(leaf_value[k])

    W = tree.weights[order] if n_int else np.zeros((0, A))
    nnz = np.count_nonzero(W, axis=1)
    kind = "axis" if np.all(nnz <= 1) else "oblique"
    left = np.array([ref(int(tree.left[k])) for k in order], dtype=np.int64)
    right = np.array([ref(int(tree.right[k])) for k in order], dtype=np.int64)
    root = 0 if n_int else _leaf_ref(leaf_value[0])
    feature = np.full(n_int, -1, dtype=np.int64)
    shift = np.zeros(n_int, dtype=np.int64)
    threshold = np.zeros(n_int, dtype=np.int64)
    exact = True
    unresolved: set[int] = set()

    if kind == "axis":
        for i, k in enumerate(order):
            theta = Fraction(float(tree.threshold[k]))
            if nnz[i] == 0:
                feature[i] = 0
                threshold[i] = Q15_MAX if theta >= 0 else -1
                continue
            f = int(np.flatnonzero(W[i])[0])
            c = Fraction(float(W[i, f]))
            v = theta * Q15_ONE_FR / c
            feature[i] = f
            if c > 0:
                t = _floor(v)
            else:   # c*x <= theta  <=>  x >= v  <=>  not (x <= ceil(v) - 1): swap the children
                t = _ceil(v) - 1
                left[i], right[i] = right[i], left[i]
            threshold[i] = min(max(t, -1), Q15_MAX)
        return QuantizedTree(A, tree.n_classes, "axis", feature, np.zeros((n_int, 0), dtype=np.int64), shift,
                             threshold, left, right, root, 16, True, [])

    Wq = np.zeros((n_int, A), dtype=np.int64)
    reach = None
    if X_q15 is not None:
        Xq = np.asarray(X_q15, dtype=np.int64)
        if Xq.ndim != 2 or Xq.shape[1] != A:
            raise TreegenError(f"quantisation data has shape {Xq.shape}, expected (rows, {A})")
        X01 = Xq / 32768.0
        # rows reaching each node in the float tree
        node_of = np.zeros(Xq.shape[0], dtype=np.int64)
        reach = {}
        active = np.arange(Xq.shape[0])
        while active.size:
            cur = node_of[active]
            for k in np.unique(cur):
                if tree.left[k] != LEAF:
                    reach[int(k)] = active[cur == k]
            internal = tree.left[cur] != LEAF
            active, cur = active[internal], cur[internal]
            go_left = np.einsum("ij,ij->i", X01[active], tree.weights[cur]) <= tree.threshold[cur]
            node_of[active] = np.where(go_left, tree.left[cur], tree.right[cur])
    bound = 0
    for i, k in enumerate(order):
        w = W[i]
        theta = Fraction(float(tree.threshold[k]))
        m = float(np.abs(w).max())
        if m == 0.0:
            threshold[i] = 0 if theta >= 0 else -1
            continue
        s = _weight_shift(m)
        wq = np.rint(np.ldexp(w, s)).astype(np.int64)
        Wq[i] = wq
        shift[i] = s
        bound = max(bound, int(np.abs(wq).sum()) * Q15_MAX)
        t_exact = theta * (Fraction(2) ** (s + 15))
        t0 = _floor(t_exact)
        node_exact = bool(np.array_equal(np.ldexp(w, s), wq.astype(np.float64))) and t_exact.denominator == 1
        if node_exact:
            threshold[i] = _clamp_acc(t0)
            continue
        exact = False
        if reach is not None and int(k) in reach:
            rows = reach[int(k)]
            acc = Xq[rows] @ wq
            float_left = (X01[rows] @ w) <= float(tree.threshold[k])
            t, bad = _fit_threshold(acc, float_left, t0)
            threshold[i] = _clamp_acc(t)
            unresolved.update(int(r) for r in rows[bad])
        else:
            threshold[i] = _clamp_acc(t0)
    acc_bits = 32 if bound <= ACC32_LIMIT else 64
    lim = (1 << (acc_bits - 1))
    threshold = np.clip(threshold, -lim, lim - 1)
    return QuantizedTree(A, tree.n_classes, "oblique", feature, Wq, shift, threshold, left, right, root,
                         acc_bits, exact, sorted(unresolved))


Q15_ONE_FR = Fraction(32768)


def quantize_trees(trees: list, X_q15: np.ndarray | None = None, leaf_ids: list | None = None) -> list[QuantizedTree]:
    """:func:`quantize_tree` of every tree of ``trees`` (``leaf_ids``: per tree)."""
    return [quantize_tree(t, X_q15, None if leaf_ids is None else leaf_ids[k]) for k, t in enumerate(trees)]


def quantize_model(model, X_q15: np.ndarray | None = None, leaf_ids: list | None = None) -> list[QuantizedTree]:
    """Quantise every tree of a :class:`~treegen.core.model.Model` (``leaf_ids``: per tree, see
    :func:`quantize_tree`)."""
    return quantize_trees(model.trees, X_q15, leaf_ids)


# ------------------------------------------------------------------------------ soft voting
PROBA_BITS = 15          # leaf probabilities in units of 2^-15 (uint16_t, 32768 = 1.0)
PROBA_ONE = 1 << PROBA_BITS


@dataclass(eq=False)
class SoftVote:
    """Fixed-point soft voting of an ensemble.

    Every distinct leaf class distribution of the forest is one row of ``table`` (uint16, units of
    2^-15: ``P = round(p * 32768)`` half up, ``p`` the leaf's count frequency); ``leaf_ids[k][node]``
    is the row of node ``node`` of tree ``k``. The C sums the rows of the leaves reached
    (``uint32_t``, at most ``n_trees * 32768``: no overflow below 131072 trees) and returns the first
    class with the largest sum (scikit-learn's ``argmax``: ties -> lowest index).

    Agreement with the float mean (scikit-learn's ``predict_proba``): each stored probability is
    within 2^-16 of ``p``, so a sum difference of two classes is within ``n_trees * 2^-15`` of the
    exact one: the fixed-point vote equals the float argmax whenever the top class's mean exceeds
    every other class's mean by more than ``bound`` = 2^-15 (+ the float sum's own rounding,
    ``n_trees * 2^-52``). ``exact`` when every ``p * 32768`` is an integer (e.g. pure leaves): then
    the sums are exact in both and the votes are identical, ties included.
    """

    table: np.ndarray       # int64 (n_rows, n_classes), values 0..32768
    leaf_ids: list          # per tree: int64 (n_nodes,) row index of each leaf (-1 for internal nodes)
    exact: bool
    bound: float
    onehot: bool = False    # every leaf is pure: row k is class k (the C adds 32768 to the leaf's class)

    @property
    def n_rows(self) -> int:
        return int(self.table.shape[0])


def soft_vote(model) -> SoftVote:
    """The fixed-point soft vote of ``model``'s trees (see :class:`SoftVote`)."""
    rows: dict = {}
    table = []
    leaf_ids = []
    exact = True
    for tree in model.trees:
        counts = tree.class_counts
        ids = np.full(tree.n_nodes, -1, dtype=np.int64)
        for node in tree.leaves():
            c = counts[node].astype(object)
            n = int(sum(c))
            if n == 0:
                row = tuple(PROBA_ONE if k == tree.leaf_class[node] else 0 for k in range(tree.n_classes))
            else:   # round half up, exact rational arithmetic
                row = tuple(int((2 * int(ck) * PROBA_ONE + n) // (2 * n)) for ck in c)
                exact &= all((int(ck) * PROBA_ONE) % n == 0 for ck in c)
            if row not in rows:
                rows[row] = len(table)
                table.append(row)
            ids[node] = rows[row]
        leaf_ids.append(ids)
    n_trees = len(model.trees)
    bound = 0.0 if exact else 2.0 ** -PROBA_BITS + n_trees * 2.0 ** -52
    table = np.array(table, dtype=np.int64).reshape(-1, model.n_classes)
    if np.all(np.count_nonzero(table, axis=1) == 1):   # pure leaves: row = class, sums = 32768 * votes
        cls = table.argmax(axis=1)
        leaf_ids = [np.where(ids >= 0, cls[np.maximum(ids, 0)], -1) for ids in leaf_ids]
        table = np.eye(model.n_classes, dtype=np.int64) * PROBA_ONE
        return SoftVote(table, leaf_ids, True, 0.0, True)
    return SoftVote(table, leaf_ids, exact, bound)


def soft_vote_for(model, vote: str) -> SoftVote | None:
    """The soft vote an export of ``model`` with ``vote`` (resolved: ``soft`` / ``hard``) uses: the
    :class:`SoftVote` of a soft-voting ensemble, else None. Raises when the ``uint32_t`` sums of the C
    could overflow."""
    soft = soft_vote(model) if len(model.trees) > 1 and vote == "soft" else None
    if soft is not None and len(model.trees) >= (1 << 31) // PROBA_ONE:
        raise TreegenError(f"soft voting sums {len(model.trees)} trees: more than a uint32_t sum holds")
    return soft


# ------------------------------------------------------------------------------ integer nodes
def _acc_bound(weights_row: np.ndarray) -> int:
    return int(np.abs(weights_row).sum()) * Q15_MAX


def _q15_tree(index: int, qt: QuantizedTree, tree: Tree) -> dict:
    """One quantised tree as target-ready integer nodes (pre-order; child references as in the module
    doc): per node the threshold, children and the feature (axis) or the int16 weights, the shift and
    the accumulator bound (oblique); per tree its kind, root, size and accumulator width."""
    n_int = qt.n_internal
    kind = "leaf" if qt.root < 0 else qt.kind
    nodes = []
    for i in range(n_int):
        node = {"index": i, "threshold": int(qt.threshold[i]), "left": int(qt.left[i]), "right": int(qt.right[i])}
        if qt.kind == "axis":
            node["feature"] = int(qt.feature[i])
        else:
            row = np.asarray(qt.weights[i], dtype=np.int64)
            node["weights"] = [int(v) for v in row]
            node["shift"] = int(qt.shift[i])
            node["acc_bound"] = _acc_bound(row)
        nodes.append(node)
    return {
        "index": index, "kind": kind, "root": int(qt.root), "n_internal": n_int,
        "n_leaves": tree.n_leaves, "depth": tree.depth, "leaf_class": int(-qt.root - 1) if qt.root < 0 else -1,
        "acc_bits": int(qt.acc_bits) if kind == "oblique" else 16,
        "acc_bound": max((n["acc_bound"] for n in nodes), default=0) if kind == "oblique" else 0,
        "exact": bool(qt.exact), "nodes": nodes,
    }


def lower_q15(model, soft: SoftVote | None, X_q15: np.ndarray | None = None,
              qtrees: list | None = None) -> tuple[list, list]:
    """(quantised trees, their integer nodes) of ``model``: the trees quantised with the data rows
    ``X_q15`` (see :func:`quantize_tree`) and, with ``soft``, leaves returning probability rows;
    ``qtrees`` given: those trees, already quantised."""
    if qtrees is None:
        qtrees = quantize_model(model, X_q15, None if soft is None else soft.leaf_ids)
    return qtrees, [_q15_tree(k, qt, t) for k, (qt, t) in enumerate(zip(qtrees, model.trees))]
