"""`treegen compare --task regression` end to end on a local cluster of one worker: RMSE / MAE / R²
tables and statistics, JSON in the units rule, the results file resumed (another pick runs nothing),
and the one-line refusals between classification and regression labels."""

from __future__ import annotations

import json

import numpy as np

from tests.cli.test_json_units import accuracy_like_values
from tests.conftest import assert_user_error, run_cli


def _csv(path, X, y):
    path.write_text("a,b,c,target\n" + "".join(f"{r[0]:.6g},{r[1]:.6g},{r[2]:.6g},{t:g}\n" for r, t in zip(X, y)))
    return path


def test_compare_regression_resume_and_pick(capsys, tmp_path):
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, size=(80, 3))
    wave = _csv(tmp_path / "wave.csv", X, np.round(3 * X[:, 0] + np.sin(5 * X[:, 1]), 4))
    ramp = _csv(tmp_path / "ramp.csv", X, np.round(10 * X[:, 2] ** 2 - X[:, 0], 4))
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"cart": {"max_depth": 3}, "efti": {"max_iter": 150}}))
    argv = ["compare", wave, ramp, "--task", "regression", "--algos", "cart,efti", "--params", params,
            "--folds", "3", "--runs-per-fold", "2", "--pick", "best-train", "--seed", "2", "--workers", "1", "-q"]
    code, out, err = run_cli(capsys, [*argv, "--json", tmp_path / "c.json", "--markdown", tmp_path / "c.md"])
    assert code == 0, err
    assert "# treegen compare (regression): 2 method(s) on 2 dataset(s)" in out
    assert "3-fold shuffled (not stratified) CV" in out and "lowest training RMSE" in out
    for title in ("## Test RMSE", "## Test MAE", "## Test R²", "## Statistics (one score per dataset: the mean "
                  "test RMSE, lower is better", "- Wilcoxon signed-rank, cart vs efti"):
        assert title in out, title
    doc = json.loads((tmp_path / "c.json").read_text())
    s = doc["summary"]
    assert doc["task"] == s["task"] == "regression" and doc["n_tasks"] == 2 * 3 * (1 + 2)
    assert doc["datasets"][0]["n_values"] == 80 and "n_classes" not in doc["datasets"][0]
    for i, ds in enumerate(s["datasets"]):
        cells = [s["cells"][ds][m]["rmse"]["mean"] for m in s["methods"]]
        assert s["mean_rmse"][i] == cells and s["best"][ds] == [s["methods"][int(np.argmin(cells))]]
    efti = [r for r in doc["records"] if r["method"] == "efti"]
    assert all(r["rmse"] == r["run_rmse"][r["picked_run"]] and
               r["run_train_rmse"][r["picked_run"]] == min(r["run_train_rmse"]) for r in efti)
    assert accuracy_like_values(doc) == []        # no RMSE under an accuracy-like key
    # the same comparison with the other pick: every run from the results file, no cluster
    argv[argv.index("best-train")] = "median"
    code, out, err = run_cli(capsys, [*argv, "--json", tmp_path / "m.json", "--results", tmp_path / "c.tasks.jsonl"])
    assert code == 0, err
    med = json.loads((tmp_path / "m.json").read_text())
    assert med["n_tasks_run"] == 0 and "all from the results file" in out
    assert [r["rmse"] for r in med["records"] if r["method"] == "efti"] == \
        [float(np.median(r["run_rmse"])) for r in efti]


def test_compare_task_label_refusals(capsys, tmp_path):
    X = np.arange(60, dtype=float).reshape(20, 3)
    levels = _csv(tmp_path / "levels.csv", X, [i % 3 for i in range(20)])
    continuous = _csv(tmp_path / "cont.csv", np.vstack([X] * 6), np.round(np.arange(120) * 0.37, 2))
    line = assert_user_error(capsys, ["compare", levels, "--task", "regression", "--algos", "cart", "--json",
                                      tmp_path / "a.json"], "only 3 integer levels")
    assert "use --task classification" in line and "levels.csv" in line
    line = assert_user_error(capsys, ["compare", continuous, "--algos", "cart", "--json", tmp_path / "b.json"],
                             "120 distinct numeric values")
    assert "use --task regression to compare regressors" in line
    assert_user_error(capsys, ["compare", continuous, "--task", "regression", "--algos", "cart,gp", "--json",
                               tmp_path / "c.json"], "'gp' has no regression variant")
