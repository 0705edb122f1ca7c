"""DE-split CART and ID3: the split attribute by the Separation Measure, its threshold by DE.

Mitrofanov and Semenkin, "Differential evolution in the decision tree learning algorithm"
(shared/seeds/001_*.txt). The tree is grown top-down like treegen's CART (same stopping rules and
cost-complexity pruning), but a node's split is found in two steps instead of enumerating every cut
point of every attribute:

1. **Attribute by the Separation Measure.** Two classes: ``x+`` and ``x-`` are the class means of the
   attribute (``x+ > x-``), ``x* = (x+ + x-)/2``, ``n+`` the rows of the ``+`` class with
   ``x >= x*`` and ``n-`` the rows of the ``-`` class with ``x < x*`` (each class counted on its own
   side of the midpoint — read literally, with all rows counted, ``n+ n-`` would only measure how
   balanced the midpoint split is); ``d = n+ * n-``, and the attribute with the largest ``d`` wins.
   **More than two classes** (treegen's generalisation): ``d`` of an attribute is the largest
   two-class ``d`` over all pairs of classes present at the node — the attribute that separates some
   pair of classes best; a binary split can only separate groups of classes, and the pair it
   separates best is where the threshold search starts. For two classes this is the paper's ``d``.
   Ties go to the lowest attribute index; attributes constant at the node (or with ``d = 0``) are
   skipped; if the chosen attribute has no admissible cut (``min_samples_leaf``) the next best is used.
2. **Threshold by DE.** A population of ``population`` thresholds, uniform in the attribute's range at
   the node, evolves for ``generations`` generations maximising the impurity decrease (Gini for
   ``de-cart``, information gain = entropy decrease for ``de-id3``) of the split ``x <= s``.
   * Seven mutation strategies (Qin & Suganthan's SaDE pool): rand/1, rand/2, best/1, best/2,
     current-to-best/1, current-to-rand/1, rand-to-best/1; for every individual one is chosen by
     **Population-level Dynamic Probabilities**: ``p_i = p_all + r_i (1 - n p_all) / scale``,
     ``p_all = 0.2 / n``, ``r_i = success_i**2 / used_i`` (0 while unused), ``scale = sum r_i``
     (uniform ``1/n`` while ``scale = 0``); a use is a *success* when the offspring's fitness exceeds
     the parent population's mean fitness (an inadmissible cut, fitness -1, counts as 0 in that mean).
   * ``F`` and ``Cr`` by **Success-History Adaptation**: every individual draws
     ``F_i = M_F + 0.1 * Cauchy`` (redrawn while ``<= 0``, capped at 1) and
     ``Cr_i = clip(M_Cr + 0.1 * N(0,1), 0, 1)``; after a generation with successes,
     ``M_F = (M_F + s1/s2) / 2`` with ``s1 = sum w_i F_i**2``, ``s2 = sum w_i F_i``,
     ``w_i = FitDif_i / sum FitDif`` (the weighted Lehmer mean; ``FitDif`` = offspring fitness minus
     the parent mean), and the same for ``Cr``; ``M_F = M_Cr = 0.5`` at the start. The threshold is one
     gene, so the binomial crossover always takes the mutant (its ``jrand`` gene): ``Cr`` is adapted
     as the paper says but cannot change the search.
   * A mutant outside ``[lo, hi]`` is set halfway between the bound and its parent (SHADE's rule);
     the offspring replaces its parent when not worse.
   * A candidate ``s`` is evaluated through the node's sorted attribute values and prefix class
     counts (``O(log n)`` per candidate after one ``O(n log n)`` sort of *one* attribute). The final
     threshold is the midpoint between the two sample values around the best cut (as CART), which
     is exact on the Q15 grid.
   * Shortcut (treegen): when the attribute has at most ``population`` admissible cut points at the
     node, they are all evaluated (the initial population alone would be as large).

Every random draw comes from :class:`treegen.core.rng.Pcg32`; same seed, same tree.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_POPULATION
from treegen.core.rng import Pcg32, take_u32
from treegen.core.tree import LEAF, Tree
from treegen.learn.inducers import cart

STRATEGIES = ("rand/1", "rand/2", "best/1", "best/2", "current-to-best/1", "current-to-rand/1", "rand-to-best/1")
U32 = float(1 << 32)
INVALID = -1.0


@dataclass(frozen=True)
class DESplitParams:
    criterion: str = "gini"
    population: int = 20
    generations: int = 30
    max_depth: int | None = None
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    ccp_alpha: float = 0.0

    def validate(self) -> "DESplitParams":
        cart._check_params(self.criterion, self.max_depth, self.min_samples_split, self.min_samples_leaf,
                           self.ccp_alpha)
        if not cart._is_int(self.population) or not 4 <= self.population <= MAX_POPULATION:
            raise TreegenError(f"DE-split: population must be an integer 4..{MAX_POPULATION}, got {self.population!r}")
        if not cart._is_int(self.generations) or self.generations < 0:
            raise TreegenError(f"DE-split: generations must be a non-negative integer, got {self.generations!r}")
        return self


# ---------------------------------------------------------------------------------------- attribute
def separation_measure(X: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Separation Measure ``d`` of every attribute (columns of ``X``) for the rows ``X, y``.

    ``d = max over class pairs of n_hi(x >= mid) * n_lo(x < mid)`` (see the module docstring); 0 for an
    attribute whose class means coincide for every pair.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    present = [c for c in range(n_classes) if np.any(y == c)]
    members = {c: X[y == c] for c in present}
    means = {c: members[c].mean(axis=0) for c in present}
    d = np.zeros(X.shape[1], dtype=np.float64)
    for i, p in enumerate(present):
        for q in present[i + 1:]:
            mp, mq = means[p], means[q]
            mid = (mp + mq) / 2.0
            p_high = mp > mq
            # rows of the class with the larger mean at or above the midpoint, of the other below
            p_up = np.count_nonzero(members[p] >= mid, axis=0)
            p_down = members[p].shape[0] - p_up
            q_up = np.count_nonzero(members[q] >= mid, axis=0)
            q_down = members[q].shape[0] - q_up
            dpq = np.where(p_high, p_up * q_down, q_up * p_down).astype(np.float64)
            dpq[mp == mq] = 0.0
            np.maximum(d, dpq, out=d)
    return d


# ---------------------------------------------------------------------------------------- PDP / SHA
def pdp_probabilities(success: np.ndarray, used: np.ndarray) -> np.ndarray:
    """Population-level Dynamic Probabilities of the mutation strategies."""
    success = np.asarray(success, dtype=np.float64)
    used = np.asarray(used, dtype=np.float64)
    n = success.shape[0]
    p_all = 0.2 / n
    r = np.where(used > 0, success ** 2 / np.where(used > 0, used, 1.0), 0.0)
    scale = r.sum()
    if scale <= 0:
        return np.full(n, 1.0 / n)
    return p_all + r * (1.0 - n * p_all) / scale


def sha_update(old: float, values, fit_dif) -> float:
    """Success-History Adaptation: ``(old + s1/s2) / 2`` with the FitDif-weighted Lehmer mean ``s1/s2``;
    ``old`` unchanged without successes."""
    values = np.asarray(values, dtype=np.float64)
    fit_dif = np.asarray(fit_dif, dtype=np.float64)
    if values.size == 0 or fit_dif.sum() <= 0:
        return float(old)
    w = fit_dif / fit_dif.sum()
    s1 = float(np.sum(w * values ** 2))
    s2 = float(np.sum(w * values))
    if s2 <= 0:
        return float(old)
    return (float(old) + s1 / s2) / 2.0


# ---------------------------------------------------------------------------------------- fitness
class CutFitness:
    """Impurity decrease of ``x <= s`` for candidate thresholds, from the sorted values of one attribute."""

    def __init__(self, values: np.ndarray, y: np.ndarray, n_classes: int, criterion: str, msl: int):
        order = np.argsort(values, kind="stable")
        self.v = values[order]
        self.n = self.v.shape[0]
        onehot = np.zeros((self.n, n_classes), dtype=np.int64)
        onehot[np.arange(self.n), y[order]] = 1
        self.cum = np.vstack([np.zeros((1, n_classes), dtype=np.int64), np.cumsum(onehot, axis=0)])
        self.total = self.cum[-1]
        self.criterion = criterion
        self.msl = msl
        self.parent = self._impurity(self.total[None, :], np.array([self.n]))[0]

    def _impurity(self, counts: np.ndarray, n: np.ndarray) -> np.ndarray:
        n = np.maximum(n, 1).astype(np.float64)
        p = counts / n[:, None]
        if self.criterion == "gini":
            return 1.0 - np.sum(p * p, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.where(p > 0, np.log2(np.where(p > 0, p, 1.0)), 0.0)
        return -np.sum(p * lg, axis=1)

    def positions(self, s: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.v, s, side="right")

    def of_positions(self, pos: np.ndarray) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.int64)
        left = self.cum[pos]
        right = self.total - left
        nl, nr = pos, self.n - pos
        gain = (self.parent - (nl * self._impurity(left, nl) + nr * self._impurity(right, nr)) / self.n)
        ok = (nl >= self.msl) & (nr >= self.msl)
        # a cut must separate two different values
        ok &= (pos > 0) & (pos < self.n)
        ok[ok] &= self.v[np.maximum(pos[ok] - 1, 0)] < self.v[np.minimum(pos[ok], self.n - 1)]
        return np.where(ok, gain, INVALID)

    def __call__(self, s: np.ndarray) -> np.ndarray:
        return self.of_positions(self.positions(s))

    def threshold(self, pos: int) -> float:
        return float(self.v[pos - 1] / 2.0 + self.v[pos] / 2.0)

    def admissible_positions(self) -> np.ndarray:
        lo, hi = self.msl, self.n - self.msl
        if lo > hi:
            return np.zeros(0, dtype=np.int64)
        p = np.arange(max(lo, 1), min(hi, self.n - 1) + 1)
        return p[self.v[p - 1] < self.v[p]]


def _mutants(strategy: np.ndarray, x: np.ndarray, best: float, r: np.ndarray, F: np.ndarray,
             K: np.ndarray) -> np.ndarray:
    """Mutant of every individual for its strategy index; ``r`` (P, 5) distinct random partners."""
    a, b, c, d, e = (x[r[:, k]] for k in range(5))
    out = np.empty_like(x)
    table = [
        a + F * (b - c),                                  # rand/1
        a + F * (b - c) + F * (d - e),                    # rand/2
        best + F * (a - b),                               # best/1
        best + F * (a - b) + F * (c - d),                 # best/2
        x + F * (best - x) + F * (a - b),                 # current-to-best/1
        x + K * (a - x) + F * (b - c),                    # current-to-rand/1
        a + F * (best - a) + F * (b - c),                 # rand-to-best/1
    ]
    for k, v in enumerate(table):
        m = strategy == k
        out[m] = v[m]
    return out


class ThresholdDE:
    """DE over one attribute's threshold (public for tests): PDP strategy choice, SHA of F and Cr."""

    def __init__(self, fitness: CutFitness, population: int, rng: Pcg32):
        self.f = fitness
        self.P = population
        self.rng = rng
        self.lo, self.hi = float(fitness.v[0]), float(fitness.v[-1])
        self.success = np.zeros(len(STRATEGIES), dtype=np.int64)
        self.used = np.zeros(len(STRATEGIES), dtype=np.int64)
        self.MF = 0.5
        self.MCR = 0.5
        self.evaluations = 0

    def _uniform(self, k: int) -> np.ndarray:
        return take_u32(self.rng, k).astype(np.float64) / U32

    def _partners(self) -> np.ndarray:
        """Five distinct partners of every individual, none the individual itself: the first five of
        the other individuals ordered by a random 32-bit key (ties by index). With P = 4 or 5 the
        list wraps around (rand/2 and best/2 then reuse a partner)."""
        P = self.P
        keys = take_u32(self.rng, P * P).reshape(P, P).astype(np.float64)
        keys[np.arange(P), np.arange(P)] = np.inf
        order = np.argsort(keys, axis=1, kind="stable")[:, :P - 1]
        return order[:, np.arange(5) % (P - 1)]

    def run(self, generations: int) -> tuple[float, float]:
        """Best ``(threshold candidate, fitness)`` after ``generations`` generations."""
        P = self.P
        x = self.lo + (self.hi - self.lo) * self._uniform(P)
        fit = self.f(x)
        self.evaluations += P
        for _ in range(generations):
            probs = pdp_probabilities(self.success, self.used)
            cdf = np.cumsum(probs)
            u = self._uniform(4 * P).reshape(P, 4)
            strategy = np.minimum(np.searchsorted(cdf, u[:, 0] * cdf[-1], side="right"), len(STRATEGIES) - 1)
            F = self.MF + 0.1 * np.tan(np.pi * (u[:, 1] - 0.5))
            for i in np.flatnonzero(F <= 0).tolist():        # redraw (rare) in index order
                while F[i] <= 0:
                    F[i] = self.MF + 0.1 * math.tan(math.pi * (self.rng.next_u32() / U32 - 0.5))
            F = np.minimum(F, 1.0)
            # N(0,1) as Pcg32.normal_q16: Irwin-Hall of four 16-bit uniforms (block-drawn)
            h = (take_u32(self.rng, 4 * P).reshape(P, 4) >> np.uint64(16)).astype(np.int64).sum(axis=1)
            z = (((h - (1 << 17)) * 113512) >> 16).astype(np.float64) / 65536.0
            CR = np.clip(self.MCR + 0.1 * z, 0.0, 1.0)
            K = u[:, 2]
            best = float(x[int(np.argmax(fit))])
            v = _mutants(strategy, x, best, self._partners(), F, K)
            v = np.where(v < self.lo, (self.lo + x) / 2.0, np.where(v > self.hi, (self.hi + x) / 2.0, v))
            fv = self.f(v)
            self.evaluations += P
            mean = float(np.mean(np.maximum(fit, 0.0)))
            succ = fv > mean
            np.add.at(self.used, strategy, 1)
            np.add.at(self.success, strategy[succ], 1)
            if np.any(succ):
                dif = fv[succ] - mean
                self.MF = sha_update(self.MF, F[succ], dif)
                self.MCR = sha_update(self.MCR, CR[succ], dif)
            keep = fv >= fit
            x = np.where(keep, v, x)
            fit = np.where(keep, fv, fit)
        b = int(np.argmax(fit))
        return float(x[b]), float(fit[b])


