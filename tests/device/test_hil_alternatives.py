"""A GP tree and a random forest on an emulated Cortex-M4 (QEMU mps2-an386): every prediction of the
device equals the host's fixed-point model, on held-out rows. FAILS (never skips) when
arm-none-eabi-gcc or qemu-system-arm is missing (scripts/setup.sh)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared

from treegen import GPClassifier, RFClassifier
from treegen.device import hil

pytestmark = pytest.mark.hil


@pytest.mark.parametrize("algo", ["gp", "rf"])
def test_gp_and_forest_on_qemu_m4(algo, tmp_path):
    X, y = load_shared("veh")
    tr = np.arange(X.shape[0]) % 2 == 0
    if algo == "gp":
        est = GPClassifier(max_iter=40, population=16, random_state=1)
    else:
        est = RFClassifier(n_trees=4, max_depth=5, random_state=1)
    model = est.fit(X[tr], y[tr]).model_
    report = hil.run_hil(model, "qemu-m4", data=(X[~tr], y[~tr]), build_dir=tmp_path / "fw", bench_iters=10)
    assert report["ok"] is True and report["error"] is None, report.get("error")
    assert report["rows"] == int((~tr).sum()) and report["mismatches"] == 0
    assert report["model_hash"] == model.hash()
    assert all(c["ok"] for c in report["checks"])
