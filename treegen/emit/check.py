"""The check pass: Python predictors that execute the description of an export
(:class:`~treegen.emit.lower.Lowered`) with the generated C's semantics, bit for bit — the reference
the C must equal (host-compiled in tests/emit, on the device in ``treegen hil``).

q15: integer tests on Q15 inputs (:func:`predict_q15`), majority vote or the fixed-point soft vote
(:func:`soft_sums`, :func:`proba_q15`); f32: float32 tests on raw inputs (:func:`predict_f32`).
:func:`check` gives an export's example rows with their expected classes and, with data, the
agreement with the float model. A regression export (``lowered.values``): :func:`predict_values`,
the leaves selecting rows of the value table combined as :mod:`treegen.emit.lower_value` documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.metrics import agreement as _agreement
from treegen.core.scaling import Q15_MAX, Q15_ONE
from treegen.emit.lower_f32 import f32_key

if TYPE_CHECKING:
    from treegen.emit.lower_fixed import QuantizedTree, SoftVote

EXAMPLE_ROWS = 4


def predict_q15(qt: QuantizedTree, X_q15: np.ndarray) -> np.ndarray:
    """Class index for every row of Q15 inputs, with exactly the generated C's integer semantics."""
    Xq = np.asarray(X_q15, dtype=np.int64)
    if Xq.ndim != 2 or Xq.shape[1] != qt.n_features:
        raise TreegenError(f"expected rows of {qt.n_features} Q15 features, got shape {Xq.shape}")
    ref = np.full(Xq.shape[0], qt.root, dtype=np.int64)
    active = np.flatnonzero(ref >= 0)
    while active.size:
        node = ref[active]
        if qt.kind == "axis":
            go_left = Xq[active, qt.feature[node]] <= qt.threshold[node]
        else:
            acc = np.einsum("ij,ij->i", Xq[active], qt.weights[node])
            go_left = acc <= qt.threshold[node]
        ref[active] = np.where(go_left, qt.left[node], qt.right[node])
        active = active[ref[active] >= 0]
    return -ref - 1


def soft_sums(qtrees: list, sv: SoftVote, X_q15: np.ndarray) -> np.ndarray:
    """Per-class sums of the stored leaf probabilities (int64), exactly as the C accumulates them."""
    Xq = np.asarray(X_q15, dtype=np.int64)
    total = np.zeros((Xq.shape[0], sv.table.shape[1]), dtype=np.int64)
    for qt in qtrees:
        total += sv.table[predict_q15(qt, Xq)]
    return total


