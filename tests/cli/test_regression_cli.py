"""``--task regression`` from the command line: the hints, fit, show, predict, eval, cv and the plots."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, run_cli
from sklearn.datasets import load_diabetes

from treegen.core.model import load


@pytest.fixture(scope="module")
def diab_csv(tmp_path_factory):
    d = load_diabetes(scaled=False)
    path = tmp_path_factory.mktemp("reg") / "diab.csv"
    rows = [",".join(d.feature_names + ["target"])]
    rows += [",".join(f"{v:g}" for v in r) + f",{int(t)}" for r, t in zip(d.data, d.target)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_hints_between_classification_and_regression(capsys, diab_csv, tmp_path):
    line = assert_user_error(capsys, ["fit", diab_csv, "--algo", "cart", "-o", tmp_path / "m.json"],
                             "214 distinct numeric values")
    assert "--task regression" in line
    labels = tmp_path / "cls.csv"
    labels.write_text("a,b,class\n" + "".join(f"{i},{i % 7},{i % 3}\n" for i in range(40)))
    assert "--task classification" in assert_user_error(
        capsys, ["fit", labels, "--algo", "cart", "--task", "regression", "-o", tmp_path / "m.json"], "3 integer levels")
    assert_user_error(capsys, ["fit", diab_csv, "--algo", "id3", "--task", "regression", "-o", tmp_path / "m.json"],
                      "no regression variant")
    assert_user_error(capsys, ["cv", diab_csv, "--algo", "cart", "--task", "regression", "--criterion", "gini"],
                      "--criterion does not apply to --algo cart --task regression")
    assert "use --task regression to compare regressors" in assert_user_error(
        capsys, ["compare", diab_csv, "--algos", "cart", "--json", tmp_path / "c.json"], "214 distinct numeric values")


def test_fit_show_predict_eval_cv_and_plots(capsys, diab_csv, tmp_path):
    model = tmp_path / "m.json"
    code, out, err = run_cli(capsys, ["fit", diab_csv, "--algo", "cart", "--task", "regression", "--max-depth", "3",
                                      "-o", model, "--json", tmp_path / "fit.json"])
    assert code == 0, err
    assert "regression of target" in out and "train R²        0.5007" in out
    m = load(model)
    assert m.task == "regression" and m.metadata["target_name"] == "target"
    assert json.loads((tmp_path / "fit.json").read_text())["train_r2"] == pytest.approx(0.5007, abs=1e-4)
    code, out, _ = run_cli(capsys, ["show", model])
    assert code == 0 and "value 268.871  (n=31)" in out and "regression of target" in out
    code, out, _ = run_cli(capsys, ["predict", model, diab_csv])
    values = np.array([float(v) for v in out.split()[1:]])
    assert code == 0 and values.shape == (442,) and np.unique(values).size == 8
    code, out, _ = run_cli(capsys, ["eval", model, diab_csv, "--json", tmp_path / "eval.json"])
    assert code == 0 and "RMSE      54.4147" in out and "R²        0.5007" in out
    code, out, _ = run_cli(capsys, ["cv", diab_csv, "--algo", "cart", "--task", "regression", "--max-depth", "3",
                                    "--folds", "3", "-q", "--json", tmp_path / "cv.json"])
    assert code == 0 and "RMSE" in out and "MAE" in out and "R²" in out
    for kind, inputs in (("tree", [model]), ("partition", [model, diab_csv]), ("cv", [tmp_path / "cv.json"])):
        code, out, err = run_cli(capsys, ["plot", kind, *inputs, "-o", tmp_path / f"{kind}.svg"])
        assert code == 0 and (tmp_path / f"{kind}.svg").stat().st_size > 1000, err
    assert_user_error(capsys, ["plot", "confusion", model, diab_csv, "-o", tmp_path / "c.svg"],
                      "needs a classification model")
