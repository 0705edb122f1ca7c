"""The search of ``treegen tune``: which (algorithm, settings) are worth a device measurement.

Method: **successive halving with Pareto promotion** over a seeded sample of each algorithm's size
knobs. Why this and not a library's multi-objective optimiser (NSGA-II in pymoo, Optuna's MOTPE):

* the expensive objective (flash, RAM and instructions *measured on the emulated target*) is known
  only after a firmware build and an emulator run, so it cannot sit inside an optimiser's inner loop
  evaluated hundreds of times; the cheap objective, cross-validated accuracy, comes in fidelities
  (2 folds, 5 folds, 2 x 5 folds) that halving exploits directly;
* it reuses ``compare``'s tasks unchanged (:mod:`treegen.learn.compare`): each rung is a set of
  (method, repetition, fold) tasks with compare's keys, so a rung is resumable from the results file,
  runs on the same Dask cluster, and a method's final accuracy equals ``treegen cv`` with that seed;
* it is deterministic by seed (the sample, the folds and the promotion are pure functions of the
  seed and of the finished tasks), with no new dependency.

The knobs (:data:`SPACES`) are the ones that trade accuracy for size: EFTI's Ko
(``oversize_weight``), depth and iterations; CART's depth and ccp alpha; ID3's depth and leaf size;
DE-PDT's height and generations; GP's depth and iterations; forests' trees and depth. Each
algorithm's candidates are its default setting plus ``per_algo - 1`` distinct settings drawn from
its space by ``numpy.random.default_rng([seed, index of the algorithm])`` (a sample, not a grid).
The space is first cut to the values the inducer itself accepts on data of the search's shape
(:func:`search_space`: each value fitted, fast, on a seeded problem with the data's training rows,
features and classes); a value it refuses is left out and reported, never proposed.

A candidate that fails anyway (refused by its inducer on the real rows, a fit error, a worker that
died) leaves the search with its reason (:attr:`SearchResult.failed`); the others go on.

Rungs (:data:`RUNGS`): rung 0 scores every candidate on folds 0-1 of a 5-fold split, rung 1 the
survivors on all 5 folds, rung 2 on two repetitions of 5 folds. Between rungs the candidates are
sorted into non-dominated fronts of (mean accuracy up, mean leaves down) — leaves stand in for size
and time until the device has measured them — and fronts are kept whole while they fit into
``ceil(n / eta)``; the last front that does not fit is cut by accuracy. A small model of modest
accuracy therefore survives next to a large accurate one: the budget is spent where the
accuracy-vs-size front is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from treegen.core.errors import TreegenError
from treegen.learn.compare import CompareData, Method, Task, plan

#: size knobs per algorithm: parameter -> values the sample draws from (before :func:`search_space`
#: drops the values the inducer refuses for the data's shape)
SPACES: dict[str, dict[str, list]] = {
    "efti": {"max_depth": [2, 3, 4, 5, 6], "oversize_weight": [0.001, 0.01, 0.05, 0.2],
             "max_iter": [2000, 5000, 10000, 20000]},
    "cart": {"max_depth": [1, 2, 3, 4, 5, 6, 8], "ccp_alpha": [0.0, 0.002, 0.005, 0.01, 0.02]},
    "id3": {"max_depth": [1, 2, 3, 4, 5, 6, 8], "min_samples_leaf": [1, 2, 5, 10]},
    "de-pdt": {"height": [2, 3, 4, 5, 6], "generations": [200, 500, 1000], "population": [20, 50]},
    "de-cart": {"max_depth": [1, 2, 3, 4, 6], "generations": [10, 30]},
    "de-id3": {"max_depth": [1, 2, 3, 4, 6], "generations": [10, 30]},
    "gp": {"max_depth": [2, 3, 4, 5, 6], "max_iter": [2000, 5000, 10000], "population": [50, 100]},
    "rf": {"n_trees": [3, 5, 10, 20], "max_depth": [2, 3, 4, 5, 6]},
}
#: searched names that are an algorithm with fixed parameters: name -> (algorithm, parameters);
#: efti-distill is EFTI distilled from a 100-tree forest trained inside each fold (treegen.learn.distill)
VARIANTS: dict[str, tuple[str, dict]] = {
    "efti-distill": ("efti", {"teacher": "rf", "teacher_samples": 2.0}),
}
SPACES["efti-distill"] = dict(SPACES["efti"])
#: algorithms searched when --algos is not given (gp only when named: its Python engine is slow on
#: thousands of rows)
DEFAULT_ALGOS = ("cart", "efti", "efti-distill", "id3", "de-pdt", "rf")


def algorithm_of(name: str) -> tuple[str, dict]:
    """A searched name -> (the algorithm it runs, its fixed parameters)."""
    return VARIANTS.get(name, (name, {}))
#: (repeats, folds used of the 5) per rung
RUNGS: tuple[tuple[int, tuple[int, ...]], ...] = ((1, (0, 1)), (1, (0, 1, 2, 3, 4)), (2, (0, 1, 2, 3, 4)))
FOLDS = 5
#: rows of the synthetic problem a knob value is tried on (:func:`search_space`)
PROBE_ROWS = 64
#: the fast settings of a probe fit: iteration knobs capped (the bounds checked are not iteration counts)
FAST_CAPS = {"max_iter": 20, "generations": 2}
#: and the knobs capped only at their defaults (a forest of 100 trees), not when they are the value tried
DEFAULT_CAPS = {"n_trees": 3}


def parse_algos(text: str | None) -> list[str] | None:
    """``--algos`` as a list (None: the defaults); an empty list, an empty name or a name given twice
    raise :class:`TreegenError` (never a silent search of every algorithm)."""
    if text is None:
        return None
    names = [a.strip() for a in text.split(",")]
    if not any(names):
        raise TreegenError(f"--algos {text!r} names no algorithm (choose from {', '.join(SPACES)})")
    if not all(names):
        raise TreegenError(f"--algos {text!r} has an empty name (give A,B,... without empty entries)")
    unknown = [a for a in names if a not in SPACES]
    if unknown:
        raise TreegenError(f"unknown algorithm {unknown[0]!r} in --algos (choose from {', '.join(SPACES)})")
    dup = sorted({a for a in names if names.count(a) > 1})
    if dup:
        raise TreegenError(f"algorithm {dup[0]!r} listed twice in --algos {text!r}")
    return names


def default_label(algo: str) -> str:
    return f"{algo}(defaults)"


def fast(algo: str, params: dict) -> dict:
    """``params`` of ``algo`` with its iteration knobs capped (:data:`FAST_CAPS`, defaults included)
    and the Python engine unless one is named: the same bounds are checked in a fraction of the time."""
    from treegen.learn.estimators import make_estimator

    full = make_estimator(algo).get_params()
    out = dict(params)
    for k, cap in FAST_CAPS.items():
        v = out.get(k, full.get(k))
        if k in full and isinstance(v, int) and not isinstance(v, bool) and v > cap:
            out[k] = cap
    for k, cap in DEFAULT_CAPS.items():
        if k in full and k not in out:
            out[k] = cap
    if "engine" in full:
        out.setdefault("engine", "python")
    return out


def probe_data(shape: tuple[int, int, int], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random problem of ``shape`` = (training rows, features, classes), rows capped at
    :data:`PROBE_ROWS`; every class present when the rows allow it."""
    rows, n_features, n_classes = shape
    rows = max(1, min(int(rows), PROBE_ROWS))
    rng = np.random.default_rng([seed, rows, n_features, n_classes])
    X = rng.normal(size=(rows, int(n_features)))
    y = np.arange(rows) % max(1, int(n_classes))
    return X, y


