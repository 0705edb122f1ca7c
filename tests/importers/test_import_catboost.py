"""CatBoost import (issue #36): binary, multiclass and regression models on three datasets each, with and
without NaN (nan_mode Min and Max): the parsed ensemble, the treegen model (after a JSON round trip) and
the model read back from the .cbm and .json files give CatBoost's RawFormulaVal bit for bit and its class
on 20k random rows, the data, rows at every border and +-1 / +-64 float32 ulps around it, and NaN rows;
scale and bias; refusals in one line naming the feature or field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from treegen.core.errors import TreegenError
from treegen.core.model import Model

cb = pytest.importorskip("catboost")
from sklearn.datasets import load_breast_cancer  # noqa: E402
from boost_rows import check_rows  # noqa: E402
from catboost_models import CASES, fit, raw_of  # noqa: E402

from treegen.importers.catboost_json import from_catboost, parse_catboost  # noqa: E402
from treegen.importers.files import import_model  # noqa: E402


def class_of(est, ens, Z):
    if isinstance(est, cb.CatBoostClassifier):
        return np.asarray(est.predict(Z)).reshape(-1)
    return np.asarray(est.predict(Z, prediction_type="Class")).reshape(-1)


def check_model(model, est, ens, Z):
    """The model (after a JSON round trip) == CatBoost bit for bit: raw value, and class."""
    model = Model.from_dict(json.loads(model.to_json()))
    ref = raw_of(est, Z)
    mine = model.predict_value(Z) if model.task == "regression" else model.decision_function(Z)
    mine = np.asarray(mine, dtype=np.float64).reshape(ref.shape)
    assert np.array_equal(mine.view(np.int64), ref.view(np.int64)), \
        f"{int(np.count_nonzero(mine.view(np.int64) != ref.view(np.int64)))} raw values differ"
    if model.task == "classification":
        labels = np.asarray(model.classes, dtype=object)[model.predict_index(Z)]
        assert np.array_equal(labels.astype(str), class_of(est, ens, Z).astype(str))


@pytest.mark.slow
@pytest.mark.parametrize("nan", [False, True], ids=["no-nan", "nan"])
@pytest.mark.parametrize("name,loss", CASES, ids=[c[0] for c in CASES])
def test_catboost_bit_equal(name, loss, nan, tmp_path):
    est, X = fit(name, loss, nan)
    ens = parse_catboost(est)
    Z = check_rows(ens, X, n_random=20000)
    assert Z.shape[0] >= 20000 + 5 * len(set(ens.split_points()))
    ref = raw_of(est, Z)
    assert np.array_equal(ens.raw(Z).reshape(ref.shape).view(np.int64), ref.view(np.int64))
    check_model(from_catboost(est, X=X), est, ens, Z)
    # the files: binary .cbm (converted by catboost) and JSON: the same model as the object
    est.save_model(str(tmp_path / "m.cbm"))
    est.save_model(str(tmp_path / "m.json"), format="json")
    direct = from_catboost(est)
    for path in ("m.cbm", "m.json"):
        m = import_model(tmp_path / path)
        assert m.to_dict()["trees"] == direct.to_dict()["trees"] and m.boost == direct.boost
    check_model(direct, est, ens, Z)      # scaling from the borders: the same float32 tests


def test_nan_mode_max_and_forbidden():
    for mode in ("Max", "Forbidden"):
        est, X = fit("bc", "Logloss", nan=mode == "Max", nan_mode=mode)
        ens = parse_catboost(est)
        Z = check_rows(ens, np.where(np.isnan(X), 0.0, X) if mode == "Forbidden" else X, n_random=2000)
        if mode == "Forbidden":            # CatBoost compares NaN as is: NaN > border is false
            Z[np.random.default_rng(2).random(Z.shape) < 0.05] = np.nan
        check_model(from_catboost(est), est, ens, Z)


def test_nan_directions_are_the_features_own():
    """AsTrue (nan_mode Max) sends NaN to bit 1 (right): planting AsFalse everywhere must break it."""
    est, X = fit("bc", "Logloss", nan=True, nan_mode="Max")
    doc = json.loads(json.dumps(_doc(est)))
    treat = {f["nan_value_treatment"] for f in doc["features_info"]["float_features"]}
    assert "AsTrue" in treat
    ens = parse_catboost(doc)
    Xn = np.where(np.isnan(X), 0.0, X)[:200].copy()
    Xn[np.random.default_rng(1).random(Xn.shape) < 0.3] = np.nan
    assert np.array_equal(ens.raw(Xn)[:, 0].view(np.int64), raw_of(est, Xn).view(np.int64))
    for f in doc["features_info"]["float_features"]:
        f["nan_value_treatment"] = "AsFalse"
    assert not np.array_equal(parse_catboost(doc).raw(Xn)[:, 0], raw_of(est, Xn))


def test_border_ties_go_to_bit_zero():
    """x == border gives bit 0 (CatBoost: x > border); a planted `>=` would move every border row."""
    est, X = fit("diab", "RMSE", nan=False, iterations=10, depth=3)
    ens = parse_catboost(est)
    pts = ens.split_points()
    B = np.repeat(X[:1], len(pts), axis=0).astype(np.float32).astype(np.float64)
    for i, (f, t) in enumerate(pts):
        B[i, f] = t
    assert np.array_equal(ens.raw(B)[:, 0].view(np.int64), raw_of(est, B).view(np.int64))
    ens.op = "<"            # the bug: ties to the other side
    assert not np.array_equal(ens.raw(B)[:, 0], raw_of(est, B))


@pytest.mark.parametrize("name,loss", [("diab", "RMSE"), ("iris", "MultiClass"), ("bc", "Logloss")])
def test_scale_and_bias_after_the_trees(name, loss):
    est, X = fit(name, loss, nan=False, iterations=20, depth=4)
    dim = 3 if loss == "MultiClass" else 1
    est.set_scale_and_bias(0.7312, [11.3 + k for k in range(dim)] if dim > 1 else 11.3)
    ens = parse_catboost(est)
    assert ens.scale == 0.7312 and ens.bias[0] == 11.3
    Z = check_rows(ens, X, n_random=3000)
    check_model(from_catboost(est), est, ens, Z)
    # the bias added first (the other libraries' base score) is not CatBoost's result
    ens.base_score, ens.bias = list(ens.bias), None
    ens.scale = 1.0
    assert not np.array_equal(ens.raw(Z).reshape(-1), (raw_of(est, Z) - 0).reshape(-1))


def _doc(est):
    from treegen.importers.catboost_json import load_catboost_json
    return load_catboost_json(est)


def test_refusals_name_the_feature_or_field(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    Xc = np.column_stack([X[:, :3], (X[:, 3] > 600).astype(int).astype(str)]).astype(object)
    Xc[:, :3] = Xc[:, :3].astype(float)
    import pandas as pd
    df = pd.DataFrame(Xc, columns=["a", "b", "c", "colour"])
    df[["a", "b", "c"]] = df[["a", "b", "c"]].astype(float)
    est = cb.CatBoostClassifier(iterations=3, depth=2, verbose=0, thread_count=1, allow_writing_files=False)
    est.fit(df, y, cat_features=["colour"])
    with pytest.raises(TreegenError, match=r"categorical feature 'colour' \(index 3\) cannot be imported"):
        from_catboost(est)
    est = cb.CatBoostRegressor(iterations=3, depth=2, verbose=0, thread_count=1, loss_function="Poisson",
                               allow_writing_files=False).fit(X[:, :4], np.arange(len(X)) % 5)
    with pytest.raises(TreegenError, match="loss 'Poisson' cannot be imported"):
        from_catboost(est)
    est = cb.CatBoostRegressor(iterations=3, depth=2, verbose=0, thread_count=1, grow_policy="Depthwise",
                               allow_writing_files=False).fit(X[:, :4], X[:, 5])
    with pytest.raises(TreegenError, match="non-symmetric trees"):
        from_catboost(est)
    good, _ = fit("diab", "RMSE", nan=False, iterations=3, depth=2)
    doc = _doc(good)
    for mutate, message in (
            (lambda d: d["oblivious_trees"][1]["splits"][0].update(float_feature_index=99),
             r"oblivious_trees\[1\]\.splits\[0\]\.float_feature_index: feature index 99 is out of range 0\.\.9"),
            (lambda d: d["oblivious_trees"][0]["leaf_values"].pop(),
             r"oblivious_trees\[0\]\.leaf_values: 3 values, expected 4 leaves x 1 outputs"),
            (lambda d: d["oblivious_trees"][2]["splits"][1].update(border="0.5"),
             r"oblivious_trees\[2\]\.splits\[1\]\.border: value must be a number, got a string"),
            (lambda d: d["oblivious_trees"][0]["splits"][0].update(border=1e300),
             r"border: 1e\+300 is outside the float32 range"),
            (lambda d: d["oblivious_trees"][0]["leaf_values"].__setitem__(0, float("nan")),
             r"leaf_values\[0\]: value nan is not finite"),
            (lambda d: d["features_info"]["float_features"][2].update(nan_value_treatment="Sometimes"),
             r"float_features\[2\]\.nan_value_treatment: unknown value 'Sometimes'"),
            (lambda d: d["oblivious_trees"][0]["splits"][0].update(split_type="OnlineCtr"),
             r"split_type: 'OnlineCtr' splits cannot be imported"),
            (lambda d: d.update(scale_and_bias=[1.0, [0.0, 1.0]]), r"scale_and_bias\[1\]: 2 bias values for 1 outputs"),
            (lambda d: d["oblivious_trees"][0].update(splits=[{}] * 17), r"splits: has 17 entries, expected 0\.\.16"),
    ):
        bad = json.loads(json.dumps(doc))
        mutate(bad)
        with pytest.raises(TreegenError, match=message) as err:
            parse_catboost(bad)
        assert "\n" not in str(err.value)
    (tmp_path / "broken.cbm").write_bytes(b"CBM1" + b"\x00" * 40)
    with pytest.raises(TreegenError, match="broken.cbm is not a readable CatBoost model"):
        from_catboost(tmp_path / "broken.cbm")
    with pytest.raises(TreegenError, match="not fitted"):
        from_catboost(cb.CatBoostClassifier())
