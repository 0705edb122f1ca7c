"""The lowering pass: a model -> :class:`Lowered`, the target-ready description of one export.

One description per dtype, built once and then only read: the template context
(:mod:`treegen.emit.contexts`) renders it, the Python predictors (:mod:`treegen.emit.check`)
execute it, the report (:mod:`treegen.emit.report`) states its exactness facts. The integer side
comes from :mod:`treegen.emit.lower_fixed`, the float32 side from :mod:`treegen.emit.lower_f32`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from treegen.emit import lower_f32 as _f32
from treegen.emit import lower_fixed as _fixed
from treegen.emit import lower_scaling as _scaling


@dataclass(eq=False)
class Lowered:
    """What the C of an export computes, as data.

    ``trees``: per tree its nodes (q15: integer thresholds, int16 weights and shifts, accumulator
    bounds; f32: float32 tests on raw inputs), child references ``>= 0`` internal node, ``< 0`` leaf
    value ``-ref - 1`` (class index, or the soft vote's probability row). ``qtrees``: q15, the
    quantised trees (what :func:`treegen.emit.check.predict_fixed` executes). ``raw_trees``: q15 with
    no oblique tree, the float32 tests of the raw-input entry point (``raw_split``). ``soft``: the
    fixed-point soft vote (:class:`~treegen.emit.lower_fixed.SoftVote`) or None (majority / single
    tree). ``vote``: the float model's vote the agreement is measured against.

    Exactness facts: ``exact_tests`` (every test takes the source's branch for every input of the
    model's contract), ``exact`` (that, and an exact vote), ``off_grid`` (imported models: tests whose
    Q15 grid test differs from the source's, else None), ``unresolved`` (data rows that cannot keep
    their float side after quantisation).

    ``scaling`` (q15): per feature a test reads, the integer constants of the raw-input entry point's
    Q15 scaling (:func:`~treegen.emit.lower_scaling.lower_scaling`; no floating point on the device).
    """

    dtype: str
    trees: list
    soft: object
    vote: str
    exact_tests: bool
    exact: bool
    qtrees: list = field(default_factory=list)
    raw_split: bool = False
    raw_trees: list = field(default_factory=list)
    off_grid: int | None = None
    unresolved: list = field(default_factory=list)
    scaling: list = field(default_factory=list)
    values: object = None     # a regression model: its ValueVote (treegen.emit.lower_value), leaves return rows


def lower(model, *, dtype: str, vote: str, soft=None, X_q15=None, qtrees: list | None = None,
          values=None) -> Lowered:
    """The description of ``model`` exported as ``dtype`` (``q15`` / ``f32``).

    ``vote``: the resolved vote (``soft`` / ``hard``); ``soft``: its fixed-point soft vote
    (:func:`~treegen.emit.lower_fixed.soft_vote_for`); ``X_q15``: data rows fitting inexact oblique
    thresholds (q15); ``qtrees``: q15 trees already quantised; ``values``: a regression model's value
    table (:func:`~treegen.emit.lower_value.value_vote`), whose rows its leaves return."""
    ids = soft if soft is not None else values          # what the leaves return: rows of its table
    lowered = _lower(model, dtype, vote, soft, ids, X_q15, qtrees)
    if values is not None:
        lowered.values = values
        single = len(model.trees) == 1
        if dtype == "q15":
            stored = bool(np.array_equal(np.ldexp(values.values, values.frac_bits), values.q.astype(np.float64)))
        else:
            stored = bool(np.array_equal(values.f32.astype(np.float64), values.values))
        lowered.exact = lowered.exact_tests and stored and single
    return lowered


def _lower(model, dtype, vote, soft, ids, X_q15, qtrees) -> Lowered:
    if dtype == "q15":
        qtrees, trees = _fixed.lower_q15(model, ids, X_q15, qtrees)
        raw_split = not any(t["kind"] == "oblique" for t in trees)
        raw_trees, off_grid = [], None
        if raw_split or model.has_raw_thresholds:
            raw_trees, off_grid = _f32.lower_f32(model, soft=ids, qtrees=qtrees, trees=raw_split,
                                                 source_thresholds=False)
        exact_tests = all(bool(qt.exact) for qt in qtrees)
        if model.has_raw_thresholds and model.contract == "float32":
            exact_tests = exact_tests and off_grid == 0
        unresolved = sorted({int(r) for qt in qtrees for r in qt.unresolved_rows})
        return Lowered("q15", trees, soft, vote, exact_tests, exact_tests and (soft is None or soft.exact),
                       qtrees=qtrees, raw_split=raw_split, raw_trees=raw_trees, off_grid=off_grid,
                       unresolved=unresolved,
                       scaling=_scaling.lower_scaling(model.scaling, _scaling.used_features(model)))
    axis = [k for k, t in enumerate(model.trees) if t.is_axis_parallel()]
    per_tree = [None] * len(model.trees)
    if axis:   # an axis tree's float32 tests are its Q15 tests on raw inputs
        quantised = _fixed.quantize_trees([model.trees[k] for k in axis], None,
                                          None if ids is None else [ids.leaf_ids[k] for k in axis])
        for k, qt in zip(axis, quantised):
            per_tree[k] = qt
    trees, off_grid = _f32.lower_f32(model, soft=ids, qtrees=per_tree)
    exact_tests = all(t["kind"] != "oblique" for t in trees)
    return Lowered("f32", trees, soft, vote, exact_tests, exact_tests and (soft is None or soft.exact),
                   off_grid=off_grid)
