"""EFTI — Evolutionary Full Tree Induction (oblique trees by a (1+1) evolution strategy).

The algorithm of the EFTI thesis (shared/seeds/000_*.txt) with the defaults of its public
reference implementation:

* **Individual**: one binary oblique tree; the evolution starts from a random one-node tree.
* **Node test initialisation (mixed dipole)**: pick two training instances ``x_i``, ``x_j`` of
  different classes; ``w = x_i - x_j`` and ``theta = delta*w.x_i + (1-delta)*w.x_j`` with
  ``delta = d/100``, ``d`` uniform in 5..94, so the hyperplane lies between the two points and
  separates them. The dipole is drawn from the whole training set (``dipole="global"``, as the
  reference does) or, with ``dipole="node"``, from the instances reaching the leaf being split
  when they hold at least two classes.
* **Coefficient mutation**: every iteration ``1 + floor(alpha * internal_nodes * (A+1))``
  (computed as ``(round_down(alpha * 2**32) * internal_nodes * (A+1)) >> 32``)
  distinct coefficients (``alpha = coefficient_mutation_rate``, 0 = one per iteration as in the
  reference) of random internal nodes change by ``sigma * N(0,1)``; 30 % of the picks hit the
  threshold. ``sigma = clip(|c|, 0.1, 0.25)`` in the coefficient's own unit (weights: 1;
  threshold: the dot-product unit), coefficients saturate at +-(1 - 2**-15).
* **Topology mutation**: with probability ``p = rho * (1 - exp(-leaves/classes))`` a random leaf
  is either replaced by a new node with two leaves (probability ``p``; needs depth < max_depth),
  or removed together with its parent while its sibling moves up (needs > 2 leaves).
* **Attribute sampling per node** (``node_features = k``, 0 = off; the oblique counterpart of
  scikit-learn's ``max_features``): when ``0 < k < A``, every new node (the root and every node a
  topology mutation adds) first draws its own ``k`` distinct attributes (a partial Fisher-Yates
  shuffle of ``0..A-1``: for ``i < k``, swap position ``i`` with ``i + below(A - i)``; the node keeps
  the first ``k`` entries in that order). Its dipole hyperplane uses only those attributes
  (``w_a = 0`` elsewhere, ``theta`` from that ``w``), and its weight mutations pick an attribute among
  them (``subset[below(k)]``), so the node's weights stay zero outside its subset; the coefficient
  count uses ``k + 1`` in place of ``A + 1``. With ``k = 0`` or ``k >= A`` no draw is made: the
  same trees as without the option.
* **Leaf classes**: the dominant class of each row of the distribution matrix (ties -> lowest
  class index; an empty leaf predicts class 0).
* **Fitness**: ``accuracy * (1 - Ko*oversize**2) * (1 - Km*missing)`` with
  ``oversize = (leaves - classes)/classes`` and ``missing`` the fraction of classes no leaf
  predicts (the size factor is floored at 0).
* **Selection**: the mutant replaces the parent when its fitness is higher. Otherwise, after
  ``s`` stagnant iterations, it is still accepted with the *search probability*
  ``s * raise * exp(-((f - f_mut)/f) / search_probability)``; while such a search is under way,
  the evolution returns to the best tree found so far with probability
  ``return_to_best_probability`` per iteration.

Integer fitness and selection
-----------------------------
So that the same algorithm runs bit for bit in C on an FPU-less microcontroller, fitness and
selection are integer: ``F = hits * PEN[leaves] * MISS[classes_present]`` with the factor tables
``PEN[L] = round(65536 * max(0, 1 - Ko*((L-C)/C)**2))`` and
``MISS[p] = round(65536 * (1 - Km*(C-p)/C))`` (``fitness = F / (n * 2**32)``); "higher" is ``>`` on
``F``. The search probability is a 32-bit threshold
``(min(s * RAISE, 2**32) * EXP[d]) >> 32`` with ``RAISE = round(raise * 2**32)``,
``d = min(1023, ((F - F_mut) * 1024) // F)`` and ``EXP[d] = round(2**32 * exp(-(d/1024)/sp))``
(capped at 2**32 - 1). The probability tables are computed once, in Python, and handed to C.
* **Partial reclassification**: the projections ``w.x`` of every instance on every node are
  memorised; a mutation re-routes only the instances whose path crosses a mutated node, updates
  the mutated projection column incrementally (``w_mut.x = w.x + (w_mut_a - w_a) x_a``) and
  updates the distribution matrix by difference. It is switched on when the tree is at least
  3 tests deep and off again at depth 1 (small trees gain nothing).

Exact arithmetic
----------------
Inputs are Q15 integers (``x * 32768``), weights are integers in +-32767 (``w * 32768``) and
thresholds integers in units of ``2**-30``; they are stored in float64, in which every product and
sum here is an exact integer (< 2**53). Hence the incremental projections of partial
reclassification equal freshly computed ones bit for bit, partial and full reclassification
produce the *identical* tree for a seed, and the exported weights are exactly representable in
the fixed-point C (``int16`` weights, integer thresholds).

All random choices go through :class:`treegen.core.rng.Pcg32` with integer draws, so the algorithm
can be reproduced exactly in C.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_EFTI_DEPTH
from treegen.core.rng import Pcg32, prob_u32
from treegen.core.tree import LEAF, Tree
from treegen.learn import vicinal, vicinal_q16

W_ONE = 1 << 15            # weight / input unit (Q15)
W_MAX = W_ONE - 1          # saturation of weights
T_ONE = 1 << 30            # threshold unit: product of two Q15 values
FIT_ONE = 1 << 16          # fixed-point one of the fitness factor tables
EXP_STEPS = 1024           # resolution of the search-probability table (relative fitness loss)
MAX_COEF_MUTATIONS = 64    # cap of coefficient mutations per iteration (static buffer in C)
CALLBACK_INTERVAL = 1024
VICINAL_ONE = 1 << 16      # unit of the vicinal "hits" (probability mass of correct classification)
DELTA_ON_DEPTH = 3
DELTA_OFF_DEPTH = 1


MAX_ITER = (1 << 32) - 1     # iteration counters are uint32_t in the C engine (host and device)
MAX_SEED = (1 << 64) - 1     # PCG32 takes a 64-bit seed
MAX_NODE_FEATURES = 65535    # attribute indices are uint16_t in the C engine


@dataclass(frozen=True)
class EFTIParams:
    """EFTI options (defaults of the public reference implementation)."""

    max_iter: int = 50_000
    oversize_weight: float = 0.01
    missing_weight: float = 0.0
    topology_mutation_rate: float = 0.6
    search_probability: float = 0.05
    search_probability_raise: float = 5e-5
    return_to_best_probability: float = 1e-4
    max_depth: int = 8
    partial_reclassification: bool = True
    coefficient_mutation_rate: float = 0.0
    threshold_mutation_share: float = 0.3
    dipole: str = "global"
    node_features: int = 0

    def validate(self) -> "EFTIParams":
        def check(cond: bool, msg: str) -> None:
            if not cond:
                raise TreegenError(f"EFTI: {msg}")

        check(isinstance(self.max_iter, (int, np.integer)) and not isinstance(self.max_iter, bool)
              and 0 <= self.max_iter <= MAX_ITER,
              f"max_iter must be an integer in 0..{MAX_ITER} (the engines count iterations in 32 bits), "
              f"got {self.max_iter!r}")
        check(0 <= self.oversize_weight, f"oversize_weight must be >= 0, got {self.oversize_weight}")
        check(0 <= self.missing_weight <= 1, f"missing_weight must be in [0, 1], got {self.missing_weight}")
        check(0 <= self.topology_mutation_rate <= 1,
              f"topology_mutation_rate must be in [0, 1], got {self.topology_mutation_rate}")
        check(self.search_probability > 0, f"search_probability must be > 0, got {self.search_probability}")
        check(self.search_probability_raise >= 0,
              f"search_probability_raise must be >= 0, got {self.search_probability_raise}")
        check(0 <= self.return_to_best_probability <= 1,
              f"return_to_best_probability must be in [0, 1], got {self.return_to_best_probability}")
        check(isinstance(self.max_depth, (int, np.integer)) and 1 <= self.max_depth <= MAX_EFTI_DEPTH,
              f"max_depth must be an integer in 1..{MAX_EFTI_DEPTH}, got {self.max_depth!r}")
        check(0 <= self.coefficient_mutation_rate <= 1,
              f"coefficient_mutation_rate must be in [0, 1], got {self.coefficient_mutation_rate}")
        check(self.dipole in ("node", "global"), f"dipole must be 'node' or 'global', got {self.dipole!r}")
        check(0 <= self.threshold_mutation_share <= 1,
              f"threshold_mutation_share must be in [0, 1], got {self.threshold_mutation_share}")
        check(isinstance(self.node_features, (int, np.integer)) and not isinstance(self.node_features, bool)
              and 0 <= self.node_features <= MAX_NODE_FEATURES,
              f"node_features must be an integer in 0..{MAX_NODE_FEATURES} (0 = every attribute), "
              f"got {self.node_features!r}")
        return self


def check_seed(seed) -> int:
    """A seed as the RNG uses it: an integer in 0..2**64-1 (larger values would silently wrap)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise TreegenError(f"EFTI: random_state must be an integer in 0..{MAX_SEED} (a 64-bit seed), got {seed!r}")
    return int(seed)


