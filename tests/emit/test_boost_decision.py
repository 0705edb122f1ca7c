"""The class decision of imported boosted classifiers is the source library's own, also for raw scores in
the band where ``raw > 0`` would differ (issue #25): XGBoost (float32 sigmoid: raw > 0x1.8p-24),
LightGBM (double sigmoid: raw > 0x1.8p-53), scikit-learn GradientBoosting (raw >= 0), onnxruntime
(raw > 0.5 when no weight is negative). Each model is crafted so that data rows land on the band's
boundary floats; the library's ``predict`` == the treegen model == host-compiled float32 C == the
Q15 C (rows whose integer sums are exact). Multiclass: the softmax tie gap bounds where the library's
argmax of probabilities may differ from the first largest raw score."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import treegen
from treegen.core.errors import ModelFileError
from treegen.core.model import Model
from treegen.core.native import STRICT_CFLAGS

pytest.importorskip("sklearn")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
from sklearn.datasets import load_breast_cancer, load_iris  # noqa: E402
from sklearn.ensemble import GradientBoostingClassifier  # noqa: E402

from treegen.importers import from_lightgbm, from_sklearn, from_xgboost  # noqa: E402
from treegen.emit.lower_boost import decision_q, lower_boost_q15, predict_class_q15, predict_raw_q15  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

U24 = 2.0 ** -24
U53 = 2.0 ** -53

DRIVER = r"""
#include <stdio.h>
#include "{n}.h"
int main(int argc, char **argv)
{{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    {T} x[TG_{N}_N_FEATURES];
    int32_t c;
    if (argc != 3 || in == NULL || out == NULL) return 2;
    while (fread(x, sizeof x, 1, in) == 1) {{
        c = (int32_t)tg_{n}_{fn}(x);
        fwrite(&c, sizeof c, 1, out);
    }}
    fclose(in);
    return fclose(out) != 0;
}}
"""


def _c_classes(model, rows, tmp_path, name: str, dtype: str) -> np.ndarray:
    d = tmp_path / f"{name}_{dtype}"
    treegen.export_model(model, d, target="cortex-m4", dtype=dtype, name=name, measure=False)
    q15 = dtype == "q15"
    (d / "drv.c").write_text(DRIVER.format(n=name, N=name.upper(), T="int16_t" if q15 else "float",
                                           fn="predict_q15" if q15 else "predict"))
    subprocess.run(["gcc", *STRICT_CFLAGS, "-O2", "-I", str(d), str(d / f"{name}.c"), str(d / "drv.c"), "-o",
                    str(d / "drv")], check=True)
    (model.scaling.to_q15(rows).astype(np.int16) if q15 else rows.astype(np.float32)).tofile(d / "in.bin")
    subprocess.run([str(d / "drv"), str(d / "in.bin"), str(d / "out.bin")], check=True)
    return np.fromfile(d / "out.bin", dtype=np.int32).astype(np.int64)


def _check_all(model, lib_class, X, tmp_path, name, band):
    """library == model (after a JSON round trip) == float32 C == Q15 C on every row; ``band``: the raw
    values the rows must reach (each in the band or on its boundary)."""
    model = Model.from_dict(json.loads(model.to_json()))
    raw = model.decision_function(X)
    assert set(band) <= set(raw.tolist()), (band, sorted(set(raw.tolist())))
    mine = model.predict_index(X)
    assert np.array_equal(mine, lib_class)
    assert (raw > 0).astype(int).tolist() != mine.tolist()          # raw > 0 would be wrong on these rows
    assert np.array_equal(_c_classes(model, X, tmp_path, name, "f32"), lib_class)
    tq = lower_boost_q15(model)
    Q = model.scaling.to_q15(X)
    py_q = predict_class_q15(tq, predict_raw_q15(tq, Q))
    assert np.array_equal(_c_classes(model, X, tmp_path, name, "q15"), py_q)
    exact = np.ldexp(predict_raw_q15(tq, Q)[:, 0].astype(np.float64), -tq.frac_bits) == raw
    assert exact[np.isin(raw, band)].all()                            # the band rows' sums are exact in Q
    assert np.array_equal(py_q[exact], lib_class[exact])
    return model


def _bc(n=120):
    X, y = load_breast_cancer(return_X_y=True)
    return X[:n], y[:n]


def test_xgboost_sigmoid_band(tmp_path):
    X, y = _bc()
    est = xgb.XGBClassifier(n_estimators=1, max_depth=2, n_jobs=1, base_score=0.5).fit(X, y)
    doc = json.loads(est.get_booster().save_raw("json"))
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    leaves = [i for i, c in enumerate(tree["left_children"]) if c == -1]
    band = [U24, 1.5 * U24, float(np.nextafter(np.float32(1.5 * U24), np.float32(1))), 2 * U24][:len(leaves)]
    for i, v in zip(leaves, band):
        tree["split_conditions"][i] = v
        tree["base_weights"][i] = v
    path = tmp_path / "xb.json"
    path.write_text(json.dumps(doc))
    lib = xgb.XGBClassifier()
    lib.load_model(path)
    lib_class = lib.predict(X).astype(np.int64)
    model = from_xgboost(lib, X=X)
    assert model.boost["decision_threshold"] == {"value": 1.5 * U24, "rule": ">"}
    assert np.array_equal(model.decision_function(X).astype(np.float32),
                          lib.predict(X, output_margin=True).astype(np.float32))
    hit = [v for v in band if v in set(model.decision_function(X).tolist())]
    assert U24 in hit and 1.5 * U24 in hit
    _check_all(model, lib_class, X, tmp_path, "xb", [U24, 1.5 * U24])
    assert decision_q(1.5 * U24, ">", 30) == 96 and decision_q(0.0, ">=", 30) == -1


def test_lightgbm_sigmoid_band(tmp_path):
    X, y = _bc()
    est = lgb.LGBMClassifier(n_estimators=1, num_leaves=4, verbose=-1, n_jobs=1, min_child_samples=5).fit(X, y)
    text = re.sub(r"tree_sizes=[^\n]*\n", "", est.booster_.model_to_string())
    band = [U53, 1.5 * U53, float(np.nextafter(1.5 * U53, 1.0)), -U53]
    n = len(re.search(r"leaf_value=([^\n]*)", text).group(1).split())
    text = re.sub(r"leaf_value=[^\n]*", "leaf_value=" + " ".join(repr(v) for v in band[:n]), text, count=1)
    est._Booster = lgb.Booster(model_str=text)          # LGBMClassifier.predict: argmax of [1 - p, p]
    lib_class = est.predict(X).astype(np.int64)
    model = from_lightgbm(est._Booster, X=X)
    assert model.boost["decision_threshold"] == {"value": 1.5 * U53, "rule": ">"}
    assert np.array_equal(model.decision_function(X), est._Booster.predict(X, raw_score=True))
    _check_all(model, lib_class, X, tmp_path, "lb", [U53, 1.5 * U53])


def test_sklearn_gradient_boosting_raw_zero_is_class_1(tmp_path):
    X, y = _bc()
    est = GradientBoostingClassifier(n_estimators=1, max_depth=1, learning_rate=1.0, random_state=0).fit(X, y)
    init = float(est._raw_predict_init(X[:1])[0, 0])
    value = est.estimators_[0, 0].tree_.value
    value[1, 0, 0] = -init                               # raw = init + 1.0 * (-init) = 0 exactly at one leaf
    assert np.count_nonzero(est.decision_function(X) == 0.0) > 0
    model = from_sklearn(est, X=X)
    assert model.boost["decision_threshold"] == {"value": 0.0, "rule": ">="}
    _check_all(model, est.predict(X).astype(np.int64), X, tmp_path, "gb", [0.0])


def test_onnx_positive_weights_rule(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from treegen.importers import from_onnx
    attrs = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], class_treeids=[0, 0],
                 class_nodeids=[1, 2], class_ids=[1, 1], class_weights=[0.25, 0.75],
                 classlabels_int64s=[0, 1], post_transform="LOGISTIC")
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "prob"], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                               helper.make_tensor_value_info("prob", TensorProto.FLOAT, [None, 2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    X = np.linspace(0.0, 1.0, 11).reshape(-1, 1)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    lib_class = sess.run(None, {"X": X.astype(np.float32)})[0].astype(np.int64)
    model = from_onnx(m, X=X)
    assert model.boost["decision_threshold"] == {"value": 0.5, "rule": ">"}
    _check_all(model, lib_class, X, tmp_path, "ob", [0.25, 0.75])


def test_xgboost_softmax_ties_within_the_gap():
    X, y = load_iris(return_X_y=True)
    est = xgb.XGBClassifier(n_estimators=1, max_depth=2, n_jobs=1).fit(X, y)
    doc = json.loads(est.get_booster().save_raw("json"))
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    # margins (base 0): class 1 = 0.25 everywhere; class 0 = 0.25 - 2^-26 or 0.25 - 2^-24 (a gap of a quarter
    # and of one ulp of 1.0); class 2 further below
    for t, vals in zip(trees, ([0.25 - U24 / 4, 0.25 - U24], [0.25] * 3, [0.25 - 4 * U24, 0.25 - 1e-3, 0.0])):
        leaves = [i for i, c in enumerate(t["left_children"]) if c == -1]
        for i, v in zip(leaves, vals * 3):
            t["split_conditions"][i] = v
    rng = np.random.default_rng(0)
    Z = np.vstack([X, rng.uniform(X.min(0), X.max(0), (3000, 4))])
    lib = xgb.XGBClassifier()
    lib.load_model(bytearray(json.dumps(doc).encode()))
    model = from_xgboost(lib)
    gap_bound = model.metadata["class_tie_gap"]
    assert gap_bound == 2.0 ** -22
    raw = model.decision_function(Z)
    assert np.array_equal(raw.astype(np.float32), lib.predict(Z, output_margin=True))
    lib_class, mine = lib.predict(Z), model.predict_index(Z)
    differ = lib_class != mine
    assert differ.any()                                  # the library's softmax does tie distinct raw scores
    top = raw.max(axis=1)
    gap = top - raw[np.arange(len(Z)), lib_class]
    assert np.all(lib_class[differ] < mine[differ]) and np.all(gap[differ] < gap_bound)
    assert gap[differ].max() <= 1.5 * U24                # measured: ties up to 1.5 ulp of 1.0
    # probabilities: the model's double softmax vs XGBoost's float32 one
    assert np.abs(model.predict_proba(Z) - lib.predict_proba(Z)).max() < 2.0 ** -22


def test_decision_threshold_in_the_model_file():
    X, y = _bc(60)
    model = from_xgboost(xgb.XGBClassifier(n_estimators=2, max_depth=1, n_jobs=1).fit(X, y))
    d = json.loads(model.to_json())
    old = json.loads(model.to_json())
    del old["boost"]["decision_threshold"]
    assert Model.from_dict(old).to_json() == json.dumps(old, indent=1)   # files without it: unchanged
    assert Model.from_dict(old).decision_threshold == (0.0, ">")
    for bad, msg in (({"value": 0.1, "rule": ">"}, "not a float32 value"),
                     ({"value": 0.0, "rule": "<"}, "rule: must be one of"),
                     ({"value": 0.0}, "rule: missing"), ({"value": 0.0, "rule": ">", "x": 1}, "x: unknown field")):
        d["boost"]["decision_threshold"] = bad
        with pytest.raises(ModelFileError, match=msg):
            Model.from_dict(d)


def test_lightgbm_softmax_ties_within_the_gap():
    X, y = load_iris(return_X_y=True)
    est = lgb.LGBMClassifier(n_estimators=1, num_leaves=2, verbose=-1, n_jobs=1, min_child_samples=5).fit(X, y)
    text = re.sub(r"tree_sizes=[^\n]*\n", "", est.booster_.model_to_string())
    # raw scores (from 0): class 1 = 0.25 everywhere, class 0 = 0.25 - 2^-55 or 0.25 - 2^-53, class 2 lower
    vals = iter([[0.25 - U53 / 4, 0.25 - U53], [0.25, 0.25], [0.25 - 4 * U53, 0.0]])
    text = re.sub(r"leaf_value=[^\n]*", lambda m: "leaf_value=" + " ".join(repr(v) for v in next(vals)), text)
    est._Booster = lgb.Booster(model_str=text)
    model = from_lightgbm(est._Booster, X=X)
    assert model.metadata["class_tie_gap"] == 2.0 ** -51
    rng = np.random.default_rng(0)
    Z = np.vstack([X, rng.uniform(X.min(0), X.max(0), (500, 4))])
    raw = model.decision_function(Z)
    assert np.array_equal(raw, est._Booster.predict(Z, raw_score=True))
    lib_class, mine = est.predict(Z), model.predict_index(Z)
    differ = lib_class != mine
    assert differ.any()                                  # LightGBM's double softmax ties distinct raw scores
    gap = raw.max(axis=1) - raw[np.arange(len(Z)), lib_class]
    assert np.all(lib_class[differ] < mine[differ]) and np.all(gap[differ] < 2.0 ** -51)
    assert np.abs(model.predict_proba(Z) - est.predict_proba(Z)).max() < 1e-15


def test_xgboost_logitraw_compares_the_margin_with_one_half():
    X, y = _bc(60)
    est = xgb.XGBClassifier(n_estimators=2, max_depth=1, n_jobs=1, objective="binary:logitraw").fit(X, y)
    bm = np.linspace(-1, 1, len(X)).astype(np.float32)      # margins moved across (0, 0.5]
    margin = est.predict(X, output_margin=True, base_margin=bm)
    assert np.count_nonzero((margin > 0) & (margin <= 0.5)) >= 3
    assert np.array_equal(est.predict(X, base_margin=bm), (margin > 0.5).astype(int))   # the library's rule
    model = from_xgboost(est)
    assert model.boost["decision_threshold"] == {"value": 0.5, "rule": ">"}
    raw = model.decision_function(X)
    assert np.array_equal(model.predict_index(X), est.predict(X)) and np.array_equal(
        model.class_of_raw(raw[:, None]), (raw > 0.5).astype(int))


def _symmetric_three_classes():
    """Classes 0 and 1 on the very same rows (each row once with each label), class 2 apart: every
    library grows identical trees for outputs 0 and 1, so their raw scores tie exactly on every row."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(60, 3))
    B = rng.normal(size=(60, 3)) + 2
    X = np.vstack([A, A, B]).astype(np.float32).astype(np.float64)
    return X, np.array([0] * 60 + [1] * 60 + [2] * 60)


