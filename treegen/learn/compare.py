"""Comparing algorithms and settings over many datasets: one task per (dataset, method, repetition, fold).

The protocol is the one of :mod:`treegen.learn.cv`, task by task: the fold assignment of repetition
``r`` comes from ``numpy.random.default_rng(seed + r)`` over the dataset's labels, and the estimator of
fold ``f`` gets the seed :func:`treegen.learn.cv.fold_seed` ``(seed, r, f)``. A task therefore gives
the same result wherever and whenever it runs — on a local process, on a remote Dask worker, after
its first worker died — and a method's cell equals ``treegen cv`` with the same seed. Every method
sees the same folds, so the per-dataset scores are paired (what the tests of
:mod:`treegen.core.stats` need).

Pieces:

* :class:`Method` — a named (algorithm, parameters) setting; :func:`methods_from_spec` builds them from
  ``--algos`` and a parameter file's contents.
* :func:`plan` — the task list; every task has a ``key``: a hash of everything its result depends on
  (dataset contents, algorithm, parameters, folds, seed, repetition, fold, and the run index of runs
  after the first when a stochastic method runs ``runs_per_fold`` times per fold).
* :func:`run_task` — one task (runs on a worker); ``measure(estimator, X_train)`` may add figures
  (e.g. flash bytes of the export, which the learn layer cannot compute itself).
* :class:`ResultsFile` (:mod:`treegen.learn.compare_results`) — the resumable JSONL results file: one
  finished task per line, every line validated, read back on a rerun so finished tasks are skipped.
* :func:`dask_client` / :func:`run_tasks` — the tasks on a Dask cluster (a local one sized to the
  cores, or a running scheduler, its address checked first: :mod:`treegen.learn.scheduler`): datasets
  sent once to every worker, tasks submitted with the dataset's future, results handed back as they
  finish; an interrupt cancels what is left (stop signals: :mod:`treegen.learn.cluster_signals`).
* :mod:`treegen.learn.compare_runs` — several runs per fold: their seeds, which methods are
  deterministic (one run), and one score per fold from its runs (``pick``: the median test accuracy,
  or the test accuracy of the run with the best training accuracy; Cao & Rockett's protocol).
* :func:`summarize` — per-cell mean ± 95 % CI, best method per dataset, average ranks, Friedman with
  Iman-Davenport + Nemenyi + Holm, and Wilcoxon for two methods.

Regression (``task="regression"`` of :func:`methods_from_spec`, ``--task regression``): the methods
are the algorithms' regressors (:data:`treegen.learn.regressors.REGRESSORS`); the folds of repetition
``r`` are the shuffled K-fold split of ``treegen cv --task regression`` (:func:`treegen.learn.cv.kfold_ids`
over ``default_rng(seed + r)``), a task's record has the test ``rmse``, ``mae``, ``r2`` and the
``train_rmse`` (what ``--pick best-train`` minimises), its key includes the task (a classification
record is never taken for it), and the statistics rank the mean test RMSE, lower is better.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import CancelledError
import hashlib
import json
import logging
import math
import os
import re
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from treegen.core import stats
from treegen.core.errors import DataError, TreegenError
from treegen.core.limits import check_target_range
from treegen.core.metrics import regression_scores, summary
from treegen.learn.cluster_signals import children_ignore_sigint, deferred_stop_signals, raise_deferred
from treegen.learn.compare_results import TASKS, ResultsFile
from treegen.learn.compare_runs import MAX_RUNS_PER_FOLD, PICKS, fold_records, is_deterministic, run_seed
from treegen.learn.cv import EstimatorFactory, _plain_params, fold_seed, kfold_ids, stratified_fold_ids
from treegen.learn.estimators import ALGORITHMS
from treegen.learn.regressors import REGRESSORS
from treegen.learn.scheduler import parse_address, probe

#: fields of a task record that depend on the machine, not on the task (left out of comparisons)
TIMING_FIELDS = ("train_seconds", "measure_seconds")


# ---------------------------------------------------------------------- datasets and methods
@dataclass(eq=False)
class CompareData:
    """A dataset as the workers get it: raw features, labels, and a digest of both."""

    name: str
    X: np.ndarray
    y: np.ndarray
    digest: str = ""

    def __post_init__(self):
        self.X = np.ascontiguousarray(self.X, dtype=np.float64)
        self.y = np.asarray(self.y)
        if self.X.ndim != 2 or self.X.shape[0] == 0:
            raise DataError(f"dataset {self.name}: X must be a non-empty 2-D array, got shape {self.X.shape}")
        if self.y.ndim != 1 or self.y.shape[0] != self.X.shape[0]:
            raise DataError(f"dataset {self.name}: {self.X.shape[0]} rows but labels of shape {self.y.shape}")
        if not self.digest:
            h = hashlib.sha256(self.X.tobytes())
            h.update(json.dumps([str(v) for v in self.y.tolist()]).encode())
            self.digest = h.hexdigest()[:16]


@dataclass(frozen=True)
class Method:
    """A column of the comparison: an algorithm with fixed parameters, under a display name."""

    name: str
    algorithm: str
    params: dict = field(default_factory=dict, hash=False)
    task: str = "classification"      # or "regression": the algorithm's regressor (REGRESSORS)

    def factory(self) -> EstimatorFactory:
        return EstimatorFactory(self.algorithm, self.params, self.task)


def _setting_label(algo: str, params: dict, varying: Sequence[str]) -> str:
    shown = [f"{k}={params[k]}" for k in varying if k in params]
    return f"{algo}({', '.join(shown)})" if shown else algo


def _probe(algo: str, params: dict, task: str = "classification") -> None:
    """Fit the algorithm with ``params`` on a toy problem, so bad values fail now (estimators validate at
    fit): at most 20 iterations, and the Python engine unless one is named."""
    p = dict(params)
    it = p.get("max_iter")
    if isinstance(it, int) and not isinstance(it, bool) and it > 20:
        p["max_iter"] = 20
    factory = EstimatorFactory(algo, p, task)
    if "engine" in factory.cls._param_names():
        p.setdefault("engine", "python")
        factory = EstimatorFactory(algo, p, task)
    X = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]] * 2)
    y = np.array([0.0, 2.0, 0.5, 1.5] * 2) if task == "regression" else np.array([0, 1, 0, 1] * 2)
    try:
        factory(0).fit(X, y)
    except TreegenError as exc:
        raise TreegenError(f"{algo}: {exc}") from None
    except (TypeError, ArithmeticError) as exc:
        raise TreegenError(f"{algo}: bad parameter value ({exc})") from None


def methods_from_spec(algos: Sequence[str], params_spec: dict | None = None,
                      task: str = "classification") -> list[Method]:
    """Methods for algorithm names and a parameter specification.

    ``params_spec`` maps an algorithm name to one parameter dict or a list of them (one method per
    setting); a setting may carry ``"name"`` (the column title). Unnamed settings of one algorithm
    are called ``algo(p=v, ...)`` by the parameters that differ between them, or just ``algo``.
    Unknown algorithms, parameters not of the algorithm, a spec entry for an algorithm not in
    ``algos`` and duplicate names raise :class:`TreegenError`. ``task`` "regression": the
    algorithms' regressors (:data:`treegen.learn.regressors.REGRESSORS`) and their parameters.
    """
    if task not in TASKS:
        raise TreegenError(f"unknown task {task!r} (choose from {', '.join(TASKS)})")
    algos = list(algos)
    if not algos:
        raise TreegenError("no algorithm given")
    for a in algos:
        if task == "regression" and a not in REGRESSORS:
            raise TreegenError(f"algorithm {a!r} has no regression variant (--task regression: choose from "
                               f"{', '.join(REGRESSORS)})")
        if a not in ALGORITHMS:
            raise TreegenError(f"unknown algorithm {a!r} (choose from {', '.join(ALGORITHMS)})")
    if len(set(algos)) != len(algos):
        raise TreegenError(f"algorithm listed twice in {','.join(algos)} (give several settings in the params file)")
    spec = dict(params_spec or {})
    extra = [k for k in spec if k not in algos]
    if extra:
        raise TreegenError(f"parameters given for algorithm {extra[0]!r}, which is not among the algorithms "
                           f"({','.join(algos)})")
    methods: list[Method] = []
    for algo in algos:
        settings = spec.get(algo, [{}])
        if isinstance(settings, dict):
            settings = [settings]
        if not isinstance(settings, list) or not settings or not all(isinstance(s, dict) for s in settings):
            raise TreegenError(f"parameters of {algo!r} must be a table of values or a list of tables")
        plain = [{k: v for k, v in s.items() if k != "name"} for s in settings]
        for s in plain:
            for k, v in s.items():
                if k in ("random_state", "callback"):
                    raise TreegenError(f"parameter {k!r} of {algo!r} cannot be set in a comparison "
                                       "(the seed comes from --seed)")
                if not (v is None or isinstance(v, (bool, int, float, str))):
                    raise TreegenError(f"parameter {k!r} of {algo!r} must be a number, string or boolean, got {v!r}")
            _probe(algo, s, task)   # unknown option / bad value -> TreegenError, before any cluster starts
        keys = sorted({k for s in plain for k in s})
        varying = [k for k in keys if len({json.dumps(s.get(k), sort_keys=True) for s in plain}) > 1]
        for s, p in zip(settings, plain):
            name = s.get("name")
            if name is not None and (not isinstance(name, str) or not name.strip()):
                raise TreegenError(f"setting name of {algo!r} must be a non-empty string, got {name!r}")
            name = name or (_setting_label(algo, p, varying) if len(settings) > 1 else algo)
            methods.append(Method(name, algo, p, task))
    names = [m.name for m in methods]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise TreegenError(f"two settings are both called {dup!r}; give them distinct names")
    return methods


# ---------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class Task:
    """One fit + test: a method on one fold of one repetition of one dataset."""

    key: str
    dataset: str
    method: str
    algorithm: str
    params: dict = field(hash=False)
    folds: int = 5
    split_seed: int = 0
    repeat: int = 0
    fold: int = 0
    seed: int = 0
    key_v1: str = ""      # the same task's key in results files of record version 1 (accuracy in percent)
    run: int = 0          # run index within the fold (runs_per_fold > 1); run 0 is the fold's one task of R = 1
    task: str = "classification"   # "regression": K-fold (not stratified), RMSE / MAE / R² (run_task)


def task_key(data: CompareData, method: Method, folds: int, seed: int, repeat: int, fold: int,
             record: int = 2, run: int = 0) -> str:
    """Hash of everything a task's result depends on (not the display names). ``record`` 2 = accuracies
    as fractions; version 1 (accuracy in percent, no version in the hash) is what older results files
    hold — :meth:`ResultsFile.done` converts those records instead of running their tasks again.
    ``run`` > 0 (a further run of the fold) enters the hash; run 0 has the key of the fold's single
    task, so a results file of one run per fold gives every fold its first run. A regression method's
    task adds ``"task": "regression"`` (a classification key is unchanged, and the two never meet)."""
    ident = {"data": data.digest, "algorithm": method.algorithm, "params": method.params,
             "folds": folds, "seed": seed, "repeat": repeat, "fold": fold}
    if method.task != "classification":
        ident["task"] = method.task
    if record != 1:
        ident["record"] = record
    if run:
        ident["run"] = run
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def plan(datasets: Sequence[CompareData], methods: Sequence[Method], *, folds: int = 5, repeats: int = 1,
         seed: int = 0, runs_per_fold: int = 1) -> list[Task]:
    """Every (dataset, method, repetition, fold[, run]) task, datasets outermost, runs innermost.

    A stochastic method gets ``runs_per_fold`` independently seeded runs per fold (:func:`run_seed`);
    a deterministic one (CART, ID3: :func:`is_deterministic`) one run. With ``runs_per_fold`` 1 the
    tasks, keys and seeds are those of a plan without runs. The methods share one task (:func:`task_of`);
    a regression needs numeric, finite target values."""
    for name, value, minimum in (("folds", folds, 2), ("repeats", repeats, 1), ("seed", seed, 0),
                                 ("runs_per_fold", runs_per_fold, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise TreegenError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if runs_per_fold > MAX_RUNS_PER_FOLD:
        raise TreegenError(f"runs_per_fold must be at most {MAX_RUNS_PER_FOLD}, got {runs_per_fold}")
    names = [d.name for d in datasets]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise TreegenError(f"dataset {dup!r} given twice")
    seen: dict[str, str] = {}
    for d in datasets:
        if d.digest in seen:
            raise TreegenError(f"datasets {seen[d.digest]} and {d.name} have the same contents")
        seen[d.digest] = d.name
    task = task_of(methods)
    tasks = []
    for data in datasets:
        n = data.X.shape[0]
        if folds > n:
            raise TreegenError(f"dataset {data.name}: folds ({folds}) cannot exceed the number of rows ({n})")
        if task == "regression":
            target_values(data)
        else:
            classes, counts = np.unique(data.y, return_counts=True)
            if classes.shape[0] < 2:
                raise DataError(f"dataset {data.name} has a single class ({classes[0]!r}); at least two are needed")
            if counts.min() < folds:
                warnings.warn(f"dataset {data.name}: the least populated class has only {int(counts.min())} "
                              f"member(s), fewer than folds={folds}", UserWarning, stacklevel=2)
        for m in methods:
            runs = 1 if is_deterministic(m.algorithm) else int(runs_per_fold)
            for r in range(repeats):
                for f in range(folds):
                    first = task_key(data, m, folds, seed, r, f)
                    for i in range(runs):
                        key = first if i == 0 else task_key(data, m, folds, seed, r, f, run=i)
                        v1 = (task_key(data, m, folds, seed, r, f, record=1) if i == 0 and task != "regression"
                              else "")
                        tasks.append(Task(key, data.name, m.name, m.algorithm, dict(m.params), folds, seed + r, r,
                                          f, run_seed(first, fold_seed(seed, r, f), i), key_v1=v1, run=i, task=task))
    return tasks


def task_of(methods: Sequence[Method]) -> str:
    """The task the methods share (classification or regression); mixed tasks raise :class:`TreegenError`."""
    tasks = {m.task for m in methods}
    if len(tasks) > 1:
        raise TreegenError("methods of a comparison must all classify or all regress, got both")
    return tasks.pop() if tasks else "classification"


def target_values(data: CompareData) -> np.ndarray:
    """The float64 target values of a regression dataset (text or non-finite values raise :class:`DataError`)."""
    y = data.y
    try:
        y = np.asarray(y.tolist() if y.dtype == object else y, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"dataset {data.name}: regression needs numeric target values, got text labels "
                        "(use --task classification)") from None
    if not np.all(np.isfinite(y)):
        raise DataError(f"dataset {data.name}: target values contain NaN or infinite values")
    check_target_range(y, f"dataset {data.name}: target value", DataError)
    return y


def run_task(task: Task, data: CompareData, measure: Callable | None = None) -> dict:
    """Fit the task's estimator on its training rows, score it on its test rows.

    Returns the task's record: ``key, dataset, method, algorithm, repeat, fold, run, seed, n_train, n_test,
    accuracy`` (a fraction 0..1), ``train_accuracy`` (on the training rows), ``leaves, depth, train_seconds``
    and whatever ``measure(estimator, X_train)`` returns.

    A regression task (``task.task`` "regression") splits as ``treegen cv --task regression`` (shuffled
    K-fold: :func:`treegen.learn.cv.kfold_ids`) and its record has ``"task": "regression"``, ``rmse``,
    ``mae``, ``r2`` (test rows) and ``train_rmse`` instead of the accuracies; ``leaves`` counts the
    leaves of all the model's trees and ``depth`` is its deepest tree's (as ``cv`` counts them).
    """
    regression = task.task == "regression"
    y = target_values(data) if regression else data.y
    rng = np.random.default_rng(task.split_seed)
    fold_of = kfold_ids(y.shape[0], task.folds, rng) if regression else stratified_fold_ids(y, task.folds, rng)
    test = np.flatnonzero(fold_of == task.fold)
    train = np.flatnonzero(fold_of != task.fold)
    est = EstimatorFactory(task.algorithm, task.params, task.task)(task.seed)
    where = f"dataset {task.dataset}, {task.method}, repetition {task.repeat}, fold {task.fold}" + \
        (f", run {task.run}" if task.run else "")
    t0 = time.perf_counter()
    try:
        est.fit(data.X[train], y[train])
    except TreegenError as exc:
        raise TreegenError(f"{where}: {exc}") from None
    seconds = time.perf_counter() - t0
    pred = np.asarray(est.predict(data.X[test]))
    record = {
        "key": task.key, "dataset": task.dataset, "method": task.method, "algorithm": task.algorithm,
        "repeat": task.repeat, "fold": task.fold, "run": task.run, "seed": task.seed,
        "n_train": int(train.shape[0]), "n_test": int(test.shape[0]),
    }
    if regression:
        scores = regression_scores(y[test], pred)
        trees = est.model_.trees
        record.update(task="regression", rmse=scores["rmse"], mae=scores["mae"], r2=scores["r2"],
                      train_rmse=regression_scores(y[train], np.asarray(est.predict(data.X[train])))["rmse"],
                      leaves=int(sum(t.n_leaves for t in trees)), depth=int(max(t.depth for t in trees)),
                      train_seconds=seconds)
    else:
        record.update(accuracy=float(np.mean(pred == y[test])),
                      train_accuracy=float(np.mean(np.asarray(est.predict(data.X[train])) == y[train])),
                      leaves=int(est.tree_.n_leaves), depth=int(est.tree_.depth), train_seconds=seconds)
    if measure is not None:
        t0 = time.perf_counter()
        try:
            record.update(measure(est, data.X[train]))
        except TreegenError as exc:
            raise TreegenError(f"{where}: {exc}") from None
        record["measure_seconds"] = time.perf_counter() - t0
    return record


# ---------------------------------------------------------------------- the results file
# (treegen.learn.compare_results: every line validated, records checked against their tasks)


# ---------------------------------------------------------------------- Dask
def _distributed():
    try:
        import distributed
    except ImportError:        # in the compare extra
        raise TreegenError("distributed (Dask) is not installed; running on a Dask cluster needs the compare "
                           "extra: pip install 'treegen[compare]'") from None
    return distributed


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, *, timeout: float = 5.0,
                quiet_logs: bool = True) -> Iterator:
    """A ``distributed.Client``: connected to ``scheduler`` (``tcp://HOST:PORT``), or to a local cluster
    of ``workers`` single-threaded worker processes (default: one per core). Closed on exit.

    An unreachable scheduler raises :class:`TreegenError` after ``timeout`` seconds.
    """
    if scheduler is not None:     # checked before Dask is imported (seconds): refused addresses fail fast
        if workers is not None:
            raise TreegenError("--workers sizes the local cluster; it cannot be used with --scheduler")
        host, port, address = parse_address(scheduler)    # foo://, no port: refused before any connection
        probe(host, port, timeout)     # refused, black hole, silent, another protocol: one line within timeout
    distributed = _distributed()
    if quiet_logs:   # Dask's own log lines (tracebacks of lost connections ...): the caller reports errors
        for name in ("distributed", "distributed.client", "distributed.scheduler", "distributed.worker",
                     "distributed.nanny", "distributed.core", "distributed.comm", "distributed.batched"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if scheduler is not None:
        fail = f"cannot reach the Dask scheduler at {scheduler}"
        try:
            client = distributed.Client(address, timeout=f"{timeout}s", set_as_default=False)
        except (OSError, TimeoutError, ValueError, distributed.comm.CommClosedError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            if len(reason) > 160:
                reason = reason[:157] + "..."
            raise TreegenError(f"{fail} within {timeout:g} s ({reason})") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = (os.cpu_count() or 1) if workers is None else workers
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TreegenError(f"workers must be an integer >= 1, got {workers!r}")
    # workers ignore a terminal's Ctrl-C (treegen closes them); a stop signal during the start-up is acted
    # on once the cluster exists, so that it is closed with every process (treegen.learn.cluster_signals)
    with warnings.catch_warnings(), children_ignore_sigint(), deferred_stop_signals() as got:
        warnings.filterwarnings("ignore", message="Port .* is already in use")   # its HTTP server moves elsewhere
        try:
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                               dashboard_address=None, scheduler_port=0, host="127.0.0.1",
                                               silence_logs=logging.CRITICAL + 1 if quiet_logs else logging.WARNING)
        except (RuntimeError, OSError, TimeoutError) as exc:    # Dask closes what it started before raising
            cluster, failure = None, " ".join(str(exc).split()) or type(exc).__name__
    if cluster is None:
        raise_deferred(got)      # a Ctrl-C that reached a worker as it started: the interrupt, not the failure
        raise TreegenError(f"cannot start a local Dask cluster of {n} worker process(es): {failure}")
    try:
        raise_deferred(got)
        client = distributed.Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def _dataset(data: CompareData) -> CompareData:
    return data


def run_tasks(client, tasks: Sequence[Task], datasets: Sequence[CompareData], *, measure: Callable | None = None,
              on_result: Callable[[dict], None] | None = None,
              on_error: Callable[[Task, str], None] | None = None) -> list[dict]:
    """Run ``tasks`` on the Dask ``client``; return their records in task order.

    Every dataset a task needs is sent once to every worker (a task returning it, replicated to all
    workers; unlike scattered data it is recomputed if the worker holding it dies) and tasks get its
    future, so a task ships only its small description. ``on_result(record)`` is called in this
    process as each task finishes (write it, advance a progress bar). A failing task cancels the
    rest and raises its error; so does an interrupt (``KeyboardInterrupt`` propagates after the
    remaining tasks are cancelled). Tasks of a worker lost mid-run are rerun by Dask elsewhere.
    ``on_error(task, reason)`` given: a failing task (its error, or its workers died) is handed to it
    with a one-line reason, its record is None, and the other tasks go on (``treegen tune``).
    """
    distributed = _distributed()
    if not tasks:
        return []
    by_name = {d.name: d for d in datasets}
    needed = sorted({t.dataset for t in tasks})
    missing = [n for n in needed if n not in by_name]
    if missing:
        raise TreegenError(f"no data for dataset {missing[0]!r}")
    # each dataset as a task that returns it: the scheduler keeps it in the graph, so a copy lost with a
    # worker is recomputed (scattered data would be lost for good), and a copy is placed on every worker
    # (a fresh key per call: the copy of an earlier call on the same client is being cancelled)
    call = uuid.uuid4().hex[:12]
    future_of = {n: client.submit(_dataset, by_name[n], key=f"treegen-data-{by_name[n].digest}-{call}", pure=False)
                 for n in needed}
    client.replicate(list(future_of.values()))
    futures = [client.submit(run_task, t, future_of[t.dataset], measure, key=f"treegen-task-{t.key}", pure=False,
                             retries=0) for t in tasks]
    index = {f.key: i for i, f in enumerate(futures)}
    records: list[dict | None] = [None] * len(tasks)
    try:
        for fut in distributed.as_completed(futures, loop=client.loop):
            try:
                rec = fut.result()
            except Exception as exc:
                task = tasks[index[fut.key]]
                if on_error is None and not isinstance(exc, (distributed.KilledWorker, CancelledError, OSError,
                                                             TimeoutError)):
                    raise
                if on_error is not None:
                    on_error(task, task_failure(exc))
                    continue
                if isinstance(exc, distributed.KilledWorker):
                    what = "its workers died while running it"
                else:
                    reason = re.search(r"reason: ([^.]+)", str(exc))
                    what = (f"the cluster cancelled it ({reason.group(1)})" if reason else
                            f"the cluster dropped it ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
                run = f", run {task.run}" if task.run else ""
                raise TreegenError(f"task dataset {task.dataset}, {task.method}, repetition {task.repeat}, fold "
                                   f"{task.fold}{run}: {what}") from None
            records[index[fut.key]] = rec
            if on_result is not None:
                on_result(rec)
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        client.cancel(list(future_of.values()))
    return records  # type: ignore[return-value]


def task_failure(exc: BaseException) -> str:
    """One line saying why a task failed (its own error, or what the cluster did to it)."""
    distributed = _distributed()
    if isinstance(exc, distributed.KilledWorker):
        return "its workers died while running it"
    text = " ".join(str(exc).split())
    if isinstance(exc, TreegenError):
        return text
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


# ---------------------------------------------------------------------- summary and statistics
def _stat(values: list) -> dict | None:
    vals = [v for v in values if v is not None]
    return summary(vals) if vals and len(vals) == len(values) else None


def summarize(records: Sequence[dict], datasets: Sequence[str], methods: Sequence[Method], *,
              alpha: float = 0.05) -> dict:
    """The comparison's tables and tests from the task records.

    Returns ``{"datasets", "methods", "cells": {dataset: {method: cell}}, "best": {dataset: [methods]},
    "scores": [[mean accuracy]] (datasets x methods), "average_ranks", "friedman", "wilcoxon"}``;
    a cell is ``{"accuracy", "leaves", "depth", "flash_bytes", "train_seconds": {"mean", "ci95"},
    "n_folds"}`` (``flash_bytes`` None when not measured). Best = highest mean accuracy (ties: all).
    Friedman needs >= 2 datasets and >= 2 methods; Wilcoxon is given for exactly two methods.

    Regression methods (:func:`task_of`): a cell has ``rmse``, ``mae``, ``r2`` (``{"mean", "ci95",
    "std"}``) instead of ``accuracy``; the table the statistics rank is ``mean_rmse`` (datasets x
    methods, lower is better: best = lowest mean RMSE, rank 1 = lowest) instead of ``scores``; the
    summary adds ``"task": "regression"`` and ``"metric": "rmse"``.
    """
    regression = task_of(methods) == "regression"
    higher = not regression                 # accuracy: higher is better; RMSE: lower
    metric = "rmse" if regression else "accuracy"
    names = [m.name for m in methods]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["method"]), []).append(r)
    cells: dict[str, dict[str, dict]] = {}
    for ds in datasets:
        cells[ds] = {}
        for m in names:
            recs = sorted(groups.get((ds, m), []), key=lambda r: (r["repeat"], r["fold"]))
            if not recs:
                raise TreegenError(f"no results for {m} on {ds}")
            scored = ({k: _spread([r[k] for r in recs]) for k in ("rmse", "mae", "r2")} if regression
                      else {"accuracy": summary([r["accuracy"] for r in recs])})
            cells[ds][m] = {
                **scored,
                "leaves": summary([r["leaves"] for r in recs]),
                "depth": summary([r["depth"] for r in recs]),
                "flash_bytes": _stat([r.get("flash_bytes") for r in recs]),
                "train_seconds": summary([r["train_seconds"] for r in recs]),
                "n_folds": len(recs),
            }
    scores = np.array([[cells[ds][m][metric]["mean"] for m in names] for ds in datasets], dtype=np.float64)
    best = {}
    for i, ds in enumerate(datasets):
        top = np.round(scores[i], stats.TIE_DECIMALS)
        best[ds] = [names[j] for j in np.flatnonzero(top == (top.max() if higher else top.min()))]
    head = {"task": "regression", "metric": "rmse"} if regression else {}
    out = {**head, "datasets": list(datasets), "methods": names, "cells": cells, "best": best,
           ("mean_rmse" if regression else "scores"): scores.tolist(),
           "average_ranks": None, "friedman": None, "wilcoxon": None}
    if len(datasets) >= 1:
        out["average_ranks"] = dict(zip(names, map(float, stats.average_ranks(scores, higher_is_better=higher))))
    if len(datasets) >= 2 and len(names) >= 2:
        out["friedman"] = stats.friedman(scores, names, higher_is_better=higher, alpha=alpha)
        out["friedman"]["iman_davenport"] = finite_or_none(out["friedman"]["iman_davenport"])  # JSON has no inf
        if len(names) == 2:
            out["wilcoxon"] = {"a": names[0], "b": names[1],
                               **stats.wilcoxon(scores[:, 0], scores[:, 1], higher_is_better=higher)}
    return out


def _spread(values: list) -> dict:
    """:func:`summary` plus the sample standard deviation (0 for one value)."""
    return {**summary(values), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0}


def method_params(methods: Sequence[Method]) -> dict:
    """Each method's full estimator parameters (defaults filled in), JSON-ready."""
    return {m.name: {"algorithm": m.algorithm, "params": _plain_params(m.factory()(0).get_params()),
                     **({"task": m.task} if m.task != "classification" else {})}
            for m in methods}


def strip_timing(records: Iterable[dict]) -> list[dict]:
    """Records without the machine-dependent fields (for comparing two runs)."""
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in records]


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