def topology_thresholds(params: EFTIParams, n_classes: int, max_leaves: int) -> list[int]:
    """32-bit thresholds of the topology mutation probability, indexed by the number of leaves."""
    return [prob_u32(params.topology_mutation_rate * (1.0 - math.exp(-leaves / n_classes)))
            for leaves in range(max_leaves + 1)]


class FitnessTables:
    """Integer fitness factors and selection probabilities (shared with the C engine)."""

    def __init__(self, params: EFTIParams, n_classes: int):
        self.p = params
        self.C = n_classes
        self._pen: dict[int, int] = {}
        self.miss = [round(FIT_ONE * (1.0 - params.missing_weight * (n_classes - k) / n_classes))
                     for k in range(n_classes + 1)]
        self.raise_q32 = round(params.search_probability_raise * 2.0 ** 32)
        self.exp = [min((1 << 32) - 1, round(2.0 ** 32 * math.exp(-(d / EXP_STEPS) / params.search_probability)))
                    for d in range(EXP_STEPS)]

    def pen(self, leaves: int) -> int:
        v = self._pen.get(leaves)
        if v is None:
            over = (leaves - self.C) / self.C
            v = self._pen[leaves] = round(FIT_ONE * max(0.0, 1.0 - self.p.oversize_weight * over * over))
        return v

    def fitness(self, hits: int, leaves: int, present: int) -> int:
        return hits * self.pen(leaves) * self.miss[present]

    def search_threshold(self, stagnation: int, f_cur: int, f_mut: int) -> int:
        """32-bit threshold of the search probability (0 when f_cur == 0)."""
        if f_cur <= 0:
            return 0
        d = min(EXP_STEPS - 1, ((f_cur - f_mut) * EXP_STEPS) // f_cur)
        a = min(stagnation * self.raise_q32, 1 << 32)
        return (a * self.exp[d]) >> 32


def fitness(hits: int, n: int, leaves: int, classes_present: int, n_classes: int, params: EFTIParams) -> float:
    """The fitness value (a fraction in [0, 1]) of the integer definition."""
    tables = FitnessTables(params, n_classes)
    return tables.fitness(hits, leaves, classes_present) / (n * float(1 << 32))


class _Snapshot:
    __slots__ = ("W", "T", "L", "R", "par", "F", "root", "free", "fit", "hits", "dom")


class Evolver:
    """State of one EFTI run. Use :func:`induce`; this class is public for tests and benchmarks."""

    def __init__(self, Xq: np.ndarray, y: np.ndarray, n_classes: int, params: EFTIParams, seed: int):
        self.X = np.ascontiguousarray(Xq, dtype=np.float64)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.n, self.A = self.X.shape
        self.C = int(n_classes)
        self.p = params
        self.rng = Pcg32(seed)
        cap = 32
        self.cap = cap
        self.W = np.zeros((cap, self.A))
        self.T = np.zeros(cap)
        self.L = np.full(cap, LEAF, dtype=np.int64)
        self.R = np.full(cap, LEAF, dtype=np.int64)
        self.par = np.full(cap, LEAF, dtype=np.int64)
        self.P = np.zeros((self.n, cap))          # memorised projections (partial reclassification)
        self.free = list(range(cap - 1, -1, -1))  # pop() yields the lowest free slot
        self.counts = np.zeros((cap, self.C), dtype=np.int64)
        # attribute sampling per node: k attributes per node (k = A: off, no draws)
        self.k = params.node_features if 0 < params.node_features < self.A else self.A
        self.sampling = self.k < self.A
        self.F = np.zeros((cap, self.k if self.sampling else 0), dtype=np.int64)   # each node's attributes
        self.root = self._alloc()
        max_leaves = 1 << params.max_depth
        self.topo_thr = topology_thresholds(params, self.C, max_leaves)
        self.thr_share = prob_u32(params.threshold_mutation_share)
        self.alpha_u32 = prob_u32(params.coefficient_mutation_rate)
        self.rtb_thr = prob_u32(params.return_to_best_probability)
        self.tables = FitnessTables(params, self.C)
        self.partial = False
        self.stats = {"rerouted": 0, "evaluations": 0}
        self.vicinal_sigma = None     # per-attribute kernel widths when the fitness uses the vicinal risk
        self.vicinal_sigma_q15 = self.vicinal_phi = self.Xq_int = None   # ... and its integer form
        self._structure()

    # ------------------------------------------------------------------ node pool
    def _alloc(self) -> int:
        if not self.free:
            self._grow()
        node = self.free.pop()
        self.L[node] = self.R[node] = self.par[node] = LEAF
        self.W[node] = 0.0
        self.T[node] = 0.0
        return node

    def _release(self, node: int) -> None:
        self.L[node] = self.R[node] = self.par[node] = LEAF
        self.W[node] = 0.0
        self.T[node] = 0.0
        self.free.append(node)
        self.free.sort(reverse=True)

    def _grow(self) -> None:
        old, new = self.cap, self.cap * 2
        self.W = np.vstack([self.W, np.zeros((old, self.A))])
        self.T = np.concatenate([self.T, np.zeros(old)])
        for name in ("L", "R", "par"):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(old, LEAF, dtype=np.int64)]))
        self.P = np.hstack([self.P, np.zeros((self.n, old))])
        self.counts = np.vstack([self.counts, np.zeros((old, self.C), dtype=np.int64)])
        self.F = np.vstack([self.F, np.zeros((old, self.F.shape[1]), dtype=np.int64)])
        self.free = sorted(self.free + list(range(old, new)), reverse=True)
        self.cap = new

    # ------------------------------------------------------------------ structure caches
    def _structure(self) -> None:
        """Leaves and internal nodes in pre-order, node depths, routing table."""
        L, R = self.L.tolist(), self.R.tolist()
        leaves, internal = [], []
        depth = [0] * self.cap
        stack = [self.root]
        max_depth = 0
        while stack:
            node = stack.pop()
            left = L[node]
            if left == LEAF:
                leaves.append(node)
            else:
                internal.append(node)
                d = depth[node] + 1
                right = R[node]
                depth[left] = depth[right] = d
                if d > max_depth:
                    max_depth = d
                stack.append(right)
                stack.append(left)
        self.leaves = leaves
        self.internal = internal
        self.node_depth = depth
        self.tree_depth = max_depth
        # child table for vectorised routing (leaves point to themselves)
        own = np.arange(self.cap, dtype=np.int64)
        child = np.empty(2 * self.cap, dtype=np.int64)
        child[0::2] = np.where(self.L >= 0, self.L, own)
        child[1::2] = np.where(self.R >= 0, self.R, own)
        self.child = child
        self.internal_arr = np.array(internal, dtype=np.int64)
        self.leaves_arr = np.array(leaves, dtype=np.int64)

    _STRUCT = ("leaves", "internal", "node_depth", "tree_depth", "child", "internal_arr", "leaves_arr")

    def _save_structure(self) -> tuple:
        return tuple(getattr(self, name) for name in self._STRUCT)

    def _load_structure(self, saved: tuple) -> None:
        for name, value in zip(self._STRUCT, saved):
            setattr(self, name, value)

    def _subtree_leaves(self, node: int) -> list[int]:
        out, stack = [], [node]
        while stack:
            k = stack.pop()
            if self.L[k] == LEAF:
                out.append(k)
            else:
                stack.append(int(self.R[k]))
                stack.append(int(self.L[k]))
        return out

    # ------------------------------------------------------------------ classification
    def _route(self, G: np.ndarray) -> np.ndarray:
        """Leaf of each row given its test outcomes ``G`` (rows x node slots, True = right;
        columns of leaves are never read)."""
        m = G.shape[0]
        node = np.full(m, self.root, dtype=np.int64)
        if not self.internal:
            return node
        flat = G.reshape(-1)
        base = np.arange(m, dtype=np.int64) * G.shape[1]
        child = self.child
        for _ in range(self.tree_depth):
            node = child[2 * node + flat[base + node]]
        return node

    def _classify_all(self) -> np.ndarray:
        """Full reclassification: fresh projections of every instance on every internal node."""
        if not self.internal:
            return np.full(self.n, self.root, dtype=np.int64)
        ia = self.internal_arr
        proj = self.X @ self.W[ia].T
        if self.partial:
            self.P[:, ia] = proj
        G = np.zeros((self.n, self.cap), dtype=bool)
        G[:, ia] = proj > self.T[ia]
        return self._route(G)

    def _counts_full(self, leaf_of: np.ndarray) -> np.ndarray:
        return np.bincount(leaf_of * self.C + self.y, minlength=self.cap * self.C).reshape(self.cap, self.C)

    def _score(self, counts: np.ndarray) -> tuple[float, int, np.ndarray]:
        per_leaf = counts[self.leaves_arr]
        dom = per_leaf.argmax(axis=1)
        hits = int(per_leaf.max(axis=1).sum())
        present = len(set(dom.tolist())) if self.p.missing_weight else self.C
        if self.vicinal_sigma is not None:
            # vicinal risk replaces accuracy: "hits" = sum of the rows' probabilities of being
            # classified correctly, in units of 2**-16, by the integer recursion the C engine runs
            correct = vicinal_q16.correct_mass(self.W, self.T, self.L, self.R, self.root,
                                               dict(zip(self.leaves, dom.tolist())), self.Xq_int, self.y,
                                               self.vicinal_sigma_q15, self.vicinal_phi)
            return self.tables.fitness(correct, len(self.leaves), present), hits, dom
        return self.tables.fitness(hits, len(self.leaves), present), hits, dom

    def evaluate_current(self) -> None:
        """(Re)compute everything about the current individual from scratch."""
        self.leaf_of = self._classify_all()
        self.counts = self._counts_full(self.leaf_of)
        self.fit, self.hits, self.dom = self._score(self.counts)

    # ------------------------------------------------------------------ node test initialisation
    def draw_node_features(self, node: int) -> None:
        """The ``k`` attributes of a new node (partial Fisher-Yates shuffle; attribute sampling per node)."""
        perm = list(range(self.A))
        for i in range(self.k):
            j = i + self.rng.below(self.A - i)
            perm[i], perm[j] = perm[j], perm[i]
        self.F[node] = perm[:self.k]

    def dipole_hyperplane(self, members: np.ndarray | None, node: int) -> tuple[np.ndarray, int]:
        """Mixed-dipole hyperplane ``(w, theta)`` in integer units for the new test of ``node`` (see
        module docstring); with attribute sampling per node, ``node`` first draws its attributes and
        ``w`` is zero outside them."""
        rng, y = self.rng, self.y
        if self.sampling:
            self.draw_node_features(node)
        pool = None
        if members is not None and members.size >= 2:
            ym = y[members]
            if ym.min() != ym.max():
                pool = members
        if pool is None:
            pool = np.arange(self.n)
        m = pool.size
        i = int(pool[rng.below(m)])
        j = i
        while y[j] == y[i]:
            j = int(pool[rng.below(m)])
        w = self.X[i] - self.X[j]
        if self.sampling:
            keep = np.zeros(self.A, dtype=bool)
            keep[self.F[node]] = True
            w[~keep] = 0.0
        d = 5 + rng.below(90)
        pi = int(w @ self.X[i])
        pj = int(w @ self.X[j])
        theta = (d * pi + (100 - d) * pj) // 100
        return w, theta

    def init_root(self) -> None:
        w, theta = self.dipole_hyperplane(None, self.root)
        self._split(self.root, w, theta)
        self._structure()

    def _split(self, leaf: int, w: np.ndarray, theta: int) -> tuple[int, int]:
        c1 = self._alloc()
        c2 = self._alloc()
        self.L[leaf], self.R[leaf] = c1, c2
        self.par[c1] = self.par[c2] = leaf
        self.W[leaf] = w
        self.T[leaf] = float(theta)
        return c1, c2

    # ------------------------------------------------------------------ mutation
    def _sigma_step(self, value: float, one: int) -> int:
        a = abs(value)
        lo, hi = one // 10, one // 4
        sigma = lo if a < lo else (int(a) if a < hi else hi)
        return (sigma * self.rng.normal_q16()) >> 16

    def mutate(self) -> dict:
        """Apply one mutation in place; return the undo record."""
        rng, p = self.rng, self.p
        undo = {"topo": None, "coef": [], "mark": []}
        n_leaves = len(self.leaves)
        can_topo = p.max_depth >= 2
        if can_topo and rng.chance(self.topo_thr[min(n_leaves, len(self.topo_thr) - 1)]):
            undo["structure"] = self._save_structure()
            undo["structure_cap"] = self.cap
            add_thr = self.topo_thr[min(n_leaves, len(self.topo_thr) - 1)]
            while True:
                leaf = self.leaves[rng.below(n_leaves)]
                if rng.chance(add_thr):
                    if self.node_depth[leaf] < p.max_depth:
                        members = np.flatnonzero(self.leaf_of == leaf) if p.dipole == "node" else None
                        w, theta = self.dipole_hyperplane(members, leaf)
                        c1, c2 = self._split(leaf, w, theta)
                        if self.partial:
                            self.P[:, leaf] = self.X @ w
                        undo["topo"] = ("add", leaf, c1, c2)
                        undo["mark"].append(leaf)
                        break
                elif n_leaves > 2:
                    parent = int(self.par[leaf])
                    sib = int(self.R[parent] if self.L[parent] == leaf else self.L[parent])
                    grand = int(self.par[parent])
                    undo["mark"].extend(self._subtree_leaves(parent))
                    if grand == LEAF:
                        self.root = sib
                    elif self.L[grand] == parent:
                        self.L[grand] = sib
                    else:
                        self.R[grand] = sib
                    self.par[sib] = grand
                    undo["topo"] = ("remove", leaf, parent, sib, grand)
                    break
            self._structure()
        # coefficient mutation
        n_int = len(self.internal)
        count = 1 + ((self.alpha_u32 * n_int * (self.k + 1)) >> 32)
        count = min(count, n_int * (self.k + 1), MAX_COEF_MUTATIONS)
        chosen = set()
        for _ in range(count):
            while True:
                node = self.internal[rng.below(n_int)]
                if rng.chance(self.thr_share):
                    attr = -1
                elif self.sampling:
                    attr = int(self.F[node, rng.below(self.k)])
                else:
                    attr = rng.below(self.A)
                if (node, attr) not in chosen:
                    chosen.add((node, attr))
                    break
            if attr < 0:
                old = self.T[node]
                new = old + self._sigma_step(old, T_ONE)
                self.T[node] = new
            else:
                old = self.W[node, attr]
                new = min(max(old + self._sigma_step(old, W_ONE), -W_MAX), W_MAX)
                self.W[node, attr] = new
                if self.partial and new != old:
                    self.P[:, node] += (new - old) * self.X[:, attr]
            undo["coef"].append((node, attr, old, new))
            undo["mark"].extend(self._subtree_leaves(node))
        return undo

    def revert(self, undo: dict) -> None:
        for node, attr, old, new in reversed(undo["coef"]):
            if attr < 0:
                self.T[node] = old
            else:
                self.W[node, attr] = old
                if self.partial and new != old:
                    self.P[:, node] -= (new - old) * self.X[:, attr]
        topo = undo["topo"]
        if topo is not None:
            if topo[0] == "add":
                _, leaf, c1, c2 = topo
                self.L[leaf] = self.R[leaf] = LEAF
                self.W[leaf] = 0.0
                self.T[leaf] = 0.0
                self._release(c2)
                self._release(c1)
            else:
                _, leaf, parent, sib, grand = topo
                if grand == LEAF:
                    self.root = parent
                elif self.L[grand] == sib:
                    self.L[grand] = parent
                else:
                    self.R[grand] = parent
                self.par[sib] = parent
            if self.cap == undo["structure_cap"]:
                self._load_structure(undo["structure"])
            else:  # the node pool grew during this mutation
                self._structure()

    def commit_topology(self, undo: dict) -> None:
        topo = undo["topo"]
        if topo is not None and topo[0] == "remove":
            _, leaf, parent, _sib, _grand = topo
            self._release(leaf)
            self._release(parent)

    # ------------------------------------------------------------------ evaluation of the mutant
    def evaluate_mutant(self, undo: dict) -> tuple[float, int, np.ndarray, np.ndarray, np.ndarray | None]:
        """Fitness of the (in-place) mutant. Returns fit, hits, dom, counts, (rows, new leaves) or all leaves."""
        self.stats["evaluations"] += 1
        if self.partial:
            mark = np.zeros(self.cap, dtype=bool)
            mark[undo["mark"]] = True
            rows = np.flatnonzero(mark[self.leaf_of])
            self.stats["rerouted"] += rows.size
            if rows.size:
                new_leaf = self._route(self.P[rows] > self.T)
                ys = self.y[rows]
                size = self.cap * self.C
                delta = (np.bincount(new_leaf * self.C + ys, minlength=size)
                         - np.bincount(self.leaf_of[rows] * self.C + ys, minlength=size))
                counts = self.counts + delta.reshape(self.cap, self.C)
            else:
                new_leaf = rows
                counts = self.counts
            fit, hits, dom = self._score(counts)
            return fit, hits, dom, counts, (rows, new_leaf)
        self.stats["rerouted"] += self.n
        leaf_of = self._classify_all()
        counts = self._counts_full(leaf_of)
        fit, hits, dom = self._score(counts)
        return fit, hits, dom, counts, leaf_of

    def adopt(self, fit, hits, dom, counts, change) -> None:
        if isinstance(change, tuple):
            rows, new_leaf = change
            if rows.size:
                self.leaf_of = self.leaf_of.copy()
                self.leaf_of[rows] = new_leaf
        else:
            self.leaf_of = change
        self.counts = counts
        self.fit, self.hits, self.dom = fit, hits, dom

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> _Snapshot:
        s = _Snapshot()
        s.W, s.T, s.L, s.R, s.par = self.W.copy(), self.T.copy(), self.L.copy(), self.R.copy(), self.par.copy()
        s.F = self.F.copy()
        s.root, s.free = self.root, list(self.free)
        s.fit, s.hits, s.dom = self.fit, self.hits, self.dom.copy()
        return s

    def restore(self, s: _Snapshot) -> None:
        if s.W.shape[0] != self.cap:   # pool grew after the snapshot: pad it
            extra = self.cap - s.W.shape[0]
            self.W = np.vstack([s.W, np.zeros((extra, self.A))])
            self.T = np.concatenate([s.T, np.zeros(extra)])
            self.L, self.R, self.par = (np.concatenate([a, np.full(extra, LEAF, dtype=np.int64)])
                                        for a in (s.L, s.R, s.par))
            self.F = np.vstack([s.F, np.zeros((extra, s.F.shape[1]), dtype=np.int64)])
            self.free = sorted(s.free + list(range(s.W.shape[0], self.cap)), reverse=True)
        else:
            self.W, self.T, self.L, self.R, self.par = s.W.copy(), s.T.copy(), s.L.copy(), s.R.copy(), s.par.copy()
            self.F = s.F.copy()
            self.free = list(s.free)
        self.root = s.root
        self._structure()
        self.evaluate_current()

    def set_partial(self, on: bool) -> None:
        if on and not self.partial:
            self.partial = True
            if self.internal:
                ia = self.internal_arr
                self.P[:, ia] = self.X @ self.W[ia].T
        elif not on:
            self.partial = False

    # ------------------------------------------------------------------ export
    def to_tree(self, s: _Snapshot, X01: np.ndarray) -> Tree:
        """Snapshot -> shared tree model (pre-order, exact float weights)."""
        order, W, T, left, right = preorder_arrays(s, self.A)
        m = len(order)
        leaf_class = np.zeros(m, dtype=np.int32)
        leaves_in_order = [k for k in order if s.L[k] == LEAF]
        dom = dict(zip(leaves_in_order, s.dom.tolist()))
        for i, k in enumerate(order):
            if s.L[k] == LEAF:
                leaf_class[i] = dom[k]
        tree = Tree(W, T, left, right, leaf_class, np.zeros((m, self.C), dtype=np.int64))
        return tree.refit_counts(X01, self.y, relabel=False).validate()


