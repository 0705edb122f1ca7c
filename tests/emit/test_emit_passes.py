"""The emit layer is a sequence of passes: following a model through ``treegen build`` or an export
enters each ``treegen.emit`` module at most twice (traced with bench/trace_emit.py's profiler hook).

Before the passes, one build of a two-tree soft-voting forest entered ``treegen.emit.quantize`` 83
times (the float32 threshold search of ``export.py`` called back into it per node and per tree).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from export_models import make_model, random_tree, small_models

from treegen.core.model import save
from treegen.emit.export import export_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from trace_emit import Tracer, trace_build  # noqa: E402

BOUND = 2
PASSES = ("export", "options", "lower", "lower_fixed", "check", "contexts", "library", "size", "report")


def _assert_bound(tracer: Tracer, must_enter: tuple) -> None:
    over = {m: n for m, n in tracer.entries.items() if n > BOUND}
    assert not over, f"emit modules entered more than {BOUND} times: {over}"
    missing = [m for m in must_enter if tracer.entries[f"treegen.emit.{m}"] == 0]
    assert not missing, f"the trace never entered {missing}: the tracer or the flow is broken"


def test_build_enters_each_emit_module_at_most_twice(tmp_path):
    """q15 build of a soft-voting forest with raw thresholds: the lowering also takes the float32
    side (the raw-input entry point, the thresholds off the Q15 grid)."""
    model = save(small_models()["forest"], tmp_path / "forest.json")
    _assert_bound(trace_build(model, "qemu-m4"), PASSES + ("lower_f32",))


@pytest.mark.parametrize("dtype", ["q15", "f32"])
def test_export_with_data_and_sizes_enters_each_emit_module_at_most_twice(dtype, tmp_path):
    """An export doing every pass (data rows: inexact thresholds fitted, agreement; example; an
    Arduino library; sizes measured) of an ensemble mixing axis and inexact oblique trees."""
    rng = np.random.default_rng(3)
    model = make_model([random_tree(rng, 5, 3, 6, "axis"), random_tree(rng, 5, 3, 6, "float")], 5, 3)
    X = rng.uniform(0, 1, (40, 5))
    with Tracer() as tracer:
        rep = export_model(model, tmp_path, target="cortex-m4", dtype=dtype, data=(X, rng.integers(0, 3, 40)),
                           example=True, lib_layout="arduino", measure=True)
    assert rep.agreement is not None and rep.estimated_bytes > 0
    _assert_bound(tracer, PASSES + (("lower_f32",) if dtype == "f32" else ()))
