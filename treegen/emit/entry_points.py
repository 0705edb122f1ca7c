"""The C entry points an export declares, as data: the report records them (``ExportReport.entry_points``)
so that a harness binds to what the export says it provides, not to the header's text.

Each entry point is ``{"name": C function, "input": "float32" | "q15", "output": ...}`` where ``output`` is
``"class"`` (an ``int`` class index), ``"value_int32"`` (a fixed-point regression value), ``"value_f32"``
(a float32 regression value), ``"proba_u16"`` (``n_classes`` uint16_t probabilities in units of 2^-15,
through an output array), ``"raw_f32"`` / ``"raw_f64"`` / ``"raw_int32"`` (the ``n_outputs`` raw scores of
a boosted model through an output array) or ``"value_f64"`` (a boosted regressor's double prediction).
"""

from __future__ import annotations


def _ep(name: str, inp: str, out: str) -> dict:
    return {"name": name, "input": inp, "output": out}


def tree_entry_points(ident: str, *, dtype: str, regression: bool, soft: bool) -> list[dict]:
    """The tree export (templates/c/model.h.j2)."""
    p = f"tg_{ident}"
    if regression:
        if dtype == "q15":
            return [_ep(f"{p}_predict_value_q15", "q15", "value_int32"),
                    _ep(f"{p}_predict_value", "float32", "value_int32")]
        return [_ep(f"{p}_predict_value_f32", "float32", "value_f32"),
                _ep(f"{p}_predict_value", "float32", "value_f32")]
    if dtype == "q15":
        eps = [_ep(f"{p}_predict_q15", "q15", "class"), _ep(f"{p}_predict", "float32", "class")]
        if soft:
            eps += [_ep(f"{p}_predict_proba_q15", "q15", "proba_u16"), _ep(f"{p}_predict_proba", "float32", "proba_u16")]
        return eps
    eps = [_ep(f"{p}_predict_f32", "float32", "class"), _ep(f"{p}_predict", "float32", "class")]
    if soft:
        eps.append(_ep(f"{p}_predict_proba", "float32", "proba_u16"))
    return eps


def boost_entry_points(ident: str, *, dtype: str, classification: bool, sum_dtype: str = "float32") -> list[dict]:
    """The boosted export (templates/c/boost*.h.j2): ``sum_dtype`` the f32 export's sum type."""
    p = f"tg_{ident}"
    if dtype == "q15":
        return [_ep(f"{p}_raw_q15", "q15", "raw_int32"),
                _ep(f"{p}_predict_q15", "q15", "class" if classification else "value_int32")]
    wide = "f64" if sum_dtype in ("float64", "double") else "f32"
    return [_ep(f"{p}_raw", "float32", f"raw_{wide}"),
            _ep(f"{p}_predict", "float32", "class" if classification else f"value_{wide}")]


def find(entry_points: list[dict], *, input: str, output: str) -> dict | None:
    """The first entry point taking ``input`` and giving ``output``, or None."""
    return next((e for e in entry_points if e["input"] == input and e["output"] == output), None)
