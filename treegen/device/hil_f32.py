"""The float32 export on a device (PREDICT_F32): a regression model's float32 value or a boosted model's
raw scores (and class), compared bit for bit with the Python reference the export is defined to equal.

The harness compiles the model's float32 export beside its Q15 one when
:func:`treegen.device.firmware.f32_export_wanted` says so; its recorded entry points
(:func:`treegen.device.firmware.f32_spec`) fix what each row answers: the class (classifiers), then the
outputs' IEEE-754 bits. The references: a boosted model (vote ``sum``) -- the source library's raw
score computed by the library's own tests and sums (:mod:`treegen.device.library_ref`, kept in the
model file; ``decision_function`` / ``predict_value`` for a model without it) in the export's sum
type, and its class; a tree regressor -- the float32 path of its lowered description
(:func:`treegen.emit.check.predict_values`, what the f32 C computes). Rows: the data rows and, with
``ulps``, the float32 values within ``ulps`` of every threshold (:mod:`treegen.device.float_probes`).
"""

from __future__ import annotations

import numpy as np

from treegen.core.model import Model
from treegen.device.firmware import f32_spec
from treegen.device.library_ref import reference_classes, reference_raw
from treegen.emit.entry_points import boost_entry_points, tree_entry_points


def spec_for(model: Model) -> dict:
    """What the harness's PREDICT_F32 answers per row for ``model`` (its float32 export's entry points)."""
    if model.vote == "sum":
        eps = boost_entry_points("m", dtype="f32", classification=not model.is_regression,
                                 sum_dtype=model.boost["sum_dtype"])
    else:
        eps = tree_entry_points("m", dtype="f32", regression=model.is_regression, soft=False)
    return f32_spec(eps, header="m.h", class_bytes=1 if model.n_classes <= 255 else 2,
                    n_outputs=model.n_outputs if model.vote == "sum" else 1)


def reference(model: Model, rows: np.ndarray, spec: dict) -> tuple[np.ndarray | None, np.ndarray]:
    """(classes or None, outputs ``(n, n_out)`` in the export's float type) for float32 ``rows``."""
    X = np.asarray(rows, dtype=np.float32).astype(np.float64)
    dt = np.float32 if spec["width"] == 4 else np.float64
    if model.vote == "sum":   # the source library's own arithmetic (library_ref), not treegen's tree IR of it
        vals = reference_raw(model, X).astype(dt)
    else:
        from treegen.emit import lower as _lower
        from treegen.emit.check import predict_values
        from treegen.emit.lower_value import value_vote

        lowered = _lower.lower(model, dtype="f32", vote="mean", values=value_vote(model))
        vals = np.asarray(predict_values(lowered, X, model.scaling.to_q15(X)), dtype=dt).reshape(-1, 1)
    cls = None if spec["class_fn"] is None else reference_classes(model, X)
    return cls, vals


def decode(got: np.ndarray, spec: dict) -> tuple[np.ndarray | None, np.ndarray]:
    """The device's ``(n, row_bytes)`` answers -> (classes or None, outputs)."""
    cb = spec["class_bytes"]
    cls = None
    if spec["class_fn"] is not None:
        cls = got[:, 0].astype(np.int64) if cb == 1 else (got[:, 0].astype(np.int64) | (got[:, 1].astype(np.int64) << 8))
    dt = np.dtype("<f4") if spec["width"] == 4 else np.dtype("<f8")
    vals = np.ascontiguousarray(got[:, cb:]).view(dt).reshape(got.shape[0], spec["n_out"])
    return cls, vals


def probes(model: Model, X_raw: np.ndarray, ulps: int) -> tuple[np.ndarray, int]:
    from treegen.device.float_probes import raw_threshold_probes, threshold_probes

    return (raw_threshold_probes if model.has_raw_thresholds else threshold_probes)(model, X_raw, ulps)


def check_float32(client, model: Model, raw_rows: np.ndarray, ulps: int = 0) -> dict:
    """PREDICT_F32 on the data rows (and, ``ulps`` > 0, the threshold neighbourhoods): every output's bits
    and every class equal to the reference's. Returns rows, thresholds, mismatches and the first one."""
    spec = spec_for(model)
    X32 = np.asarray(raw_rows, dtype=np.float64).astype(np.float32)
    n_data, n_points = X32.shape[0], 0
    if ulps > 0:
        extra, n_points = probes(model, X32, int(ulps))
        X32 = np.vstack([X32, extra.astype(np.float32)])
    got = client.predict_f32(X32, spec["row_bytes"])
    g_cls, g_val = decode(got, spec)
    w_cls, w_val = reference(model, X32, spec)
    ui = np.uint32 if spec["width"] == 4 else np.uint64
    bad_val = np.any(g_val.view(ui) != w_val.view(ui), axis=1)
    bad = bad_val if w_cls is None else (bad_val | (g_cls != w_cls))
    idx = np.flatnonzero(bad)
    first = None
    if idx.size:
        i = int(idx[0])
        first = (f"row {i}, device {g_val[i].tolist()}" + ("" if w_cls is None else f" class {int(g_cls[i])}")
                 + f", expected {w_val[i].tolist()}" + ("" if w_cls is None else f" class {int(w_cls[i])}"))
    return {"rows": int(X32.shape[0]), "data_rows": int(n_data), "thresholds": int(n_points), "ulps": int(ulps),
            "outputs": int(spec["n_out"]), "type": "float32" if spec["width"] == 4 else "float64",
            "classes": w_cls is not None, "mismatches": int(idx.size), "first": first}


def message(r: dict) -> str:
    """The one-line result of :func:`check_float32`."""
    what = f"{r['outputs']} {r['type']} output(s){' and the class' if r['classes'] else ''}"
    around = f" +-{r['ulps']} ulps around {r['thresholds']} thresholds" if r["ulps"] else ""
    if r["mismatches"]:
        return (f"{r['mismatches']} of {r['rows']} float32 rows differ from the reference "
                f"({what}; first: {r['first']})")
    return f"{r['rows']} float32 rows ({r['data_rows']} data{around}): {what} bit-identical to the reference"
