"""Repeated stratified K-fold cross-validation (plain shuffled K-fold for regression).

Deterministic for a given ``seed``: the fold assignment of repetition ``r`` comes from
``numpy.random.Generator(PCG64(seed + r))`` and the estimator of fold ``f`` of repetition ``r`` gets
the seed :func:`fold_seed` ``(seed, r, f)``, so the result does not depend on ``jobs`` or on the
joblib backend. Folds run through ``joblib.Parallel(n_jobs=jobs)``; with ``jobs=None`` the number
of workers and the backend come from ``joblib.parallel_config`` (e.g. a Dask or Ray backend).

Result (accuracy as a fraction 0..1, like ``score()``; the CLI prints percent)::

    {"dataset": ..., "algorithm": ..., "params": {...}, "folds_k": K, "repeats": R, "seed": S,
     "n_rows": ..., "n_features": ..., "n_classes": ...,
     "accuracy": {"mean": f, "ci95": f}, "leaves": {"mean": n, "ci95": n}, "depth": {...},
     "folds": [{"repeat", "fold", "accuracy", "leaves", "depth", "train_seconds", "seed",
                "n_train", "n_test"}, ...]}

With ``task="regression"`` the folds are a shuffled K-fold split (:func:`kfold_ids`: the same
generator ``PCG64(seed + r)``), the estimators come from
:data:`treegen.learn.regressors.REGRESSORS`, and ``accuracy`` / ``n_classes`` are replaced by
``"task": "regression"``, ``rmse``, ``mae`` and ``r2`` (summaries over the folds; each fold record
has the three figures of its test rows).
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Callable

import numpy as np
from joblib import Parallel, delayed

from treegen.core.errors import DataError, TreegenError
from treegen.core.limits import available_cores, capped_jobs  # noqa: F401 - cv's own names too
from treegen.core.metrics import regression_scores, summary
from treegen.learn.estimators import ALGORITHMS, make_estimator, resolve_seed


class EstimatorFactory:
    """Picklable ``factory(seed) -> unfitted estimator`` for an algorithm name and parameters.

    The estimator class is resolved when the factory is made (in the parent process), and the
    parameters are validated by building one estimator. ``random_state`` is set per fold.
    """

    def __init__(self, algorithm: str, params: dict | None = None, task: str = "classification"):
        params = dict(params or {})
        params.pop("random_state", None)
        if task == "regression":
            from treegen.learn.regressors import REGRESSORS, make_regressor

            make_regressor(algorithm, **params)
            self.cls = REGRESSORS[algorithm]
        else:
            make_estimator(algorithm, **params)  # raises TreegenError on unknown algorithm / option
            self.cls = ALGORITHMS[algorithm]
        self.algorithm = algorithm
        self.params = params

    def __call__(self, seed: int):
        return self.cls(**self.params, random_state=seed)


def fold_seed(seed: int, repeat: int, fold: int) -> int:
    """Estimator seed of one fold: a 31-bit integer derived from ``(seed, repeat, fold)``."""
    state = np.random.SeedSequence([seed, repeat, fold]).generate_state(1, dtype=np.uint32)
    return int(state[0]) & 0x7FFFFFFF


def stratified_fold_ids(y, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold index (0..folds-1) of every row; each class is spread evenly over the folds.

    Classes are visited in sorted order; the members of each class are shuffled and dealt
    round-robin, continuing where the previous class stopped, so fold sizes differ by at most one.
    """
    _, y_idx = np.unique(np.asarray(y), return_inverse=True)
    y_idx = y_idx.ravel()
    fold_of = np.empty(y_idx.shape[0], dtype=np.int64)
    start = 0
    for c in range(int(y_idx.max()) + 1 if y_idx.size else 0):
        members = rng.permutation(np.flatnonzero(y_idx == c))
        fold_of[members] = (start + np.arange(members.shape[0])) % folds
        start = (start + members.shape[0]) % folds
    return fold_of


