"""``treegen import FILE -o MODEL.json`` (issue #25): XGBoost JSON/UBJSON and LightGBM model text files,
pickles only with --trust-pickle; bad files -> one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_user_error, run_cli
from treegen.core.model import load

pytest.importorskip("sklearn")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
joblib = pytest.importorskip("joblib")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import GradientBoostingRegressor

    d = tmp_path_factory.mktemp("import")
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[::3], y[::3]
    xc = xgb.XGBClassifier(n_estimators=6, max_depth=2, n_jobs=1).fit(X, y)
    xc.get_booster().save_model(d / "x.json")
    xc.get_booster().save_model(d / "x.ubj")
    lc = lgb.LGBMClassifier(n_estimators=6, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    lc.booster_.save_model(d / "l.txt")
    gb = GradientBoostingRegressor(n_estimators=4, max_depth=2).fit(X, y.astype(float))
    joblib.dump(gb, d / "gb.joblib")
    header = ",".join([f"f{i}" for i in range(X.shape[1])] + ["label"])
    np.savetxt(d / "train.csv", np.column_stack([X, y]), delimiter=",", header=header, comments="")
    return d, X, y, xc, lc, gb


def test_import_xgboost_and_lightgbm_files(files, capsys):
    d, X, y, xc, lc, _ = files
    for src, est in (("x.json", xc), ("x.ubj", xc), ("l.txt", lc)):
        code, out, err = run_cli(capsys, ["import", d / src, "-o", d / f"{src}.model.json",
                                          "--data", d / "train.csv"])
        assert code == 0, err
        assert "trees, 30 features, 2 classes, vote sum" in out and "library decision: class 1 iff raw >" in out
        model = load(d / f"{src}.model.json")
        assert np.array_equal(model.predict(X), est.predict(X))
        assert model.scaling.method == "minmax" and model.handles_missing
    code, out, err = run_cli(capsys, ["export", d / "x.json.model.json", "--target", "cortex-m4", "--dtype", "f32",
                                      "-o", d / "x_c", "--data", d / "train.csv"])
    assert code == 0, err
    assert "exact           yes" in out and "raw scores bit-equal on 100.00 % of 190 rows, classes 100.00 %" in out


def test_pickles_need_trust(files, capsys):
    d, X, _, _, _, gb = files
    assert_user_error(capsys, ["import", d / "gb.joblib", "-o", d / "gb.json"], "pass --trust-pickle")
    assert not (d / "gb.json").exists()
    code, out, err = run_cli(capsys, ["import", d / "gb.joblib", "--trust-pickle", "-o", d / "gb.json"])
    assert code == 0, err
    assert "regression" in out
    assert np.array_equal(load(d / "gb.json").predict(X), gb.predict(X))


def test_bad_files(files, capsys, tmp_path):
    d = files[0]
    assert_user_error(capsys, ["import", d / "train.csv", "-o", tmp_path / "m.json"], "not a model file treegen can import")
    assert_user_error(capsys, ["import", tmp_path / "none.json", "-o", tmp_path / "m.json"], "model file not found")
    (tmp_path / "bad.json").write_text('{"learner": {"objective": {"name": "rank:pairwise"}}, "version": [3]}')
    assert_user_error(capsys, ["import", tmp_path / "bad.json", "-o", tmp_path / "m.json"],
                      "bad.json: learner.learner_model_param: missing")
    (tmp_path / "bad.ubj").write_bytes(b"{L\x00\x00\x00\x00\x00\x00\x00\x05learn}")
    assert_user_error(capsys, ["import", tmp_path / "bad.ubj", "-o", tmp_path / "m.json"], "not a valid UBJSON model")
    (tmp_path / "bad.txt").write_text("tree\nversion=v4\nnum_class=1\nlabel_index=0\nmax_feature_idx=2\n"
                                      "feature_names=a b c\nfeature_infos=none none none\nobjective=lambdarank\n\n"
                                      "Tree=0\nnum_leaves=1\nnum_cat=0\nleaf_value=0\n\nend of trees\n")
    assert_user_error(capsys, ["import", tmp_path / "bad.txt", "-o", tmp_path / "m.json"],
                      "objective 'lambdarank' cannot be imported")
    (tmp_path / "p.pkl").write_bytes(b"\x80\x04garbage")
    assert_user_error(capsys, ["import", tmp_path / "p.pkl", "--trust-pickle", "-o", tmp_path / "m.json"],
                      "cannot unpickle")


def test_import_catboost_and_treelite_files(files, capsys, tmp_path):
    """CatBoost .cbm / JSON and a Treelite checkpoint through `treegen import` (issue #36); bad ones:
    one line, exit 2."""
    cb = pytest.importorskip("catboost")
    treelite = pytest.importorskip("treelite")
    d, X, y, xc, _, _ = files
    est = cb.CatBoostClassifier(iterations=5, depth=3, verbose=0, thread_count=1, random_seed=0,
                                allow_writing_files=False).fit(X, y)
    est.save_model(str(tmp_path / "c.cbm"))
    est.save_model(str(tmp_path / "c.json"), format="json")
    treelite.frontend.from_xgboost(xc.get_booster()).serialize(str(tmp_path / "x.tl"))
    for src, ref, what in (("c.cbm", est, "imported CatBoost"), ("c.json", est, "imported CatBoost"),
                           ("x.tl", xc, "imported Treelite checkpoint")):
        code, out, err = run_cli(capsys, ["import", tmp_path / src, "-o", tmp_path / f"{src}.model.json"])
        assert code == 0, err
        assert what in out and "2 classes, vote sum" in out
        assert np.array_equal(load(tmp_path / f"{src}.model.json").predict(X), np.asarray(ref.predict(X)).ravel())
    (tmp_path / "bad.cbm").write_bytes(b"CBM1" + b"\x01" * 64)
    assert_user_error(capsys, ["import", tmp_path / "bad.cbm", "-o", tmp_path / "m.json"],
                      "is not a readable CatBoost model")
    (tmp_path / "bad.json").write_text('{"features_info": {"float_features": []}, "oblivious_trees": []}')
    assert_user_error(capsys, ["import", tmp_path / "bad.json", "-o", tmp_path / "m.json"],
                      "features_info.float_features: the model has no float features")
    (tmp_path / "bad.tl").write_bytes(b"\x04\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00" + b"\x00" * 16)
    assert_user_error(capsys, ["import", tmp_path / "bad.tl", "-o", tmp_path / "m.json"],
                      "is not a readable Treelite checkpoint")
