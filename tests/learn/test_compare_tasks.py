"""treegen.learn.compare without a cluster: methods, task plan and keys, one task = one cv fold,
the resumable results file, the summary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import load_shared
from treegen.core.errors import TreegenError
from treegen.learn import compare as C
from treegen.learn.cv import cross_validate, fold_seed


@pytest.fixture(scope="module")
def irs():
    X, y = load_shared("irs")
    return C.CompareData("irs", X, y)


def test_methods_from_spec_names_and_errors():
    ms = C.methods_from_spec(["efti", "cart"], {"efti": [{"max_iter": 100, "oversize_weight": 0.05},
                                                         {"max_iter": 100, "oversize_weight": 0.1}],
                                                "cart": {"ccp_alpha": 0.01, "name": "CART-pruned"}})
    assert [m.name for m in ms] == ["efti(oversize_weight=0.05)", "efti(oversize_weight=0.1)", "CART-pruned"]
    assert ms[2].params == {"ccp_alpha": 0.01}
    assert [m.name for m in C.methods_from_spec(["cart"])] == ["cart"]
    for algos, spec, match in [
        (["c45"], None, "unknown algorithm 'c45'"),
        (["efti"], {"efti": {"max_iters": 5}}, "has no option 'max_iters'"),
        (["efti"], {"cart": {"ccp_alpha": 0.1}}, "not among the algorithms"),
        (["efti"], {"efti": {"random_state": 3}}, "cannot be set"),
        (["efti"], {"efti": [{"name": "a"}, {"name": "a", "max_iter": 5}]}, "both called 'a'"),
        (["efti"], {"efti": "fast"}, "must be a table"),
        (["efti", "efti"], None, "listed twice"),
    ]:
        with pytest.raises(TreegenError, match=match):
            C.methods_from_spec(algos, spec)


def test_plan_keys_and_seeds(irs):
    ms = C.methods_from_spec(["efti", "cart"], {"efti": {"max_iter": 200}})
    tasks = C.plan([irs], ms, folds=3, repeats=2, seed=7)
    assert len(tasks) == 2 * 2 * 3 and len({t.key for t in tasks}) == len(tasks)
    assert [t.seed for t in tasks[:6]] == [fold_seed(7, r, f) for r in range(2) for f in range(3)]
    assert [t.key for t in C.plan([irs], ms, folds=3, repeats=2, seed=7)] == [t.key for t in tasks]
    # a key depends on the result's inputs, not on the names
    renamed = C.methods_from_spec(["efti"], {"efti": {"max_iter": 200, "name": "E"}})
    assert C.plan([irs], renamed, folds=3, seed=7)[0].key == tasks[0].key
    other = C.methods_from_spec(["efti"], {"efti": {"max_iter": 201}})
    assert C.plan([irs], other, folds=3, seed=7)[0].key != tasks[0].key
    assert C.plan([irs], ms, folds=3, seed=8)[0].key != tasks[0].key
    changed = C.CompareData("irs", irs.X[:-1], irs.y[:-1])
    assert C.plan([changed], ms, folds=3, seed=7)[0].key != tasks[0].key
    with pytest.raises(TreegenError, match="given twice"):
        C.plan([irs, irs], ms)
    with pytest.raises(TreegenError, match="datasets irs and copy have the same contents"):
        C.plan([irs, C.CompareData("copy", irs.X, irs.y)], ms)
    with pytest.raises(TreegenError, match="folds"):
        C.plan([irs], ms, folds=1)


@pytest.mark.parametrize("algo,params", [("cart", {"ccp_alpha": 0.01}), ("efti", {"max_iter": 300})])
def test_task_equals_cv_fold(irs, algo, params):
    """A method's tasks are exactly `treegen cv` with the same seed (same folds, same estimator seeds)."""
    m = C.methods_from_spec([algo], {algo: params})
    recs = [C.run_task(t, irs) for t in C.plan([irs], m, folds=3, repeats=2, seed=5)]
    cv = cross_validate(irs.X, irs.y, algo, params, folds=3, repeats=2, seed=5, jobs=1)
    fields = ("repeat", "fold", "seed", "accuracy", "leaves", "depth", "n_train", "n_test")
    assert [{k: r[k] for k in fields} for r in recs] == [{k: f[k] for k in fields} for f in cv["folds"]]


