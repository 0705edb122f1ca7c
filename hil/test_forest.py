"""A soft-voting forest on the emulated Cortex-M4: an imported scikit-learn RandomForest whose device
answers PREDICT and PROBA (classes and Q15 mean probabilities) exactly as the Python fixed-point
model, on every row (the wine rows and seeded random rows). Needs the suite to build (not with
--hil-port)."""

from __future__ import annotations

import numpy as np
import pytest

from treegen.device.hil import check_identity, predict_rows
from treegen.device.protocol import CAP_PROBA

from treegen.hil.devices import open_client, start_device
from .models import forest_case

pytestmark = [pytest.mark.hil, pytest.mark.hil_only(targets=("qemu-m4", "native"), build=True)]


def test_soft_forest_predict_and_proba(target, firmwares, hil_options, request, record_property):
    layout = "table" if target.name == "qemu-m4" else "unrolled"   # both layouts, one run each
    case = forest_case()
    assert case.model.vote == "soft" and len(case.model.trees) == 8
    ref = case.ref
    assert ref.proba is not None
    fw = firmwares.get(target, case, layout=layout)
    with start_device(target, fw, None) as dev:
        request.node._hil_device = dev
        client = open_client(dev, hil_options.timeout)
        try:
            info = client.info()
            check_identity(info, case.model, target, fw.variant_string)
            assert info.capabilities & CAP_PROBA
            got = predict_rows(client, ref.X_q15)
            cls, proba = client.predict_proba(ref.X_q15)
        finally:
            client.close()
    n = ref.X_q15.shape[0]
    record_property("rows", n)
    assert int(np.count_nonzero(got != ref.fixed)) == 0, "PREDICT differs from the fixed-point model"
    assert int(np.count_nonzero(cls != ref.fixed)) == 0, "PROBA classes differ from the fixed-point model"
    bad = np.flatnonzero(np.any(proba != ref.proba, axis=1))
    assert bad.size == 0, f"{bad.size} of {n} rows: device probabilities differ (first row {bad[:1]})"
    # the probabilities are scikit-learn's mean leaf frequencies to within 2^-15 (soft-vote bound) on the
    # rows whose Q15 model takes scikit-learn's branches; the fixed-point sums vote like the mean
    assert np.all(proba.sum(axis=1) >= 32768 - case.model.n_classes)
    assert np.all(proba.sum(axis=1) <= 32768 + case.model.n_classes)