# ---------------------------------------------------------------------------------------- growing
def _node_split(X, y, n_classes, params: DESplitParams, rng: Pcg32, stats: dict):
    """``(feature, threshold, mask_left)`` of a node's split, or None."""
    d = separation_measure(X, y, n_classes)
    order = np.lexsort((np.arange(d.size), -d))
    for f in order.tolist():
        if d[f] <= 0:
            break
        fit = CutFitness(X[:, f], y, n_classes, params.criterion, params.min_samples_leaf)
        cuts = fit.admissible_positions()
        if cuts.size == 0:
            continue
        if cuts.size <= params.population or params.generations == 0:
            g = fit.of_positions(cuts)
            stats["enumerated"] += 1
            stats["evaluations"] += int(cuts.size)
            pos = int(cuts[int(np.argmax(g))])
        else:
            de = ThresholdDE(fit, params.population, rng)
            s, best = de.run(params.generations)
            stats["de_nodes"] += 1
            stats["evaluations"] += de.evaluations
            if best <= INVALID:
                pos = int(cuts[int(np.argmax(fit.of_positions(cuts)))])
            else:
                pos = int(fit.positions(np.array([s]))[0])
        thr = fit.threshold(pos)
        return f, thr, X[:, f] <= thr
    return None


def _grow(X, y, n_classes, params: DESplitParams, seed: int, stats: dict) -> dict:
    N, A = X.shape
    rng = Pcg32(seed)
    depth_limit = params.max_depth if params.max_depth is not None else np.iinfo(np.int64).max
    min_split = max(params.min_samples_split, 2 * params.min_samples_leaf)
    feature, threshold, left, right, counts_l = [], [], [], [], []
    stack = [(np.arange(N), 0, -1, True)]
    while stack:
        rows, depth, parent, is_left = stack.pop()
        node = len(feature)
        if parent >= 0:
            (left if is_left else right)[parent] = node
        counts = np.bincount(y[rows], minlength=n_classes).astype(np.int64)
        feature.append(LEAF)
        threshold.append(0.0)
        left.append(LEAF)
        right.append(LEAF)
        counts_l.append(counts)
        n = rows.shape[0]
        if depth >= depth_limit or n < min_split or counts.max() == n:
            continue
        split = _node_split(X[rows], y[rows], n_classes, params, rng, stats)
        if split is None:
            continue
        f, thr, mask = split
        feature[node] = f
        threshold[node] = thr
        stack.append((rows[~mask], depth + 1, node, False))
        stack.append((rows[mask], depth + 1, node, True))
    counts = np.array(counts_l, dtype=np.int64).reshape(-1, n_classes)
    n_samples = counts.sum(axis=1)
    impurity = np.array([cart._node_impurity(c, int(m), params.criterion) for c, m in zip(counts, n_samples)])
    return {"feature": np.array(feature, dtype=np.int64), "threshold": np.array(threshold),
            "left": np.array(left, dtype=np.int64), "right": np.array(right, dtype=np.int64),
            "counts": counts, "n_samples": n_samples, "impurity": impurity, "n_features": A}


