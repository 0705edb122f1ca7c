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


# ---------------------------------------------------------------------- knob ranges within the inducers' bounds
#: (training rows, features, classes): tiny and large, one feature and many, two classes and many
SHAPES = [(6, 1, 2), (9, 2, 3), (20, 1, 7), (40, 5, 2), (300, 12, 4), (1500, 40, 10)]


def _shape_data(shape, seed=1):
    """Random rows of ``shape`` (all its rows, not the probe's cap), every class present."""
    rows, n_features, n_classes = shape
    rng = np.random.default_rng([seed, *shape])
    return rng.normal(size=(rows, n_features)), np.arange(rows) % n_classes


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_knob_range_fits_at_both_ends_on_every_shape(shape):
    """For every algorithm, the search space built for ``shape`` holds only values its inducer accepts:
    each knob at the low and the high end of its range (the others at their defaults) is fitted, with
    fast settings (iterations capped), on data of that shape. Planted bug: SPACES['de-pdt']['height']
    starting at 1 with the check in search_space removed -> 'DE-PDT: height must be an integer in
    2..12' on every shape (the refusal seen on unseen data)."""
    from treegen.learn.estimators import make_estimator

    X, y = _shape_data(shape)
    problems = []
    for algo in T.SPACES:
        space, refused = T.search_space(algo, shape)
        assert set(space) == set(T.SPACES[algo]), (algo, refused)     # no knob lost on these shapes
        for knob, values in space.items():
            assert values == sorted(values) and values
            for v in {values[0], values[-1]}:
                base, fixed = T.algorithm_of(algo)          # efti-distill: efti with a teacher
                try:
                    make_estimator(base, **T.fast(base, {**fixed, knob: v}), random_state=0).fit(X, y)
                except TreegenError as exc:
                    problems.append(f"{algo} {knob}={v}: {exc}")
    assert not problems, problems


def test_a_value_the_inducer_refuses_is_left_out_and_reported(monkeypatch):
    monkeypatch.setitem(T.SPACES, "de-pdt", {"height": [1, 2, 3], "generations": [200], "population": [2, 20]})
    space, refused = T.search_space("de-pdt", (30, 3, 2))
    assert space == {"height": [2, 3], "generations": [200], "population": [20]}
    assert len(refused) == 2 and "de-pdt height=1: DE-PDT: height must be an integer in 2..12, got 1" in refused[0]
    assert "population must be an integer 4.." in refused[1]
    got = []
    methods = T.sample_methods(["de-pdt"], 10, seed=0, shape=(30, 3, 2), refused=got)
    assert got == refused and all(m.params.get("height", 5) >= 2 for m in methods)
    assert len(methods) == 1 + 2      # the defaults and every admissible setting (2 x 1 x 1)


# ---------------------------------------------------------------------- failed candidates
def test_a_failing_candidate_leaves_the_search_and_the_others_go_on():
    """run() reports one method's task as failed at rung 0 and another's at rung 1: both leave with
    their reasons, the rest is promoted and scored as before (no 'no results for ...' error)."""
    ds = load_csv(DATASETS / "irs.csv.gz")
    data = C.CompareData("irs", ds.X, ds.labels)
    methods = T.sample_methods(["cart", "id3"], 4, seed=1)
    bad0 = methods[1].name
    bad1 = []

    def run(tasks):
        if any(t.fold == 3 for t in tasks) and not bad1:       # rung 1: its first method fails on fold 3
            bad1.append(tasks[0].method)
        out = []
        for t in tasks:
            if t.method == bad0 or (bad1 and t.method == bad1[0] and t.fold == 3):
                out.append({"key": t.key, "method": t.method, "error": f"refused {t.method}"})
            else:
                out.append(C.run_task(t, data))
        return out
    got = T.successive_halving(data, methods, run, seed=1, eta=2, min_keep=3)
    assert got.failed == {bad0: {"rung": 0, "reason": f"refused {bad0}"},
                          bad1[0]: {"rung": 1, "reason": f"refused {bad1[0]}"}}
    assert bad0 not in got.rungs[1]["methods"] and got.rungs[0]["failed"] == [bad0]
    assert got.rungs[1]["failed"] == [bad1[0]] and bad1[0] not in got.rungs[1]["scores"]
    assert bad1[0] not in got.rungs[2]["methods"] and len(got.rungs[2]["methods"]) == 3
    assert got.finalists and all(m.name not in got.failed for m in got.finalists)
    assert all(s["n_folds"] == 10 for s in got.final_scores.values())


@pytest.mark.parametrize("text, match", [(",", "names no algorithm"), ("", "names no algorithm"),
                                         ("cart,", "empty name"), ("efti,efti", "listed twice"),
                                         ("cart,xgb", "unknown algorithm 'xgb'")])
def test_parse_algos_refuses_empty_and_repeated_names(text, match):
    with pytest.raises(TreegenError, match=match):
        T.parse_algos(text)
    assert T.parse_algos(None) is None and T.parse_algos(" cart , id3") == ["cart", "id3"]
