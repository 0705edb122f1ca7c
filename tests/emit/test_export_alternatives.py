"""The exported C of every alternative inducer (de-pdt, de-cart, de-id3, id3) equals the Python model
bit for bit: host-compiled C (strict flags + UBSan) == the Python fixed-point model == the float
model, on rows not trained on (the other half of the dataset), seeded random Q15 rows and rows at and
one LSB either side of every threshold; every quantised tree is exact. Table and unrolled layouts;
for the oblique DE-PDT tree also the DSP variant (emulated) and the float32 export (documented
tolerance)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import load_shared
from export_models import agreement_rows, build_driver, run_driver

from treegen import DECARTClassifier, DEID3Classifier, DEPDTClassifier, ID3Classifier
from treegen.emit.check import predict_fixed
from treegen.emit.export import export_model
from treegen.emit.quantize import quantize_model

UBSAN = ("-O2", "-fsanitize=undefined", "-fno-sanitize-recover=all")

CASES = {
    "de-pdt": ("veh", lambda: DEPDTClassifier(population=10, generations=30, height=4, random_state=3)),
    "de-cart": ("veh", lambda: DECARTClassifier(max_depth=7, random_state=3)),
    "de-id3": ("seg", lambda: DEID3Classifier(max_depth=7, random_state=3)),
    "id3": ("car", lambda: ID3Classifier(categorical=list(range(6)), pruning="pessimistic")),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def fitted(request):
    dataset, make = CASES[request.param]
    X, y = load_shared(dataset)
    est = make().fit(X[::2], y[::2])
    model = est.model_
    qtrees = quantize_model(model)
    rng = np.random.default_rng(7)
    rows = np.concatenate([X[1::2].astype(np.int16), agreement_rows(qtrees, X.shape[1], rng, n_random=3000)])
    return request.param, model, qtrees, rows


def _check(model, rows, expected, layout, variant, dtype, work) -> np.ndarray:
    rep = export_model(model, work, target="cortex-m4", layout=layout, variant=variant, dtype=dtype, measure=False)
    X = rows.astype(np.float32) if dtype == "f32" else rows
    return run_driver(build_driver(work, rep.name, float_input=dtype == "f32", extra=UBSAN), X, work)


def test_c_equals_python_fixed_point_and_float_model(fitted, tmp_path):
    algo, model, qtrees, rows = fitted
    assert all(qt.exact for qt in qtrees), f"{algo}: a quantised tree is not exact"
    assert qtrees[0].kind == ("oblique" if algo == "de-pdt" else "axis")
    expected = predict_fixed(qtrees, rows, model.n_classes)
    floating = model.predict_index(rows.astype(np.float64))
    assert np.array_equal(expected, floating), f"{algo}: fixed-point model differs from the float model"
    assert rows.shape[0] > 3000
    builds = [("table", "scalar", "q15"), ("unrolled", "scalar", "q15")]
    if algo == "de-pdt":       # oblique: the DSP variant (emulated on the host) and the float32 export
        builds += [("table", "dsp", "q15"), ("table", "auto", "f32")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outs = list(pool.map(lambda b: (b, _check(model, rows, expected, *b, tmp_path / "-".join(b))), builds))
    for (layout, variant, dtype), got in outs:
        if dtype == "f32":     # documented tolerance of the float32 export: >= 99.5 % of rows
            agree = 100.0 * float(np.mean(got == floating))
            assert agree >= 99.5, f"{algo}: f32 agreement {agree:.3f} %"
            continue
        bad = np.flatnonzero(got != expected)
        assert bad.size == 0, f"{algo} {layout}/{variant}: {bad.size} of {rows.shape[0]} rows differ"
