"""treegen.learn.cv: stratified folds, determinism, parallel execution, summary figures and errors."""

from __future__ import annotations

import warnings

import joblib
import numpy as np
import pytest

from treegen.core.errors import TreegenError
from treegen.core.metrics import mean_ci95
from treegen.core.tree import LEAF, Tree
from treegen.learn import cv
from treegen.learn.estimators import ALGORITHMS, TreeClassifier


class StumpClassifier(TreeClassifier):
    """Fast stand-in inducer: one axis-parallel split on feature ``seed % n_features`` at the median."""

    algorithm = "stump"

    def __init__(self, *, max_iter: int = 10, scaling: str = "auto", random_state: int | None = None):
        self.max_iter = max_iter
        self.scaling = scaling
        self.random_state = random_state

    def _induce(self, X, y, n_classes):
        j = (self.random_state or 0) % X.shape[1]
        w = np.zeros((3, X.shape[1]))
        w[0, j] = 1.0
        thr = np.zeros(3)
        thr[0] = float(np.median(X[:, j]))
        tree = Tree(w, thr, [1, LEAF, LEAF], [2, LEAF, LEAF], [0, 0, 0], np.zeros((3, n_classes), dtype=np.int64))
        return tree.refit_counts(X, y), {"seed_used": self.random_state}


