"""The f32 export's table layout compares monotone keys of the float32 bits (lower_f32.f32_key, C
tg_<name>_key): thresholds of either sign, inputs of either sign around each of them, both layouts,
equal to the Q15 model the export is defined to follow (found by bench/mutations.py: a reversed key of
negative thresholds survived every test)."""

from __future__ import annotations

import numpy as np
import pytest
from export_models import build_driver, run_driver

from treegen import CARTClassifier
from treegen.device.float_probes import threshold_probes
from treegen.emit.export import export_model
from treegen.emit.quantize import predict_model_q15, quantize_model


@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_f32_export_on_negative_and_positive_thresholds(layout, tmp_path):
    rng = np.random.default_rng(2)
    X = rng.uniform(-5.0, 5.0, size=(400, 3))
    y = (X[:, 0] < -2.5).astype(int) + (X[:, 1] > 1.5).astype(int) + (X[:, 2] < -0.7).astype(int)
    model = CARTClassifier(max_depth=4).fit(X, y).model_
    export_model(model, tmp_path, target="cortex-m4", layout=layout, dtype="f32", name="neg", measure=False)
    probes, n = threshold_probes(model, X, 8)
    assert n >= 6 and (probes < 0).any() and (probes > 0).any()      # thresholds of both signs are probed
    rows = np.vstack([probes, X.astype(np.float32)]).astype(np.float32)
    exe = build_driver(tmp_path, "neg", float_input=True, predict="tg_neg_predict")
    got = run_driver(exe, rows, tmp_path)
    want = predict_model_q15(quantize_model(model), model.n_classes,
                             model.scaling.to_q15(rows.astype(np.float64)).astype(np.int64))
    assert np.array_equal(got, np.asarray(want, dtype=np.int64))
