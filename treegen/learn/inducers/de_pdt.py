"""DE-PDT — perceptron decision trees evolved by differential evolution.

The algorithm of Lopes, Freitas, Pedrosa Silva and Guimarães, "Differential Evolution and Perceptron
Decision Trees for Classification Tasks" (shared/seeds/004_*.txt):

* **Individual**: a *complete* binary tree of height ``h``: ``M = 2**(h-1) - 1`` linear nodes (a weight
  for every attribute and a constant ``theta``) and ``2**(h-1)`` leaf classes. Node ``k`` (heap order,
  root 0) sends a row to its left child ``2k+1`` when ``w.x + theta < 0``, otherwise to ``2k+2`` (the
  paper's ``i -> 2i / 2i+1`` in 1-based numbering).
* **DE/rand/1/bin** on the real part: for every target ``x`` three other distinct individuals
  ``a, b, c``; mutant ``a + F (b - c)``; binomial crossover with ``CR`` (gene ``jrand`` always from the
  mutant). ``F`` is drawn in [0.4, 1] and ``CR`` in [0.9, 1] anew for every target (paper, 4.2).
* **Leaves — swap movement** (paper 4.2, after Prado et al.): the difference ``b - c`` is a move of
  leaf ``i`` from ``b_i`` to ``c_i``. It is applied to ``a`` only where ``a_i == b_i`` (giving ``c_i``);
  where ``a_i == c_i`` the reverse move gives ``b_i``; otherwise ``a_i`` is kept. Each move happens
  only when a uniform draw is below ``F``. The leaf genes then take part in the same binomial
  crossover as the real genes (``jrand`` is drawn over the whole genome).
* **Objective**: misclassifications (paper 4.1), minimised. Individuals are compared by their error
  *rate* on the rows they were evaluated on (see legitimacy), exactly, by integer cross-multiplication.
  treegen extra (off by default): ``oversize_weight`` multiplies the hit count by EFTI's size factor
  ``1 - Ko*((L-C)/C)**2`` (L = leaves reached by a training row, C = classes; Q16 table).
* **Selection**: the trial replaces its target when it is not worse (default ``selection="not-worse"``).
  The paper's DE summary (section 3) says "If y is better than x, x is replaced by y"; its DE
  reference (Storn & Price) says the same in prose, but Storn's published DE code implements it as
  ``if (tempval <= val(i))  % if competitor is better ...``: ties are accepted. ``selection="better"``
  is the strict literal reading (measured in ``bench/results/alternatives_split.md``: on son it
  leaves more training errors, paired +1.1 +- 0.8 points; its test accuracy is not significantly
  different). The whole generation's trials are made from the
  current population and evaluated together (synchronous DE, as Storn's code: the old population is
  static through one iteration), so a population is evaluated as one batched matrix product.
* **Replacement** (4.3): after selection, the worst ``replacement`` fraction (``floor(x*P)``
  individuals, ties by index) and every individual whose accuracy is below ``1/n_classes`` are replaced
  by fresh random trees. treegen keeps the current best individual out of this (elitism), so a
  generation never loses the best tree found.
* **Legitimacy** (4.4): an individual is evaluated on the first ``l`` rows of one seeded random
  permutation of the training rows (nested samples: a larger ``l`` adds rows). ``l`` starts at
  ``2 * attributes`` and after each generation becomes ``ceil(min(N, l * alpha))`` with
  ``alpha = 1 + delta / sigma``, ``delta = 1e-6`` and ``sigma`` the standard deviation of the
  population's objective values (misclassifications); ``sigma = 0`` gives ``l = N``. With the paper's
  tiny ``delta`` the ceiling makes ``l`` grow by exactly one row per generation while ``sigma > l*delta``.
  The ``l`` of every evaluation is stored; an individual not replaced for ``t = 10`` generations whose
  stored ``l`` is below the current one is re-evaluated at the current ``l``.
* **Result**: after the last generation the population is evaluated on all training rows and the
  best one (or, with ``validation_fraction > 0`` — treegen's extra, proposed in the paper's conclusion —
  the best on a stratified hold-out of the training rows, ties by training objective) is returned.
* **Pruning into the IR**: subtrees no training row reaches are removed (their parent is replaced by
  the other child) and two sibling leaves of one class are merged, bottom-up. Predictions on the
  training rows are unchanged; ``fit_info_`` reports the complete and the pruned size.

Initialisation (not specified by the paper): weights uniform integers in ``+-32767`` (Q15), ``theta``
so that the hyperplane passes through a random training row, leaves uniform random classes.

Exact arithmetic
----------------
Inputs are Q15 integers, weights int16 (``w * 32768``), ``theta`` an integer in units of ``2**-30``
clipped to ``+-attributes * 2**30``. Mutants are rounded to these grids (``rint``, half to even) and
clipped, so every individual *is* its fixed-point tree: a node's test ``sum(w_q x_q) + theta < 0`` is an
exact integer comparison (float64 holds the integers exactly; BLAS summation order cannot change an
exact integer sum below 2**53). The IR gets ``w = w_q / 2**15`` and threshold ``(-theta - 1) / 2**30``
(``acc + theta < 0  <=>  acc <= -theta - 1``), which :mod:`treegen.emit.quantize` exports exactly.

All random choices come from :class:`treegen.core.rng.Pcg32` (integer draws, block draws via
:func:`treegen.core.rng.take_u32`); the same seed and data give the same tree.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_POPULATION, check_memory
from treegen.core.rng import Pcg32, take_u32
from treegen.core.tree import LEAF, Tree
from treegen.learn.inducers import cart

W_ONE = 1 << 15
W_MAX = W_ONE - 1
T_ONE = 1 << 30
FIT_ONE = 1 << 16
U32 = float(1 << 32)
ROW_CHUNK = 2048
MIN_HEIGHT, MAX_HEIGHT = 2, 12


@dataclass(frozen=True)
class DEPDTParams:
    """DE-PDT options (defaults: the paper's)."""

    population: int = 50
    generations: int = 2000
    height: int = 5
    replacement: float = 0.1
    legitimacy_delta: float = 1e-6
    reevaluate_after: int = 10
    oversize_weight: float = 0.0
    validation_fraction: float = 0.0
    engine: str = "python"
    selection: str = "not-worse"

    def validate(self) -> "DEPDTParams":
        def check(cond: bool, msg: str) -> None:
            if not cond:
                raise TreegenError(f"DE-PDT: {msg}")

        is_int = cart._is_int

        check(is_int(self.population) and 4 <= self.population <= MAX_POPULATION,
              f"population must be an integer 4..{MAX_POPULATION} (DE/rand/1 needs 3 others), got {self.population!r}")
        check(is_int(self.generations) and self.generations >= 0,
              f"generations must be a non-negative integer, got {self.generations!r}")
        check(is_int(self.height) and MIN_HEIGHT <= self.height <= MAX_HEIGHT,
              f"height must be an integer in {MIN_HEIGHT}..{MAX_HEIGHT}, got {self.height!r}")
        check(0 <= self.replacement < 1, f"replacement must be in [0, 1), got {self.replacement!r}")
        check(self.legitimacy_delta > 0, f"legitimacy_delta must be > 0, got {self.legitimacy_delta!r}")
        check(is_int(self.reevaluate_after) and self.reevaluate_after >= 1,
              f"reevaluate_after must be an integer >= 1, got {self.reevaluate_after!r}")
        check(self.oversize_weight >= 0, f"oversize_weight must be >= 0, got {self.oversize_weight!r}")
        check(0 <= self.validation_fraction < 1,
              f"validation_fraction must be in [0, 1), got {self.validation_fraction!r}")
        check(self.engine in ("python", "native"), f"engine must be 'python' or 'native', got {self.engine!r}")
        check(self.selection in ("better", "not-worse"),
              f"selection must be 'better' or 'not-worse', got {self.selection!r}")
        return self


# ---------------------------------------------------------------------------------------- operators
def swap_leaves(a: np.ndarray, b: np.ndarray, c: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """The paper's discrete "swap movement" mutation of leaf classes.

    Where ``gate`` (a draw below F) is true: ``a_i == b_i`` -> ``c_i``; else ``a_i == c_i`` -> ``b_i``;
    otherwise, and where ``gate`` is false, ``a_i``.
    """
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    out = np.where(a == b, c, np.where(a == c, b, a))
    return np.where(gate, out, a)


def selected(trial_score: np.ndarray, l: int, score: np.ndarray, evaluated: np.ndarray,
             selection: str = "not-worse") -> np.ndarray:
    """Targets whose trial replaces them: trial rate ``trial_score / l`` not below the target's
    ``score / evaluated`` (``"not-worse"``, Storn's DE code) or above it (``"better"``, strict),
    compared exactly by integer cross-multiplication."""
    lhs = np.asarray(trial_score, dtype=np.int64) * np.asarray(evaluated, dtype=np.int64)
    rhs = np.asarray(score, dtype=np.int64) * int(l)
    return np.flatnonzero(lhs > rhs if selection == "better" else lhs >= rhs)


def replacement_indices(hits: np.ndarray, score: np.ndarray, evaluated: np.ndarray, n_classes: int,
                        fraction: float) -> np.ndarray:
    """Individuals replaced after a generation (sorted): the ``floor(fraction * P)`` worst by objective
    rate ``score / evaluated`` (ties: higher index first), and every one with accuracy
    ``hits / evaluated < 1 / n_classes``; never the best one (highest rate, lowest index)."""
    P = hits.shape[0]
    rate = score.astype(np.float64) / evaluated.astype(np.float64)
    order = np.lexsort((-np.arange(P), rate))           # worst first: lowest rate, then highest index
    best = int(np.lexsort((np.arange(P), -rate))[0])
    k = int(math.floor(fraction * P + 1e-9))
    out = set(order[:k].tolist())
    out.update(np.flatnonzero(hits * n_classes < evaluated).tolist())
    out.discard(best)
    return np.array(sorted(out), dtype=np.int64)


def grow_legitimacy(l: int, objective: np.ndarray, n: int, delta: float) -> int:
    """Next legitimacy ``ceil(min(N, l * (1 + delta / sigma)))``; ``sigma = 0`` gives ``N``."""
    sigma = float(np.std(np.asarray(objective, dtype=np.float64)))
    if sigma == 0.0:
        return int(n)
    return int(math.ceil(min(float(n), l * (1.0 + delta / sigma))))


def stale_individuals(evaluated: np.ndarray, eval_gen: np.ndarray, generation: int, l: int, t: int) -> np.ndarray:
    """Individuals to re-evaluate: not re-evaluated or replaced for ``t`` generations and evaluated
    with fewer rows than the current legitimacy ``l``."""
    return np.flatnonzero((generation - eval_gen >= t) & (evaluated < l))


def size_table(n_classes: int, max_leaves: int, oversize_weight: float) -> np.ndarray:
    """EFTI's Q16 size factor ``round(65536 * max(0, 1 - Ko*((L-C)/C)**2))`` for L = 0..max_leaves."""
    L = np.arange(max_leaves + 1, dtype=np.float64)
    over = (L - n_classes) / n_classes
    return np.array([round(FIT_ONE * max(0.0, 1.0 - oversize_weight * o * o)) for o in over], dtype=np.int64)


# ---------------------------------------------------------------------------------------- evolution
class Population:
    """State of one DE-PDT run (public for tests): genomes, their evaluations and the sample order."""

    def __init__(self, Xq: np.ndarray, y: np.ndarray, n_classes: int, params: DEPDTParams, seed: int,
                 order: np.ndarray | None = None):
        self.X = np.ascontiguousarray(Xq, dtype=np.float64)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.n, self.A = self.X.shape
        self.C = int(n_classes)
        self.p = params
        self.rng = Pcg32(seed)
        self.M = (1 << (params.height - 1)) - 1
        self.LV = self.M + 1
        self.t_max = float(self.A * T_ONE)
        self.pen = size_table(self.C, self.LV, params.oversize_weight)
        P = params.population
        if order is None:
            order = self.permutation(self.n)
        self.Xo = self.X[order]
        self.yo = self.y[order]
        # the population, its trials and their scores: refused up front when the machine cannot hold them
        check_memory(3 * 8 * P * (self.M * (self.A + 1) + self.LV + 5),
                     f"DE-PDT: a population of {P} trees of height {params.height} over {self.A} attributes")
        self.W = np.zeros((P, self.M, self.A))
        self.T = np.zeros((P, self.M))
        self.leaf = np.zeros((P, self.LV), dtype=np.int64)
        self.hits = np.zeros(P, dtype=np.int64)
        self.score = np.zeros(P, dtype=np.int64)
        self.evaluated = np.ones(P, dtype=np.int64)
        self.eval_gen = np.zeros(P, dtype=np.int64)
        self.l = int(min(self.n, 2 * self.A))
        self.row_evaluations = 0

    # ------------------------------------------------------------------ random draws
    def permutation(self, n: int) -> np.ndarray:
        """Fisher-Yates shuffle of 0..n-1 with ``below`` draws (reproducible in C)."""
        idx = list(range(n))
        u = take_u32(self.rng, max(0, n - 1))
        for k, i in enumerate(range(n - 1, 0, -1)):
            j = (int(u[k]) * (i + 1)) >> 32
            idx[i], idx[j] = idx[j], idx[i]
        return np.array(idx, dtype=np.int64)

    def random_individuals(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` fresh random trees: per tree ``M*A`` weight draws, ``M`` row draws, ``LV`` leaf draws."""
        M, A, LV = self.M, self.A, self.LV
        per = M * A + M + LV
        u = take_u32(self.rng, count * per).reshape(count, per)
        W = ((u[:, :M * A] * np.uint64(2 * W_MAX + 1)) >> np.uint64(32)).astype(np.int64) - W_MAX
        W = W.reshape(count, M, A).astype(np.float64)
        rows = ((u[:, M * A:M * A + M] * np.uint64(self.n)) >> np.uint64(32)).astype(np.int64)
        leaf = ((u[:, M * A + M:] * np.uint64(self.C)) >> np.uint64(32)).astype(np.int64)
        T = -np.einsum("cma,cma->cm", W, self.X[rows])
        return W, T, leaf

    # ------------------------------------------------------------------ evaluation
    def route(self, W: np.ndarray, T: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Leaf index (0..LV-1) of every row of ``X`` in every tree: ``(rows, trees)``.

        ``engine="native"``: the C kernel (only the nodes on each row's path); ``"python"``: every
        node's projection as one batched matrix product. Identical results (exact integers)."""
        if self.p.engine == "native":
            from treegen.learn import native_de_pdt

            return native_de_pdt.route(X.astype(np.int16), W, T, self.p.height - 1)
        Q = W.shape[0]
        out = np.empty((X.shape[0], Q), dtype=np.int64)
        flatW = W.reshape(Q * self.M, self.A).T
        cols = np.arange(Q, dtype=np.int64) * self.M
        for s in range(0, X.shape[0], ROW_CHUNK):
            Xs = X[s:s + ROW_CHUNK]
            right = (Xs @ flatW + T.reshape(-1)) >= 0          # (rows, Q*M): not (acc + theta < 0)
            node = np.zeros((Xs.shape[0], Q), dtype=np.int64)
            for _ in range(self.p.height - 1):
                go = np.take_along_axis(right, cols + node, axis=1)
                node = 2 * node + 1 + go
            out[s:s + ROW_CHUNK] = node - self.M
        return out

    def evaluate(self, W, T, leaf, X, y) -> tuple[np.ndarray, np.ndarray]:
        """``(hits, score)`` of trees on rows: hits, and hits times the size factor of reached leaves."""
        Q = W.shape[0]
        self.row_evaluations += X.shape[0] * Q
        lv = self.route(W, T, X)
        pred = np.take_along_axis(leaf.T, lv, axis=0)           # leaf: (Q, LV) -> (rows, Q)
        hits = np.count_nonzero(pred == y[:, None], axis=0).astype(np.int64)
        if self.p.oversize_weight > 0:
            reached = np.zeros((Q, self.LV), dtype=bool)
            reached[np.broadcast_to(np.arange(Q), lv.shape), lv] = True
            score = hits * self.pen[reached.sum(axis=1)]
        else:
            score = hits * FIT_ONE
        return hits, score

    def evaluate_at(self, idx: np.ndarray, l: int, generation: int) -> None:
        if idx.size == 0:
            return
        h, s = self.evaluate(self.W[idx], self.T[idx], self.leaf[idx], self.Xo[:l], self.yo[:l])
        self.hits[idx], self.score[idx] = h, s
        self.evaluated[idx] = l
        self.eval_gen[idx] = generation

    def initialise(self) -> None:
        P = self.p.population
        self.W, self.T, self.leaf = self.random_individuals(P)
        self.evaluate_at(np.arange(P), self.l, 0)

    # ------------------------------------------------------------------ one generation
    def pick_abc(self, i: int) -> tuple[int, int, int]:
        P = self.p.population
        picks: list[int] = []
        while len(picks) < 3:
            r = self.rng.below(P)
            if r != i and r not in picks:
                picks.append(r)
        return picks[0], picks[1], picks[2]

    def trials(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """DE/rand/1/bin trials of the whole population (real genes) with swap-movement leaves."""
        P, M, A, LV = self.p.population, self.M, self.A, self.LV
        G = M * (A + 1) + LV
        abc = np.array([self.pick_abc(i) for i in range(P)], dtype=np.int64)
        u = take_u32(self.rng, P * (3 + G + LV)).reshape(P, 3 + G + LV)
        F = 0.4 + 0.6 * (u[:, 0].astype(np.float64) / U32)
        CR = 0.9 + 0.1 * (u[:, 1].astype(np.float64) / U32)
        jrand = ((u[:, 2] * np.uint64(G)) >> np.uint64(32)).astype(np.int64)
        cross = (u[:, 3:3 + G].astype(np.float64) / U32) < CR[:, None]
        cross[np.arange(P), jrand] = True
        gate = (u[:, 3 + G:].astype(np.float64) / U32) < F[:, None]
        a, b, c = abc[:, 0], abc[:, 1], abc[:, 2]
        f3 = F[:, None, None]
        vW = np.clip(np.rint(self.W[a] + f3 * (self.W[b] - self.W[c])), -W_MAX, W_MAX)
        vT = np.clip(np.rint(self.T[a] + F[:, None] * (self.T[b] - self.T[c])), -self.t_max, self.t_max)
        vL = swap_leaves(self.leaf[a], self.leaf[b], self.leaf[c], gate)
        cW = cross[:, :M * A].reshape(P, M, A)
        cT = cross[:, M * A:M * (A + 1)]
        cL = cross[:, M * (A + 1):]
        return (np.where(cW, vW, self.W), np.where(cT, vT, self.T), np.where(cL, vL, self.leaf))

    def step(self, generation: int) -> int:
        """One generation; returns the number of individuals replaced by random trees."""
        l = self.l
        self.evaluate_at(stale_individuals(self.evaluated, self.eval_gen, generation, l, self.p.reevaluate_after),
                         l, generation)
        W, T, leaf = self.trials()
        hits, score = self.evaluate(W, T, leaf, self.Xo[:l], self.yo[:l])
        idx = selected(score, l, self.score, self.evaluated, self.p.selection)
        self.W[idx], self.T[idx], self.leaf[idx] = W[idx], T[idx], leaf[idx]
        self.hits[idx], self.score[idx] = hits[idx], score[idx]
        self.evaluated[idx] = l
        self.eval_gen[idx] = generation
        repl = replacement_indices(self.hits, self.score, self.evaluated, self.C, self.p.replacement)
        if repl.size:
            self.W[repl], self.T[repl], self.leaf[repl] = self.random_individuals(repl.size)
            self.evaluate_at(repl, l, generation)
        objective = self.evaluated - self.hits
        self.l = grow_legitimacy(l, objective, self.n, self.p.legitimacy_delta)
        return int(repl.size)

    def best_index(self) -> int:
        rate = self.score.astype(np.float64) / self.evaluated
        return int(np.lexsort((np.arange(rate.size), -rate))[0])


# ---------------------------------------------------------------------------------------- IR
def _complete_counts(leaf_of: np.ndarray, y: np.ndarray, M: int, n_classes: int) -> np.ndarray:
    """Class counts of every heap node (0..2M) of the complete tree."""
    counts = np.zeros((2 * M + 1, n_classes), dtype=np.int64)
    np.add.at(counts, (leaf_of + M, y), 1)
    for k in range(M - 1, -1, -1):
        counts[k] = counts[2 * k + 1] + counts[2 * k + 2]
    return counts


def pruned_tree(W: np.ndarray, T: np.ndarray, leaf: np.ndarray, leaf_of: np.ndarray, y: np.ndarray,
                n_classes: int) -> Tree:
    """The complete perceptron tree (integer genome) -> IR tree without empty subtrees and with
    same-class sibling leaves merged. ``leaf_of``: leaf index of every training row."""
    M, A = W.shape
    counts = _complete_counts(leaf_of, y, M, n_classes)
    n_rows = counts.sum(axis=1)

    def build(k: int):
        # returns ("leaf", class) or ("node", k, left, right); depth is bounded by height <= 12
        if k >= M:
            return ("leaf", int(leaf[k - M]))
        lk, rk = 2 * k + 1, 2 * k + 2
        if n_rows[lk] == 0:
            return build(rk)
        if n_rows[rk] == 0:
            return build(lk)
        lt, rt = build(lk), build(rk)
        if lt[0] == "leaf" and rt[0] == "leaf" and lt[1] == rt[1]:
            return lt
        return ("node", k, lt, rt)

    root = build(0) if n_rows[0] > 0 else ("leaf", int(leaf[0]))
    weights, thr, left, right, cls = [], [], [], [], []
    stack = [(root, -1, False)]
    while stack:
        item, parent, is_left = stack.pop()
        idx = len(weights)
        if parent >= 0:
            (left if is_left else right)[parent] = idx
        left.append(LEAF)
        right.append(LEAF)
        if item[0] == "leaf":
            weights.append(np.zeros(A))
            thr.append(0.0)
            cls.append(item[1])
        else:
            k = item[1]
            weights.append(W[k] / W_ONE)
            thr.append((-T[k] - 1.0) / T_ONE)
            cls.append(0)
            stack.append((item[3], idx, False))
            stack.append((item[2], idx, True))
    tree = Tree(np.array(weights).reshape(-1, A), np.array(thr), np.array(left), np.array(right),
                np.array(cls), np.zeros((len(weights), n_classes), dtype=np.int64))
    return tree


def check_inputs(X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    Xq = np.rint(X * W_ONE)
    if X.ndim != 2 or not np.array_equal(Xq / W_ONE, X) or Xq.min() < 0 or Xq.max() > W_MAX:
        raise TreegenError("DE-PDT needs features normalised on the Q15 grid (see treegen.core.scaling)")
    if np.unique(y).size < 2:
        raise TreegenError("DE-PDT needs at least two classes in the training data")
    return X, Xq, y


def _validation_split(y: np.ndarray, fraction: float, rng: Pcg32) -> tuple[np.ndarray, np.ndarray]:
    """Stratified hold-out: ``round(fraction * n_c)`` rows of every class (keeping one for training)."""
    val = []
    for c in np.unique(y).tolist():
        members = np.flatnonzero(y == c)
        k = min(members.size - 1, int(round(fraction * members.size)))
        if k <= 0:
            continue
        u = take_u32(rng, members.size)
        order = np.lexsort((members, u))                   # a seeded shuffle of the class
        val.extend(members[order[:k]].tolist())
    val_mask = np.zeros(y.shape[0], dtype=bool)
    val_mask[val] = True
    return np.flatnonzero(~val_mask), np.flatnonzero(val_mask)


def induce(X: np.ndarray, y: np.ndarray, n_classes: int, params: DEPDTParams | None = None, *, seed: int = 0,
           callback: Callable[[int, float, int, float], None] | None = None) -> tuple[Tree, dict]:
    """Evolve a perceptron decision tree by DE.

    Parameters
    ----------
    X : (n, A) normalised features on the Q15 grid.
    y : (n,) class indices 0..n_classes-1 (at least two distinct).
    n_classes : int
    params : :class:`DEPDTParams`
    seed : int
        PRNG seed; the same seed and data give the same tree.
    callback : ``callback(generation, best_rate, leaves_reached_hint, best_accuracy)``, every 16
        generations and at the end (the rate and accuracy are on the current legitimacy sample).

    Returns
    -------
    tree, info : the pruned tree and ``{"generations", "legitimacy", "complete_nodes", ...}``.
    """
    params = (params or DEPDTParams()).validate()
    X, Xq, y = check_inputs(X, y)
    t0 = time.perf_counter()
    rng = Pcg32(seed)
    if params.validation_fraction > 0:
        train, val = _validation_split(y, params.validation_fraction, rng)
    else:
        train, val = np.arange(y.shape[0]), np.zeros(0, dtype=np.int64)
    pop = Population(Xq[train], y[train], n_classes, params, seed=int(rng.next_u32()))
    pop.initialise()
    replaced = 0
    for g in range(1, params.generations + 1):
        replaced += pop.step(g)
        if callback and (g % 16 == 0 or g == params.generations):
            b = pop.best_index()
            callback(g, float(pop.score[b]) / (FIT_ONE * pop.evaluated[b]), pop.LV,
                     float(pop.hits[b]) / pop.evaluated[b])
    # final: every individual on all training rows (and the validation rows)
    P = params.population
    hits, score = pop.evaluate(pop.W, pop.T, pop.leaf, pop.X, pop.y)
    if val.size:
        vh, _ = pop.evaluate(pop.W, pop.T, pop.leaf, Xq[val], y[val])
        best = int(np.lexsort((np.arange(P), -score, -vh))[0])
    else:
        vh = None
        best = int(np.lexsort((np.arange(P), -score))[0])
    W, T, leaf = pop.W[best], pop.T[best], pop.leaf[best]
    leaf_of = pop.route(W[None], T[None], pop.X)[:, 0]
    tree = pruned_tree(W, T, leaf, leaf_of, pop.y, n_classes)
    tree = tree.refit_counts(X, y, relabel=False).validate()
    elapsed = time.perf_counter() - t0
    info = {
        "generations": int(params.generations),
        "train_errors": int(pop.n - hits[best]),
        "validation_accuracy": (float(vh[best]) / val.size) if val.size else None,
        "final_legitimacy": int(pop.l),
        "n_train_rows": int(pop.n),
        "complete_nodes": int(2 * pop.M + 1),
        "complete_leaves": int(pop.LV),
        "pruned_nodes": int(tree.n_nodes),
        "pruned_leaves": int(tree.n_leaves),
        "replaced": int(replaced),
        "row_evaluations": int(pop.row_evaluations),
        "elapsed_s": round(elapsed, 4),
        "de_pdt_params": asdict(params),
    }
    return tree, info
