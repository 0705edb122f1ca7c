"""What an export can be asked for, checked once before anything is computed or written: layout,
dtype, variant, vote and library layout, and the target's extensions (a DSP or MVE variant on a
core without them is refused)."""

from __future__ import annotations

import re
from pathlib import Path

from treegen.core import targets as _targets
from treegen.core.codegen import c_identifier
from treegen.core.errors import TreegenError

LAYOUTS = ("table", "unrolled")
DTYPES = ("q15", "f32")
#: what ``dtype`` may be asked for: a dtype, or ``auto`` (:func:`default_dtype`)
DTYPE_CHOICES = ("auto",) + DTYPES
VARIANTS = ("auto", "scalar", "dsp", "mve")
VOTES = ("auto", "soft", "hard")
#: how the files of an export are laid out (:mod:`treegen.emit.library`)
LIB_LAYOUTS = ("plain", "platformio", "arduino", "cmake", "zephyr", "espidf")
INT16_LIMIT = 32767  # features, classes, trees: counted in C int (16 bits on AVR)


def _choice(value: str, choices: tuple, what: str) -> str:
    if value not in choices:
        raise TreegenError(f"unknown {what} {value!r} (choose from {', '.join(choices)})")
    return value


def resolve_variant(variant: str, target: _targets.Target, dtype: str) -> str:
    """``auto`` -> ``mve`` on targets with Helium (``mve = true``), else ``dsp`` on targets with the DSP
    extension, else ``scalar``; ``dsp`` and ``mve`` need their extension."""
    _choice(variant, VARIANTS, "variant")
    if dtype == "f32":
        if variant in ("dsp", "mve"):
            raise TreegenError(f"variant {variant!r} applies to the q15 dtype only (f32 uses the FPU)")
        return "scalar"
    if variant == "auto":
        return "mve" if target.mve else ("dsp" if target.dsp else "scalar")
    if variant == "mve" and not target.mve:
        raise TreegenError(f"variant 'mve' needs the M-profile Vector Extension (Helium); target {target.name!r} "
                           f"({target.core}) has none")
    if variant == "dsp" and not target.dsp:
        raise TreegenError(f"variant 'dsp' needs the ARMv7E-M DSP extension; target {target.name!r} "
                           f"({target.core}) has none")
    return variant


def default_dtype(model) -> str:
    """The dtype ``auto`` resolves to: the one exact for the model's inputs.

    ``f32`` for a model whose tests are its source library's float thresholds (imported XGBoost,
    LightGBM, scikit-learn, ONNX models) when Q15 would not reproduce them: every boosted (vote sum)
    model (its Q15 leaf values are rounded), an imported regressor (Q15 values rounded), and an
    imported tree or forest with a threshold between two Q15 grid points. The f32 export compares the
    raw float32 input with the source's own threshold: the source's branch for every float32 input.
    ``q15`` otherwise: treegen-trained models (exact by construction on the Q15 grid) and imported
    models whose every threshold lies on the grid (integer data)."""
    if not model.has_raw_thresholds:
        return "q15"
    if model.vote == "sum":
        return "f32"
    from treegen.emit.lower_f32 import thresholds_off_grid
    return "f32" if model.is_regression or thresholds_off_grid(model) > 0 else "q15"


def resolve_dtype(model, dtype: str) -> str:
    """``dtype`` checked; ``auto`` -> :func:`default_dtype`."""
    _choice(dtype, DTYPE_CHOICES, "dtype")
    return default_dtype(model) if dtype == "auto" else dtype


def default_name(model) -> str:
    dataset = str((model.metadata or {}).get("dataset") or "")
    stem = re.sub(r"(\.csv)?(\.gz)?$", "", Path(dataset).name) if dataset else ""
    return c_identifier(stem or "model")


def check_options(model, *, target, layout: str, dtype: str, variant: str, vote: str, lib_layout: str,
                  name: str | None) -> tuple:
    """(target, variant, C name, vote) of an export: the :class:`~treegen.core.targets.Target` of
    ``target`` (a name or a Target), the resolved variant (:func:`resolve_variant`), the C identifier
    of ``name`` (default: the dataset's stem) and the vote (``auto``: the model's own)."""
    tgt = target if isinstance(target, _targets.Target) else _targets.get(str(target))
    _choice(layout, LAYOUTS, "layout")
    _choice(dtype, DTYPES, "dtype")
    _choice(vote, VOTES, "vote")
    _choice(lib_layout, LIB_LAYOUTS, "library layout")
    variant = resolve_variant(variant, tgt, dtype)
    for what, n in (("features", model.n_features), ("classes", model.n_classes), ("trees", len(model.trees))):
        if n > INT16_LIMIT:  # the C counts them in int, which may have 16 bits (AVR)
            raise TreegenError(f"model has {n} {what}; the generated C supports at most {INT16_LIMIT}")
    ident = c_identifier(name) if name is not None else default_name(model)
    if model.vote == "sum":
        raise TreegenError("exporting an additive (boosted, vote 'sum') model is not supported yet")
    if model.vote in ("mean", "sum") and vote != "auto":
        raise TreegenError(f"--vote {vote} applies to classification ensembles; this model combines its trees by "
                           f"{model.vote!r}")
    return tgt, variant, ident, model.vote if vote == "auto" else vote
