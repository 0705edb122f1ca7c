"""The bundled device checks (:mod:`treegen.hil.test_device`: INFO identifies the model, PREDICT equals
the Python fixed-point model on every row, BENCH is sane), run here over the suite's targets
(--hil-target) and model cases (EFTI and CART on veh, seg and pid, or --hil-model): ``conftest.py``
gives the plugin's ``treegen_*`` fixtures these parameters."""

from __future__ import annotations

import pytest

from treegen.hil.test_device import (test_bench_is_sane, test_info_identifies_the_model,  # noqa: F401
                                     test_predict_equals_fixed_point_model_on_every_row)

pytestmark = pytest.mark.hil
