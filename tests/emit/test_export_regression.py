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


def test_arduino_example_of_a_regression_model_runs(models, tmp_path):
    """The Arduino layout's example sketch prints values and finds no row differing from Python (host C++
    build with the stub core of tests/c/arduino_stub), for q15 and f32."""
    from pathlib import Path

    X, fitted = models
    stub = Path(__file__).resolve().parents[1] / "c" / "arduino_stub"
    gcc, gxx = require("gcc"), require("g++")
    for dtype in ("q15", "f32"):
        lib = tmp_path / dtype / "m"
        export_model(fitted["forest"], lib, target="native", dtype=dtype, name="m", measure=False,
                     lib_layout="arduino", example=True, data=(X, None))
        src, build = lib / "src", tmp_path / dtype / "build"
        build.mkdir()
        run_cc([gcc, *STRICT_CFLAGS, "-O2", "-I", str(src), "-c", str(src / "m.c"), "-o", str(build / "m.o")])
        cxx = [gxx, "-std=gnu++11", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-O2", "-I", str(stub),
               "-I", str(src)]
        run_cc([*cxx, "-x", "c++", "-c", str(lib / "examples" / "m" / "m.ino"), "-o", str(build / "sketch.o")])
        run_cc([*cxx, "-c", str(stub / "main.cpp"), "-o", str(build / "core.o")])
        run_cc([gxx, str(build / "sketch.o"), str(build / "core.o"), str(build / "m.o"), "-o", str(build / "exe")])
        out = subprocess.run([str(build / "exe")], capture_output=True, text=True, timeout=30).stdout
        assert out.endswith("0 of 4 rows differ from the Python model\n") and ": value " in out, out


def test_vote_option_is_refused_for_a_regression_model(models, tmp_path):
    from treegen.core.errors import TreegenError

    with pytest.raises(TreegenError, match="--vote soft applies to classification ensembles"):
        export_model(models[1]["forest"], tmp_path, target="native", vote="soft", measure=False)


def test_additive_models_take_the_boosted_export_not_the_class_one(tmp_path):
    from treegen.core.errors import TreegenError
    from treegen.core.model import Model
    from treegen.core.scaling import InputScaling
    from treegen.core.tree import LEAF, Tree

    stump = Tree(np.array([[1.0], [0.0], [0.0]]), np.array([0.5, 0, 0]), [1, LEAF, LEAF], [2, LEAF, LEAF],
                 np.zeros(3), np.zeros((3, 1)), leaf_value=np.array([0.0, -1.0, 1.0]))
    m = Model([stump], ["a"], [0, 1], InputScaling(np.zeros(1), np.ones(1), "minmax"), vote="sum",
              boost={"base_score": [0.0], "tree_output": [0], "link": "logistic", "sum_dtype": "float32"})
    # vote 'sum' goes to the boosted export (treegen.emit.export_boost): integer sums for Q15 inputs ...
    rep = export_model(m, tmp_path / "q", target="native", measure=False)
    assert rep.dtype == "q15" and rep.vote.startswith("sum (int32_t")
    # ... and its float32 export needs the source thresholds of an imported model
    with pytest.raises(TreegenError, match="needs its source thresholds"):
        export_model(m, tmp_path / "f", target="native", dtype="f32", measure=False)