def check_inputs(X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate EFTI inputs: ``(X, X * 32768, y)``; features must lie on the Q15 grid in [0, 1)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    Xq = np.rint(X * W_ONE)
    if not np.array_equal(Xq / W_ONE, X) or Xq.min() < 0 or Xq.max() > W_MAX:
        raise TreegenError("EFTI needs features normalised on the Q15 grid (see treegen.core.scaling)")
    if np.unique(y).size < 2:
        raise TreegenError("EFTI needs at least two classes in the training data")
    return X, Xq, y


def preorder_arrays(s, n_attributes: int):
    """A snapshot's nodes in pre-order (root, left subtree, right subtree) as the shared tree arrays:
    ``(order, W, T, left, right)`` -- ``order[i]`` the snapshot slot of node ``i``, exact float weights
    and thresholds at inner nodes (0 at leaves), child indices in the new order (``LEAF`` at leaves)."""
    order: list[int] = []
    stack = [s.root]
    while stack:
        k = stack.pop()
        order.append(k)
        if s.L[k] != LEAF:
            stack.append(int(s.R[k]))
            stack.append(int(s.L[k]))
    index = {k: i for i, k in enumerate(order)}
    m = len(order)
    W = np.zeros((m, n_attributes))
    T = np.zeros(m)
    left = np.full(m, LEAF, dtype=np.int32)
    right = np.full(m, LEAF, dtype=np.int32)
    for i, k in enumerate(order):
        if s.L[k] != LEAF:
            W[i] = s.W[k] / W_ONE
            T[i] = s.T[k] / T_ONE
            left[i] = index[int(s.L[k])]
            right[i] = index[int(s.R[k])]
    return order, W, T, left, right


def induce(X: np.ndarray, y: np.ndarray, n_classes: int, params: EFTIParams | None = None, *, seed: int = 0,
           callback: Callable[[int, float, int, float], None] | None = None, risk: str = "empirical",
           vicinity_sigma2: float = vicinal.DEFAULT_SIGMA2) -> tuple[Tree, dict]:
    """Evolve an oblique tree.

    Parameters
    ----------
    X : (n, A) float array of normalised features on the Q15 grid (multiples of 2**-15 in [0, 1)).
    y : (n,) int array of class indices 0..n_classes-1 (at least two distinct).
    n_classes : number of classes.
    params : :class:`EFTIParams`.
    seed : PRNG seed; the same seed and data give the same tree.
    callback : ``callback(iteration, best_fitness, best_leaves, best_accuracy)``, called on every
        improvement of the best tree, every 1024 iterations, and once at the end.
    risk : ``'empirical'`` (the fitness counts correctly classified rows) or ``'vicinal'`` (it counts
        each row's probability of being classified correctly under a Gaussian kernel of variance
        ``vicinity_sigma2`` per attribute variance, :mod:`treegen.learn.vicinal`; the size and
        missing-class factors are kept). The vicinal fitness is ``(sum_i correct_i) * PEN * MISS``
        with ``correct_i`` a row's Q16 probability of correct classification by the integer recursion
        of :mod:`treegen.learn.vicinal_q16` (the one the C engine runs), an integer like the empirical one.

    Returns
    -------
    tree, info : the best tree found, and ``{"fitness", "iterations", "elapsed_s", ...}``.
    """
    params = (params or EFTIParams()).validate()
    vicinal.check_risk(risk)
    X, Xq, y = check_inputs(X, y)
    t0 = time.perf_counter()
    ev = Evolver(Xq, y, n_classes, params, seed)
    unit = 1
    if risk == "vicinal":
        ev.vicinal_sigma = vicinal.kernel_sigma(X, vicinity_sigma2)
        ev.vicinal_sigma_q15 = vicinal_q16.sigma_q15(X, vicinity_sigma2)
        ev.vicinal_phi = vicinal_q16.phi_table()
        ev.Xq_int = Xq.astype(np.int64)
        unit = VICINAL_ONE
    best = evolve(ev, params, callback, unit)
    fit_scale = ev.n * float(1 << 32) * unit
    tree = ev.to_tree(best, X)
    elapsed = time.perf_counter() - t0
    info = fit_info(best.fit, ev.n, params.max_iter, elapsed, params, ev.stats["rerouted"], ev.stats["evaluations"])
    if risk == "vicinal":
        info["fitness"] = best.fit / fit_scale
        info["risk"] = "vicinal"
        info["vicinity_sigma2"] = float(vicinity_sigma2)
        info["training_vicinal_risk"] = vicinal.vicinal_risk(tree, X, y, ev.vicinal_sigma)
    return tree, info


def evolve(ev: Evolver, params: EFTIParams, callback: Callable[[int, float, int, float], None] | None = None,
           unit: int = 1) -> _Snapshot:
    """The (1+1) evolution of ``ev`` (a new :class:`Evolver`, or a subclass with another fitness) for
    ``params.max_iter`` iterations: the best individual's snapshot (module docstring; ``callback`` as
    :func:`induce`, ``unit``: the unit of the fitness' "hits")."""
    ev.init_root()
    ev.evaluate_current()
    best = ev.snapshot()
    fit_scale = ev.n * float(1 << 32) * unit
    stagnation = 0
    searching = False
    rng = ev.rng
    n_leaves_best = len(ev.leaves)
    acc_best = ev.hits / ev.n
    if callback:
        callback(0, best.fit / fit_scale, n_leaves_best, acc_best)
    for it in range(params.max_iter):
        if params.partial_reclassification:
            if not ev.partial and ev.tree_depth >= DELTA_ON_DEPTH:
                ev.set_partial(True)
            elif ev.partial and ev.tree_depth <= DELTA_OFF_DEPTH:
                ev.set_partial(False)
        fit = ev.fit
        undo = ev.mutate()
        fit_mut, hits, dom, counts, change = ev.evaluate_mutant(undo)
        if fit_mut > fit:
            stagnation = 0
            ev.adopt(fit_mut, hits, dom, counts, change)
            ev.commit_topology(undo)
            if fit_mut > best.fit:
                best = ev.snapshot()
                searching = False
                n_leaves_best, acc_best = len(ev.leaves), hits / ev.n
                if callback:
                    callback(it + 1, best.fit / fit_scale, n_leaves_best, acc_best)
        else:
            stagnation += 1
            should_return = rng.chance(ev.rtb_thr)
            should_search = rng.chance(ev.tables.search_threshold(stagnation, fit, fit_mut))
            if searching and should_return:
                ev.revert(undo)
                ev.restore(best)
                searching = False
                stagnation = 0
            elif should_search:
                searching = True
                ev.adopt(fit_mut, hits, dom, counts, change)
                ev.commit_topology(undo)
            else:
                ev.revert(undo)
        if callback and (it + 1) % CALLBACK_INTERVAL == 0:
            callback(it + 1, best.fit / fit_scale, n_leaves_best, acc_best)
    if callback:
        callback(params.max_iter, best.fit / fit_scale, n_leaves_best, acc_best)
    return best


def fit_info(fitness_int: int, n: int, iterations: int, elapsed: float, params: EFTIParams, rerouted: int,
             evaluations: int) -> dict:
    """The ``info`` dict of an EFTI run (Python and native engines alike): fitness as a fraction
    (the integer fitness over ``n * 2**32``) and as the integer, iterations, seconds, parameters, and
    the share of instance evaluations that had to be re-routed."""
    return {
        "fitness": fitness_int / (n * float(1 << 32)),
        "fitness_int": int(fitness_int),
        "iterations": int(iterations),
        "elapsed_s": round(elapsed, 4),
        "efti_params": asdict(params),
        "rerouted_fraction": round(rerouted / max(1, evaluations * n), 4),
    }
