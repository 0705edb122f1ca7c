"""``treegen export`` of an additive (vote "sum", boosted) model: the float32 C of
:mod:`treegen.emit.lower_boost`, rendered from ``templates/c/boost.{h,c}.j2``.

Passes as :mod:`treegen.emit.export`: lower (:func:`~treegen.emit.lower_boost.lower_boost`), check (its
Python mirror against the model on the data and example rows), render + write, measure (the compiled
object), report (:class:`~treegen.emit.report.ExportReport`).
"""

from __future__ import annotations

import numpy as np

from treegen.core import metrics
from treegen.core import targets as _targets
from treegen.core.codegen import c_identifier
from treegen.core.errors import TreegenError
from treegen.core.version import __version__
from treegen.emit.entry_points import boost_entry_points
from treegen.emit.library import write_library
from treegen.emit.lower_boost import (c_float, lower_boost, lower_boost_q15, predict_class, predict_class_q15,
                                      predict_raw, predict_raw_q15)
from treegen.emit.options import resolve_variant
from treegen.emit.report import ExportReport
from treegen.emit.size import measure_linked, measure_size

PER_ROW = 8


def _rows(items: list[str]) -> list[str]:
    return [", ".join(items[i:i + PER_ROW]) + "," for i in range(0, len(items), PER_ROW)]


def boost_context(model, tb, *, name: str, target_name: str) -> dict:
    f32_sum = tb.sum_dtype == "float32"
    feat_c = "uint8_t" if tb.feat_bits == 8 else "uint16_t"
    right_c = "uint16_t" if tb.right_bits == 16 else "uint32_t"
    suffix = "u"
    return {
        "name": name, "NAME": name.upper(), "version": __version__, "model_hash": model.hash(),
        "source": str(model.metadata.get("source", "?")), "target_name": target_name,
        "n_features": model.n_features, "n_outputs": tb.n_outputs, "n_trees": tb.n_trees, "n_nodes": tb.n_nodes,
        "n_values": int(tb.values.shape[0]), "task": model.task, "f32_sum": f32_sum,
        "sum_c": "float" if f32_sum else "double", "feat_c": feat_c, "right_c": right_c,
        "leaf_code": tb.leaf_code, "routes_missing": tb.routes_missing,
        "features": [{"index": i, "name": n} for i, n in enumerate(model.feature_names)],
        "classes": [{"index": i, "label": str(c)} for i, c in enumerate(model.classes)],
        "feat_rows": _rows([f"{int(v)}{suffix}" for v in tb.feat]),
        "thr_rows": _rows([c_float(float(v), False) for v in tb.thr]),
        "uses_infinity": bool(np.any(np.isinf(tb.thr))),
        "right_rows": _rows([f"{int(v)}{suffix}" for v in tb.right]),
        "value_rows": _rows([c_float(float(v), True) for v in tb.values]),
        "root_rows": _rows([f"{int(v)}{suffix}" for v in tb.roots]),
        "out_rows": _rows([f"{int(v)}{suffix}" for v in tb.outputs]),
        "base": [c_float(float(v), not f32_sum) for v in tb.base],
        "scale_c": None if tb.scale == 1.0 else c_float(tb.scale, not f32_sum),
        "bias": [] if tb.bias is None else [c_float(float(v), not f32_sum) for v in tb.bias],
        "decision_op": tb.decision_rule, "decision_c": c_float(tb.decision_value, not f32_sum),
        "decision_text": f"{tb.decision_value!r}", "tie_gap": _tie_gap(model),
    }


def _tie_gap(model) -> float:
    return float(model.metadata.get("class_tie_gap") or 0.0) if model.task == "classification" else 0.0


