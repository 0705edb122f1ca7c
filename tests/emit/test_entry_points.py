"""The export records its C entry points as data (ExportReport.entry_points): for every kind of export
each recorded function is declared in the header with the recorded input type, and every inference
function the header declares is recorded (the harness binds to the record, not to the header text)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from export_models import small_models

from treegen.emit.entry_points import find
from treegen.emit.export import export_model

DECL = re.compile(r"^(\w[\w ]*?)\s+(tg_\w+)\((const (?:float|int16_t)) \*", re.M)
INPUT = {"const float": "float32", "const int16_t": "q15"}


def _check(rep, out):
    header = (out / f"{rep.name}.h").read_text()
    declared = {name: INPUT[arg] for _, name, arg in DECL.findall(header) if not name.endswith("_scale_q15")}
    assert {e["name"]: e["input"] for e in rep.entry_points} == declared
    return rep.entry_points


def _regressor():
    from sklearn.datasets import load_diabetes

    from treegen.learn.regressors import CARTRegressor
    X, y = load_diabetes(return_X_y=True)
    return CARTRegressor(max_depth=3).fit(X, y).model_


def _stump():
    from treegen.core.model import Model
    from treegen.core.scaling import InputScaling
    from treegen.core.tree import LEAF, Tree
    stump = Tree(np.array([[1.0], [0.0], [0.0]]), np.array([0.5, 0, 0]), [1, LEAF, LEAF], [2, LEAF, LEAF],
                 np.zeros(3), np.zeros((3, 1)), leaf_value=np.array([0.0, -1.0, 1.0]))
    return Model([stump], ["a"], [0, 1], InputScaling(np.zeros(1), np.ones(1), "minmax"), vote="sum",
                 boost={"base_score": [0.0], "tree_output": [0], "link": "logistic", "sum_dtype": "float32"})


@pytest.mark.parametrize("kind", ["axis", "forest"])
@pytest.mark.parametrize("dtype", ["q15", "f32"])
def test_tree_classifier_entry_points(kind, dtype, tmp_path):
    rep = export_model(small_models()[kind], tmp_path, target="native", dtype=dtype, measure=False)
    eps = _check(rep, tmp_path)
    assert find(eps, input="float32", output="class")["name"] == \
        (f"tg_{rep.name}_predict" if dtype == "q15" else f"tg_{rep.name}_predict_f32")


@pytest.mark.parametrize("dtype", ["q15", "f32"])
def test_regression_entry_points(dtype, tmp_path):
    pytest.importorskip("sklearn")
    rep = export_model(_regressor(), tmp_path, target="native", dtype=dtype, measure=False)
    eps = _check(rep, tmp_path)
    assert find(eps, input="float32", output="class") is None
    assert find(eps, input="float32", output="value_int32" if dtype == "q15" else "value_f32") is not None


def test_boosted_q15_has_no_float_entry(tmp_path):
    rep = export_model(_stump(), tmp_path, target="native", measure=False)
    eps = _check(rep, tmp_path)
    assert find(eps, input="float32", output="class") is None
    assert find(eps, input="q15", output="class")["name"] == f"tg_{rep.name}_predict_q15"
