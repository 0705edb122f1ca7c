"""The render pass, first half: the description of an export (:class:`~treegen.emit.lower.Lowered`) ->
the template context, plain data for ``templates/c/*.j2``.

What is decided here is how the C is laid out, not what it computes: the dual-MAC pairs and the
MVE vectors of an oblique node, which tests are constant and which nodes unreachable (the unrolled
layout drops them), the narrowest C types of child references and feature indices, literals for
the scaling and the example rows, names and labels as C text.
"""

from __future__ import annotations

import numpy as np

from treegen.core.codegen import c_string_body, comment_text, f32_literal, int_type
from treegen.core.tree import LEAF
from treegen.core.version import __version__
from treegen.emit.lower_scaling import used_features  # noqa: F401  (re-exported)

MVE_LANES = 8  # int16_t lanes of a 128-bit Helium vector


def _pairs(weights_row: np.ndarray) -> tuple[list, list]:
    """Non-zero terms of an oblique node split into adjacent pairs (dual MAC) and single terms."""
    nz = [int(j) for j in np.flatnonzero(weights_row)]
    pairs, singles = [], []
    k = 0
    while k < len(nz):
        j = nz[k]
        if k + 1 < len(nz) and nz[k + 1] == j + 1:
            pairs.append({"feature": j, "w0": int(weights_row[j]), "w1": int(weights_row[j + 1])})
            k += 2
        else:
            singles.append({"feature": j, "weight": int(weights_row[j])})
            k += 1
    return pairs, singles


def _mark_constant_tests(nodes: list, type_max: int | None, type_min: int | None = None) -> None:
    """Flag tests whose outcome is fixed: ``always_left`` (threshold >= the compared type's maximum),
    ``always_right`` (threshold < ``type_min``, when given) and the nodes they make unreachable. The
    unrolled layout emits a plain jump there (a literal comparison would be always true or false,
    which C compilers rightly warn about) and drops the dead blocks. Nodes that already carry
    ``always_left`` / ``always_right`` keep them (``type_max`` None: f32 nodes, flagged beforehand)."""
    for n in nodes:
        if type_max is not None:
            n["always_left"] = n["threshold"] >= type_max
            n["always_right"] = type_min is not None and n["threshold"] < type_min
        n.setdefault("always_left", False)
        n.setdefault("always_right", False)
        n["reachable"] = False
    if not nodes:
        return
    stack = [0]
    while stack:
        n = nodes[stack.pop()]
        n["reachable"] = True
        if n["always_left"]:
            children = [n["left"]]
        elif n["always_right"]:
            children = [n["right"]]
        else:
            children = [n["left"], n["right"]]
        stack.extend(c for c in children if c >= 0)


def _c_double(v: float) -> str:
    """An exact C99 double literal (hexadecimal floating constant)."""
    return float(v).hex()