def try_setting(algo: str, params: dict, shape: tuple[int, int, int], *, seed: int = 0) -> str | None:
    """Fit ``algo`` with ``params`` (fast: :func:`fast`) on a problem of ``shape``; None when the
    inducer accepts it, else its one-line refusal."""
    from treegen.learn.estimators import make_estimator

    X, y = probe_data(shape, seed)
    algo, fixed = algorithm_of(algo)
    try:
        make_estimator(algo, **fast(algo, {**fixed, **params}), random_state=0).fit(X, y)
    except TreegenError as exc:
        return " ".join(str(exc).split())
    except (TypeError, ValueError, ArithmeticError) as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return None


def train_shape(n_rows: int, n_features: int, n_classes: int) -> tuple[int, int, int]:
    """The smallest training set a candidate meets: a rung's fold leaves (FOLDS - 1) / FOLDS of the rows."""
    return (max(1, (n_rows * (FOLDS - 1)) // FOLDS), n_features, n_classes)


def search_space(algo: str, shape: tuple[int, int, int] | None = None) -> tuple[dict[str, list], list[str]]:
    """The knob values of ``algo`` (:data:`SPACES`) its inducer accepts on data of ``shape`` = (training
    rows, features, classes): each value tried (:func:`try_setting`) with the other knobs at their
    defaults. Returns (space, refusals: one line per value left out). A knob none of whose values
    passes is left out of the space (the default is used)."""
    if algo not in SPACES:
        raise TreegenError(f"unknown algorithm {algo!r} (choose from {', '.join(SPACES)})")
    if shape is None:
        return {k: list(v) for k, v in SPACES[algo].items()}, []
    space, refused = {}, []
    for knob, values in SPACES[algo].items():
        ok = []
        for v in values:
            why = try_setting(algo, {knob: v}, shape)
            if why is None:
                ok.append(v)
            else:
                refused.append(f"{algo} {knob}={v}: {why}")
        if ok:
            space[knob] = ok
    return space, refused


def sample_methods(algos: Sequence[str], per_algo: int, seed: int, shape: tuple[int, int, int] | None = None,
                   refused: list | None = None) -> list[Method]:
    """Each algorithm's default setting and ``per_algo - 1`` distinct settings sampled from its
    :func:`search_space` for ``shape`` (deterministic by ``seed``); the values left out are appended
    to ``refused``."""
    if per_algo < 1:
        raise TreegenError(f"candidates per algorithm must be >= 1, got {per_algo}")
    if not algos:
        raise TreegenError("no algorithm to search")
    methods = []
    for i, algo in enumerate(algos):
        space, why = search_space(algo, shape)
        if refused is not None:
            refused += why
        base, fixed = algorithm_of(algo)
        methods.append(Method(default_label(algo), base, dict(fixed)))
        keys = sorted(space)
        n_all = math.prod(len(space[k]) for k in keys)
        rng = np.random.default_rng([seed, i])
        picks = rng.choice(n_all, size=min(per_algo - 1, n_all), replace=False) if keys else []
        for flat in sorted(int(p) for p in picks):
            params = {}
            for k in keys:
                flat, j = divmod(flat, len(space[k]))
                params[k] = space[k][j]
            label = f"{algo}(" + ", ".join(f"{k}={params[k]}" for k in keys) + ")"
            methods.append(Method(label, base, {**fixed, **params}))
    return methods


def rung_tasks(data: CompareData, methods: Sequence[Method], rung: int, seed: int) -> list[Task]:
    """The compare tasks of ``methods`` at ``rung`` (their keys are compare's: shared results file)."""
    repeats, folds = RUNGS[rung]
    return [t for t in plan([data], methods, folds=FOLDS, repeats=repeats, seed=seed) if t.fold in folds]


def scores(records: Sequence[dict], methods: Sequence[Method]) -> dict[str, dict]:
    """Per method name: mean accuracy, mean leaves and number of folds from its task records."""
    out = {}
    for m in methods:
        recs = [r for r in records if r["method"] == m.name]
        if not recs:
            raise TreegenError(f"no results for {m.name}")
        out[m.name] = {"accuracy": float(np.mean([r["accuracy"] for r in recs])),
                       "leaves": float(np.mean([r["leaves"] for r in recs])), "n_folds": len(recs)}
    return out


def failed_methods(records: Sequence[dict], methods: Sequence[Method]) -> dict[str, str]:
    """Per method name whose tasks did not all finish: the first failure's reason (a record with
    ``"error"``, or no record at all)."""
    out = {}
    for m in methods:
        recs = [r for r in records if r["method"] == m.name]
        bad = [r for r in recs if "error" in r]
        if bad:
            out[m.name] = bad[0]["error"]
        elif not recs:
            out[m.name] = "no result"
    return out


def nondominated_fronts(points: Sequence[tuple[float, float]]) -> list[list[int]]:
    """Indices of ``points`` (objectives to *minimise*) sorted into non-dominated fronts."""
    n = len(points)
    rest = list(range(n))
    fronts = []
    while rest:
        front = [i for i in rest
                 if not any(all(points[j][k] <= points[i][k] for k in range(len(points[i])))
                            and points[j] != points[i] for j in rest)]
        fronts.append(front)
        rest = [i for i in rest if i not in front]
    return fronts


def promote(methods: Sequence[Method], score: dict[str, dict], keep: int) -> list[Method]:
    """The ``keep`` methods of the best non-dominated fronts of (accuracy up, leaves down); the
    last front that does not fit whole is cut by accuracy, then fewer leaves, then name."""
    pts = [(-round(score[m.name]["accuracy"], 9), round(score[m.name]["leaves"], 9)) for m in methods]
    chosen: list[int] = []
    for front in nondominated_fronts(pts):
        if len(chosen) + len(front) <= keep:
            chosen += front
            continue
        front = sorted(front, key=lambda i: (pts[i], methods[i].name))
        chosen += front[: keep - len(chosen)]
        break
    return [methods[i] for i in sorted(chosen)]


@dataclass
class SearchResult:
    """What :func:`successive_halving` found: the finalists (scored at the last rung), every rung's
    candidates and scores, whether the time budget cut the search, and the candidates that failed
    (name -> {"rung", "reason"}: refused by the inducer, a fit error, a worker lost)."""

    finalists: list[Method]
    final_scores: dict[str, dict]
    rungs: list[dict]
    cut_by_budget: bool
    failed: dict[str, dict]


def successive_halving(data: CompareData, methods: Sequence[Method], run: Callable[[list[Task]], list[dict]], *,
                       seed: int, eta: int = 2, min_keep: int = 4, deadline: float | None = None,
                       clock: Callable[[], float] | None = None) -> SearchResult:
    """Score ``methods`` rung by rung (:data:`RUNGS`), keeping ``max(min_keep, ceil(n / eta))`` by
    :func:`promote` between rungs. ``run(tasks) -> records`` runs tasks (Dask, the results file); a
    task that failed has a record ``{"method", "error"}``: its method leaves the search with that
    reason (``failed``) and the others go on. ``deadline`` (a ``clock()`` value): no new rung starts
    after it (the last finished rung's survivors are the finalists; ``cut_by_budget`` says so)."""
    import time

    clock = clock or time.monotonic
    current = list(methods)
    rungs, cut = [], False
    score: dict[str, dict] = {}
    failed: dict[str, dict] = {}
    for r in range(len(RUNGS)):
        if r > 0:
            keep = max(min_keep, math.ceil(len(current) / eta))
            current = promote(current, score, keep) if keep < len(current) else current
            if deadline is not None and clock() > deadline:
                cut = True
                break
        if not current:
            break
        tasks = rung_tasks(data, current, r, seed)
        records = run(tasks)
        ran = [m.name for m in current]
        bad = failed_methods(records, current)
        for name, reason in bad.items():
            failed[name] = {"rung": r, "reason": reason}
        current = [m for m in current if m.name not in bad]
        score = scores([rec for rec in records if "error" not in rec], current)
        rungs.append({"rung": r, "repeats": RUNGS[r][0], "folds": list(RUNGS[r][1]), "methods": ran,
                      "scores": score, "failed": sorted(bad)})
    return SearchResult(current, score, rungs, cut, failed)


def pareto_front(points: Sequence[dict], objectives: Sequence[tuple[str, int]]) -> list[int]:
    """Indices of the points not dominated by another, for ``objectives`` = (field, +1 maximise /
    -1 minimise); points missing a field (None) are left out."""
    ok = [i for i, p in enumerate(points) if all(p.get(f) is not None for f, _ in objectives)]
    vec = {i: tuple(-s * float(points[i][f]) for f, s in objectives) for i in ok}
    return [i for i in ok
            if not any(all(vec[j][k] <= vec[i][k] for k in range(len(objectives))) and vec[j] != vec[i]
                       for j in ok)]
