"""The float32 C export of boosted (vote "sum") models (issue #25): compiled on the host with the strict
flags, the C's raw scores equal the source library's bit for bit (XGBoost float32 margins, LightGBM and
scikit-learn double sums) on random, +-64-ulp threshold and NaN rows; the report states the guarantee."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import treegen
from treegen.core.errors import TreegenError
from treegen.core.native import STRICT_CFLAGS

pytest.importorskip("sklearn")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from boost_rows import check_rows  # noqa: E402

from treegen.importers import from_lightgbm, from_sklearn, from_xgboost  # noqa: E402
from treegen.importers.lightgbm_text import parse_lightgbm  # noqa: E402
from treegen.importers.sklearn_values import parse_sklearn_values  # noqa: E402
from treegen.importers.xgboost_json import parse_xgboost  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

DRIVER = r"""
#include <stdio.h>
#include "{n}.h"
int main(int argc, char **argv)
{{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    float x[TG_{N}_N_FEATURES];
    {T} raw[TG_{N}_N_OUTPUTS];
    if (argc != 3 || in == NULL || out == NULL) return 2;
    while (fread(x, sizeof x, 1, in) == 1) {{
        tg_{n}_raw(x, raw);
        fwrite(raw, sizeof raw, 1, out);
    }}
    fclose(in);
    return fclose(out) != 0;
}}
"""


def _c_raw(report, name: str, Z: np.ndarray, tmp_path, double: bool) -> np.ndarray:
    d = tmp_path / name
    (d / "drv.c").write_text(DRIVER.format(n=name, N=name.upper(), T="double" if double else "float"))
    subprocess.run(["gcc", *STRICT_CFLAGS, "-O2", "-I", str(d), str(d / f"{name}.c"), str(d / "drv.c"),
                    "-o", str(d / "drv")], check=True)
    Z.astype(np.float32).tofile(d / "in.bin")
    subprocess.run([str(d / "drv"), str(d / "in.bin"), str(d / "out.bin")], check=True)
    return np.fromfile(d / "out.bin", dtype=np.float64 if double else np.float32).reshape(len(Z), -1)


def _half(name):
    X, y = {"bc": load_breast_cancer, "iris": load_iris, "diab": load_diabetes}[name](return_X_y=True)
    return X[::2], y[::2]


def _with_nan(X):
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    return X


def test_xgboost_binary_with_nan_and_multiclass(tmp_path):
    X, y = _half("bc")
    X = _with_nan(X)
    est = xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1).fit(X, y)
    rep = treegen.export_model(from_xgboost(est, X=X), tmp_path / "xb", target="cortex-m4", dtype="f32", name="xb",
                               data=(np.nan_to_num(X), y))
    assert rep.exact and rep.agreement["raw_bit_equal"] == 1.0 and "bit for bit" in rep.guarantee
    assert any("8.94" in n for n in rep.notes)          # XGBoost's own binary rule is stated
    Z = check_rows(parse_xgboost(est), X, n_random=500)
    margin = est.get_booster().predict(xgb.DMatrix(Z), output_margin=True)
    assert np.array_equal(_c_raw(rep, "xb", Z, tmp_path, False)[:, 0].view(np.int32), margin.view(np.int32))

    X, y = _half("iris")
    est = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X, y)
    treegen.export_model(from_xgboost(est), tmp_path / "xm", target="cortex-m4", dtype="f32", name="xm",
                         measure=False)
    Z = check_rows(parse_xgboost(est), X, n_random=500)
    margin = est.get_booster().predict(xgb.DMatrix(Z), output_margin=True)
    assert np.array_equal(_c_raw(None, "xm", Z, tmp_path, False).view(np.int32), margin.view(np.int32))


def test_lightgbm_regression_and_histgb_double_sums(tmp_path):
    X, y = _half("diab")
    est = lgb.LGBMRegressor(n_estimators=15, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    treegen.export_model(from_lightgbm(est), tmp_path / "lr", target="cortex-m4", dtype="f32", name="lr",
                         measure=False)
    Z = check_rows(parse_lightgbm(est), X, n_random=500, inf=True)
    assert np.array_equal(_c_raw(None, "lr", Z, tmp_path, True)[:, 0].view(np.int64), est.predict(Z).view(np.int64))

    X, y = _half("bc")
    X = _with_nan(X)
    est = HistGradientBoostingClassifier(max_iter=8, random_state=0).fit(X, y)
    treegen.export_model(from_sklearn(est, X=X), tmp_path / "hb", target="cortex-m4", dtype="f32", name="hb",
                         measure=False)
    Z = check_rows(parse_sklearn_values(est), X, n_random=500, inf=True)
    assert np.array_equal(_c_raw(None, "hb", Z, tmp_path, True).view(np.int64), est._raw_predict(Z).view(np.int64))


def test_boosted_export_refusals(tmp_path):
    X, y = _half("bc")
    model = from_xgboost(xgb.XGBClassifier(n_estimators=2, max_depth=1, n_jobs=1).fit(X, y))
    with pytest.raises(TreegenError, match="unknown dtype 'q7'"):
        treegen.export_model(model, tmp_path / "a", target="cortex-m4", dtype="q7", measure=False)
    with pytest.raises(TreegenError, match="table layout"):
        treegen.export_model(model, tmp_path / "a", target="cortex-m4", dtype="f32", layout="unrolled", measure=False)


Q15_DRIVER = r"""
#include <stdio.h>
#include "{n}.h"
int main(int argc, char **argv)
{{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    int16_t q[TG_{N}_N_FEATURES];
    int32_t raw[TG_{N}_N_OUTPUTS];
    (void)argc;
    if (in == NULL || out == NULL) return 2;
    while (fread(q, sizeof q, 1, in) == 1) {{
        tg_{n}_raw_q15(q, raw);
        fwrite(raw, sizeof raw, 1, out);
    }}
    fclose(in);
    return fclose(out) != 0;
}}
"""


def test_q15_integer_sums_and_the_decision_bound(tmp_path):
    from treegen.emit.lower_boost import lower_boost_q15, predict_raw_q15

    X, y = _half("bc")
    est = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    model = from_lightgbm(est, X=X)
    rep = treegen.export_model(model, tmp_path / "lq", target="cortex-m4", dtype="q15", name="lq", data=(X, y))
    assert rep.dtype == "q15" and not rep.exact and rep.agreement["fixed_vs_float"] >= 0.97
    d = tmp_path / "lq"
    (d / "drv.c").write_text(Q15_DRIVER.format(n="lq", N="LQ"))
    subprocess.run(["gcc", *STRICT_CFLAGS, "-O2", "-I", str(d), str(d / "lq.c"), str(d / "drv.c"), "-o",
                    str(d / "drv")], check=True)
    rng = np.random.default_rng(5)
    Q = np.vstack([model.scaling.to_q15(X), rng.integers(0, 32768, size=(3000, X.shape[1]))]).astype(np.int16)
    Q.tofile(d / "in.bin")
    subprocess.run([str(d / "drv"), str(d / "in.bin"), str(d / "out.bin")], check=True)
    c = np.fromfile(d / "out.bin", dtype=np.int32).reshape(len(Q), -1)
    tq = lower_boost_q15(model)
    assert np.array_equal(c.astype(np.int64), predict_raw_q15(tq, Q))
    # the proven bound: outside it the integer class is the grid model's (exact float64 sums of its leaves)
    Xn = Q.astype(np.float64) / 32768.0
    leaves = [t.apply(Xn) for t in model.trees]
    exact = np.array(model.boost["base_score"][0]) + sum(t.leaf_value[lf] for t, lf in zip(model.trees, leaves))
    v, rule = model.decision_threshold                     # LightGBM: raw > 0x1.8p-53
    assert (v, rule) == (1.5 * 2.0 ** -53, ">") and tq.decision_q == int(np.floor(v * 2.0 ** tq.frac_bits))
    far = np.abs(exact - v) > tq.bound
    assert far.mean() > 0.9
    assert np.array_equal((c[far, 0] > tq.decision_q), (exact[far] > v))
