"""The report of an export: what was written and measured, and what is guaranteed — the exactness
facts of the description (:class:`~treegen.emit.lower.Lowered`) stated for the model's input contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from treegen.emit.entry_points import tree_entry_points


@dataclass
class ExportReport:
    """What :func:`treegen.emit.export.export_model` wrote and measured. ``to_dict()`` is JSON-ready."""

    name: str
    target: str
    layout: str
    dtype: str
    variant: str
    model_hash: str
    files: list
    n_features: int
    n_classes: int
    trees: list                       # per tree: kind, internal nodes, leaves, depth, acc_bits, acc_bound, exact
    acc_bits: int | None              # widest accumulator (q15 oblique), 16 = no accumulator, None for f32
    exact: bool | None                # the export predicts as the source / float model for every input of
                                      # the input contract (tests and vote); see ``guarantee`` and ``notes``
    unresolved_rows: list             # data rows that cannot keep their float side after quantisation
    field_types: dict                 # child reference / feature index C types
    estimated_bytes: int              # tables (+ an estimate of unrolled code), used for the flash check
    flash_bytes: int | None = None    # measured on the compiled object (size tool), None if no compiler;
                                      # the object alone: library routines (soft-float ...) not counted
    ram_bytes: int | None = None
    flash_bytes_inference: int | None = None  # the classification path alone (no labels, no raw wrapper)
    sections: dict = field(default_factory=dict)
    size_note: str = ""
    agreement: dict | None = None     # with data: fixed-vs-float agreement and both accuracies (fractions 0..1)
    notes: list = field(default_factory=list)
    vote: str = "single tree"         # ensembles: soft / hard
    input_contract: str = "float32"   # float32 / integer / q15 (Model.contract)
    guarantee: str = ""               # what holds for every input of the contract
    thresholds_off_grid: int | None = None  # imported models: tests whose Q15 grid test differs from the source
    soft_vote_bound: float | None = None    # soft vote == float argmax unless class means differ by <= this
    # in a linked image (treegen.emit.size.measure_linked): what an entry point costs, library routines
    # included; {"flash_bytes", "ram_bytes"} or None (not linked: see linked_note)
    linked_q15: dict | None = None          # tg_<name>_predict_q15 (dtype q15)
    linked_float: dict | None = None        # tg_<name>_predict (raw float32 inputs)
    linked_note: str = ""
    # regression exports: the value table (treegen.emit.lower_value)
    task: str = "classification"
    value_frac_bits: int | None = None      # q15: int32_t values in units of 2^-value_frac_bits
    value_bound: float | None = None        # q15: |fixed-point value - float model| <= this where the tests agree
    values_line: str = ""                   # how the leaf values are stored and combined, and what was measured
    # the C functions the export declares: name, input and output type (treegen.emit.entry_points)
    entry_points: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def make_report(model, lowered, ctx: dict, *, target: str, variant: str, files: list, estimated: int,
                size: dict, agreement: dict | None, ieee_float: bool = True) -> ExportReport:
    """The :class:`ExportReport` of an export: the description's exactness facts (``lowered``), what
    the template context decided (``ctx``), the written ``files``, the flash ``estimated`` and
    ``size`` (:func:`treegen.emit.size.measure`, or not measured), the data's ``agreement``."""
    dtype, ident, soft = lowered.dtype, ctx["name"], lowered.soft
    has_axis = any(t["kind"] == "axis" for t in lowered.trees)
    has_oblique = any(t["kind"] == "oblique" for t in lowered.trees)
    notes = []
    if dtype == "f32":
        if has_axis and model.has_raw_thresholds:
            notes.append("f32: axis trees compare the raw float32 inputs with the source model's own thresholds "
                         "(x <= the largest float32 not above t): its branch for every float32 input")
        elif has_axis:
            notes.append("f32: axis trees compare the raw float32 inputs with thresholds converted to raw units "
                         "at export: the same branch as the Q15 model for every float32 input, no scaling on "
                         "the device")
        if has_oblique:
            notes.append("f32: oblique trees fold the input scaling into float32 weights and thresholds (no Q15 "
                         "snapping, no clipping): agreement with the float model is measured, not exact")
        if agreement is not None and "f32_vs_float" in agreement and agreement.get("task") != "regression":
            notes.append(f"f32: {100 * agreement['f32_vs_float']:.2f} % agreement with the float model "
                         f"({agreement['rows']} rows)")

    # ---- what is guaranteed, for every input of the model's input contract
    contract = model.contract
    off_grid = lowered.off_grid
    tests_exact, exact = lowered.exact_tests, lowered.exact
    source = "the source model's float32 tests" if model.has_raw_thresholds else "the model"
    inputs = {"float32": "every float32 input", "integer": "every integer input",
              "q15": "every Q15 input"}[contract]
    if dtype == "q15":
        guarantee = (f"C == Python fixed-point model on every Q15 input (tg_{ident}_predict_q15) and on every "
                     f"float32 input (tg_{ident}_predict: the same Q15 values, integer scaling, any int and "
                     f"double width)")
        if not tests_exact:
            if model.has_raw_thresholds and off_grid:
                notes.append(f"q15: {off_grid} threshold(s) lie between two Q15 grid points: an input in the grid "
                             f"cell of such a threshold can take the other branch than {source}")
            else:
                notes.append("q15: inexact coefficients; thresholds fitted to the data given")
    else:
        if not has_oblique:
            guarantee = (f"each test takes the branch of {source} for every float32 input "
                         "(compare on IEEE-754 bits; no scaling on the device)")
        elif ieee_float:
            guarantee = ("oblique trees: C == Python float32 evaluation (predict_f32, left to right, no FMA "
                         "contraction) on every float32 input; agreement with the model measured")
        else:
            guarantee = (f"oblique trees: float32 arithmetic of {target}'s C library, which is not IEEE-754 "
                         "throughout (subnormals flush to zero): C == Python float32 evaluation only where "
                         "no subnormal occurs; agreement with the model measured")
    values = getattr(lowered, "values", None)
    values_line = ""
    if values is not None:
        guarantee = guarantee.replace(f"tg_{ident}_predict_q15", f"tg_{ident}_predict_value_q15").replace(
            f"tg_{ident}_predict:", f"tg_{ident}_predict_value:")
        mean = f"; the mean of {len(model.trees)} trees" if len(model.trees) > 1 else ""
        if dtype == "q15":
            rounding = " (int64_t sum, rounded half away from zero)" if mean else ""
            values_line = (f"{values.n_rows} leaf values in int32_t units of 2^-{values.frac_bits}{mean}{rounding}: "
                           f"within {values.bound:.3g} of the float model's value wherever the tests take its branch")
        else:
            values_line = (f"{values.n_rows} leaf values in float32{mean} (float32 sum in tree order, one "
                           "division)")
        key = "fixed" if dtype == "q15" else "f32"
        if agreement is not None and f"{key}_vs_float_rmse" in agreement:
            values_line += (f"; measured on the {agreement['rows']} data rows: RMSE "
                            f"{agreement[f'{key}_vs_float_rmse']:.3g}, max |difference| "
                            f"{agreement[f'{key}_vs_float_max_abs']:.3g} from the float model; "
                            f"{100 * agreement[f'{key}_vs_float_within']:.2f} % of rows within "
                            f"{agreement[f'{key}_vs_float_tolerance']}, "
                            f"{100 * agreement[f'{key}_vs_float']:.2f} % bit-equal")
    elif soft is not None:
        guarantee += ("; soft vote exact (every leaf probability is a multiple of 2^-15)" if soft.exact else
                      f"; soft vote == float argmax unless two class means differ by <= {soft.bound:.3g}")
    if exact:
        notes.insert(0, f"exact: predicts as {source} for {inputs} (input contract {contract})")
    elif agreement is not None and values is None:
        key = "fixed_vs_float" if dtype == "q15" else "f32_vs_float"
        notes.append(f"not exact for {inputs}: measured {100 * agreement[key]:.2f} % agreement with {source} "
                     f"on the {agreement['rows']} data rows given")
    if dtype == "q15" and contract == "integer":
        notes.append(f"input contract integer: tg_{ident}_predict{'_value' if values is not None else ''} rounds a non-integer input to the nearest integer "
                     "(half to even) before the test")
    if dtype == "q15" and variant in ("dsp", "mve") and not has_oblique:
        notes.append(f"variant {variant}: the model has no oblique tree, axis tests need no multiply-accumulate")
    if lowered.unresolved:
        notes.append(f"{len(lowered.unresolved)} data row(s) cannot keep their float side after quantisation")

    trees_info = [{k: t[k] for k in ("kind", "n_internal", "n_leaves", "depth", "acc_bits", "acc_bound", "exact")}
                  for t in lowered.trees]
    if dtype == "f32":
        for t in trees_info:
            t["acc_bits"] = t["acc_bound"] = None
        acc_bits = None
    else:
        acc_bits = max(t["acc_bits"] for t in lowered.trees)
    return ExportReport(
        name=ident, target=target, layout=ctx["layout"], dtype=dtype, variant=variant, model_hash=ctx["model_hash"],
        files=[str(p) for p in files], n_features=model.n_features, n_classes=model.n_classes, trees=trees_info,
        acc_bits=acc_bits, exact=exact, unresolved_rows=lowered.unresolved,
        field_types={"child_ref": ctx["ref_t"]["c"], "feature_index": ctx["feat_t"]["c"]},
        estimated_bytes=estimated, flash_bytes=size["flash_bytes"], ram_bytes=size["ram_bytes"],
        flash_bytes_inference=size.get("inference"),
        sections=size["sections"], size_note=size["note"], agreement=agreement, notes=notes,
        vote=ctx["vote"] if len(model.trees) > 1 else "single tree", input_contract=contract,
        guarantee=guarantee, thresholds_off_grid=off_grid,
        soft_vote_bound=None if soft is None else float(soft.bound),
        linked_q15=size.get("linked", {}).get("q15"), linked_float=size.get("linked", {}).get("float"),
        linked_note=size.get("linked", {}).get("note", ""),
        task=model.task, value_frac_bits=None if values is None or dtype != "q15" else values.frac_bits,
        value_bound=None if values is None or dtype != "q15" else float(values.bound), values_line=values_line,
        entry_points=tree_entry_points(ident, dtype=dtype, regression=values is not None, soft=bool(ctx.get("soft"))),
    )
