"""GP trees, random forests (CART and oblique EFTI bases) and EFTI trees trained by vicinal risk export bit-exact: the host-compiled C
== the Python fixed-point model == the float model, on test rows never trained on, random Q15 rows
and rows at and one LSB either side of every threshold."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared
from export_models import agreement_rows, build_driver, run_driver

from treegen import EFTIClassifier, GPClassifier, RFClassifier
from treegen.emit.check import predict_fixed
from treegen.emit.export import export_model
from treegen.emit.quantize import quantize_model


KEYS = ("efti-vicinal", "gp", "rf-cart", "rf-efti")


@pytest.fixture(scope="module")
def trained():
    """(models by key, test rows): trained once, when the first test of the file runs (not at collection,
    which every test worker does)."""
    X, y = load_shared("pid")
    tr = np.arange(X.shape[0]) % 2 == 0
    gp = GPClassifier(max_iter=60, population=20, random_state=2).fit(X[tr], y[tr])
    rf = RFClassifier(n_trees=5, max_depth=6, random_state=2).fit(X[tr], y[tr])
    ob = RFClassifier(n_trees=3, base="efti", max_iter=300, random_state=2).fit(X[tr], y[tr])
    vr = EFTIClassifier(max_iter=200, risk="vicinal", random_state=2).fit(X[tr], y[tr])
    models = {"gp": gp.model_, "rf-cart": rf.model_, "rf-efti": ob.model_, "efti-vicinal": vr.model_}
    assert sorted(models) == list(KEYS)
    return models, X[~tr]


@pytest.mark.parametrize("key", KEYS)
def test_export_is_bit_exact(key, tmp_path, trained):
    models, test_rows = trained
    model = models[key]
    qtrees = quantize_model(model)
    assert all(qt.exact for qt in qtrees)
    rng = np.random.default_rng(7)
    X = np.vstack([model.scaling.to_q15(test_rows).astype(np.int16),
                   agreement_rows(qtrees, model.n_features, rng, n_random=2000, per_node=8)])
    expected = predict_fixed(qtrees, X, model.n_classes)
    floating = model.predict_index_normalised(X / 32768.0)
    assert np.array_equal(expected, floating)
    rep = export_model(model, tmp_path, target="native", measure=False)
    got = run_driver(build_driver(tmp_path, rep.name), X, tmp_path)
    assert np.array_equal(got, expected), f"{int(np.sum(got != expected))} of {X.shape[0]} rows differ"