def blobs(n_per_class=(20, 20, 20), seed=0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for c, n in enumerate(n_per_class):
        X.append(rng.normal(loc=3.0 * c, scale=1.0, size=(n, 2)))
        y += [c + 1] * n
    return np.vstack(X), np.array(y)


def _strip_times(result):
    return [{k: v for k, v in f.items() if k != "train_seconds"} for f in result["folds"]]


def test_stratified_fold_ids_balanced_and_deterministic():
    y = np.array([0] * 23 + [1] * 11 + [2] * 6)
    ids = cv.stratified_fold_ids(y, 5, np.random.default_rng(4))
    sizes = np.bincount(ids, minlength=5)
    assert sizes.sum() == 40 and sizes.max() - sizes.min() <= 1
    for c in range(3):
        per_fold = np.bincount(ids[y == c], minlength=5)
        assert per_fold.max() - per_fold.min() <= 1
    again = cv.stratified_fold_ids(y, 5, np.random.default_rng(4))
    assert np.array_equal(ids, again)
    other = cv.stratified_fold_ids(y, 5, np.random.default_rng(5))
    assert not np.array_equal(ids, other)


def test_stratified_fold_ids_string_labels_and_every_fold_nonempty():
    y = np.array(["b", "a", "a", "c", "b"], dtype=object)
    ids = cv.stratified_fold_ids(y, 5, np.random.default_rng(0))
    assert sorted(ids.tolist()) == [0, 1, 2, 3, 4]


def test_fold_seed_deterministic_and_distinct():
    seeds = {cv.fold_seed(7, r, f) for r in range(4) for f in range(10)}
    assert len(seeds) == 40
    assert cv.fold_seed(7, 1, 2) == cv.fold_seed(7, 1, 2)
    assert cv.fold_seed(7, 1, 2) != cv.fold_seed(8, 1, 2)
    assert all(0 <= s < 2**31 for s in seeds)


@pytest.fixture
def stump(monkeypatch):
    monkeypatch.setitem(ALGORITHMS, "stump", StumpClassifier)
    return "stump"


def test_cross_validate_result_structure(stump):
    X, y = blobs()
    res = cv.cross_validate(X, y, stump, {"max_iter": 3}, folds=4, repeats=3, seed=11, jobs=1, dataset="blobs")
    assert res["dataset"] == "blobs" and res["algorithm"] == "stump"
    assert res["params"] == {"max_iter": 3, "scaling": "auto"}
    assert (res["folds_k"], res["repeats"], res["seed"]) == (4, 3, 11)
    assert (res["n_rows"], res["n_features"], res["n_classes"]) == (60, 2, 3)
    folds = res["folds"]
    assert [(f["repeat"], f["fold"]) for f in folds] == [(r, f) for r in range(3) for f in range(4)]
    for f in folds:
        assert set(f) >= {"repeat", "fold", "accuracy", "leaves", "depth", "train_seconds", "seed"}
        assert 0.0 <= f["accuracy"] <= 1.0
        assert f["leaves"] == 2 and f["depth"] == 1
        assert f["seed"] == cv.fold_seed(11, f["repeat"], f["fold"])
        assert f["n_train"] + f["n_test"] == 60
    for r in range(3):
        assert sum(f["n_test"] for f in folds if f["repeat"] == r) == 60
    mean, ci = mean_ci95([f["accuracy"] for f in folds])
    assert res["accuracy"] == {"mean": pytest.approx(mean), "ci95": pytest.approx(ci)}
    assert res["leaves"] == {"mean": 2.0, "ci95": 0.0}
    # the accuracy really is the fraction of the test fold predicted correctly
    assert all(abs(f["accuracy"] * f["n_test"] - round(f["accuracy"] * f["n_test"])) < 1e-9
               for f in folds)


def test_cross_validate_deterministic_and_independent_of_jobs(stump):
    X, y = blobs(seed=1)
    a = cv.cross_validate(X, y, stump, folds=5, repeats=2, seed=3, jobs=1)
    b = cv.cross_validate(X, y, stump, folds=5, repeats=2, seed=3, jobs=1)
    with joblib.parallel_config(backend="threading"):
        c = cv.cross_validate(X, y, stump, folds=5, repeats=2, seed=3, jobs=2)
    assert _strip_times(a) == _strip_times(b) == _strip_times(c)
    d = cv.cross_validate(X, y, stump, folds=5, repeats=2, seed=4, jobs=1)
    assert _strip_times(a) != _strip_times(d)


def test_cross_validate_with_factory_and_on_fold():
    X, y = blobs()
    seen = []
    res = cv.cross_validate(X, y, lambda seed: StumpClassifier(random_state=seed), folds=3, seed=0, jobs=1,
                            on_fold=seen.append)
    assert res["algorithm"] == "stump"
    assert len(seen) == 3 and {d["fold"] for d in seen} == {0, 1, 2}


def test_estimator_factory_sets_fold_seed(stump):
    fac = cv.EstimatorFactory(stump, {"max_iter": 5, "random_state": 99})
    est = fac(1234)
    assert est.random_state == 1234 and est.max_iter == 5


@pytest.mark.parametrize("kwargs,match", [
    ({"folds": 1}, "folds must be at least 2"),
    ({"folds": 61}, "cannot exceed the number of rows"),
    ({"repeats": 0}, "repeats must be at least 1"),
    ({"seed": -1}, "seed must be at least 0"),
    ({"jobs": 0}, "jobs must not be 0"),
    ({"folds": 2.5}, "folds must be an integer"),
])
def test_cross_validate_bad_arguments(stump, kwargs, match):
    X, y = blobs()
    with pytest.raises(TreegenError, match=match):
        cv.cross_validate(X, y, stump, **kwargs)


def test_cross_validate_bad_algorithm_and_data(stump):
    X, y = blobs()
    with pytest.raises(TreegenError, match="unknown algorithm"):
        cv.cross_validate(X, y, "nope")
    with pytest.raises(TreegenError, match="has no option"):
        cv.cross_validate(X, y, stump, {"criterion": "gini"})
    with pytest.raises(TreegenError, match="single class"):
        cv.cross_validate(X, np.ones(60), stump)
    with pytest.raises(TreegenError):
        cv.cross_validate(X, y[:-1], stump)


def test_small_class_warns_but_runs(stump):
    X, y = blobs((20, 20, 3))
    with pytest.warns(UserWarning, match="least populated class has only 3"):
        res = cv.cross_validate(X, y, stump, folds=5, seed=0, jobs=1)
    assert len(res["folds"]) == 5


def test_no_warning_for_well_populated_classes(stump):
    X, y = blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cv.cross_validate(X, y, stump, folds=5, jobs=1)


# ---------------------------------------------------------------------- real inducers
def test_cart_on_iris_with_processes(datasets_dir):
    from conftest import load_shared

    X, y = load_shared("irs")
    a = cv.cross_validate(X, y, "cart", {}, folds=5, repeats=2, seed=0, jobs=1, dataset="irs")
    b = cv.cross_validate(X, y, "cart", {}, folds=5, repeats=2, seed=0, jobs=2, dataset="irs")
    assert _strip_times(a) == _strip_times(b)
    assert 0.85 < a["accuracy"]["mean"] <= 1.0
    assert a["accuracy"]["ci95"] > 0
    assert a["leaves"]["mean"] >= 3


def test_efti_on_iris_reproducible(datasets_dir):
    from conftest import load_shared

    X, y = load_shared("irs")
    a = cv.cross_validate(X, y, "efti", {"max_iter": 500}, folds=3, seed=5, jobs=1)
    b = cv.cross_validate(X, y, "efti", {"max_iter": 500}, folds=3, seed=5, jobs=1)
    assert _strip_times(a) == _strip_times(b)
    assert a["params"]["max_iter"] == 500
    assert a["accuracy"]["mean"] > 0.6