# ---------------------------------------------------------------------- the whole comparison
FLASH_FIELDS = ("flash_bytes", "flash_bytes_inference")


def run_comparison(data: Sequence[CompareData], methods: Sequence[Method], *, folds: int = 5, repeats: int = 1,
                   seed: int = 0, runs_per_fold: int = 1, pick: str = "median",
                   results: str | os.PathLike | None = None, scheduler: str | None = None,
                   workers: int | None = None, measure: Callable | None = None,
                   on_start: Callable[[int, int, int], None] | None = None,
                   on_result: Callable[[dict], None] | None = None, skip_bad_results: bool = False) -> dict:
    """Every (dataset, method, repetition, fold) task on a Dask cluster, then the summary: what
    ``treegen compare`` computes (the command adds the printing and the files).

    ``runs_per_fold``, ``pick``: R independently seeded runs of each stochastic method per fold, and how
    the fold's score comes from them (:func:`plan`, :func:`fold_records`; every run is one task and
    one line of the results file, so an interrupted comparison resumes from its finished runs);
    ``results``: the JSONL results file (tasks found there are not run again; None = in memory; a bad
    line raises :class:`TreegenError` naming it, or is skipped with a warning if ``skip_bad_results``);
    ``scheduler``: a running Dask scheduler (default: a local cluster of ``workers`` processes);
    ``measure(estimator, X_train) -> dict``: extra figures per task (e.g.
    :class:`treegen.device.footprint.FlashSize`); ``on_start(n_tasks, n_done, n_pending)`` once the
    cluster is up; ``on_result(record)`` as each task finishes.

    Returns ``{"task", "methods", "folds", "repeats", "seed", "runs_per_fold", "pick", "deterministic", "cluster",
    "n_tasks", "n_tasks_run", "wall_seconds", "task_seconds", "summary", "records"}`` (accuracies as
    fractions 0..1; :func:`summarize`; ``records``: one per fold (:func:`fold_records`), plus
    ``run_records`` (every run) when a fold has several; ``deterministic``: the methods run once per
    fold; ``task_seconds``: the fit and measure times of all the tasks summed, those of the results
    file included — the compute behind the table, wherever and whenever it ran).
    """
    if pick not in PICKS:
        raise TreegenError(f"pick must be one of {', '.join(PICKS)}, got {pick!r}")
    tasks = plan(data, methods, folds=folds, repeats=repeats, seed=seed, runs_per_fold=runs_per_fold)
    multi = {(t.dataset, t.method) for t in tasks if t.run > 0}      # the methods run several times per fold
    store = ResultsFile(results, skip_bad=skip_bad_results)
    done = store.done(tasks)
    if measure is not None:   # records made without a measure do not have its figures
        done = {k: r for k, r in done.items() if r.get("flash_bytes", False) is not False}
    if pick == "best-train" and multi:   # picked by training accuracy: older records lack it, run those again
        picked_by_train = {t.key for t in tasks if (t.dataset, t.method) in multi}
        done = {k: r for k, r in done.items()
                if "train_accuracy" in r or "train_rmse" in r or k not in picked_by_train}
    pending = [t for t in tasks if t.key not in done]
    cluster = f"the Dask scheduler {scheduler}" if scheduler else "a local Dask cluster"
    t0 = time.perf_counter()
    if pending:
        with dask_client(scheduler, workers) as client:
            n_workers = len(client.scheduler_info().get("workers", {}))
            cluster += f" ({n_workers} worker{'s' if n_workers != 1 else ''})"
            if on_start is not None:
                on_start(len(tasks), len(done), len(pending))

            def got(rec: dict) -> None:
                store.add(rec)
                if on_result is not None:
                    on_result(rec)
            run_tasks(client, pending, data, measure=measure, on_result=got)
    else:
        cluster = "no cluster (every task from the results file)"
        if on_start is not None:
            on_start(len(tasks), len(done), 0)
    wall = time.perf_counter() - t0
    # names come from this run (a record is found by what its result depends on, not by the names)
    records = [{**store.records[t.key], "dataset": t.dataset, "method": t.method} for t in tasks]
    if measure is None:
        records = [{k: v for k, v in r.items() if k not in FLASH_FIELDS} for r in records]
    per_fold = fold_records(records, pick)
    out = {"task": task_of(methods), "methods": method_params(methods), "folds": folds, "repeats": repeats,
           "seed": seed,
           "runs_per_fold": runs_per_fold, "pick": pick,
           "deterministic": [m.name for m in methods if is_deterministic(m.algorithm)], "cluster": cluster,
           "n_tasks": len(tasks), "n_tasks_run": len(pending), "wall_seconds": wall,
           "task_seconds": sum(float(r.get(f) or 0.0) for r in records for f in TIMING_FIELDS),
           "summary": summarize(per_fold, [d.name for d in data], methods), "records": per_fold}
    if len(per_fold) != len(records):
        out["run_records"] = records
    return out


def compare(datasets: dict, algos: Sequence[str], params: dict | None = None, *, task: str = "classification",
            **kw) -> dict:
    """:func:`run_comparison` from plain data: ``datasets`` maps a name to ``(X, y)``; ``algos`` are
    algorithm names, ``params`` the ``--params`` mapping (algorithm -> parameters or a list of
    settings); ``task`` "regression" compares the algorithms' regressors by RMSE. Keyword arguments
    as :func:`run_comparison`."""
    data = [CompareData(name, X, y) for name, (X, y) in datasets.items()]
    return run_comparison(data, methods_from_spec(list(algos), params, task), **kw)
