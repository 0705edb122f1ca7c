"""Random forests of treegen trees (Breiman 2001; the seed shared/seeds/003_*.txt).

Each tree is induced by a base tree learner (``cart``, ``efti`` or ``gp``) on a bootstrap sample
of the training rows (``round(sample_fraction * n)`` rows drawn with replacement; the seed's 2/3
is ``sample_fraction=2/3``) and on

* ``feature_bagging="split"``: all features, a random subset of ``max_features`` searched at every
  node (CART only; scikit-learn's rule), or
* ``feature_bagging="tree"``: a random subset of ``max_features`` features for the whole tree (as
  the seed describes; any base learner). The tree is trained on those columns and its weights are
  written back into the full feature space (zeros elsewhere), so it is an ordinary tree of the IR.

Every tree gets its own generator ``PCG64(SeedSequence([seed, t]))``: the forest does not depend on
``n_jobs``. Class probabilities are the trees' leaf class frequencies (from their training samples,
bootstrap multiplicities included), averaged over the trees; the out-of-bag estimate uses, for each
row, only the trees whose sample did not contain it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.tree import Tree

BASES = ("cart", "efti", "gp")
BAGGING = ("auto", "split", "tree")


def resolve_max_features(max_features, n_features: int) -> int:
    """Number of features for ``'sqrt'``, ``'log2'``, ``'all'``/None, an integer N or a fraction."""
    if max_features is None or max_features == "all":
        return n_features
    if max_features == "sqrt":
        return max(1, int(math.sqrt(n_features)))
    if max_features == "log2":
        return max(1, int(math.log2(n_features)))
    if isinstance(max_features, numbers.Integral) and not isinstance(max_features, bool):
        if max_features < 1:
            raise TreegenError(f"max_features must be >= 1, got {max_features}")
        return min(int(max_features), n_features)
    if isinstance(max_features, numbers.Real) and not isinstance(max_features, bool) and 0 < max_features <= 1:
        return max(1, int(max_features * n_features))
    raise TreegenError(f"max_features must be sqrt, log2, all, an integer >= 1 or a fraction in (0, 1], "
                       f"got {max_features!r}")


def tree_rng(seed: int, t: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(t)])))


def draw_sample(rng: np.random.Generator, n: int, sample_fraction: float) -> np.ndarray:
    """Bootstrap row indices (with replacement), ``max(1, round(sample_fraction * n))`` of them."""
    return rng.integers(0, n, size=max(1, int(round(sample_fraction * n))))


def widen(tree: Tree, features: np.ndarray, n_features: int) -> Tree:
    """A tree trained on the columns ``features`` -> the same tree over all ``n_features`` columns."""
    W = np.zeros((tree.n_nodes, n_features))
    W[:, features] = tree.weights
    return Tree(W, tree.threshold, tree.left, tree.right, tree.leaf_class, tree.class_counts).validate()


def fit_one(t: int, X: np.ndarray, y: np.ndarray, n_classes: int, *, seed: int, base: str, base_params: dict,
            sample_fraction: float, bagging: str, k: int, engine: str = "python") -> tuple[Tree, np.ndarray, float]:
    """Tree ``t`` of the forest: (tree over all features, in-bag mask, seconds). ``engine``: the EFTI
    engine of the ``efti`` base (``python`` or ``native``; both give the same tree)."""
    import time

    t0 = time.perf_counter()
    rng = tree_rng(seed, t)
    n, A = X.shape
    rows = draw_sample(rng, n, sample_fraction)
    Xs, ys = X[rows], y[rows]
    if np.unique(ys).size < 2:            # a one-class sample: a single leaf of that class
        tree = Tree.leaf_only(A, n_classes, int(ys[0]))
        tree.class_counts[0] = np.bincount(ys, minlength=n_classes)
    else:
        feats = np.sort(rng.choice(A, size=k, replace=False)) if bagging == "tree" and k < A else None
        sub_seed = int(rng.integers(0, 2**31 - 1))
        Xt = Xs if feats is None else Xs[:, feats]
        if base == "cart":
            from treegen.learn.inducers import cart

            per_split = k if bagging == "split" and k < A else None
            tree, _ = cart.induce(Xt, ys, n_classes, max_features=per_split, rng=rng, **base_params)
        elif base == "efti":
            from treegen.learn.inducers import efti

            params = efti.EFTIParams(**base_params)
            if engine == "native":       # the C engine: the same tree, faster
                from treegen.learn import engine as native

                tree, _ = native.induce(Xt, ys, n_classes, params, seed=sub_seed)
            else:
                tree, _ = efti.induce(Xt, ys, n_classes, params, seed=sub_seed)
        else:
            from treegen.learn.inducers import gp

            tree, _ = gp.induce(Xt, ys, n_classes, gp.GPParams(**base_params), seed=sub_seed)
        if feats is not None:
            tree = widen(tree, feats, A)
    in_bag = np.zeros(n, dtype=bool)
    in_bag[rows] = True
    return tree, in_bag, time.perf_counter() - t0


def oob(trees: list[Tree], in_bag: list[np.ndarray], X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray, int]:
    """Out-of-bag accuracy, decision function (NaN rows: in every sample) and the number of rows scored."""
    n, C = X.shape[0], trees[0].n_classes
    acc = np.zeros((n, C))
    seen = np.zeros(n, dtype=np.int64)
    for tree, bag in zip(trees, in_bag):
        out = ~bag
        if out.any():
            acc[out] += tree.predict_proba(X[out])
            seen[out] += 1
    scored = seen > 0
    decision = np.full((n, C), np.nan)
    decision[scored] = acc[scored] / seen[scored, None]
    if not scored.any():
        return float("nan"), decision, 0
    score = float(np.mean(decision[scored].argmax(axis=1) == y[scored]))
    return score, decision, int(scored.sum())


def fit_one_regression(t: int, X: np.ndarray, y: np.ndarray, *, seed: int, base_params: dict,
                       sample_fraction: float, k: int) -> tuple[Tree, np.ndarray, float]:
    """Regression tree ``t`` of a forest (CART, squared error, ``k`` features searched per split):
    (value tree, in-bag mask, seconds). The same bootstrap draws as :func:`fit_one`."""
    import time

    from treegen.learn.inducers import cart_reg

    t0 = time.perf_counter()
    rng = tree_rng(seed, t)
    n, A = X.shape
    rows = draw_sample(rng, n, sample_fraction)
    tree, _ = cart_reg.induce(X[rows], y[rows], max_features=k if k < A else None, rng=rng, **base_params)
    in_bag = np.zeros(n, dtype=bool)
    in_bag[rows] = True
    return tree, in_bag, time.perf_counter() - t0


def oob_regression(trees: list[Tree], in_bag: list[np.ndarray], X: np.ndarray,
                   y: np.ndarray) -> tuple[float, np.ndarray, int]:
    """Out-of-bag R² of a regression forest, each row's out-of-bag mean prediction (NaN: in every
    sample) and the number of rows scored."""
    from treegen.core.metrics import regression_scores

    n = X.shape[0]
    acc = np.zeros(n)
    seen = np.zeros(n, dtype=np.int64)
    for tree, bag in zip(trees, in_bag):
        out = ~bag
        if out.any():
            acc[out] += tree.predict_value(X[out])
            seen[out] += 1
    scored = seen > 0
    pred = np.full(n, np.nan)
    pred[scored] = acc[scored] / seen[scored]
    if not scored.any():
        return float("nan"), pred, 0
    return regression_scores(y[scored], pred[scored])["r2"], pred, int(scored.sum())
