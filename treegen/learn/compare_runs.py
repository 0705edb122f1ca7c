"""Several independently seeded runs of a stochastic method per fold, and one score per fold from them.

The protocol of Cao & Rockett 2015 (shared/seeds/002_*.txt, section 4.2 and 5): a GP is
non-deterministic, so each fold gets R independently initialised runs; the fold's test error is the
median over the runs, or the test error of the run with the lowest training error. In a comparison
(:mod:`treegen.learn.compare`) every run is one task with its own key and results-file line, so an
interrupted comparison resumes from its finished runs and the runs spread over a Dask cluster like
any task. Run 0 of a fold is exactly the fold's single task of one run per fold (same key, same
seed): ``runs_per_fold`` 1 is today's comparison, and a results file of one run per fold gives every
fold its first run. Deterministic algorithms (CART, ID3: ``deterministic`` on the estimator class)
run once per fold whatever R is.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from treegen.core.errors import TreegenError
from treegen.learn.estimators import ALGORITHMS

#: how a fold's score comes from its runs: the median test accuracy, or that of the best-trained run
PICKS = ("median", "best-train")
MAX_RUNS_PER_FOLD = 1000
#: fields summed over a fold's runs (the compute behind the fold)
SUMMED = ("train_seconds", "measure_seconds")
#: the test figures of a regression task record (``task`` "regression"); a fold's median takes each one's median
REGRESSION_SCORES = ("rmse", "mae", "r2")


def run_seed(first_key: str, fold_seed_: int, run: int) -> int:
    """Estimator seed of run ``run`` of a fold: run 0 keeps the fold's seed (:func:`fold_seed`, as
    ``treegen cv``); a later run gets a 31-bit seed hashed from the first run's task key and the run index."""
    if run == 0:
        return fold_seed_
    digest = hashlib.sha256(f"{first_key}/run/{run}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def is_deterministic(algorithm: str) -> bool:
    """The algorithm gives the same tree for every seed (one run per fold is all there is)."""
    return bool(getattr(ALGORITHMS[algorithm], "deterministic", False))


def _median(values: list):
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals and len(vals) == len(values) else None


def fold_records(records: Sequence[dict], pick: str = "median") -> list[dict]:
    """One record per (dataset, method, repetition, fold) from the records of its runs (in first-seen order).

    A fold with one run keeps that run's record unchanged (``runs_per_fold`` 1, deterministic methods).
    A fold of several runs scores, by ``pick``:

    * ``median``: the median test accuracy of the runs (even count: the mean of the middle two);
      leaves, depth and flash bytes are the runs' medians too;
    * ``best-train``: the record of the run with the highest training accuracy (ties: the lowest run
      index), as "the test error of the run with the lowest training error" (Cao & Rockett 2015).

    Either way ``train_seconds`` (and ``measure_seconds``) are the runs' sums, and the record adds
    ``runs`` (the count), ``pick``, ``picked_run`` (None for the median) and ``run_accuracies`` /
    ``run_train_accuracies`` (by run index). ``best-train`` needs ``train_accuracy`` in every run.

    Regression records (``task`` "regression") score by RMSE: ``median`` takes the medians of
    ``rmse``, ``mae`` and ``r2`` (each on its own), ``best-train`` the run with the lowest
    ``train_rmse`` (ties: the lowest run index); the lists are ``run_rmse`` / ``run_train_rmse``.
    """
    if pick not in PICKS:
        raise TreegenError(f"pick must be one of {', '.join(PICKS)}, got {pick!r}")
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["method"], r["repeat"], r["fold"]), []).append(r)
    out = []
    for (ds, method, repeat, fold), runs in groups.items():
        if len(runs) == 1:
            out.append(runs[0])
            continue
        runs = sorted(runs, key=lambda r: r.get("run", 0))
        regression = runs[0].get("task") == "regression"
        score, train_key = ("rmse", "train_rmse") if regression else ("accuracy", "train_accuracy")
        train = [r.get(train_key) for r in runs]
        if pick == "best-train":
            if any(t is None for t in train):
                raise TreegenError(f"dataset {ds}, {method}, repetition {repeat}, fold {fold}: a run without its "
                                   "training accuracy (a record of an older treegen) cannot be picked by best-train")
            # the best training fit: the highest accuracy, or the lowest RMSE (ties: the lowest run index)
            best = (min(range(len(runs)), key=lambda i: (train[i], i)) if regression else
                    max(range(len(runs)), key=lambda i: (train[i], -i)))
            rec = dict(runs[best])
            picked = runs[best].get("run", 0)
        else:
            rec = dict(runs[0])
            for name in (*(REGRESSION_SCORES if regression else ("accuracy",)), "leaves", "depth", "flash_bytes",
                         "flash_bytes_inference"):
                if name in rec:
                    rec[name] = _median([r.get(name) for r in runs])
            rec.pop(train_key, None)
            picked = None
        for name in SUMMED:
            if any(name in r for r in runs):
                rec[name] = float(sum(float(r.get(name) or 0.0) for r in runs))
        if regression:
            rec.update(runs=len(runs), pick=pick, picked_run=picked, run_rmse=[r[score] for r in runs],
                       run_train_rmse=train)
        else:
            rec.update(runs=len(runs), pick=pick, picked_run=picked, run_accuracies=[r[score] for r in runs],
                       run_train_accuracies=train)
        out.append(rec)
    return out
