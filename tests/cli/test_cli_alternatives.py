"""CLI of the alternative learners: --algo gp / rf, --risk vicinal, --vicinity-sigma2, eval's ROC AUC
and metrics table, and their bad inputs (one line, exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, load_shared, run_cli

from treegen.core.model import load


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    X, y = load_shared("bcw")
    path = tmp_path_factory.mktemp("alt") / "bcw200.csv"
    rows = np.column_stack([X[:200], y[:200]])
    header = ",".join([f"a{i}" for i in range(X.shape[1])] + ["class"])
    np.savetxt(path, rows, fmt="%d", delimiter=",", header=header, comments="")
    return path


def test_fit_rf_prints_oob_and_eval_prints_auc_and_metrics_table(data, tmp_path, capsys):
    model = tmp_path / "rf.json"
    code, out, err = run_cli(capsys, ["fit", data, "--algo", "rf", "--n-trees", "7", "--max-features", "2",
                                      "--sample-fraction", "0.6667", "--jobs", "2", "--seed", "4", "-o", model, "-q"])
    assert code == 0, err
    assert "trees           7" in out and "oob accuracy" in out
    m = load(model)
    assert len(m.trees) == 7 and m.metadata["algorithm"] == "rf"
    assert m.trees[0].class_counts[0].sum() == round(0.6667 * 200)
    code, out, err = run_cli(capsys, ["eval", model, data, "--json", tmp_path / "e.json"])
    assert code == 0, err
    lines = {ln.split("  ")[0]: ln for ln in out.splitlines()}
    for key in ("accuracy", "precision (macro)", "recall (macro)", "f1 (macro)", "roc auc", "training time",
                "prediction time"):
        assert key in lines, out
    rep = json.loads((tmp_path / "e.json").read_text())
    assert 0.9 < rep["roc_auc"] <= 1.0 and rep["predict_seconds"] > 0 and rep["train_seconds"] > 0


def test_fit_efti_forest_and_tree_with_attributes_per_node(data, tmp_path, capsys):
    for args in (["--algo", "rf", "--base", "efti", "--feature-bagging", "node", "--n-trees", "3"],
                 ["--algo", "efti", "--max-features", "2"]):
        model = tmp_path / "m.json"
        code, out, err = run_cli(capsys, ["fit", data, *args, "--max-iter", "200", "--seed", "1", "-o", model, "-q"])
        assert code == 0, err
        k = 3 if "rf" in args else 2                 # bcw: sqrt(9) per node in the forest; 2 for the tree
        for t in load(model).trees:
            assert all(np.count_nonzero(t.weights[j]) <= k for j in np.flatnonzero(t.left >= 0))


def test_fit_gp_vicinal_and_empirical(data, tmp_path, capsys):
    for risk in ("vicinal", "empirical"):
        sigma = ["--vicinity-sigma2", "0.05"] if risk == "vicinal" else []
        code, out, err = run_cli(capsys, ["fit", data, "--algo", "gp", "--risk", risk, "--max-iter", "40",
                                          "--population", "12", *sigma, "-o", tmp_path / f"gp-{risk}.json", "-q"])
        assert code == 0, err
        assert f"({risk})" in out
        assert load(tmp_path / f"gp-{risk}.json").metadata["risk"] == risk


@pytest.mark.parametrize("algo, extra", [("efti", ["--max-iter", "300"]),
                                         ("gp", ["--max-iter", "40", "--population", "12"])])
def test_fit_vicinal_native_equals_python(data, tmp_path, capsys, algo, extra):
    trees = {}
    for engine in ("native", "python"):
        code, out, err = run_cli(capsys, ["fit", data, "--algo", algo, "--risk", "vicinal", "--engine", engine,
                                          *extra, "--seed", "3", "-o", tmp_path / f"{engine}.json", "-q"])
        assert code == 0, err
        trees[engine] = load(tmp_path / f"{engine}.json").trees[0]
    assert trees["native"].equals(trees["python"])


@pytest.mark.parametrize("argv, match", [
    (["--algo", "cart", "--risk", "vicinal"], "--risk does not apply to --algo cart"),
    (["--algo", "rf", "--risk", "vicinal"], "--risk does not apply to --algo rf"),
    (["--algo", "gp", "--vicinity-sigma2", "0"], "must be a finite number > 0"),
    (["--algo", "gp", "--vicinity-sigma2", "-0.1"], "must be a finite number > 0"),
    (["--algo", "efti", "--vicinity-sigma2", "nan"], "must be a finite number > 0"),
    (["--algo", "rf", "--n-trees", "0"], "must be 1..4096"),
    (["--algo", "rf", "--base", "svm"], "not a tree learner"),
    (["--algo", "rf", "--base", "rf"], "not a tree learner"),
    (["--algo", "rf", "--max-features", "0"], "must be 1..65535"),
    (["--algo", "rf", "--max-features", "half"], "sqrt, log2, all or an integer"),
    (["--algo", "cart", "--jobs", "2"], "--jobs does not apply to --algo cart"),
])
def test_bad_input_is_one_line_exit_2(data, tmp_path, capsys, argv, match):
    assert_user_error(capsys, ["fit", data, *argv, "--max-iter", "5", "-o", tmp_path / "m.json"]
                      if argv[1] in ("gp", "efti") else ["fit", data, *argv, "-o", tmp_path / "m.json"], match)