def kfold_ids(n: int, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold index (0..folds-1) of every row of a regression cross-validation: the rows in a random
    order (``rng.permutation(n)``) dealt round-robin, so fold sizes differ by at most one."""
    fold_of = np.empty(n, dtype=np.int64)
    fold_of[rng.permutation(n)] = np.arange(n) % folds
    return fold_of


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TreegenError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise TreegenError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _run_fold(factory: Callable, X: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray,
              repeat: int, fold: int, seed: int, task: str = "classification") -> dict:
    est = factory(seed)
    t0 = time.perf_counter()
    try:
        est.fit(X[train], y[train])
    except TreegenError as exc:
        raise TreegenError(f"repetition {repeat}, fold {fold}: {exc}") from None
    seconds = time.perf_counter() - t0
    pred = np.asarray(est.predict(X[test]))
    if task == "regression":
        scores = regression_scores(y[test], pred)
        figures = {"rmse": scores["rmse"], "mae": scores["mae"], "r2": scores["r2"]}
    else:
        figures = {"accuracy": float(np.mean(pred == y[test]))}
    trees = est.model_.trees          # an ensemble counts the leaves of all its trees, its deepest tree
    return {
        "repeat": repeat, "fold": fold, **figures, "leaves": int(sum(t.n_leaves for t in trees)),
        "depth": int(max(t.depth for t in trees)),
        "train_seconds": seconds, "seed": seed, "n_train": int(train.shape[0]), "n_test": int(test.shape[0]),
    }


def _kill_workers() -> None:
    try:
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=True, kill_workers=True)
    except Exception:  # noqa: BLE001 - best effort on the way out of an interrupted run
        pass


def _plain_params(params: dict) -> dict:
    return {k: v for k, v in params.items()
            if k not in ("random_state", "callback") and (v is None or isinstance(v, (bool, int, float, str)))}


def cross_validate(X, y, algorithm: str | Callable, params: dict | None = None, *, folds: int = 5,
                   repeats: int = 1, seed: int | None = 0, jobs: int | None = None, dataset: str = "",
                   on_fold: Callable[[dict], None] | None = None, task: str = "classification") -> dict:
    """Repeated stratified K-fold cross-validation of an algorithm.

    Parameters
    ----------
    X, y : array-like
        Raw features ``(n_rows, n_features)`` and labels (any comparable values).
    algorithm : str or callable
        An algorithm name from :data:`treegen.learn.estimators.ALGORITHMS` (with ``params``), or a
        picklable factory ``factory(seed) -> unfitted estimator``; the fitted estimator must have
        ``predict`` and a ``tree_`` (:class:`treegen.core.tree.Tree`).
    params : dict
        Estimator parameters (``random_state`` is ignored: every fold gets :func:`fold_seed`).
    folds, repeats : int
        ``2 <= folds <= n_rows``, ``repeats >= 1``.
    seed : int or None
        ``seed >= 0`` (folds and fold seeds); None draws a fresh one (returned as ``result["seed"]``).
    jobs : int or None
        ``n_jobs`` of :class:`joblib.Parallel` (None: joblib's configured default).
    dataset : str
        Name recorded in the result.
    on_fold : callable
        Called in the calling process with each fold's record as it completes (progress bars).
    task : {'classification', 'regression'}
        ``regression``: numeric ``y``, shuffled K-fold, RMSE / MAE / R² (module docstring).

    A class with fewer members than ``folds`` only triggers a :class:`UserWarning` (as in
    scikit-learn); a training split that ends up with a single class raises :class:`TreegenError`.
    """
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("X must be a numeric 2-D array") from None
    if task not in ("classification", "regression"):
        raise TreegenError(f"unknown task {task!r} (choose from classification, regression)")
    regression = task == "regression"
    y = np.asarray(y)
    if regression:
        try:
            y = np.asarray(y.tolist() if y.dtype == object else y, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError("a regression cross-validation needs numeric target values, got text labels") from None
    if X.ndim != 2 or X.shape[0] == 0:
        raise DataError(f"X must be a non-empty 2-D array, got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise DataError(f"X has {X.shape[0]} rows but y has shape {y.shape}")
    n = X.shape[0]
    folds = _check_int("folds", folds, 2)
    if folds > n:
        raise TreegenError(f"folds ({folds}) cannot exceed the number of rows ({n})")
    repeats = _check_int("repeats", repeats, 1)
    seed = resolve_seed(None) if seed is None else _check_int("seed", seed, 0)
    if jobs is not None:
        jobs = _check_int("jobs", jobs, -(2**31))
        if jobs == 0:
            raise TreegenError("jobs must not be 0 (use 1 for sequential, -1 for all cores)")

    if isinstance(algorithm, str):
        factory = EstimatorFactory(algorithm, params, task)
        algo_name = algorithm
        params_used = factory(0).get_params()
    elif callable(algorithm):
        factory = algorithm
        probe = factory(0)
        algo_name = getattr(probe, "algorithm", None) or type(probe).__name__
        params_used = dict(params) if params is not None else (
            probe.get_params() if hasattr(probe, "get_params") else {})
    else:
        raise TreegenError(f"algorithm must be a name or an estimator factory, got {algorithm!r}")

    if not regression:
        classes, counts = np.unique(y, return_counts=True)
        if classes.shape[0] < 2:
            raise DataError(f"data has a single class ({classes[0]!r}); at least two are needed")
        if counts.min() < folds:
            warnings.warn(f"the least populated class has only {int(counts.min())} member(s), fewer than "
                          f"folds={folds}", UserWarning, stacklevel=2)

    tasks = []
    for r in range(repeats):
        rng = np.random.default_rng(seed + r)
        fold_of = kfold_ids(n, folds, rng) if regression else stratified_fold_ids(y, folds, rng)
        for f in range(folds):
            test = np.flatnonzero(fold_of == f)
            train = np.flatnonzero(fold_of != f)
            tasks.append(delayed(_run_fold)(factory, X, y, train, test, r, f, fold_seed(seed, r, f), task))

    if jobs is not None:
        jobs = capped_jobs(jobs, len(tasks))
    records = []
    try:
        for rec in Parallel(n_jobs=jobs, return_as="generator")(tasks):
            records.append(rec)
            if on_fold is not None:
                on_fold(rec)
    except BaseException:
        # Ctrl-C, SIGTERM or a failing fold: no worker process may keep computing
        if jobs is None or jobs != 1:
            _kill_workers()
        raise
    records.sort(key=lambda d: (d["repeat"], d["fold"]))

    if regression:
        figures = {"task": "regression", **{k: summary([d[k] for d in records]) for k in ("rmse", "mae", "r2")}}
    else:
        figures = {"n_classes": int(classes.shape[0]), "accuracy": summary([d["accuracy"] for d in records])}
    return {
        "dataset": dataset,
        "algorithm": algo_name,
        "params": _plain_params(params_used),
        "folds_k": folds,
        "repeats": repeats,
        "seed": seed,
        "n_rows": int(n),
        "n_features": int(X.shape[1]),
        **figures,
        "leaves": summary([d["leaves"] for d in records]),
        "depth": summary([d["depth"] for d in records]),
        "train_seconds": float(sum(d["train_seconds"] for d in records)),
        "folds": records,
    }
