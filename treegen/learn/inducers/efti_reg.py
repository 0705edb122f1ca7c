"""EFTI regression: oblique value trees by EFTI's (1+1) evolution strategy with a squared-error fitness.

The search of :mod:`treegen.learn.inducers.efti` (mutations, mixed dipoles, selection, partial
reclassification, the same random draws) with another fitness:

* **Targets** are quantised for the search only: ``t = rint((y - min y) / (max y - min y) * 4095)``
  (12 bits); a dipole joins two rows of different ``t``.
* **Leaf statistics**: per leaf the row count, ``sum t`` and ``sum t**2`` (integers, exact also when
  updated by difference in partial reclassification).
* **Fitness**: ``R2 = 1 - SSE / SST`` on ``t`` (``SSE = sum over leaves of sum t**2 - (sum t)**2 / n``),
  floored at 0, as the integer ``hits = round(R2 * 2**20)`` times EFTI's size factor
  ``PEN[L] = round(65536 * max(0, 1 - Ko * ((L - K) / K)**2))`` with ``K`` = ``target_leaves`` (where a
  classifier has its class count).
* **Leaves** of the final tree predict the float64 mean of the true targets of their training rows
  (``Tree.refit_values``); a leaf no row reaches predicts the training mean.

Python engine only (the C engine and the device run the classification fitness).
"""

from __future__ import annotations

import time

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree
from treegen.learn.inducers import efti

T_LEVELS = 4095
HITS_ONE = 1 << 20


class RegressionEvolver(efti.Evolver):
    """An :class:`~treegen.learn.inducers.efti.Evolver` whose "counts" are ``(n, sum t, sum t**2)``
    per node and whose fitness is the R² of the leaves' means (module docstring)."""

    def __init__(self, Xq: np.ndarray, t: np.ndarray, target_leaves: int, params: efti.EFTIParams, seed: int):
        super().__init__(Xq, t, 3, params, seed)          # three statistics columns instead of classes
        self.K = int(target_leaves)
        self.tables = efti.FitnessTables(params, self.K)
        self.topo_thr = efti.topology_thresholds(params, self.K, 1 << params.max_depth)
        self.t = t.astype(np.float64)
        self.t2 = self.t * self.t
        self.sst = float(np.sum(self.t2) - np.sum(self.t) ** 2 / self.n)

    def _stats(self, leaf_of: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        t, t2 = (self.t, self.t2) if rows is None else (self.t[rows], self.t2[rows])
        size = self.cap
        out = np.empty((size, 3), dtype=np.int64)   # every sum is an integer below 2**53: exact
        out[:, 0] = np.bincount(leaf_of, minlength=size)
        out[:, 1] = np.bincount(leaf_of, weights=t, minlength=size)
        out[:, 2] = np.bincount(leaf_of, weights=t2, minlength=size)
        return out

    def _counts_full(self, leaf_of: np.ndarray) -> np.ndarray:
        return self._stats(leaf_of)

    def _score(self, counts: np.ndarray) -> tuple[int, int, np.ndarray]:
        per_leaf = counts[self.leaves_arr]
        n = per_leaf[:, 0].astype(np.float64)
        s1 = per_leaf[:, 1].astype(np.float64)
        s2 = per_leaf[:, 2].astype(np.float64)
        nz = n > 0
        sse = float(np.sum(s2[nz] - s1[nz] * s1[nz] / n[nz]))
        r2 = 1.0 - sse / self.sst if self.sst > 0 else 1.0
        hits = int(round(max(0.0, r2) * HITS_ONE))
        dom = np.zeros(len(self.leaves), dtype=np.int64)
        return self.tables.fitness(hits, len(self.leaves), self.K), hits, dom

    def evaluate_mutant(self, undo: dict):
        self.stats["evaluations"] += 1
        if self.partial:
            mark = np.zeros(self.cap, dtype=bool)
            mark[undo["mark"]] = True
            rows = np.flatnonzero(mark[self.leaf_of])
            self.stats["rerouted"] += rows.size
            if rows.size:
                new_leaf = self._route(self.P[rows] > self.T)
                counts = self.counts + self._stats(new_leaf, rows) - self._stats(self.leaf_of[rows], rows)
            else:
                new_leaf, counts = rows, self.counts
            fit, hits, dom = self._score(counts)
            return fit, hits, dom, counts, (rows, new_leaf)
        self.stats["rerouted"] += self.n
        leaf_of = self._classify_all()
        counts = self._counts_full(leaf_of)
        fit, hits, dom = self._score(counts)
        return fit, hits, dom, counts, leaf_of

    def to_value_tree(self, s, X01: np.ndarray, y: np.ndarray) -> Tree:
        """Snapshot -> value tree (pre-order, exact float weights), leaves = mean target of their rows."""
        order, W, T, left, right = efti.preorder_arrays(s, self.A)
        m = len(order)
        tree = Tree(W, T, left, right, np.zeros(m, dtype=np.int32), np.zeros((m, 1), dtype=np.int64),
                    leaf_value=np.full(m, float(np.mean(y))))
        return tree.refit_values(X01, y).validate()


def induce(X: np.ndarray, y: np.ndarray, params: efti.EFTIParams | None = None, *, seed: int = 0,
           target_leaves: int = 8, callback=None) -> tuple[Tree, dict]:
    """Evolve an oblique regression tree (module docstring). ``X``: normalised features on the Q15
    grid; ``y``: finite targets (at least two distinct); ``target_leaves``: ``K`` of the size factor.
    Returns the value tree and ``{"fitness", "train_r2_search", "iterations", "elapsed_s", ...}``."""
    params = (params or efti.EFTIParams()).validate()
    if isinstance(target_leaves, bool) or not isinstance(target_leaves, (int, np.integer)) or target_leaves < 2:
        raise TreegenError(f"target_leaves must be an integer >= 2, got {target_leaves!r}")
    y = np.asarray(y, dtype=np.float64)
    lo, hi = float(np.min(y)), float(np.max(y))
    if not hi > lo:
        raise TreegenError("EFTI regression needs at least two distinct target values")
    t = np.rint((y - lo) / (hi - lo) * T_LEVELS).astype(np.int64)
    X, Xq, _ = efti.check_inputs(X, np.minimum(t, 1))           # the Q15 grid check (labels unused)
    t0 = time.perf_counter()
    ev = RegressionEvolver(Xq, t, int(target_leaves), params, efti.check_seed(seed))
    best = efti.evolve(ev, params, callback)
    tree = ev.to_value_tree(best, X, y)
    info = efti.fit_info(best.fit, ev.n, params.max_iter, time.perf_counter() - t0, params,
                         ev.stats["rerouted"], ev.stats["evaluations"])
    info["fitness"] = best.fit / (float(HITS_ONE) * (1 << 32))
    info["train_r2_search"] = best.hits / HITS_ONE
    info.update(n_leaves=tree.n_leaves, depth=tree.depth, target_leaves=int(target_leaves))
    return tree, info