def _q15_render(t: dict) -> dict:
    """A q15 tree of the description with what the templates lay out: per oblique node its non-zero
    terms, dual-MAC pairs and MVE vectors; constant tests and reachability; the MVE input vectors
    and whether the accumulator is used at all."""
    t = {**t, "nodes": [dict(n) for n in t["nodes"]]}
    for node in t["nodes"]:
        if "weights" in node:
            row = np.asarray(node["weights"], dtype=np.int64)
            node["terms"] = [{"feature": int(j), "weight": int(row[j])} for j in np.flatnonzero(row)]
            node["pairs"], node["singles"] = _pairs(row)
            padded = [int(v) for v in row] + [0] * (-len(row) % MVE_LANES)
            node["mve_padded"] = padded
            node["mve_chunks"] = [k for k in range(len(padded) // MVE_LANES)
                                  if any(padded[k * MVE_LANES:(k + 1) * MVE_LANES])]
    nodes = t["nodes"]
    # axis tests compare the input as uint16_t (0..32767 by contract): T = -1 is a constant "right"
    _mark_constant_tests(nodes, (1 << (t["acc_bits"] - 1)) - 1, 0 if t["kind"] == "axis" else None)
    tested = [n for n in nodes if n["reachable"] and not n["always_left"] and not n["always_right"]]
    t["mve_x_chunks"] = sorted({k for n in tested for k in n.get("mve_chunks", [])})
    t["uses_acc"] = t["kind"] == "oblique" and bool(tested)
    return t


def _f32_render(t: dict) -> dict:
    """A float32 tree of the description with its constant tests and reachability marked."""
    t = {**t, "nodes": [dict(n) for n in t["nodes"]]}
    _mark_constant_tests(t["nodes"], None)
    return t


def template_context(lowered, model, *, name: str, target, layout: str, variant: str,
                     examples: tuple | None = None, progmem: bool = False) -> dict:
    """Everything the templates need, as plain data. ``examples``: (raw rows, their Q15 rows, expected
    classes) for the example program. ``progmem``: tables in AVR program memory even when the target
    does not ask for it (an Arduino library, built for AVR and for other cores: the C selects PROGMEM
    with ``__AVR__``)."""
    n_features, n_classes = model.n_features, model.n_classes
    soft = lowered.soft
    feat_t = int_type(0, max(n_features - 1, 0), f"feature index (model has {n_features} features)")
    values = getattr(lowered, "values", None)
    n_leaf_values = n_classes if soft is None else int(soft.table.shape[0])
    if values is not None:
        n_leaf_values = values.n_rows
    if lowered.dtype == "q15":
        trees = [_q15_render(t) for t in lowered.trees]
    else:
        trees = [_f32_render(t) for t in lowered.trees]
    hi = max(max(t["n_internal"] - 1, 0) for t in trees)
    lo = -n_leaf_values
    leaf_what = f"{n_classes} classes" if soft is None else f"{n_leaf_values} leaf probability rows"
    if values is not None:
        leaf_what = f"{n_leaf_values} leaf values"
    ref_t = int_type(lo, hi, f"child reference ({hi + 1} internal nodes, {leaf_what})")
    for t in trees:
        t["acc_c"] = "int64_t" if t["acc_bits"] == 64 else "int32_t"
    oblique = [t for t in trees if t["kind"] == "oblique"]
    scale = model.scaling
    # q15, axis trees only: the raw-input entry point tests each Q15 split on the raw float32 bits
    raw_split = lowered.raw_split
    raw_trees = [_f32_render(t) for t in lowered.raw_trees] if raw_split else []
    if raw_split:
        hi_raw = max(max(t["n_internal"] - 1, 0) for t in raw_trees)
        if hi_raw > hi:
            ref_t = int_type(lo, hi_raw, f"child reference ({hi_raw + 1} internal nodes, {leaf_what})")
    progmem = progmem or bool(getattr(target, "progmem", False))
    ctx = {
        "version": __version__,
        "model_hash": model.hash(),
        "name": name,
        "NAME": name.upper(),
        "target": {"name": target.name, "core": target.core, "dsp": target.dsp, "fpu": target.fpu},
        "layout": layout, "dtype": lowered.dtype, "variant": variant,
        "n_features": n_features, "n_classes": n_classes, "n_trees": len(trees),
        "features": [{"index": i, "name": comment_text(n)} for i, n in enumerate(model.feature_names)],
        "classes": [{"index": i, "label": c_string_body(c), "comment": comment_text(c)}
                    for i, c in enumerate(model.classes)],
        "scaling": {
            "method": scale.method,
            "features": [{**f, "offset_c": _c_double(f["offset"]), "scale_c": _c_double(f["scale"]),
                          "name": comment_text(model.feature_names[f["index"]])} for f in lowered.scaling],
        },
        "contract": model.contract,
        "vote": "soft" if soft is not None else ("mean" if values is not None else "hard"),
        "value": None if values is None else {
            "n_rows": values.n_rows, "frac_bits": values.frac_bits, "mean": bool(values.mean and len(trees) > 1),
            "q": [int(v) for v in values.q], "f32": [f32_literal(v) for v in values.f32],
            "half": len(trees) // 2, "bound": f"{values.bound:.3g}",
            "max_abs_q": int(np.max(np.abs(values.q))) if values.n_rows else 0},
        "soft": None if soft is None else {
            "rows": [[int(v) for v in row] for row in soft.table], "n_rows": n_leaf_values,
            "exact": bool(soft.exact), "bound": f"{soft.bound:.3g}", "onehot": bool(soft.onehot)},
        "raw_thresholds": model.has_raw_thresholds,
        "raw_split": raw_split, "raw_trees": raw_trees,
        "has_raw_axis": any(t["kind"] == "axis" for t in raw_trees),
        "trees": trees,
        "ref_t": ref_t, "feat_t": feat_t,
        "acc_sizes": sorted({t["acc_bits"] for t in oblique}),
        "has_axis": any(t["kind"] == "axis" for t in trees),
        "has_oblique": bool(oblique),
        "odd_features": n_features % 2 == 1,
        # MVE: the input as whole 8-lane vectors, the last one tail-predicated (fewer lanes)
        "mve_padded": -(-n_features // MVE_LANES) * MVE_LANES,
        "mve_chunks": [{"k": k, "offset": k * MVE_LANES,
                        "load": f"tg_{name}_vld" if n_features - k * MVE_LANES >= MVE_LANES else f"tg_{name}_vldn",
                        "args": "" if n_features - k * MVE_LANES >= MVE_LANES
                        else f", {n_features - k * MVE_LANES}u"}
                       for k in range(-(-n_features // MVE_LANES))],
        "vote_t": "uint16_t",
        # AVR: tables in program memory (PROGMEM + pgm_read_*), not copied to RAM by the startup code
        "progmem": progmem,
        "progmem_i64": progmem and layout == "table" and lowered.dtype == "q15" and 64 in {t["acc_bits"] for t in oblique},
    }
    if examples is not None:
        ctx["examples"] = _examples(*examples)
    return ctx


def _examples(X_raw: np.ndarray, X_q: np.ndarray, expected: np.ndarray) -> list:
    """Example rows; ``expected``: class indices, or a regression export's values (int64 fixed point /
    float32, written as exact C literals)."""
    if expected.dtype == np.float32:
        shown = [f32_literal(v) + "f" for v in expected]
    else:
        shown = [int(v) for v in expected]
    return [{"raw": [f32_literal(v) for v in X_raw[r]], "q15": [int(v) for v in X_q[r]], "expected": shown[r]}
            for r in range(X_raw.shape[0])]