def induce(X, y, n_classes, params: DESplitParams | None = None, *, seed: int = 0) -> tuple[Tree, dict]:
    """Grow (and optionally prune) a DE-split tree.

    Parameters
    ----------
    X : (n, A) normalised features; y : (n,) class indices; n_classes : int
    params : :class:`DESplitParams` (criterion 'gini' = DE-CART, 'entropy' = DE-ID3)
    seed : int

    Returns
    -------
    tree, info : the tree (pre-order) and ``{"n_leaves", "depth", "de_nodes", "enumerated_nodes",
        "fitness_evaluations", "elapsed_s"}``.
    """
    params = (params or DESplitParams()).validate()
    X, y, n_classes = cart._check_data(X, y, n_classes)
    t0 = time.perf_counter()
    stats = {"de_nodes": 0, "enumerated": 0, "evaluations": 0}
    g = _grow(X, y, n_classes, params, seed, stats)
    collapsed = None
    if params.ccp_alpha > 0:
        _, _, collapsed = cart._prune(g, float(params.ccp_alpha))
    tree = cart._to_tree(g, collapsed)
    return tree, {"n_leaves": tree.n_leaves, "depth": tree.depth, "de_nodes": stats["de_nodes"],
                  "enumerated_nodes": stats["enumerated"], "fitness_evaluations": stats["evaluations"],
                  "elapsed_s": round(time.perf_counter() - t0, 4)}