def test_measure_callable_and_errors(irs):
    m = C.methods_from_spec(["cart"])
    task = C.plan([irs], m, folds=3)[0]
    rec = C.run_task(task, irs, measure=lambda est, X: {"flash_bytes": int(est.tree_.n_leaves) * 10 + X.shape[0]})
    assert rec["flash_bytes"] == rec["leaves"] * 10 + rec["n_train"]

    def broken(est, X):
        raise TreegenError("compiler exploded")
    with pytest.raises(TreegenError, match="dataset irs, cart, repetition 0, fold 0: compiler exploded"):
        C.run_task(task, irs, measure=broken)


def _record(key, **kw):
    rec = {"key": key, "dataset": "d", "method": "cart", "algorithm": "cart", "repeat": 0, "fold": 0, "seed": 0,
           "n_train": 2, "n_test": 2, "accuracy": 1.0, "leaves": 2, "depth": 1, "train_seconds": 0.1}
    return {**rec, **kw}


def test_results_file_resumes_and_survives_a_cut_line(tmp_path):
    path = tmp_path / "r.jsonl"
    store = C.ResultsFile(path)
    store.add(_record("a"))
    with open(path, "a") as fh:
        fh.write('{"key": "b", "accur')          # a run killed while writing
    again = C.ResultsFile(path)
    assert set(again.records) == {"a"} and again.cut_line
    again.add(_record("c", accuracy=0.5))        # replaces the cut line
    third = C.ResultsFile(path)
    assert set(third.records) == {"a", "c"} and not third.cut_line
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[-1])["key"] == "c"


def _rec(ds, method, fold, acc, leaves=3):
    return {"dataset": ds, "method": method, "repeat": 0, "fold": fold, "accuracy": acc, "leaves": leaves,
            "depth": 2, "train_seconds": 0.1}


def test_summarize_best_ranks_and_tests():
    ms = [C.Method("A", "cart"), C.Method("B", "cart"), C.Method("C", "cart")]
    scores = {"d1": (90, 80, 85), "d2": (70, 75, 60), "d3": (50, 50, 40), "d4": (99, 98, 97)}
    recs = [_rec(ds, m.name, f, s[i] + f) for ds, s in scores.items() for i, m in enumerate(ms) for f in range(2)]
    out = C.summarize(recs, list(scores), ms)
    assert out["best"] == {"d1": ["A"], "d2": ["B"], "d3": ["A", "B"], "d4": ["A"]}
    assert out["cells"]["d1"]["A"]["accuracy"]["mean"] == pytest.approx(90.5)
    assert out["cells"]["d1"]["A"]["flash_bytes"] is None
    assert out["average_ranks"] == pytest.approx({"A": 1.375, "B": 1.875, "C": 2.75})
    assert out["friedman"]["names"] == ["A", "B", "C"] and out["wilcoxon"] is None
    two = C.summarize([r for r in recs if r["method"] != "C"], list(scores), ms[:2])
    assert two["wilcoxon"]["a"] == "A" and (two["wilcoxon"]["wins"], two["wilcoxon"]["ties"]) == (2, 1)
    with pytest.raises(TreegenError, match="no results for B on d1"):
        C.summarize(recs[:2], ["d1"], ms)


def test_strip_timing():
    r = {"key": "k", "accuracy": 1.0, "train_seconds": 2.0, "measure_seconds": 0.5}
    assert C.strip_timing([r]) == [{"key": "k", "accuracy": 1.0}]
    assert np.isclose(r["train_seconds"], 2.0)


def test_results_of_record_version_1_are_converted_not_rerun(irs, tmp_path):
    """A results file written before accuracies became fractions (record version 1: percent, key
    without a version) resumes: its records are converted, equal to running the task now."""
    task = C.plan([irs], [C.Method("cart", "cart")], folds=3, seed=2)[1]
    fresh = C.run_task(task, irs)
    assert task.key_v1 and task.key_v1 != task.key
    old = {**fresh, "key": task.key_v1, "accuracy": 100.0 * fresh["accuracy"]}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    done = C.ResultsFile(path).done([task])
    rec = done[task.key]
    assert rec["accuracy"] == fresh["accuracy"] and rec["converted_from"] == task.key_v1
    assert C.strip_timing([{k: v for k, v in rec.items() if k != "converted_from"}]) == C.strip_timing([fresh])
    assert task.key in C.ResultsFile(path).records          # appended: the next run reads it directly
    assert C.ResultsFile(tmp_path / "none.jsonl").done([task]) == {}
