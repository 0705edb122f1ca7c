"""The float32 C export of CatBoost models (issue #36): compiled on the host with the strict flags, the
C's double raw values (trees, then CatBoost's scale and bias) equal CatBoost's RawFormulaVal bit for bit
on 20k random rows, every border +-1 / +-64 float32 ulps and NaN rows, for the binary, multiclass and
regression models of the import tests (three datasets each, with and without NaN)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import treegen

cb = pytest.importorskip("catboost")
from boost_rows import check_rows  # noqa: E402
from catboost_models import CASES, fit, raw_of  # noqa: E402
from test_export_boost import _c_raw  # noqa: E402

from treegen.importers.catboost_json import from_catboost, parse_catboost  # noqa: E402


def test_gcc_present():
    assert shutil.which("gcc") is not None, "the host C check needs gcc"


@pytest.mark.slow
@pytest.mark.parametrize("nan", [False, True], ids=["no-nan", "nan"])
@pytest.mark.parametrize("name,loss", CASES, ids=[c[0] for c in CASES])
def test_catboost_f32_c_bit_equal_on_the_host(name, loss, nan, tmp_path):
    est, X = fit(name, loss, nan)
    ident = f"cb_{name.replace('-', '_')}"
    rep = treegen.export_model(from_catboost(est, X=X), tmp_path / ident, target="cortex-m4", dtype="f32",
                               name=ident, measure=False)
    assert rep.exact and "bit for bit" in rep.guarantee
    Z = check_rows(parse_catboost(est), X, n_random=20000)
    ref = raw_of(est, Z).reshape(len(Z), -1)
    got = _c_raw(rep, ident, Z, tmp_path, True)
    assert np.array_equal(got.view(np.int64), ref.view(np.int64)), \
        f"{int(np.count_nonzero(got.view(np.int64) != ref.view(np.int64)))} C raw values differ from CatBoost"


def test_scale_and_bias_in_the_c(tmp_path):
    for name, loss in (("diab", "RMSE"), ("iris", "MultiClass")):
        est, X = fit(name, loss, nan=False, iterations=15, depth=4)
        est.set_scale_and_bias(0.7312, [11.3, -2.5, 0.125] if loss == "MultiClass" else 11.3)
        ident = f"cs_{name}"
        treegen.export_model(from_catboost(est), tmp_path / ident, target="cortex-m4", dtype="f32", name=ident,
                             measure=False)
        text = (tmp_path / ident / f"{ident}.c").read_text()
        assert "raw[t] * 0x1.765fd8adab9f5p-1" in text and "tg_cs_%s_bias" % name in text
        Z = check_rows(parse_catboost(est), X, n_random=3000)
        got = _c_raw(None, ident, Z, tmp_path, True)
        assert np.array_equal(got.view(np.int64), raw_of(est, Z).reshape(got.shape).view(np.int64))
