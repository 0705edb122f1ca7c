"""treegen.learn.compare_runs: several seeded runs per fold (plan, seeds, keys), one score per fold from
them (median, best-train), and the results file's run records. No cluster (tests/cli/test_compare_runs_cli.py
runs the command)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import load_shared
from treegen.core.errors import TreegenError
from treegen.learn import compare as C
from treegen.learn.compare_runs import fold_records, is_deterministic, run_seed


@pytest.fixture(scope="module")
def irs():
    X, y = load_shared("irs")
    return C.CompareData("irs", X, y)


def test_one_run_per_fold_is_todays_plan(irs):
    """R = 1: the tasks, keys and seeds of a plan without runs; keys of the committed results file
    (bench/results/compare_21_500k.tasks.jsonl, written before runs per fold) are found."""
    ms = C.methods_from_spec(["gp", "cart"], {"gp": {"max_iter": 800, "risk": "vicinal"}, "cart": {"ccp_alpha": 0.01}})
    plain = C.plan([irs], ms, folds=5, repeats=5, seed=1)
    one = C.plan([irs], ms, folds=5, repeats=5, seed=1, runs_per_fold=1)
    assert one == plain and all(t.run == 0 for t in one) and len(one) == 2 * 25
    assert (one[0].key, one[0].seed) == ("ebe6f4ba1718e62a55c6023c", 1835504127)     # gp-vicinal, rep 0 fold 0
    assert one[25].key == "55ebfe52058cc32555d818d6"                                  # cart, rep 0 fold 0


def test_runs_of_stochastic_methods_only(irs):
    ms = C.methods_from_spec(["efti", "cart"], {"efti": {"max_iter": 50}})
    one = C.plan([irs], ms, folds=3, seed=4)
    three = C.plan([irs], ms, folds=3, seed=4, runs_per_fold=3)
    five = C.plan([irs], ms, folds=3, seed=4, runs_per_fold=5)
    efti = [t for t in three if t.algorithm == "efti"]
    assert len(efti) == 9 and len([t for t in three if t.algorithm == "cart"]) == 3
    assert is_deterministic("cart") and is_deterministic("id3") and not is_deterministic("gp")
    assert [(t.fold, t.run) for t in efti] == [(f, i) for f in range(3) for i in range(3)]
    assert len({t.key for t in three}) == len(three) and len({t.seed for t in efti}) == 9
    # run 0 is the fold's single task; later runs are the same whatever R is (R can grow, runs are kept)
    assert [t for t in three if t.run == 0] == one
    assert [(t.key, t.seed) for t in three] == [(t.key, t.seed) for t in five if t.run < 3]
    assert efti[1].seed == run_seed(efti[0].key, efti[0].seed, 1) and efti[1].key_v1 == ""
    for bad in (0, 1.5, True, 1001):
        with pytest.raises(TreegenError, match="runs_per_fold"):
            C.plan([irs], ms, runs_per_fold=bad)


def test_a_later_run_is_its_own_seeded_fit(irs):
    m = C.methods_from_spec(["efti"], {"efti": {"max_iter": 200, "engine": "python"}})
    tasks = C.plan([irs], m, folds=3, seed=2, runs_per_fold=2)[:2]
    first, second = (C.run_task(t, irs) for t in tasks)
    assert (first["run"], second["run"]) == (0, 1) and first["seed"] != second["seed"]
    assert 0 <= second["train_accuracy"] <= 1 and second["n_train"] == first["n_train"]
    assert C.strip_timing([C.run_task(tasks[1], irs)]) == C.strip_timing([second])


def _run(fold, run, acc, train, leaves=5, seconds=1.0, method="gp"):
    return {"dataset": "d", "method": method, "repeat": 0, "fold": fold, "run": run, "key": f"k{fold}{run}",
            "accuracy": acc, "train_accuracy": train, "leaves": leaves, "depth": 3, "train_seconds": seconds}


def test_fold_scores_median_and_best_train():
    recs = [_run(0, 0, 0.5, 0.9, leaves=4), _run(0, 1, 0.7, 0.95, leaves=8), _run(0, 2, 0.6, 0.95, leaves=6),
            _run(1, 1, 0.8, 0.7), _run(1, 0, 0.9, 0.6), _run(0, 0, 0.75, 1.0, method="cart")]
    med = fold_records(recs, "median")
    assert [(r["method"], r["fold"]) for r in med] == [("gp", 0), ("gp", 1), ("cart", 0)]
    assert med[0]["accuracy"] == pytest.approx(0.6) and med[0]["leaves"] == 6 and med[0]["picked_run"] is None
    assert med[1]["accuracy"] == pytest.approx(0.85)                 # even count: mean of the middle two
    assert med[0]["train_seconds"] == 3.0 and med[0]["runs"] == 3 and med[0]["run_accuracies"] == [0.5, 0.7, 0.6]
    assert med[2] is recs[-1]                                         # one run: the record unchanged
    best = fold_records(recs, "best-train")
    assert (best[0]["accuracy"], best[0]["picked_run"], best[0]["leaves"]) == (0.7, 1, 8)   # tie: lowest run
    assert (best[1]["accuracy"], best[1]["picked_run"]) == (0.8, 1)  # sorted by run index, not by arrival
    assert best[1]["run_train_accuracies"] == [0.6, 0.7] and best[0]["pick"] == "best-train"
    old = [{k: v for k, v in r.items() if k != "train_accuracy"} for r in recs[:3]]
    assert fold_records(old, "median")[0]["accuracy"] == pytest.approx(0.6)
    with pytest.raises(TreegenError, match="training accuracy"):
        fold_records(old, "best-train")
    with pytest.raises(TreegenError, match="pick must be one of median, best-train"):
        fold_records(recs, "mean")


def test_results_file_checks_the_run(irs, tmp_path):
    m = C.methods_from_spec(["efti"], {"efti": {"max_iter": 100, "engine": "python"}})
    task = C.plan([irs], m, folds=3, seed=2, runs_per_fold=2)[1]
    rec = C.run_task(task, irs)
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({**rec, "run": 2}) + "\n")
    with pytest.raises(TreegenError, match="has run 2, this comparison's task has 1"):
        C.ResultsFile(path).done([task])
    path.write_text(json.dumps({**rec, "train_accuracy": 1.5}) + "\n")
    with pytest.raises(TreegenError, match="train_accuracy must be a fraction"):
        C.ResultsFile(path)
    path.write_text(json.dumps(rec) + "\n")
    assert C.ResultsFile(path).done([task]) == {task.key: rec}
