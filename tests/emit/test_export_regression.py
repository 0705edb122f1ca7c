"""Regression exports (issue #25): the Python fixed-point / float32 model == host-compiled C, bit for
bit, for a CART regression tree and a forest (vote mean), both layouts, q15 and f32; the value table's
documented bound against the float model; the report's difference lines."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from export_models import require, run_cc
from sklearn.datasets import load_diabetes

from treegen.core.native import STRICT_CFLAGS
from treegen.emit import lower as _lower
from treegen.emit.check import predict_values, predict_values_float
from treegen.emit.export import export_model
from treegen.emit.lower_value import frac_bits_for, mean_round, value_vote
from treegen.learn.regressors import CARTRegressor, RFRegressor

UBSAN = ("-O2", "-fsanitize=undefined", "-fno-sanitize-recover=all")
DRIVER = r"""
#include <stdio.h>
#include <stdint.h>
#include "m.h"

int main(void)
{
    float x[TG_M_N_FEATURES];

    while (fread(x, sizeof(float), TG_M_N_FEATURES, stdin) == TG_M_N_FEATURES) {
#ifdef TG_Q15
        int16_t q[TG_M_N_FEATURES];
        int32_t v[2];

        tg_m_scale_q15(x, q);
        v[0] = tg_m_predict_value_q15(q);
        v[1] = tg_m_predict_value(x);
#else
        float v[2];

        v[0] = tg_m_predict_value_f32(x);
        v[1] = tg_m_predict_value(x);
#endif
        fwrite(v, sizeof(v[0]), 2, stdout);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def models():
    d = load_diabetes(scaled=False)
    X, y = d.data, d.target - 150.5            # negative values too: both roundings of the mean
    return X, {"tree": CARTRegressor(max_depth=6).fit(X, y).model_,
               "forest": RFRegressor(n_trees=7, max_depth=5, random_state=1).fit(X, y).model_}


def _rows(model, X, rng, n=3000) -> np.ndarray:
    """Data rows, random rows over the data's range and rows on and next to the Q15 grid points of
    every feature (the raw inputs whose Q15 value changes), as float32."""
    lo, hi = X.min(axis=0), X.max(axis=0)
    rand = lo + rng.random((n, X.shape[1])) * (hi - lo)
    q = rng.integers(0, 32768, (n, X.shape[1]))
    scale = np.where(model.scaling.scale > 0, model.scaling.scale, 1.0)
    grid = (model.scaling.offset + (q + 0.5) / (scale * 32768.0)).astype(np.float32)
    near = np.concatenate([grid, np.nextafter(grid, np.float32(np.inf)), np.nextafter(grid, np.float32(-np.inf))])
    return np.concatenate([X, rand, near]).astype(np.float32)


@pytest.mark.parametrize("layout, dtype", [("table", "q15"), ("unrolled", "f32"), ("unrolled", "q15")])
def test_c_equals_python_on_every_row(models, dtype, layout, tmp_path):
    X, fitted = models
    cc = require("gcc")
    rng = np.random.default_rng(7)
    for key, model in fitted.items():
        out = tmp_path / f"{key}"
        rep = export_model(model, out, target="native", layout=layout, dtype=dtype, name="m", measure=False,
                           data=(X, None))
        (out / "driver.c").write_text(DRIVER)
        exe = out / "driver"
        run_cc([cc, *STRICT_CFLAGS, *UBSAN, *(["-DTG_Q15"] if dtype == "q15" else []), "-I", str(out),
                str(out / "driver.c"), str(out / "m.c"), "-o", str(exe)])
        rows = _rows(model, X, rng)
        got = subprocess.run([str(exe)], input=rows.tobytes(), capture_output=True, check=True).stdout
        got = np.frombuffer(got, dtype=np.int32 if dtype == "q15" else np.float32).reshape(-1, 2)
        lowered = _lower.lower(model, dtype=dtype, vote="mean", values=value_vote(model))
        want = predict_values(lowered, rows, model.scaling.to_q15(rows))
        assert got.shape == (rows.shape[0], 2)
        assert np.array_equal(got[:, 0], want) and np.array_equal(got[:, 1], want), (key, dtype, layout)
        # the documented bound of the fixed-point values against the float model (axis trees: same leaves)
        diff = np.abs(predict_values_float(lowered, rows, model.scaling.to_q15(rows)) - model.predict_value(rows))
        if dtype == "q15":
            assert diff.max() <= lowered.values.bound * (1 + 1e-9) + 1e-12
            assert rep.value_frac_bits == lowered.values.frac_bits == frac_bits_for(np.abs(lowered.values.values).max())
        else:
            assert diff.max() <= 1e-5 * np.abs(model.predict_value(rows)).max()
        assert "RMSE" in rep.values_line and "max |difference|" in rep.values_line


def test_fixed_point_mean_rounds_half_away_from_zero():
    assert mean_round(np.array([5, -5, 4, -4, 6, -6, 0]), 4).tolist() == [1, -1, 1, -1, 2, -2, 0]
    assert frac_bits_for(1.0) == 30 and frac_bits_for(0.0) == 0 and frac_bits_for(2**31 - 1) == 0
    with pytest.raises(Exception, match="exceed the int32 range"):
        frac_bits_for(2.0**32)
