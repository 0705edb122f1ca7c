"""The alternative inducers on emulated boards: one model per algorithm (de-pdt, de-cart, de-id3, id3;
``models.ALTERNATIVE_CASES``) built for its board, the dataset's first ``ROWS`` rows streamed (the
odd ones never trained on): the device's class equals the Python fixed-point model on every row, and — these
trees are exact — the float model too (100 % agreement); BENCH answers with the same class.

The firmware is built here (deselected with --hil-port); a missing tool FAILS the test.
"""

from __future__ import annotations

import pytest

from treegen.device import hil

from . import models as hil_models
from treegen.hil.devices import require_tools

pytestmark = [pytest.mark.hil, pytest.mark.hil_only(build=True)]

ROWS = 1000


@pytest.mark.parametrize("name", sorted(hil_models.ALTERNATIVE_CASES))
def test_alternative_model_on_an_emulated_board(name, tmp_path, record_property):
    _algo, _dataset, layout, target, _params = hil_models.ALTERNATIVE_CASES[name]
    require_tools("emulated")
    case = hil_models.fit_alternative_case(name)
    X, labels = case.X_raw[:ROWS], case.labels[:ROWS]
    report = hil.run_hil(case.model, target, data=(X, labels), layout=layout, build_dir=tmp_path / "fw",
                         bench_iters=50)
    record_property("variant", report["variant"])
    record_property("insn_per_inference", report["insn_per_inference"])
    assert report["ok"], hil.summary(report)
    assert report["rows"] == X.shape[0] and report["mismatches"] == 0
    assert report["float_agreement"] == 1.0
    assert report["layout"] == layout and report["device"]["variant"].split("-")[1] == layout
