"""GP trees: axis-parallel decision trees by multi-objective genetic programming (Cao & Rockett 2015).

The GP of the vicinal-risk paper (shared/seeds/002_*.txt, section 3.2 and Table 2):

* **Individuals**: binary axis-parallel trees. Internal nodes test ``x_a <= t`` (left when true),
  leaves carry a class. Genomes are pre-order node lists, so a subtree is a contiguous slice.
  Thresholds are Q15 half-steps (``(k + 0.5) / 32768``, ``k`` the mean of the Q15 values of two
  random training rows, rounded down), so no Q15 input lies on a threshold and the exported C
  decides exactly as the tree.
* **Initialisation**: ramped half-and-half over depths ``init_min_depth..init_max_depth``, half
  "full" and half "grow" trees per depth (Poli, Langdon & McPhee, *A Field Guide to GP*; a "grow"
  node below the root is a leaf with probability 1/2). A new test takes a random attribute and a
  threshold between two random training rows' values on it.
* **Operators, always applied (PCGA: crossover and mutation probabilities 100 %)**: two parents
  -> point (subtree) crossover -> subtree mutation of each child (a random node replaced by a
  random "grow" subtree) -> node mutation of each child (a leaf gets another class; a test gets a
  new attribute and threshold, or a threshold moved by a Gaussian step of 0.1 of the attribute's
  standard deviation: ``k += floor((5 * 2**16 + std_q15 * N) / (10 * 2**16))`` for the threshold
  ``(k + 0.5) / 32768``, ``N`` an approximately normal Q16 draw, ``k`` kept in -1..32767). A child
  deeper than the static depth limit (``max_depth``, 10) is redrawn (up to 8 times; then the parent
  is kept).
* **Steady state, multi-objective (PCGA, Kumar & Rockett 2002)**: objectives (training risk,
  node count); the Pareto rank of an individual is the number of population members that dominate
  it. Parents are chosen by binary tournaments on rank. The two children join the population if
  their objective vectors are not already present, and the two worst (highest rank; then highest
  risk, then more nodes, then oldest) leave, so the population size stays fixed.
* **Risk**: ``empirical`` (fraction misclassified, the paper's ERM) or ``vicinal`` (the mean
  probability of misclassification under Gaussian kernels, :mod:`treegen.learn.vicinal`; the
  paper's VRM, with its tracking of the interval each attribute is confined to along a path),
  both as integers: misclassified rows, or the rows' summed Q16 probability of misclassification
  by :func:`treegen.learn.vicinal_q16.axis_wrong_mass`. The objectives are compared as integers.
* **Result**: the member of the final Pareto front with the lowest training risk (ties: fewer
  nodes).

One iteration = one pair of children (two risk evaluations). The paper ran 20 000 (2-D sets)
to 1 000 000 iterations (200 000 for the UCI sets); treegen's default is 20 000.
Deterministic: every random choice is an integer draw of :class:`treegen.core.rng.Pcg32` (``below``,
``chance``, ``normal_q16``), so the C engine (``templates/gp``, :mod:`treegen.learn.native_gp`)
reproduces the run draw for draw and returns the identical tree.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_POPULATION
from treegen.core.rng import Pcg32
from treegen.core.tree import LEAF, Tree
from treegen.learn import vicinal, vicinal_q16
from treegen.learn.inducers import cart

Q15_ONE = 32768
MAX_REDRAWS = 8
HALF_U32 = 1 << 31          # chance(HALF_U32): probability 1/2
MAX_SEED = (1 << 64) - 1


@dataclass(frozen=True)
class GPParams:
    """GP options (defaults: the paper's Table 2, except the iteration count)."""

    population: int = 100
    max_iter: int = 20_000
    max_depth: int = 10
    init_min_depth: int = 1
    init_max_depth: int = 5
    risk: str = "vicinal"
    sigma2: float = vicinal.DEFAULT_SIGMA2

    def validate(self) -> "GPParams":
        def check(cond: bool, msg: str) -> None:
            if not cond:
                raise TreegenError(f"GP: {msg}")

        is_int = cart._is_int

        check(is_int(self.population) and 4 <= self.population <= MAX_POPULATION,
              f"population must be an integer 4..{MAX_POPULATION}, got {self.population!r}")
        check(is_int(self.max_iter) and self.max_iter >= 0, f"max_iter must be an integer >= 0, got {self.max_iter!r}")
        check(is_int(self.max_depth) and 1 <= self.max_depth <= 30,
              f"max_depth must be an integer in 1..30, got {self.max_depth!r}")
        check(is_int(self.init_min_depth) and is_int(self.init_max_depth)
              and 1 <= self.init_min_depth <= self.init_max_depth <= self.max_depth,
              "need 1 <= init_min_depth <= init_max_depth <= max_depth")
        vicinal.check_risk(self.risk)
        vicinal.check_sigma2(self.sigma2, allow_auto=False)
        return self


# ---------------------------------------------------------------------------------------- genomes
# A genome is a pre-order list of nodes: (attr, value); attr == -1 -> leaf with class int(value).

def subtree_end(g: list, i: int) -> int:
    """Index one past the subtree rooted at ``i``."""
    need = 1
    j = i
    while need:
        need += 1 if g[j][0] >= 0 else -1
        j += 1
    return j


def depths(g: list) -> list[int]:
    """Depth of every node of a pre-order genome (root 0)."""
    out = []
    stack = [0]
    for attr, _ in g:
        d = stack.pop()
        out.append(d)
        if attr >= 0:
            stack.append(d + 1)
            stack.append(d + 1)
    return out


def genome_depth(g: list) -> int:
    return max(depths(g))


def is_valid(g: list) -> bool:
    """A complete binary pre-order genome (every test has exactly two subtrees)."""
    need = 1
    for attr, _ in g:
        if need == 0:
            return False
        need += 1 if attr >= 0 else -1
    return need == 0 and len(g) >= 1


def to_tree(g: list, n_features: int, n_classes: int) -> Tree:
    """Genome -> the shared tree IR (one-hot weights; pre-order node ids)."""
    m = len(g)
    W = np.zeros((m, n_features))
    thr = np.zeros(m)
    left = np.full(m, LEAF, dtype=np.int32)
    right = np.full(m, LEAF, dtype=np.int32)
    leaf_class = np.zeros(m, dtype=np.int32)
    stack: list[int] = []      # internal nodes still missing a child (the top is the parent)
    for i, (attr, value) in enumerate(g):
        if i > 0:
            parent = stack[-1]
            if left[parent] == LEAF:
                left[parent] = i
            else:
                right[parent] = i
                stack.pop()
        if attr >= 0:
            W[i, attr] = 1.0
            thr[i] = value
            stack.append(i)
        else:
            leaf_class[i] = int(value)
    return Tree(W, thr, left, right, leaf_class, np.zeros((m, n_classes), dtype=np.int64))


class _Problem:
    """Training data and risk evaluation shared by the operators."""

    def __init__(self, X: np.ndarray, y: np.ndarray, n_classes: int, params: GPParams):
        self.X = X
        self.y = y
        self.n, self.A = X.shape
        self.C = n_classes
        self.p = params
        self.Xq = np.rint(X * Q15_ONE).astype(np.int64)
        self.std_q15 = np.rint(X.std(axis=0) * Q15_ONE).astype(np.int64)
        self.sigma_q15 = vicinal_q16.sigma_q15(X, params.sigma2) if params.risk == "vicinal" else None
        self.phi = vicinal_q16.phi_table()
        #: one risk unit: a misclassified row (empirical) or 2**-16 of one (vicinal)
        self.unit = self.n * (vicinal_q16.Q16_ONE if params.risk == "vicinal" else 1)
        self.evaluations = 0

    def risk(self, g: list) -> int:
        """The integer risk of genome ``g`` (risk = value / ``unit``)."""
        self.evaluations += 1
        if self.p.risk == "vicinal":
            return vicinal_q16.axis_wrong_mass(g, self.Xq, self.y, self.sigma_q15, self.phi)
        tree = to_tree(g, self.A, self.C)
        return int(np.count_nonzero(tree.predict_index(self.X) != self.y))


class _Ops:
    def __init__(self, prob: _Problem, rng: Pcg32):
        self.prob = prob
        self.rng = rng

    def threshold(self, attr: int) -> float:
        """Between the values of two random training rows on ``attr``: ``(floor((q_i + q_j) / 2) + 0.5) / 32768``
        (a Q15 half-step). A threshold next to one row's value would put half of that row's kernel on
        each side (e.g. any split of a binary attribute), which the vicinal risk punishes."""
        i = self.rng.below(self.prob.n)
        j = self.rng.below(self.prob.n)
        return (((int(self.prob.Xq[i, attr]) + int(self.prob.Xq[j, attr])) >> 1) + 0.5) / Q15_ONE

    def test(self) -> tuple[int, float]:
        attr = self.rng.below(self.prob.A)
        return attr, self.threshold(attr)

    def leaf(self) -> tuple[int, float]:
        return -1, float(self.rng.below(self.prob.C))

    def random_tree(self, depth: int, full: bool) -> list:
        """'full' (every branch to ``depth``) or 'grow' (leaves anywhere above ``depth``)."""
        out: list = []
        stack = [0]
        while stack:
            d = stack.pop()
            if d >= depth or (not full and d > 0 and self.rng.chance(HALF_U32)):
                out.append(self.leaf())
            else:
                out.append(self.test())
                stack.append(d + 1)
                stack.append(d + 1)
        return out

    def ramped_half_and_half(self, size: int) -> list[list]:
        p = self.prob.p
        ds = list(range(p.init_min_depth, p.init_max_depth + 1))
        return [self.random_tree(ds[i % len(ds)], full=(i // len(ds)) % 2 == 0) for i in range(size)]

    # ---------------------------------------------------------------- operators
    def crossover(self, a: list, b: list) -> tuple[list, list]:
        i = self.rng.below(len(a))
        j = self.rng.below(len(b))
        ie, je = subtree_end(a, i), subtree_end(b, j)
        return a[:i] + b[j:je] + a[ie:], b[:j] + a[i:ie] + b[je:]

    def subtree_mutation(self, g: list) -> list:
        i = self.rng.below(len(g))
        d = depths(g)[i]
        room = max(0, self.prob.p.max_depth - d)
        new = self.random_tree(self.rng.below(min(room, self.prob.p.init_max_depth) + 1), full=False)
        return g[:i] + new + g[subtree_end(g, i):]

    def node_mutation(self, g: list) -> list:
        g = list(g)
        i = self.rng.below(len(g))
        attr, value = g[i]
        if attr < 0:
            if self.prob.C > 1:
                shift = 1 + self.rng.below(self.prob.C - 1)
                g[i] = (-1, float((int(value) + shift) % self.prob.C))
        elif self.rng.chance(HALF_U32):
            g[i] = self.test()
        else:
            # a step of 0.1 standard deviations: k + floor(0.5 + 0.1 * std * N), in integers
            k = math.floor(value * Q15_ONE) + ((5 * 65536 + int(self.prob.std_q15[attr]) * self.rng.normal_q16())
                                               // (10 * 65536))
            k = min(max(k, -1), Q15_ONE - 1)
            g[i] = (attr, (k + 0.5) / Q15_ONE)
        return g

    def child(self, parent: list, crossed: list) -> list:
        """Subtree and node mutation of a crossover child; redrawn while too deep."""
        limit = self.prob.p.max_depth
        g = crossed
        for _ in range(MAX_REDRAWS):
            if genome_depth(g) <= limit:
                break
            g = self.crossover(parent, parent)[0]
        if genome_depth(g) > limit:
            g = list(parent)
        for _ in range(MAX_REDRAWS):
            cand = self.node_mutation(self.subtree_mutation(g))
            if genome_depth(cand) <= limit:
                return cand
        return g


# ---------------------------------------------------------------------------------------- Pareto
def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` dominates ``b`` (minimisation): no worse in every objective, better in one."""
    return bool(np.all(a <= b) and np.any(a < b))


def pareto_ranks(F: np.ndarray) -> np.ndarray:
    """Rank of every row of the objective matrix ``F`` (minimised): the number of rows dominating it
    (0 = on the Pareto front)."""
    F = np.asarray(F, dtype=np.float64)
    if F.ndim == 2 and F.shape[1] == 2:          # the GP's case, without 3-D temporaries
        a, b = F[:, 0], F[:, 1]
        le = (a[:, None] <= a[None, :]) & (b[:, None] <= b[None, :])
        lt = (a[:, None] < a[None, :]) | (b[:, None] < b[None, :])
    else:
        le = np.all(F[:, None, :] <= F[None, :, :], axis=2)
        lt = np.any(F[:, None, :] < F[None, :, :], axis=2)
    dom = le & lt                       # dom[i, j]: i dominates j
    return np.count_nonzero(dom, axis=0).astype(np.int64)


# ---------------------------------------------------------------------------------------- evolution
def induce(X: np.ndarray, y: np.ndarray, n_classes: int, params: GPParams | None = None, *,
           seed: int = 0, callback=None) -> tuple[Tree, dict]:
    """Evolve an axis-parallel tree by multi-objective GP (see the module docstring).

    Parameters
    ----------
    X : (n, A) normalised features (Q15 grid).
    y : (n,) class indices.
    n_classes : int
    params : :class:`GPParams`
    seed : int
    callback : ``callback(iteration, risk, leaves, training accuracy)`` of the lowest-risk member,
        every 256 iterations and at the end.

    Returns
    -------
    tree, info
    """
    params = (params or GPParams()).validate()
    X, y = check_inputs(X, y)
    seed = check_seed(seed)
    t0 = time.perf_counter()
    prob = _Problem(X, y, int(n_classes), params)
    rng = Pcg32(seed)
    ops = _Ops(prob, rng)
    pop = ops.ramped_half_and_half(params.population)
    F = np.array([[prob.risk(g), len(g)] for g in pop], dtype=np.int64)
    age = np.arange(params.population, dtype=np.int64)
    born = params.population
    ranks = pareto_ranks(F)

    def tournament() -> int:
        i = rng.below(len(pop))
        j = rng.below(len(pop))
        return i if (ranks[i], F[i, 0]) <= (ranks[j], F[j, 0]) else j

    inserted = 0
    for it in range(params.max_iter):
        a = pop[tournament()]
        b = pop[tournament()]
        c1, c2 = ops.crossover(a, b)
        kid1 = ops.child(a, c1)
        kid2 = ops.child(b, c2)
        for kid in (kid1, kid2):
            f = np.array([prob.risk(kid), len(kid)], dtype=np.int64)
            if np.any(np.all(F == f, axis=1)):
                continue                                   # PCGA: no duplicate objective vectors
            pop.append(kid)
            F = np.vstack([F, f])
            age = np.append(age, born)
            born += 1
            # the worst: highest rank, then highest risk, then more nodes, then oldest
            worst = int(np.lexsort((age, -F[:, 1], -F[:, 0], -pareto_ranks(F)))[0])
            if worst != len(pop) - 1:
                inserted += 1
            del pop[worst]
            F = np.delete(F, worst, axis=0)
            age = np.delete(age, worst)
            ranks = pareto_ranks(F)
        if callback and (it + 1) % 256 == 0:
            best = int(np.lexsort((F[:, 1], F[:, 0]))[0])
            t = to_tree(pop[best], prob.A, prob.C)
            callback(it + 1, int(F[best, 0]) / prob.unit, t.n_leaves, float(np.mean(t.predict_index(X) == y)))
    front = np.flatnonzero(ranks == 0)
    best = int(front[np.lexsort((F[front, 1], F[front, 0]))[0]])
    return finish(pop[best], int(F[best, 0]), prob, params, X, y, callback, t0,
                  front_size=int(front.size), evaluations=int(prob.evaluations), inserted=inserted)


def check_inputs(X, y) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] < 2:
        raise TreegenError(f"GP needs a 2-D X with one label per row, got X {X.shape} and y {y.shape}")
    return X, y


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise TreegenError(f"GP: random_state must be an integer in 0..{MAX_SEED} (a 64-bit seed), got {seed!r}")
    return int(seed)


def finish(g: list, risk_int: int, prob: _Problem, params: GPParams, X: np.ndarray, y: np.ndarray, callback,
           t0: float, *, front_size: int, evaluations: int, inserted: int) -> tuple[Tree, dict]:
    """The chosen genome as a tree and the ``info`` dict (shared by the Python and the native engine)."""
    tree = to_tree(g, prob.A, prob.C).refit_counts(X, y, relabel=False).validate()
    elapsed = time.perf_counter() - t0
    if callback:
        callback(params.max_iter, risk_int / prob.unit, tree.n_leaves, float(np.mean(tree.predict_index(X) == y)))
    if params.risk == "vicinal":   # the float64 definition (vicinal.py) for the returned tree
        training_risk = vicinal.vicinal_risk(tree, X, y, vicinal.kernel_sigma(X, params.sigma2))
    else:
        training_risk = risk_int / prob.n
    info = {
        "risk": params.risk,
        "training_risk": training_risk,
        "training_risk_int": risk_int,          # the objective the search minimised (units: see _Problem.unit)
        "empirical_risk": vicinal.empirical_risk(tree, X, y),
        "front_size": front_size,
        "iterations": int(params.max_iter),
        "evaluations": evaluations,
        "children_inserted": int(inserted),
        "elapsed_s": round(elapsed, 4),
        "gp_params": asdict(params),
    }
    return tree, info