def _onnx_gb():
    skl2onnx = pytest.importorskip("skl2onnx")
    pytest.importorskip("onnxruntime")
    from treegen.importers.onnx_ml import parse_onnx  # noqa: F401  (the importer used below)

    X, y = _symmetric_three_classes()
    est = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    return est, skl2onnx.to_onnx(est, X[:1].astype(np.float32), options={"zipmap": False})


TIE_CASES = ["xgboost", "lightgbm", "sklearn-gb", "sklearn-hgb", "onnx"]


@pytest.mark.parametrize("source", TIE_CASES)
def test_c_class_is_the_library_class_on_exact_ties(source, tmp_path):
    """Every boosted importer: on rows where the two largest raw scores are exactly equal, the library
    takes the lower class index, and so do the model, the float32 C and the Q15 C (issue #32: the
    boosted f32 C taking the *last* largest class on a tie went unnoticed)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _symmetric_three_classes()
    if source == "onnx":
        import onnxruntime as ort

        from treegen.importers.onnx_ml import from_onnx

        _, onx = _onnx_gb()
        path = tmp_path / "m.onnx"
        path.write_bytes(onx.SerializeToString())
        model = from_onnx(path, X=X)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(onx.SerializeToString(), so, providers=["CPUExecutionProvider"])
        lib = np.asarray(sess.run(None, {sess.get_inputs()[0].name: X.astype(np.float32)})[0], dtype=np.int64)
    else:
        est, imp = {"xgboost": (xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1), from_xgboost),
                    "lightgbm": (lgb.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5, verbose=-1,
                                                    n_jobs=1), from_lightgbm),
                    "sklearn-gb": (GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0),
                                   from_sklearn),
                    "sklearn-hgb": (HistGradientBoostingClassifier(max_iter=5, random_state=0), from_sklearn)}[source]
        est.fit(X, y)
        model = imp(est, X=X)
        lib = np.asarray(est.predict(X), dtype=np.int64)
    raw = np.asarray(model.decision_function(X))
    tie = (raw[:, 0] == raw[:, 1]) & (raw[:, 0] >= raw[:, 2])
    assert tie.sum() >= 10 and np.all(lib[tie] == 0)                 # exact ties, the library takes the lower
    assert np.array_equal(model.predict_index(X), lib)
    assert np.array_equal(_c_classes(model, X, tmp_path, "tie", "f32"), lib)
    tq = lower_boost_q15(model)
    q = predict_raw_q15(tq, model.scaling.to_q15(X))
    qtie = (q[:, 0] == q[:, 1]) & (q[:, 0] >= q[:, 2])
    assert qtie.sum() >= 10
    c_q15 = _c_classes(model, X, tmp_path, "tie", "q15")
    assert np.all(c_q15[qtie] == 0) and np.array_equal(c_q15, predict_class_q15(tq, q))


@pytest.mark.parametrize("rule", [">", ">="])
def test_decision_q_is_the_rule_on_every_integer_sum(rule):
    """decision_q(v, rule, F): raw_q > T  <=>  raw_q * 2^-F rule v, for the int32 sums around T, on the
    libraries' thresholds (XGBoost 0x1.8p-24, LightGBM 0x1.8p-53: not a multiple of 2^-F, where floor and
    ceil differ), 0, 0.5 and values between grid points of either sign."""
    for v in (1.5 * 2.0 ** -24, 1.5 * 2.0 ** -53, 0.0, 0.5, 0.3, -0.3, -1.5 * 2.0 ** -53, 2.0 ** -30):
        for F in (10, 20, 26, 30):
            T = decision_q(v, rule, F)
            for raw_q in range(T - 3, T + 4):
                x = np.ldexp(float(raw_q), -F)
                assert (raw_q > T) == ((x > v) if rule == ">" else (x >= v)), (v, F, raw_q, T)
