"""treegen.learn.compare with task "regression", without a cluster: a task is a fold of `cv --task
regression`, keys that never meet classification keys, the results file's regression records, runs
per fold picked by RMSE, and a summary ranked by RMSE (lower is better)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli.test_json_units import accuracy_like_values
from treegen.core.errors import DataError, TreegenError
from treegen.learn import compare as C
from treegen.learn.compare_runs import fold_records
from treegen.learn.cv import cross_validate


@pytest.fixture(scope="module")
def reg():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(90, 3))
    y = 4 * X[:, 0] + np.sin(6 * X[:, 1]) + 0.1 * rng.normal(size=90)
    return C.CompareData("wave", X, y)


@pytest.mark.parametrize("algo,params", [("cart", {"max_depth": 3}), ("rf", {"n_trees": 3}),
                                         ("efti", {"max_iter": 200})])
def test_task_equals_cv_regression_fold(reg, algo, params):
    m = C.methods_from_spec([algo], {algo: params}, "regression")
    recs = [C.run_task(t, reg) for t in C.plan([reg], m, folds=3, repeats=2, seed=5)]
    cv = cross_validate(reg.X, reg.y, algo, params, folds=3, repeats=2, seed=5, jobs=1, task="regression")
    fields = ("repeat", "fold", "seed", "rmse", "mae", "r2", "leaves", "depth", "n_train", "n_test")
    assert [{k: r[k] for k in fields} for r in recs] == [{k: f[k] for k in fields} for f in cv["folds"]]
    assert all(r["task"] == "regression" and r["train_rmse"] >= 0 and "accuracy" not in r for r in recs)


def test_methods_keys_and_bad_input(reg):
    cls = C.plan([C.CompareData("lev", reg.X, (reg.y > 2).astype(int))], C.methods_from_spec(["cart"]), folds=3)
    same_data_cls = C.Method("cart", "cart")
    same_data_reg = C.methods_from_spec(["cart"], None, "regression")[0]
    assert same_data_reg.task == "regression"
    # the task enters the key: the same data, algorithm and parameters as a classification never share it
    assert C.task_key(reg, same_data_cls, 3, 0, 0, 0) != C.task_key(reg, same_data_reg, 3, 0, 0, 0)
    tasks = C.plan([reg], [same_data_reg], folds=3)
    assert tasks[0].key == C.task_key(reg, same_data_reg, 3, 0, 0, 0) and tasks[0].key_v1 == ""
    assert cls[0].key_v1 and cls[0].task == "classification"
    with pytest.raises(TreegenError, match="'gp' has no regression variant"):
        C.methods_from_spec(["gp"], None, "regression")
    with pytest.raises(TreegenError, match="has no option 'criterion' for regression"):
        C.methods_from_spec(["cart"], {"cart": {"criterion": "gini"}}, "regression")
    with pytest.raises(TreegenError, match="all classify or all regress"):
        C.plan([reg], [same_data_cls, C.Method("r", "cart", {}, "regression")])
    with pytest.raises(DataError, match="numeric target values, got text labels"):
        C.plan([C.CompareData("txt", reg.X, np.array(["a", "b", "c"] * 30))], [same_data_reg], folds=3)


def _reg_record(key, **kw):
    rec = {"key": key, "dataset": "d", "method": "cart", "algorithm": "cart", "repeat": 0, "fold": 0, "seed": 0,
           "n_train": 2, "n_test": 2, "task": "regression", "rmse": 1.5, "mae": 1.0, "r2": -0.25,
           "train_rmse": 0.5, "leaves": 2, "depth": 1, "train_seconds": 0.1}
    return {**rec, **kw}


def test_results_file_regression_records(reg, tmp_path):
    method = C.methods_from_spec(["cart"], None, "regression")
    task = C.plan([reg], method, folds=3)[0]
    path = tmp_path / "r.jsonl"
    C.ResultsFile(path).add(_reg_record(task.key, seed=task.seed, dataset="wave"))
    assert C.ResultsFile(path).done([task])[task.key]["rmse"] == 1.5
    # a regression record under a classification task's key is refused, never mixed in
    cls_task = C.Task(task.key, "wave", "cart", "cart", {}, 3, 0, 0, 0, task.seed)
    with pytest.raises(TreegenError, match='has task "regression", this comparison\'s task has "classification"'):
        C.ResultsFile(path).done([cls_task])
    for bad, match in ((_reg_record("x", rmse=-1.0), "rmse must be >= 0"),
                       (_reg_record("x", r2=1.5), "r2 must be at most 1"),
                       ({k: v for k, v in _reg_record("x").items() if k != "mae"}, "field mae missing"),
                       (_reg_record("x", task="ranking"), "task must be one of")):
        p = tmp_path / f"bad{match[:4]}.jsonl"
        p.write_text(C.json.dumps(bad) + "\n")
        with pytest.raises(TreegenError, match=match):
            C.ResultsFile(p)


def test_runs_per_fold_pick_by_rmse():
    runs = [_reg_record(f"k{i}", run=i, rmse=r, mae=r / 2, r2=0.1 * i, train_rmse=t)
            for i, (r, t) in enumerate([(3.0, 0.9), (1.0, 0.4), (2.0, 0.4)])]
    best = fold_records(runs, "best-train")[0]
    assert (best["picked_run"], best["rmse"], best["run_rmse"], best["run_train_rmse"]) == \
        (1, 1.0, [3.0, 1.0, 2.0], [0.9, 0.4, 0.4])
    med = fold_records(runs, "median")[0]
    assert (med["rmse"], med["mae"], med["r2"], med["picked_run"]) == (2.0, 1.0, pytest.approx(0.1), None)
    assert "train_rmse" not in med and "run_accuracies" not in med


def test_summary_ranks_lower_rmse_first():
    ms = [C.Method(n, "cart", {}, "regression") for n in ("A", "B", "C")]
    rmse = {"d1": (2.0, 3.0, 4.0), "d2": (5.0, 4.0, 6.0), "d3": (1.0, 1.0, 2.0), "d4": (7.0, 8.0, 9.0)}
    recs = [{**_reg_record("k", dataset=ds, method=m.name, fold=f, rmse=v[i] + 0.1 * f, mae=v[i], r2=0.5),
             "run": 0} for ds, v in rmse.items() for i, m in enumerate(ms) for f in range(2)]
    out = C.summarize(recs, list(rmse), ms)
    assert out["task"] == "regression" and out["metric"] == "rmse" and "scores" not in out
    assert out["best"] == {"d1": ["A"], "d2": ["B"], "d3": ["A", "B"], "d4": ["A"]}
    assert out["average_ranks"] == {"A": 1.375, "B": 1.625, "C": 3.0}
    assert out["friedman"]["holm"]["control"] == "A"
    cell = out["cells"]["d1"]["A"]
    assert cell["rmse"]["mean"] == pytest.approx(2.05) and cell["rmse"]["std"] == pytest.approx(0.1 / 2 ** 0.5)
    two = C.summarize([r for r in recs if r["method"] != "C"], list(rmse), ms[:2])
    assert (two["wilcoxon"]["wins"], two["wilcoxon"]["ties"], two["wilcoxon"]["losses"]) == (2, 1, 1)
    # the JSON units rule: nothing accuracy-like holds an RMSE
    assert accuracy_like_values(out) == []
