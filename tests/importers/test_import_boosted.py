"""Imported boosted and regression tree models (issue #25): the parsed ensemble and the treegen model
reproduce each library's own prediction bit for bit on random rows, rows +-1 and +-64 float32 ulps
around every threshold, and rows with NaN (libraries that route missing values); bad input is refused
with one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from treegen.core.errors import TreegenError
from treegen.core.model import Model

sklearn = pytest.importorskip("sklearn")
from sklearn import ensemble as E  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris  # noqa: E402
from sklearn.tree import DecisionTreeRegressor  # noqa: E402
from boost_rows import check_rows  # noqa: E402

from treegen.importers import from_lightgbm, from_sklearn, from_xgboost  # noqa: E402
from treegen.importers.ensemble import le_threshold  # noqa: E402
from treegen.importers.lightgbm_text import parse_lightgbm  # noqa: E402
from treegen.importers.sklearn_values import parse_sklearn_values  # noqa: E402
from treegen.importers.xgboost_json import parse_xgboost  # noqa: E402



def _data(name):
    X, y = {"bc": load_breast_cancer, "iris": load_iris, "diab": load_diabetes}[name](return_X_y=True)
    return X[::2], y[::2]


def _bc_nan():
    X, y = _data("bc")
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    return X, y


def _roundtrip(model):
    return Model.from_dict(json.loads(model.to_json()))


def _assert_same(model, est, Z, raw_ref):
    """The model (after a JSON round trip) gives the library's raw score / value bit for bit and its
    class for every row."""
    model = _roundtrip(model)
    if model.task == "regression":
        ref = np.asarray(est.predict(Z), dtype=np.float64)
        assert np.array_equal(model.predict(Z).view(np.int64), ref.view(np.int64))
        return
    raw = model.decision_function(Z).reshape(len(Z), -1)
    if model.boost["sum_dtype"] == "float32":
        raw = raw.astype(np.float32)
        raw_ref = np.asarray(raw_ref, dtype=np.float32).reshape(raw.shape)
        assert np.array_equal(raw.view(np.int32), raw_ref.view(np.int32))
    else:
        raw_ref = np.asarray(raw_ref, dtype=np.float64).reshape(raw.shape)
        assert np.array_equal(raw.view(np.int64), raw_ref.view(np.int64))
    assert np.array_equal(model.predict(Z), est.predict(Z))


# ---------------------------------------------------------------------------------------------- XGBoost
xgb = pytest.importorskip("xgboost")


@pytest.mark.parametrize("name,kind", [("bc-nan", "clf"), ("iris", "clf"), ("diab", "reg")])
def test_xgboost_bit_equal(name, kind):
    X, y = _bc_nan() if name == "bc-nan" else _data(name)
    est = (xgb.XGBClassifier if kind == "clf" else xgb.XGBRegressor)(n_estimators=12, max_depth=3, random_state=0, n_jobs=1)
    est.fit(X, y)
    ens = parse_xgboost(est)
    Z = check_rows(ens, X)   # XGBoost DMatrix refuses infinite inputs
    margin = est.get_booster().predict(xgb.DMatrix(Z), output_margin=True)
    assert np.array_equal(ens.raw(Z).astype(np.float32).reshape(margin.shape).view(np.int32), margin.view(np.int32))
    _assert_same(from_xgboost(est, X=X), est, Z, margin)
    _assert_same(from_xgboost(est), est, Z, margin)     # without data: scaling from the thresholds


def test_xgboost_files_json_and_ubj(tmp_path):
    X, y = _data("bc")
    est = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X, y)
    est.get_booster().save_model(tmp_path / "m.json")
    est.get_booster().save_model(tmp_path / "m.ubj")
    a, b = from_xgboost(tmp_path / "m.json"), from_xgboost(str(tmp_path / "m.ubj"))
    assert a.to_dict()["trees"] == b.to_dict()["trees"] and a.boost == b.boost
    assert np.array_equal(a.predict(X), est.predict(X))
    # the base margin comes from XGBoost (the JSON prints base_score to 7 digits only): margins bit-equal
    margin = est.get_booster().predict(xgb.DMatrix(X), output_margin=True)
    assert np.array_equal(a.decision_function(X).astype(np.float32).view(np.int32), margin.view(np.int32))
    assert a.metadata["decision_margin"] > 0


def test_xgboost_refusals(tmp_path):
    X, y = _data("bc")
    doc = json.loads(xgb.XGBClassifier(n_estimators=1, max_depth=1, n_jobs=1).fit(X, y).get_booster().save_raw("json"))
    poisson = json.loads(json.dumps(doc))
    poisson["learner"]["objective"]["name"] = "count:poisson"
    with pytest.raises(TreegenError, match="objective 'count:poisson' cannot be imported"):
        from_xgboost(poisson)
    dart = json.loads(json.dumps(doc))
    dart["learner"]["gradient_booster"]["name"] = "dart"
    with pytest.raises(TreegenError, match="booster 'dart'"):
        from_xgboost(dart)
    cat = json.loads(json.dumps(doc))
    cat["learner"]["gradient_booster"]["model"]["trees"][0]["split_type"][0] = 1
    with pytest.raises(TreegenError, match="categorical splits cannot be imported"):
        from_xgboost(cat)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TreegenError, match="not valid JSON"):
        from_xgboost(bad)
    with pytest.raises(TreegenError, match="not an XGBoost model"):
        from_xgboost({"version": [3]})


# ---------------------------------------------------------------------------------------------- LightGBM
lgb = pytest.importorskip("lightgbm")


@pytest.mark.parametrize("name,kind", [("bc-nan", "clf"), ("iris", "clf"), ("diab", "reg")])
def test_lightgbm_bit_equal(name, kind, tmp_path):
    X, y = _bc_nan() if name == "bc-nan" else _data(name)
    est = (lgb.LGBMClassifier if kind == "clf" else lgb.LGBMRegressor)(n_estimators=12, num_leaves=8, verbose=-1, n_jobs=1)
    est.fit(X, y)
    ens = parse_lightgbm(est)
    Z = check_rows(ens, X, inf=True)
    raw = est.booster_.predict(Z, raw_score=True)
    assert np.array_equal(ens.raw(Z).reshape(raw.shape).view(np.int64), raw.view(np.int64))
    _assert_same(from_lightgbm(est, X=X), est, Z, raw)
    path = tmp_path / "model.txt"
    est.booster_.save_model(path)
    assert from_lightgbm(path).to_dict()["trees"] == from_lightgbm(est).to_dict()["trees"]


def test_lightgbm_refusals(tmp_path):
    X, y = _data("diab")
    est = lgb.LGBMRegressor(n_estimators=2, objective="poisson", verbose=-1, n_jobs=1).fit(X, y)
    with pytest.raises(TreegenError, match="objective 'poisson' cannot be imported"):
        from_lightgbm(est)
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(TreegenError, match="not a LightGBM model text"):
        from_lightgbm(tmp_path / "x.txt")
    with pytest.raises(TreegenError, match="not fitted"):
        from_lightgbm(lgb.LGBMClassifier())


# ---------------------------------------------------------------------------------------------- scikit-learn
SK_CASES = [
    ("diab", lambda: DecisionTreeRegressor(max_depth=6, random_state=0), True),
    ("diab", lambda: E.RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0), True),
    ("diab", lambda: E.ExtraTreesRegressor(n_estimators=5, max_depth=6, random_state=0), True),
    ("bc", lambda: E.GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0), False),
    ("iris", lambda: E.GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0), False),
    ("diab", lambda: E.GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0), False),
    ("bc-nan", lambda: E.HistGradientBoostingClassifier(max_iter=10, random_state=0), True),
    ("iris", lambda: E.HistGradientBoostingClassifier(max_iter=5, random_state=0), True),
    ("diab", lambda: E.HistGradientBoostingRegressor(max_iter=10, random_state=0), True),
]


@pytest.mark.parametrize("name,make,nan", SK_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(SK_CASES)])
def test_sklearn_values_bit_equal(name, make, nan):
    X, y = _bc_nan() if name == "bc-nan" else _data(name)
    est = make().fit(X, y)
    ens = parse_sklearn_values(est)
    Z = check_rows(ens, X, nan=nan, inf="HistGradient" in type(est).__name__)
    if ens.task == "regression":
        ref = est.predict(Z)
        assert np.array_equal(ens.raw(Z)[:, 0].view(np.int64), ref.view(np.int64))
        _assert_same(from_sklearn(est, X=X), est, Z, None)
    else:
        ref = est.decision_function(Z)
        assert np.array_equal(ens.raw(Z).reshape(ref.shape).view(np.int64), ref.view(np.int64))
        _assert_same(from_sklearn(est, X=X), est, Z, ref)


def test_sklearn_values_refusals():
    X, y = _data("diab")
    with pytest.raises(TreegenError, match="loss='poisson' cannot be imported"):
        from_sklearn(E.HistGradientBoostingRegressor(max_iter=2, loss="poisson").fit(X, y))
    with pytest.raises(TreegenError, match="not fitted"):
        from_sklearn(E.GradientBoostingRegressor())
    with pytest.raises(TreegenError, match="vote does not apply"):
        from_sklearn(DecisionTreeRegressor(max_depth=2).fit(X, y), vote="soft")


def test_le_threshold_exact():
    """x < t and x <= t (float32 or double t) in the <= form, for the float32 neighbours of t."""
    rng = np.random.default_rng(3)
    for t in np.concatenate([rng.normal(size=50) * 10.0 ** rng.integers(-6, 6, 50), [0.0, -0.0, 1.0]]):
        for thr in (float(np.float32(t)), float(t)):
            le_lt, le_le = np.float32(le_threshold(thr, "<")), np.float32(le_threshold(thr, "<="))
            x = np.float32(thr)
            xs = [x]
            for _ in range(3):
                xs += [np.nextafter(xs[-1], np.float32(np.inf))]
            xs += [np.nextafter(x, np.float32(-np.inf)), np.nextafter(np.nextafter(x, np.float32(-np.inf)),
                                                                      np.float32(-np.inf))]
            for v in xs:
                assert (v <= le_lt) == (float(v) < thr)
                assert (v <= le_le) == (float(v) <= thr)


# ---------------------------------------------------------------------------------------------- ONNX
def test_onnx_gradient_boosting_bit_equal(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    skl2onnx = pytest.importorskip("skl2onnx")
    from treegen.importers import from_onnx
    from treegen.importers.files import import_model
    from treegen.importers.onnx_ml import onnx_tree_node, parse_onnx

    for name, est in (("bc", E.GradientBoostingClassifier(n_estimators=8, max_depth=2, random_state=0)),
                      ("iris", E.GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0)),
                      ("diab", E.GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0))):
        X, y = _data(name)
        est.fit(X, y)
        m = skl2onnx.to_onnx(est, X[:1].astype(np.float32),
                             options={"zipmap": False} if hasattr(est, "classes_") else None)
        ens = parse_onnx(m)
        Z = check_rows(ens, X)
        raw_m = onnx.ModelProto()
        raw_m.CopyFrom(m)
        for a in onnx_tree_node(raw_m).attribute:    # the raw scores: post_transform NONE
            if a.name == "post_transform":
                a.s = b"NONE"
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(raw_m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs = sess.run(None, {sess.get_inputs()[0].name: Z.astype(np.float32)})
        ref = outs[0].reshape(len(Z), -1) if ens.task == "regression" else outs[1][:, -ens.n_outputs:]
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(m.SerializeToString())
        model = _roundtrip(import_model(path))
        mine = (model.decision_function(Z) if ens.task == "classification" else model.predict(Z))
        mine = np.asarray(mine, dtype=np.float32).reshape(ref.shape)
        assert np.array_equal(mine.view(np.int32), ref.astype(np.float32).view(np.int32))
        assert model.to_dict()["trees"] == from_onnx(m).to_dict()["trees"]
        if ens.task == "classification":
            sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            label = sess.run(None, {sess.get_inputs()[0].name: Z.astype(np.float32)})[0]
            assert np.array_equal(model.predict(Z).astype(np.int64), label.astype(np.int64))