def decision_notes(model) -> list[str]:
    """What the exported class decision is, beside the library's (classification models)."""
    if model.task != "classification":
        return []
    if model.n_outputs == 1:
        value, rule = model.decision_threshold
        return [f"binary decision: class 1 iff raw {rule} {value!r} (boost.decision_threshold: the source "
                f"library's own rule{', ' + model.metadata['decision'] if model.metadata.get('decision') else ''})"]
    gap = _tie_gap(model)
    if gap:
        return [f"multiclass: the first largest raw score; the library's argmax of its rounded softmax is the same "
                f"class unless a lower-index output lies within {gap:.3g} below the largest raw score (then both "
                f"can round to one probability and the library takes the lower index)"]
    return ["multiclass: the first largest raw score (the library's own rule, exact)"]


def export_boost(model, out_dir, *, target, name: str | None = None, dtype: str = "f32", layout: str = "table",
                 data=None, measure: bool = True, force: bool = False, lib_layout: str = "plain",
                 example: bool = False, variant: str = "auto") -> ExportReport:
    """Write ``<name>.h`` / ``<name>.c`` of a vote-'sum' model into ``out_dir`` (see the module text)."""
    if dtype not in ("f32", "q15"):
        raise TreegenError(f"unknown dtype {dtype!r} for a boosted (vote sum) model (f32 or q15)")
    if layout != "table":
        raise TreegenError("a boosted (vote sum) model exports with the table layout")
    tgt = target if isinstance(target, _targets.Target) else _targets.get(target)
    ident = c_identifier(name or "model")
    if dtype == "q15":
        # integer compares and adds only: every variant runs the same C; the report names the one asked
        # for (the firmware announces it)
        return _export_q15(model, out_dir, tgt, ident, data, measure, force, resolve_variant(variant, tgt, "q15"),
                           lib_layout, example)
    tb = lower_boost(model)
    agreement = None
    if data is not None:
        X = np.asarray(data[0], dtype=np.float64)
        raw_c = predict_raw(tb, X)
        raw_m = np.asarray(model.decision_function(X) if model.task == "classification"
                           else model.predict_value(X), dtype=np.float64).reshape(raw_c.shape)
        same = np.all(raw_c.view(np.int64) == raw_m.view(np.int64), axis=1)
        agreement = {"rows": int(X.shape[0]), "raw_bit_equal": float(np.mean(same))}
        if model.task == "classification":
            agreement["class_agreement"] = float(np.mean(predict_class(tb, raw_c) == model.predict_index(X)))
        if not same.all():
            raise TreegenError(f"internal error: the boosted C mirror differs from the model on "
                               f"{int(np.count_nonzero(~same))} row(s)")
    ctx = {**boost_context(model, tb, name=ident, target_name=tgt.name), **_lib_keys(model, tgt, "f32", "scalar")}
    spec = example_spec_boost(model, ident, data, tb=tb, sum_c=ctx["sum_c"]) if example else None
    files, src, lib_notes = write_library(ctx, out_dir, lib_layout=lib_layout, example=example, force=force,
                                          sources=("c/boost.h.j2", "c/boost.c.j2"), spec=spec)
    eps = boost_entry_points(ident, dtype="f32", classification=model.task == "classification",
                             sum_dtype=tb.sum_dtype)
    size = _measure(src, ident, tgt, model.n_features, eps, measure)
    exact = bool(tgt.extra.get("ieee_float", True))   # IEEE binary32 (and binary64 double) arithmetic
    if model.task != "classification":
        rule = "the prediction is raw[0]"
    elif model.n_outputs == 1:
        rule = (f"the class: raw {tb.decision_rule} {tb.decision_value!r}, the library's own binary rule, "
                "hence its class for every float32 input")
    elif _tie_gap(model):
        rule = f"the class: the first largest raw, the library's unless two raws lie within {_tie_gap(model):.3g}"
    else:
        rule = "the class: the first largest raw, the library's own rule"
    guarantee = (f"tg_{ident}_raw == the source library's raw score bit for bit for every float32 input "
                 f"({tb.sum_dtype} sums in tree order, the library's own tests"
                 f"{', NaN routed by its default directions' if tb.routes_missing else ''}); " + rule)
    notes = []
    if not exact:
        notes.append(f"target {tgt.name}: its float (and double) arithmetic is not IEEE-754 binary32/binary64 "
                     "throughout, so the sums are not exact there")
    notes.extend(decision_notes(model))
    notes.extend(lib_notes)
    trees = [{"kind": "axis", "n_internal": int(t.n_internal), "n_leaves": int(t.n_leaves), "depth": int(t.depth),
              "acc_bits": None, "acc_bound": None, "exact": True} for t in model.trees]
    estimated = int(tb.n_nodes * (tb.feat_bits // 8 + 4 + tb.right_bits // 8) + tb.values.size * 8)
    return ExportReport(
        name=ident, target=tgt.name, layout="table", dtype="f32", variant="scalar", model_hash=model.hash(),
        files=[str(p) for p in files], n_features=model.n_features, n_classes=model.n_classes, trees=trees,
        acc_bits=None, exact=exact, unresolved_rows=[],
        field_types={"child_ref": ctx["right_c"], "feature_index": ctx["feat_c"]}, estimated_bytes=estimated,
        flash_bytes=size["flash_bytes"], ram_bytes=size["ram_bytes"], sections=size["sections"],
        flash_bytes_inference=size["inference"], size_note=size["note"], agreement=agreement, notes=notes,
        vote=f"sum ({tb.sum_dtype}, link {model.boost['link']})", input_contract="float32", guarantee=guarantee,
        linked_q15=size["linked"].get("q15"), linked_float=size["linked"].get("float"),
        linked_note=size["linked"]["note"], task=model.task, entry_points=eps)


def _measure(out, ident: str, tgt, n_features: int, entry_points: list, measure: bool) -> dict:
    """The compiled object's sizes, the inference path's (all but the class labels and their strings)
    and the linked probes of the recorded ``entry_points`` (:func:`treegen.emit.size.measure_linked`)."""
    if not measure:
        return {"flash_bytes": None, "ram_bytes": None, "sections": {}, "note": "not measured (measure=False)",
                "inference": None, "linked": {"note": "not linked (measure=False)"}}
    size = measure_size(out / f"{ident}.c", tgt, out)
    size["inference"] = None if size["flash_bytes"] is None else int(sum(
        v for k, v in size["sections"].items() if k.startswith((".text", ".rodata", ".data", ".sdata"))
        and "class_labels" not in k and ".str" not in k))
    size["linked"] = measure_linked(out, ident, tgt, "", n_features, entry_points=entry_points)
    return size


def q15_context(model, tq, *, name: str, target_name: str) -> dict:
    return {
        "name": name, "NAME": name.upper(), "version": __version__, "model_hash": model.hash(),
        "source": str(model.metadata.get("source", "?")), "target_name": target_name,
        "n_features": model.n_features, "n_outputs": tq.n_outputs, "n_trees": int(tq.roots.size),
        "n_nodes": int(tq.feat.size), "n_values": int(tq.values.size), "task": model.task,
        "frac_bits": tq.frac_bits, "bound_text": f"{tq.bound:.3g} (in units of 1)",
        "max_raw": "2^31 - 1",
        "feat_c": "uint8_t" if tq.feat_bits == 8 else "uint16_t",
        "right_c": "uint16_t" if tq.right_bits == 16 else "uint32_t", "leaf_code": tq.leaf_code,
        "features": [{"index": i, "name": n} for i, n in enumerate(model.feature_names)],
        "classes": [{"index": i, "label": str(c)} for i, c in enumerate(model.classes)],
        "feat_rows": _rows([f"{int(v)}u" for v in tq.feat]),
        "thr_rows": _rows([str(int(v)) for v in tq.thr]),
        "right_rows": _rows([f"{int(v)}u" for v in tq.right]),
        "value_rows": _rows([str(int(v)) for v in tq.values]),
        "root_rows": _rows([f"{int(v)}u" for v in tq.roots]),
        "out_rows": _rows([f"{int(v)}u" for v in tq.outputs]),
        "base": [str(int(v)) for v in tq.base],
        "decision_q": int(tq.decision_q), "decision_text": _q15_rule_text(model, tq),
    }


def _q15_rule_text(model, tq) -> str:
    if model.task != "classification" or tq.n_outputs > 1:
        return ""
    value, rule = model.decision_threshold
    return (f"raw > {tq.decision_q}, i.e. raw * 2^-{tq.frac_bits} {rule} {value!r} exactly "
            "(the source library's binary rule on the integer sum)")


def _lib_keys(model, tgt, dtype: str, variant: str) -> dict:
    """What the library layouts' templates read beside the boosted context (:mod:`treegen.emit.library`)."""
    return {"target": tgt, "layout": "table", "dtype": dtype, "variant": variant, "n_classes": model.n_classes,
            "q15_only": dtype == "q15"}


def example_spec_boost(model, ident: str, data, *, tb=None, tq=None, sum_c: str = "float") -> dict:
    """The example of a boosted export (:func:`treegen.emit.library.example_spec`): data rows (finite)
    or synthetic ones, and what the C mirror computes for them: the class, or the value
    (``tg_<name>_predict``: float32 rows; the q15 export: ``tg_<name>_predict_q15`` on Q15 rows)."""
    from treegen.core.codegen import f32_literal
    from treegen.emit.check import example_rows

    if data is not None:
        X = np.asarray(data[0], dtype=np.float64)
        data = (X[np.all(np.isfinite(X), axis=1)],)
    X_raw, X_q = example_rows(model, data)
    cls = model.task == "classification"
    if tq is None:
        raw = predict_raw(tb, X_raw)
        expected = ([str(int(c)) for c in predict_class(tb, raw)] if cls
                    else [c_float(v, sum_c == "double") for v in raw[:, 0]])
        return {"rows": [[f32_literal(v) + "f" for v in r] for r in X_raw], "in_t": "float",
                "call": f"tg_{ident}_predict", "out_t": "int" if cls else sum_c, "is_class": cls,
                "expected": expected, "unit": ""}
    raw_q = predict_raw_q15(tq, X_q)
    expected = [str(int(v)) for v in (predict_class_q15(tq, raw_q) if cls else raw_q[:, 0])]
    return {"rows": [[str(int(v)) for v in r] for r in X_q], "in_t": "int16_t", "call": f"tg_{ident}_predict_q15",
            "out_t": "int" if cls else "int32_t", "is_class": cls, "expected": expected,
            "unit": "" if cls else f" (units of 2^-{tq.frac_bits})"}


def other_branch(model, X_raw, X_q15) -> np.ndarray:
    """Per raw row: does any test of any tree take another branch on the Q15 grid (``q <= Q``, what the q15
    export runs) than the model's float test of the raw row (an imported model: the source's own)?"""
    Xn = np.asarray(X_q15, dtype=np.float64) / 32768.0
    moved = np.zeros(np.asarray(X_raw).shape[0], dtype=bool)
    for t in model.trees:
        raw_leaf = t.apply_raw(X_raw) if t.raw_threshold is not None else t.apply(model.scaling.transform(X_raw))
        moved |= raw_leaf != t.apply(Xn)
    return moved


def _export_q15(model, out_dir, tgt, ident: str, data, measure: bool, force: bool, variant: str,
                lib_layout: str = "plain", example: bool = False) -> ExportReport:
    """Q15 inputs, integer leaf values and sums (:class:`~treegen.emit.lower_boost.BoostQ15`)."""
    tq = lower_boost_q15(model)
    agreement, moved = None, []
    if data is not None:
        X_all = np.asarray(data[0], dtype=np.float64)
        finite = np.flatnonzero(np.all(np.isfinite(X_all), axis=1))   # Q15 inputs have no NaN
        X = X_all[finite]
        Xq = model.scaling.to_q15(X)
        moved = [int(finite[i]) for i in np.flatnonzero(other_branch(model, X, Xq))]
        agreement = {"rows": int(X.shape[0])}
        if X.shape[0] and model.task == "classification":
            agreement["fixed_vs_float"] = metrics.agreement(predict_class_q15(tq, predict_raw_q15(tq, Xq)),
                                                            model.predict_index(X))
        elif X.shape[0]:
            d = metrics.value_difference(np.ldexp(predict_raw_q15(tq, Xq)[:, 0].astype(np.float64), -tq.frac_bits),
                                         model.predict_value(X))
            agreement.update(task="regression", fixed_vs_float=d["equal"], fixed_vs_float_rmse=d["rmse"],
                             fixed_vs_float_max_abs=d["max_abs"])
        else:
            agreement = None                           # no row to measure on
    ctx = {**q15_context(model, tq, name=ident, target_name=tgt.name), **_lib_keys(model, tgt, "q15", variant)}
    spec = example_spec_boost(model, ident, data, tq=tq) if example else None
    files, src, lib_notes = write_library(ctx, out_dir, lib_layout=lib_layout, example=example, force=force,
                                          sources=("c/boost_q15.h.j2", "c/boost_q15.c.j2"), spec=spec)
    eps = boost_entry_points(ident, dtype="q15", classification=model.task == "classification")
    size = _measure(src, ident, tgt, model.n_features, eps, measure)
    off = int(model.metadata.get("thresholds_off_grid", -1)) if "thresholds_off_grid" in model.metadata else None
    if model.task == "classification" and tq.n_outputs == 1:
        value, rule = model.decision_threshold
        where = f"|raw - {value:.3g}| <= {tq.bound:.3g} (class 1 iff {_q15_rule_text(model, tq)})"
    else:
        where = f"the two largest outputs differ by <= {2 * tq.bound:.3g}"
    guarantee = (f"tg_{ident}_raw_q15 == the Python integer model bit for bit; leaf values round(v * 2^{tq.frac_bits}) "
                 f"in int32_t (overflow-free)" + (f"; the class equals the float model's on the Q15 grid unless "
                                                   f"{where}" if model.task == "classification" else ""))
    notes = ["the Q15 tests are the model's grid tests: they equal the source library's where no threshold lies "
             "inside a grid cell (imported float models: measured on --data)"] + decision_notes(model) + lib_notes
    trees = [{"kind": "axis", "n_internal": int(t.n_internal), "n_leaves": int(t.n_leaves), "depth": int(t.depth),
              "acc_bits": 32, "acc_bound": None, "exact": False} for t in model.trees]
    return ExportReport(
        name=ident, target=tgt.name, layout="table", dtype="q15", variant=variant, model_hash=model.hash(),
        files=[str(p) for p in files], n_features=model.n_features, n_classes=model.n_classes, trees=trees,
        acc_bits=32, exact=False, unresolved_rows=moved,
        field_types={"child_ref": ctx["right_c"], "feature_index": ctx["feat_c"]},
        estimated_bytes=int(tq.feat.size * (tq.feat_bits // 8 + 2 + tq.right_bits // 8) + tq.values.size * 4),
        flash_bytes=size["flash_bytes"], ram_bytes=size["ram_bytes"], sections=size["sections"],
        flash_bytes_inference=size["inference"],
        size_note=size["note"], agreement=agreement, notes=notes, thresholds_off_grid=off,
        vote=f"sum (int32_t, 2^-{tq.frac_bits} units, decision bound {tq.bound:.3g})", input_contract="q15",
        guarantee=guarantee, linked_q15=size["linked"].get("q15"), linked_float=size["linked"].get("float"),
        linked_note=size["linked"]["note"], task=model.task, entry_points=eps)
