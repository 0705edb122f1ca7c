"""``treegen export``: a model -> fixed-point (Q15) or float32 C, from the Jinja templates.

A sequence of passes, each reading only the product of the one before:

1. options  :mod:`treegen.emit.options`   layout, dtype, variant, vote and target checked once, up front
2. lower    :mod:`treegen.emit.lower`     the model -> :class:`~treegen.emit.lower.Lowered`, the per-dtype
            (:mod:`~treegen.emit.lower_fixed`, :mod:`~treegen.emit.lower_f32`) description: nodes,
            leaf payloads, vote, exactness facts
3. check    :mod:`treegen.emit.check`     the Python predictors execute it: example rows with their
            expected classes, agreement with the float model on the data given
4. render   :mod:`treegen.emit.contexts`  description -> template context (flash checked against the
            target: :func:`treegen.emit.size.check_flash`)
5. write    :mod:`treegen.emit.library`   context -> ``<name>.h``, ``<name>.c`` (+ library files, example)
            rendered from ``templates/c/*.j2`` by :mod:`treegen.core.codegen`
6. measure  :mod:`treegen.emit.size`      compiled object -> flash / RAM; linked probe programs -> the
            flash / RAM an entry point costs in a linked image (library routines included)
7. report   :mod:`treegen.emit.report`    :class:`ExportReport`: files, sizes, guarantee, notes

The generated C has no run-time checks on its hot path: validation happens once, before anything is
written (unknown target/layout/dtype/variant, a DSP variant on a core without the DSP extension,
field widths, estimated flash).

Layouts:
``table``     const node arrays (struct of arrays, in flash) walked by a loop.
``unrolled``  one labelled block per internal node, connected by ``goto``; oblique nodes emit only
              their non-zero weight terms. No recursion in the generator or the generated code.

Regression models (``task`` regression, vote ``mean``): the leaves return rows of a value table,
``int32_t`` in a per-model Q format for q15 and ``float`` for f32, combined as
:mod:`treegen.emit.lower_value` documents; the entry points are ``tg_<name>_predict_value*``.

dtype ``f32`` (raw float32 inputs, no input scaling on the device): axis trees test the raw input
with the Q15 model's branch for every float32 input, oblique trees fold the scaling into float32
weights (agreement measured); see :mod:`treegen.emit.lower_f32`.

Variants (oblique q15 trees only; axis trees need no multiply-accumulate):
``scalar``    portable C99 multiply-accumulate.
``dsp``       ARMv7E-M dual 16-bit MAC (``__smlad`` / ``__smlald`` of ``<arm_acle.h>``, CMSIS's
              ``__SMLAD`` / ``__SMLALD``) when ``__ARM_FEATURE_DSP`` is defined, otherwise a portable
              static-inline emulation with the same semantics: bit-exact with ``scalar`` everywhere.
``mve``       Helium (ARMv8.1-M MVE, e.g. Cortex-M55): eight int16_t lanes multiplied and summed into
              the accumulator by one ``VMLADAVA.S16`` (int32) / ``VMLALDAVA.S16`` (int64) per vector
              (``vmladavaq_s16`` / ``vmlaldavaq_s16`` of ``<arm_mve.h>``), the last vector of the input
              tail-predicated (``vctp16q`` + ``vldrhq_z_s16``: no read beyond the row); the unrolled
              layout loads the input vectors once per tree and the weights from zero-padded rows, and
              skips all-zero vectors. Portable emulation elsewhere: bit-exact with ``scalar``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.model import Model
from treegen.emit import check as _check
from treegen.emit import contexts as _contexts
from treegen.emit import library as _library
from treegen.emit import lower as _lower
from treegen.emit import lower_fixed as _fixed
from treegen.emit import lower_value as _value
from treegen.emit import report as _report
from treegen.emit import size as _size
# the names other modules import from here (re-exported from the passes that own them)
from treegen.emit.check import EXAMPLE_ROWS, f32_leaves, predict_f32, predict_fixed  # noqa: F401
from treegen.emit.contexts import MVE_LANES, used_features  # noqa: F401
from treegen.emit.library import (LIB_VERSION, TEMPLATES, example_path, library_src_dir,  # noqa: F401
                                  library_texts)
from treegen.emit.lower_f32 import (_f32_axis_node, f32_axis_split, f32_axis_splits, f32_below_above,  # noqa: F401
                                    f32_bits, f32_key, grid_matches_raw, q15_of_raw)
from treegen.emit.options import (DTYPE_CHOICES, DTYPES, LAYOUTS, LIB_LAYOUTS, VARIANTS, VOTES, _choice,  # noqa: F401
                                  check_options, default_dtype, default_name, resolve_dtype,
                                  resolve_variant)
from treegen.emit.report import ExportReport
from treegen.emit.size import SIZE_CFLAGS, STRICT_CFLAGS, inference_bytes, measure_size  # noqa: F401


def export_model(model: Model, out_dir, *, target, layout: str = "table", dtype: str = "auto",
                 variant: str = "auto", name: str | None = None, data=None, measure: bool = True,
                 vote: str = "auto", force: bool = False, lib_layout: str = "plain",
                 example: bool = False, link: bool = True) -> ExportReport:
    """Write the library ``<name>.h`` and ``<name>.c`` into ``out_dir``; return an :class:`ExportReport`.

    ``lib_layout``: ``plain`` (the two files in ``out_dir``), ``platformio`` (``library.json`` +
    ``src/``) or ``arduino`` (``library.properties`` + ``src/``), see :mod:`treegen.emit.library`.
    ``example``: also write an example program (``example/main.c``; ``examples/<name>/main.c`` for
    platformio; the sketch ``examples/<name>/<name>.ino`` for arduino) that classifies a few rows and
    compares them with the Python model. The library files never define ``main``, so the folder can
    be dropped into an application as it is.

    Files already in ``out_dir`` are replaced only if treegen generated them (they carry its banner)
    or ``force`` is true; otherwise nothing is written and a :class:`TreegenError` names the file.

    ``dtype``: ``q15``, ``f32`` or ``auto`` (default: :func:`~treegen.emit.options.default_dtype`, the
    exact one: f32 for imported float models whose thresholds Q15 cannot reproduce, q15 otherwise).
    ``target`` is a target name or :class:`~treegen.core.targets.Target`; ``data`` is an optional
    ``(X_raw, labels)`` pair: its rows resolve inexact thresholds during quantisation, give the
    fixed-vs-float agreement and both accuracies, and provide the example rows of ``main.c``.
    ``vote`` (ensembles): ``soft`` (mean leaf probabilities, fixed point; adds
    ``tg_<name>_predict_proba``), ``hard`` (majority of classes) or ``auto`` (the model's own vote).
    ``measure``: size the compiled object; ``link`` (with ``measure``): also link the size probes
    (:func:`treegen.emit.size.measure_linked`; four links, skipped by callers that only need the object).
    """
    dtype = resolve_dtype(model, dtype)
    if model.vote == "sum":          # additive (boosted) models: their own float32 export
        from treegen.emit.export_boost import export_boost
        return export_boost(model, out_dir, target=target, name=name, dtype=dtype, layout=layout, data=data,
                            measure=measure, force=force, lib_layout=lib_layout, example=example, variant=variant)
    tgt, variant, ident, vote = check_options(model, target=target, layout=layout, dtype=dtype, variant=variant,
                                              vote=vote, lib_layout=lib_layout, name=name)
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise TreegenError(f"output path {out_dir} is a file, not a directory")
    model.validate()
    soft = _fixed.soft_vote_for(model, vote)
    values = _value.value_vote(model) if model.is_regression else None
    X_raw = labels = X_q = None
    if data is not None:
        X_raw = np.asarray(data[0], dtype=np.float64)
        labels = None if len(data) < 2 or data[1] is None else np.asarray(data[1], dtype=object)
        X_q = model.scaling.to_q15(X_raw)

    lowered = _lower.lower(model, dtype=dtype, vote=vote, soft=soft, X_q15=X_q, values=values)
    examples, agreement = _check.check(lowered, model, X_raw, X_q, labels)
    ctx = _contexts.template_context(lowered, model, name=ident, target=tgt, layout=layout, variant=variant,
                                     examples=examples, progmem=lib_layout == "arduino")
    estimated = _size.check_flash(ctx, soft, tgt)
    files, src_dir, lib_notes = _library.write_library(ctx, out_dir, lib_layout=lib_layout, example=example,
                                                       force=force)
    size = (_size.measure(src_dir, ident, tgt, dtype, model.n_features, link=link, value=model.is_regression)
            if measure
            else {"flash_bytes": None, "ram_bytes": None, "sections": {}, "note": "not measured (measure=False)",
                  "linked": {"note": "not linked (measure=False)"}})
    rep = _report.make_report(model, lowered, ctx, target=tgt.name, variant=variant, files=files,
                              estimated=estimated, size=size, agreement=agreement,
                              ieee_float=bool(tgt.extra.get("ieee_float", True)))
    rep.notes.extend(lib_notes)
    return rep


def build_context(model: Model, *, name: str, target, layout: str, dtype: str, variant: str,
                  qtrees: list | None, examples: tuple | None = None, soft=None) -> dict:
    """The template context of ``model`` (lowered, then :func:`treegen.emit.contexts.template_context`);
    ``qtrees``: the quantised trees of a q15 export, ``soft``: the :class:`~treegen.emit.lower_fixed.SoftVote`
    of a soft-voting ensemble, ``examples``: (raw rows, Q15 rows, expected classes)."""
    lowered = _lower.lower(model, dtype=dtype, vote="soft" if soft is not None else model.vote, soft=soft,
                           qtrees=qtrees, values=_value.value_vote(model) if model.is_regression else None)
    return _contexts.template_context(lowered, model, name=name, target=target, layout=layout, variant=variant,
                                      examples=examples)