def proba_q15(sums: np.ndarray, n_trees: int) -> np.ndarray:
    """The C's ``predict_proba`` output from the sums: ``(sum + n_trees / 2) / n_trees`` (integer
    division: the mean rounded half up), uint16 units of 2^-15 (32768 = 1.0)."""
    return (np.asarray(sums, dtype=np.int64) + n_trees // 2) // n_trees


def predict_model_q15(qtrees: list[QuantizedTree], n_classes: int, X_q15: np.ndarray) -> np.ndarray:
    """Majority vote of quantised trees (ties -> lowest class index), as the generated C does."""
    if len(qtrees) == 1:
        return predict_q15(qtrees[0], X_q15)
    Xq = np.asarray(X_q15, dtype=np.int64)
    votes = np.zeros((Xq.shape[0], n_classes), dtype=np.int64)
    rows = np.arange(Xq.shape[0])
    for qt in qtrees:
        votes[rows, predict_q15(qt, Xq)] += 1
    return votes.argmax(axis=1)


def example_rows(model, data) -> tuple[np.ndarray, np.ndarray]:
    """(raw float32-representable rows, their Q15 rows) for main.c: data rows if given, else synthetic."""
    if data is not None and len(data[0]) > 0:
        X = np.asarray(data[0], dtype=np.float64)[:EXAMPLE_ROWS]
    else:
        fractions = np.linspace(0.2, 0.8, EXAMPLE_ROWS)[:, None]
        rng = np.random.default_rng(20260101)
        q = np.clip(np.round((fractions + rng.uniform(-0.15, 0.15, (EXAMPLE_ROWS, model.n_features)))
                             * Q15_ONE), 0, Q15_MAX)
        scale = model.scaling.scale
        safe = np.where(scale != 0, scale, 1.0)
        X = np.where(scale != 0, model.scaling.offset + (q / Q15_ONE) / safe, model.scaling.offset)
    big = float(np.finfo(np.float32).max)
    X = np.clip(X, -big, big).astype(np.float32).astype(np.float64)  # exactly the float literals of main.c
    return X, model.scaling.to_q15(X)


def predict_fixed(qtrees: list, X_q15: np.ndarray, n_classes: int, soft=None) -> np.ndarray:
    """Class indices of the Python fixed-point model (majority vote, ties -> lowest index; with ``soft``
    the fixed-point soft vote of :class:`~treegen.emit.lower_fixed.SoftVote`, ties -> lowest index)."""
    if soft is not None:
        return soft_sums(qtrees, soft, X_q15).argmax(axis=1)
    return np.asarray(predict_model_q15(qtrees, n_classes, np.asarray(X_q15)), dtype=np.int64)


def predict_f32(trees: list, X, n_classes: int, soft=None) -> np.ndarray:
    """Class indices computed exactly as the generated f32 C does (``trees``: the float32 trees of
    :mod:`treegen.emit.lower_f32`; ``X``: raw rows, rounded to float32 as the C receives them).
    Majority vote, ties -> lowest index; with ``soft`` (a :class:`~treegen.emit.lower_fixed.SoftVote`)
    the fixed-point soft vote."""
    leaves = f32_leaves(trees, X)
    if soft is not None:
        total = np.zeros((leaves.shape[0], n_classes), dtype=np.int64)
        for k in range(leaves.shape[1]):
            total += soft.table[leaves[:, k]]
        return total.argmax(axis=1)
    if leaves.shape[1] == 1:
        return leaves[:, 0]
    votes = np.zeros((leaves.shape[0], n_classes), dtype=np.int64)
    for k in range(leaves.shape[1]):
        votes[np.arange(leaves.shape[0]), leaves[:, k]] += 1
    return votes.argmax(axis=1)


def f32_leaves(trees: list, X) -> np.ndarray:
    """The value every tree's leaf returns (class index, or probability row with soft voting) for
    every row, as the f32 C computes it: int64 ``(rows, n_trees)``."""
    with np.errstate(over="ignore"):
        X32 = np.asarray(X, dtype=np.float32)
    if X32.ndim != 2:
        raise TreegenError(f"expected a 2-D array of rows, got shape {X32.shape}")
    keys = f32_key(X32.view(np.uint32).astype(np.int64))
    out = np.zeros((X32.shape[0], len(trees)), dtype=np.int64)
    for k, t in enumerate(trees):
        ref = np.full(X32.shape[0], t["root"], dtype=np.int64)
        if t["kind"] == "axis":
            feat = np.array([n["feature"] for n in t["nodes"]], dtype=np.int64)
            key = np.array([n["key"] for n in t["nodes"]], dtype=np.int64)
            left = np.array([n["table_left"] for n in t["nodes"]], dtype=np.int64)
            right = np.array([n["table_right"] for n in t["nodes"]], dtype=np.int64)
        elif t["kind"] == "oblique":
            W = np.array([n["w32"] for n in t["nodes"]], dtype=np.float32)
            thr = np.array([n["thr32"] for n in t["nodes"]], dtype=np.float32)
            left = np.array([n["left"] for n in t["nodes"]], dtype=np.int64)
            right = np.array([n["right"] for n in t["nodes"]], dtype=np.int64)
        active = np.flatnonzero(ref >= 0)
        while active.size:
            node = ref[active]
            if t["kind"] == "axis":
                go_left = keys[active, feat[node]] <= key[node]
            else:
                acc = np.zeros(active.size, dtype=np.float32)
                with np.errstate(all="ignore"):
                    for j in range(X32.shape[1]):  # left to right, every product and sum rounded to float32
                        acc = acc + W[node, j] * X32[active, j]
                go_left = acc <= thr[node]
            ref[active] = np.where(go_left, left[node], right[node])
            active = active[ref[active] >= 0]
        out[:, k] = -ref - 1
    return out


def predict(lowered, X_raw, X_q15, n_classes: int) -> np.ndarray:
    """Class indices of the exported model: q15 on the Q15 rows ``X_q15``, f32 on the raw rows ``X_raw``."""
    if lowered.dtype == "q15":
        return predict_fixed(lowered.qtrees, X_q15, n_classes, lowered.soft)
    return predict_f32(lowered.trees, X_raw, n_classes, lowered.soft)


def value_rows(lowered, X_raw, X_q15) -> np.ndarray:
    """``(rows, n_trees)``: the value-table row each tree's leaf returns, as the C computes it."""
    if lowered.dtype == "q15":
        Xq = np.asarray(X_q15, dtype=np.int64)
        return np.stack([predict_q15(qt, Xq) for qt in lowered.qtrees], axis=1)
    return f32_leaves(lowered.trees, X_raw)


def predict_values(lowered, X_raw, X_q15) -> np.ndarray:
    """A regression export's predictions exactly as its C returns them: q15 -- int64 fixed-point values
    (units of ``2**-frac_bits``), f32 -- float32 values (:mod:`treegen.emit.lower_value`)."""
    from treegen.emit.lower_value import combine_f32, combine_fixed

    rows = value_rows(lowered, X_raw, X_q15)
    return combine_fixed(lowered.values, rows) if lowered.dtype == "q15" else combine_f32(lowered.values, rows)


def predict_values_float(lowered, X_raw, X_q15) -> np.ndarray:
    """:func:`predict_values` as float64 numbers (q15: ``v_q * 2**-F``, exact)."""
    got = predict_values(lowered, X_raw, X_q15)
    return lowered.values.value_of(got) if lowered.dtype == "q15" else got.astype(np.float64)


def _check_values(lowered, model, X_raw, X_q15, labels) -> tuple[tuple, dict | None]:
    """:func:`check` of a regression export: expected values of the example rows (q15: fixed point,
    f32: float32) and, with data, the differences from the float model (RMSE, largest absolute)."""
    from treegen.core.metrics import regression_scores, value_difference

    ex_raw, ex_q = example_rows(model, None if X_raw is None else (X_raw,))
    examples = (ex_raw, ex_q, predict_values(lowered, ex_raw, ex_q))
    if X_raw is None or X_raw.shape[0] == 0:
        return examples, None
    got = predict_values_float(lowered, X_raw, X_q15)
    want = model.predict_value(X_raw)
    d = value_difference(got, want)
    key = "fixed" if lowered.dtype == "q15" else "f32"
    # "equal" is bit equality; "within" names the tolerance the export promises: q15, the rounding
    # bound of the value table wherever the tests take the float model's branch; f32, float32's
    # precision (2^-23 relative, once per tree summed)
    if lowered.dtype == "q15":
        tol = np.full(want.shape, float(lowered.values.bound))
        tol_text = f"{float(lowered.values.bound):.3g} (the rounding bound of the value table)"
    else:
        n = len(model.trees)
        tol = np.maximum(np.abs(want), np.finfo(np.float32).tiny) * (n * 2.0 ** -23)
        tol_text = f"{n} x 2^-23 relative (float32 precision{', per tree summed' if n > 1 else ''})"
    agreement = {"rows": int(X_raw.shape[0]), "task": "regression", f"{key}_vs_float": d["equal"],
                 f"{key}_vs_float_within": float(np.mean(np.abs(got - want) <= tol)),
                 f"{key}_vs_float_tolerance": tol_text,
                 f"{key}_vs_float_rmse": d["rmse"], f"{key}_vs_float_max_abs": d["max_abs"]}
    if labels is not None and labels.shape[0] == X_raw.shape[0]:
        try:
            y = np.asarray(labels.tolist(), dtype=np.float64)
        except (TypeError, ValueError):
            y = None
        if y is not None:
            agreement["rmse_float"] = regression_scores(y, want)["rmse"]
            agreement[f"rmse_{key}"] = regression_scores(y, got)["rmse"]
    return examples, agreement


def check(lowered, model, X_raw=None, X_q15=None, labels=None) -> tuple[tuple, dict | None]:
    """((example rows raw, their Q15 rows, expected classes), agreement) of an export.

    Example rows: the first data rows, else synthetic ones (:func:`example_rows`). With data rows
    (``X_raw`` and their ``X_q15``): the agreement of the export with the float model and, with
    ``labels``, both accuracies (fractions 0..1); else None."""
    if getattr(lowered, "values", None) is not None:
        return _check_values(lowered, model, X_raw, X_q15, labels)
    ex_raw, ex_q = example_rows(model, None if X_raw is None else (X_raw,))
    has_rows = X_raw is not None and X_raw.shape[0] > 0
    n_ex = ex_raw.shape[0]
    # one pass over the example rows and the data rows (row-wise: the same classes as two passes)
    rows_raw = np.concatenate([ex_raw, X_raw]) if has_rows else ex_raw
    rows_q = np.concatenate([ex_q, X_q15]) if has_rows else ex_q
    pred = predict(lowered, rows_raw, rows_q, model.n_classes)
    examples = (ex_raw, ex_q, pred[:n_ex])
    if not has_rows:
        return examples, None
    got = pred[n_ex:]
    float_pred = model.predict_index(X_raw, vote=lowered.vote)
    agreement = {"rows": int(X_raw.shape[0])}
    q15 = lowered.dtype == "q15"
    agreement["fixed_vs_float" if q15 else "f32_vs_float"] = _agreement(got, float_pred)
    if labels is not None and labels.shape[0] == X_raw.shape[0]:
        known = {c: i for i, c in enumerate(model.classes)}
        y = np.array([known.get(v, -1) for v in labels.tolist()], dtype=np.int64)
        agreement["accuracy_float"] = float(np.mean(float_pred == y))
        agreement["accuracy_fixed" if q15 else "accuracy_f32"] = float(np.mean(got == y))
    return examples, agreement
