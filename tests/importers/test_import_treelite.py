"""Treelite checkpoints (issue #36): a checkpoint of an XGBoost model and of a scikit-learn forest imports
to the same treegen model as the direct import (same hash; a binary XGBoost model: the same trees and the
base margin one float32 ulp apart, because Treelite recomputes XGBoost's base margin in double), read from
a file (``treegen import``) and from bytes; ``>`` / ``>=`` tests and refusals in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from treegen.core.errors import TreegenError

treelite = pytest.importorskip("treelite")
xgb = pytest.importorskip("xgboost")
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris  # noqa: E402
from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier, RandomForestRegressor  # noqa: E402
from boost_rows import check_rows  # noqa: E402

from treegen.importers import from_sklearn, from_xgboost  # noqa: E402
from treegen.importers.files import import_model, sniff_format  # noqa: E402
from treegen.importers.treelite_json import from_treelite, load_treelite_json, parse_treelite  # noqa: E402


def _checkpoint(tm, tmp_path, name):
    path = tmp_path / f"{name}.tl"
    tm.serialize(str(path))
    return path


@pytest.mark.parametrize("name", ["iris-xgb", "diab-xgb", "diab-rf", "diab-et"])
def test_checkpoint_imports_to_the_same_model(name, tmp_path):
    data, kind = name.split("-")
    X, y = {"iris": load_iris, "diab": load_diabetes}[data](return_X_y=True)
    if kind == "xgb":
        est = (xgb.XGBClassifier if data == "iris" else xgb.XGBRegressor)(n_estimators=15, max_depth=3, n_jobs=1)
        est.fit(X, y)
        tm, direct = treelite.frontend.from_xgboost(est.get_booster()), from_xgboost(est, X=X)
    else:
        est = (RandomForestRegressor if kind == "rf" else ExtraTreesRegressor)(n_estimators=8, max_depth=6,
                                                                              random_state=0).fit(X, y)
        tm, direct = treelite.sklearn.import_model(est), from_sklearn(est, X=X)
    path = _checkpoint(tm, tmp_path, name)
    assert sniff_format(path.read_bytes()[:4096]) == "treelite"
    via_file = import_model(path, X=X)
    via_bytes = from_treelite(tm.serialize_bytes(), X=X)
    assert via_file.hash() == direct.hash() == via_bytes.hash()
    Z = check_rows(parse_treelite(tm), X, n_random=2000, nan=kind == "xgb")
    if direct.task == "regression":
        ref = np.asarray(est.predict(Z), dtype=np.float64)     # XGBoost: float32 values
        assert np.array_equal(via_file.predict(Z).view(np.int64), ref.view(np.int64))
    else:
        assert np.array_equal(via_file.predict(Z), est.predict(Z))


def test_binary_xgboost_differs_by_the_base_margin_only(tmp_path):
    """Treelite stores XGBoost's base margin recomputed in double from the printed base_score; XGBoost
    adds its own float32 margin: the two are one float32 ulp apart here, everything else is equal."""
    X, y = load_breast_cancer(return_X_y=True)
    est = xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1).fit(X, y)
    a = import_model(_checkpoint(treelite.frontend.from_xgboost(est.get_booster()), tmp_path, "bc"), X=X)
    b = from_xgboost(est, X=X)
    assert a.to_dict()["trees"] == b.to_dict()["trees"]
    ba, bb = dict(a.boost), dict(b.boost)
    base_a, base_b = np.float32(ba.pop("base_score")[0]), np.float32(bb.pop("base_score")[0])
    assert ba == bb and base_a != base_b
    assert abs(int(base_a.view(np.int32)) - int(base_b.view(np.int32))) == 1
    # with XGBoost's own margin the checkpoint's model is the direct import
    d = a.to_dict()
    d["boost"]["base_score"] = [float(base_b)]
    from treegen.core.model import Model
    assert Model.from_dict(d).hash() == b.hash()


def test_greater_than_tests_are_swapped_exactly():
    """A dump whose tests read x > t (children and default directions swapped) is the same model."""
    X, y = load_diabetes(return_X_y=True)
    est = xgb.XGBRegressor(n_estimators=6, max_depth=3, n_jobs=1).fit(X, y)
    doc = load_treelite_json(treelite.frontend.from_xgboost(est.get_booster()))
    flipped = json.loads(json.dumps(doc))
    for t in flipped["trees"]:
        for nd in t["nodes"]:
            if "comparison_op" in nd:     # x < t left  ==  x >= t right
                nd["comparison_op"] = ">="
                nd["left_child"], nd["right_child"] = nd["right_child"], nd["left_child"]
                nd["default_left"] = not nd["default_left"]
    Z = check_rows(parse_treelite(doc), X, n_random=500)
    assert from_treelite(flipped).hash() == from_treelite(doc).hash()
    assert np.array_equal(parse_treelite(flipped).raw(Z), parse_treelite(doc).raw(Z))


def test_refusals(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    with pytest.raises(TreegenError, match="averaged .forest. classifier cannot be imported from Treelite"):
        from_treelite(treelite.sklearn.import_model(rf))
    est = xgb.XGBRegressor(n_estimators=2, max_depth=2, n_jobs=1).fit(X, y)
    doc = load_treelite_json(treelite.frontend.from_xgboost(est.get_booster()))
    for mutate, message in (
            (lambda d: d["trees"][1]["nodes"][0].update(split_feature_id=30),
             r"trees\[1\]\.nodes\[0\]\.split_feature_id: feature index 30 is out of range 0\.\.29"),
            (lambda d: d["trees"][0]["nodes"][0].update(left_child=99), r"left_child: child index 99 is out of range"),
            (lambda d: d["trees"][0]["nodes"][0].update(comparison_op="=="), r"comparison_op: '==' cannot"),
            (lambda d: d["trees"][0]["nodes"][1].update(node_id=0), r"node 0 is listed twice"),
            (lambda d: d["trees"][0]["nodes"][0].update(threshold=float("inf")), r"threshold: value inf is not finite"),
            (lambda d: d.update(num_target=2), r"num_target: 2 targets"),
            (lambda d: d.update(postprocessor="exponential"), r"postprocessor 'exponential'"),
            (lambda d: d["trees"][0]["nodes"][0].update(node_type="categorical_test_node"), r"node_type"),
    ):
        bad = json.loads(json.dumps(doc))
        mutate(bad)
        with pytest.raises(TreegenError, match=message) as err:
            parse_treelite(bad)
        assert "\n" not in str(err.value)
    broken = tmp_path / "broken.tl"
    broken.write_bytes(b"\x04\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00" + b"\xff" * 20)
    with pytest.raises(TreegenError, match="broken.tl is not a readable Treelite checkpoint"):
        import_model(broken)
