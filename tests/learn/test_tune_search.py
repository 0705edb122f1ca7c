"""The search of ``treegen tune`` (treegen.learn.tune): the seeded sample, Pareto promotion, the rungs
(run in this process with compare's run_task: no cluster), the front."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import DATASETS
from treegen.core.data import load_csv
from treegen.core.errors import TreegenError
from treegen.learn import compare as C
from treegen.learn import tune as T


def test_the_sample_is_seeded_distinct_and_holds_the_defaults():
    a = T.sample_methods(["cart", "efti"], 5, seed=3)
    assert [m.name for m in a] == [m.name for m in T.sample_methods(["cart", "efti"], 5, seed=3)]
    assert [m.name for m in a] != [m.name for m in T.sample_methods(["cart", "efti"], 5, seed=4)]
    assert len(a) == 10 and len({m.name for m in a}) == 10
    assert a[0].name == "cart(defaults)" and a[0].params == {} and a[5].name == "efti(defaults)"
    for m in a[1:5]:
        assert set(m.params) == set(T.SPACES["cart"])
        assert all(v in T.SPACES["cart"][k] for k, v in m.params.items())
    with pytest.raises(TreegenError, match="unknown algorithm"):
        T.sample_methods(["nope"], 2, 0)


def test_promotion_keeps_whole_fronts_of_accuracy_and_leaves():
    ms = [C.Method(n, "cart", {}) for n in "abcde"]
    score = {"a": {"accuracy": 0.9, "leaves": 20}, "b": {"accuracy": 0.8, "leaves": 3},
             "c": {"accuracy": 0.85, "leaves": 25}, "d": {"accuracy": 0.7, "leaves": 2},
             "e": {"accuracy": 0.6, "leaves": 10}}
    # front 1: a, b, d (none dominated); c is dominated by a; e by b and d
    assert T.nondominated_fronts([(-score[n]["accuracy"], score[n]["leaves"]) for n in "abcde"])[0] == [0, 1, 3]
    assert [m.name for m in T.promote(ms, score, 3)] == ["a", "b", "d"]
    assert [m.name for m in T.promote(ms, score, 2)] == ["a", "b"]          # the cut front: by accuracy
    assert [m.name for m in T.promote(ms, score, 4)] == ["a", "b", "c", "d"]


def test_pareto_front():
    pts = [{"accuracy": 0.9, "flash_bytes": 100, "latency_us": 2.0},
           {"accuracy": 0.9, "flash_bytes": 120, "latency_us": 2.0},    # dominated by 0
           {"accuracy": 0.8, "flash_bytes": 50, "latency_us": 3.0},
           {"accuracy": 0.7, "flash_bytes": 60, "latency_us": 1.0},
           {"accuracy": 0.95, "flash_bytes": None, "latency_us": 1.0}]  # not measured: left out
    assert T.pareto_front(pts, (("accuracy", 1), ("flash_bytes", -1), ("latency_us", -1))) == [0, 2, 3]


def _local_run(data):
    calls = []

    def run(tasks):
        calls.append(len(tasks))
        return [C.run_task(t, data) for t in tasks]
    return run, calls


def test_successive_halving_is_deterministic_and_halves():
    ds = load_csv(DATASETS / "irs.csv.gz")
    data = C.CompareData("irs", ds.X, ds.labels)
    methods = T.sample_methods(["cart", "id3"], 5, seed=1)
    run, calls = _local_run(data)
    a = T.successive_halving(data, methods, run, seed=1, eta=2, min_keep=3)
    b = T.successive_halving(data, methods, _local_run(data)[0], seed=1, eta=2, min_keep=3)
    assert a.rungs == b.rungs and [m.name for m in a.finalists] == [m.name for m in b.finalists]
    sizes = [len(r["methods"]) for r in a.rungs]
    assert sizes == [10, 5, 3] and calls == [10 * 2, 5 * 5, 3 * 10]     # 2 folds, 5 folds, 2 x 5 folds
    assert all(s["n_folds"] == 10 for s in a.final_scores.values())
    # a finished rung's accuracy is compare's / cv's for the same seed: the mean of its fold tasks
    m = a.finalists[0]
    recs = [C.run_task(t, data) for t in T.rung_tasks(data, [m], 2, 1)]
    assert a.final_scores[m.name]["accuracy"] == pytest.approx(np.mean([r["accuracy"] for r in recs]))


def test_a_passed_deadline_stops_after_the_first_rung():
    ds = load_csv(DATASETS / "irs.csv.gz")
    data = C.CompareData("irs", ds.X, ds.labels)
    methods = T.sample_methods(["cart"], 6, seed=0)
    got = T.successive_halving(data, methods, _local_run(data)[0], seed=0, deadline=0.0, clock=lambda: 1.0)
    assert got.cut_by_budget and len(got.rungs) == 1 and len(got.finalists) == 4
