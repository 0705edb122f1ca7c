"""``treegen export``: C sources for a target (inference, or the EFTI training engine with ``--train``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from treegen.cli.commands import add_command
from treegen.cli.common import (add_csv_options, add_ignore_names, csv_options, int_range,
                                model_names, positive_float)
from treegen.cli.paths import input_, output
from treegen.core.data import load_csv, load_for_model
from treegen.core.errors import ModelFileError, TreegenError
from treegen.core.limits import MAX_EFTI_DEPTH, MAX_U32
from treegen.core.model import load
from treegen.core.output import write_json
from treegen.core.targets import get as get_target
from treegen.emit.export import DTYPE_CHOICES as EXPORT_DTYPES
from treegen.emit.export import LAYOUTS as EXPORT_LAYOUTS
from treegen.emit.export import LIB_LAYOUTS as EXPORT_LIB_LAYOUTS
from treegen.emit.export import VARIANTS as EXPORT_VARIANTS
from treegen.emit.export import VOTES as EXPORT_VOTES
from treegen.emit.export import export_model
from treegen.learn.inducers.efti import EFTIParams


def register(sub) -> None:
    """Add export to the subcommands ``sub``."""
    p = add_command(sub, "export")
    add_ignore_names(p)
    add_csv_options(p)
    input_(p.add_argument("model", metavar="MODEL",
                          help="model file (treegen fit -o); with --train also a training CSV"), "model-or-data")
    input_(p.add_argument("--target", required=True, metavar="T", help="target name (see 'treegen targets')"), "target")
    p.add_argument("--layout", choices=EXPORT_LAYOUTS, default="table",
                   help="table: const node arrays + a loop; unrolled: one code block per node (default table)")
    p.add_argument("--dtype", choices=EXPORT_DTYPES, default="auto",
                   help="q15 fixed point or f32; auto (default): the exact one, f32 for imported float models "
                        "(boosted, regressors, thresholds off the Q15 grid), q15 otherwise")
    p.add_argument("--variant", choices=EXPORT_VARIANTS, default="auto",
                   help="oblique multiply-accumulate: scalar C, ARMv7E-M dsp, Helium mve, or auto (mve, else dsp, "
                        "if the target has it)")
    p.add_argument("--vote", choices=EXPORT_VOTES, default="auto",
                   help="ensembles: soft (mean leaf class probabilities, + tg_<name>_predict_proba), hard "
                        "(majority of classes), auto (the model's own: soft for imported RandomForest/ExtraTrees)")
    p.add_argument("--name", metavar="NAME", help="C identifier of the model (default: the model file name)")
    input_(p.add_argument("--data", metavar="CSV",
                          help="labelled data: fixed-vs-float agreement, accuracy, example rows"), "data")
    p.add_argument("--label", metavar="NAME", help="label column of --data (default: last, if present)")
    output(p.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (created if missing)"),
           "output directory", "folder")
    output(p.add_argument("--json", metavar="FILE", help="also write the report as JSON"), "JSON file")
    p.add_argument("--force", action="store_true",
                   help="replace files in DIR that treegen did not generate (default: refuse)")
    p.add_argument("--lib-layout", choices=EXPORT_LIB_LAYOUTS, default="plain",
                   help="plain: DIR/<name>.h/.c; platformio: a PlatformIO library (library.json, src/) for a "
                        "project's lib/; arduino: an Arduino library (library.properties, src/); cmake: add_subdirectory-ready "
                        "(CMakeLists.txt, src/); zephyr: a Zephyr module (zephyr/module.yml, CMakeLists.txt, Kconfig); "
                        "espidf: an ESP-IDF component (CMakeLists.txt, idf_component.yml) (default plain)")
    p.add_argument("--example", action="store_true",
                   help="also write an example program (own main(), kept out of the library): DIR/example/main.c; "
                        "platformio: DIR/examples/<name>/main.c; arduino: the sketch DIR/examples/<name>/<name>.ino")
    g = p.add_argument_group("on-device training (--train: the EFTI engine as a library; treegen.device.train_firmware)")
    g.add_argument("--train", action="store_true",
                   help="write the EFTI engine (tg_efti.*, tg_efti_config.c; --example: example/main.c) sized for "
                        "MODEL or a training CSV (compiled into flash), after a RAM check")
    g.add_argument("--max-depth", type=int_range(1, MAX_EFTI_DEPTH), metavar="D",
                   help="--train: maximum tree depth (default: the model's EFTI parameters, else 8)")
    g.add_argument("--max-rows", type=int_range(2, MAX_U32), metavar="N",
                   help="--train: training rows the device keeps (default: the data's or the model's n_train)")
    g.add_argument("--risk", choices=("empirical", "vicinal"), default=None,
                   help="--train: the fitness's risk (default empirical; vicinal needs the rows in flash: the kernel "
                        "widths go into tg_efti_data.c)")
    g.add_argument("--vicinity-sigma2", type=positive_float, default=None, metavar="S",
                   help="--train --risk vicinal: kernel variance per attribute variance (default 0.1)")
    p.set_defaults(func=cmd_export)



def cmd_export(args) -> int:
    if args.train:
        return cmd_export_train(args)
    if args.risk is not None or args.vicinity_sigma2 is not None:
        raise TreegenError("--risk and --vicinity-sigma2 of export go with --train")
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise TreegenError(f"output path {out} is a file, not a directory")
    if args.label is not None and args.data is None:
        raise TreegenError("--label needs --data")
    target = get_target(args.target)
    model = load(args.model)
    data = None
    if args.data is not None:
        ds = load_for_model(args.data, model.n_features, label=args.label,
                            feature_names=model_names(args, model), **csv_options(args),
                            missing=model.handles_missing)
        data = (ds.X, ds.labels if ds.labels.shape[0] else None)
    name = args.name if args.name is not None else Path(args.model).name.removesuffix(".json")
    rep = export_model(model, out, target=target, layout=args.layout, dtype=args.dtype, variant=args.variant,
                       name=name, data=data, vote=args.vote, force=args.force, lib_layout=args.lib_layout,
                       example=args.example)
    d = rep.to_dict()
    flags = ", ".join(f for f, on in (("FPU", target.fpu), ("DSP", target.dsp)) if on) or "no FPU, no DSP"
    print(f"model           {args.model}  (sha256 {rep.model_hash[:16]})")
    print(f"target          {rep.target}  ({target.core}; {flags})")
    auto = ""
    if args.dtype == "auto":
        auto = ("  (dtype auto: the source's float32 tests, which Q15 would not reproduce)" if rep.dtype == "f32"
                else "  (dtype auto: the model's Q15 tests)")
    print(f"export          {rep.name}: layout {rep.layout}, dtype {rep.dtype}"
          + (f", variant {rep.variant}" if rep.dtype == "q15" else "") + auto)
    print(f"files           {', '.join(rep.files)}")
    _print_library_use(args, out, rep.name)
    print(f"input contract  {rep.input_contract}" + ("  (raw integer inputs; tg_" + rep.name + "_predict rounds others)"
                                                    if rep.input_contract == "integer" and rep.dtype == "q15" else ""))
    if rep.task == "regression":
        print(f"values          {rep.values_line}")
    if len(rep.trees) > 1:
        bound = f"; == the float argmax unless two class means differ by <= {rep.soft_vote_bound:.3g}" \
            if rep.soft_vote_bound else ""
        print(f"vote            {rep.vote}{bound}")
    for i, t in enumerate(rep.trees):
        acc = f", int{t['acc_bits']}_t accumulator (|acc| <= {t['acc_bound']})" if t["kind"] == "oblique" and \
            t["acc_bits"] else ""
        print(f"{'trees' if i == 0 else '':<16}{i}: {t['kind']}, {t['n_internal']} internal nodes, "
              f"{t['n_leaves']} leaves, depth {t['depth']}{acc}")
    print(f"field types     child reference {rep.field_types['child_ref']}, "
          f"feature index {rep.field_types['feature_index']}")
    inputs = {"float32": "every float32 input", "integer": "every integer input", "q15": "every Q15 input"}
    if rep.exact:
        print(f"exact           yes, for {inputs[rep.input_contract]} ({rep.guarantee})")
    else:
        why = []
        if rep.thresholds_off_grid and rep.dtype == "q15":
            why.append(f"{rep.thresholds_off_grid} threshold(s) off the Q15 grid")
        if rep.soft_vote_bound:
            why.append(f"soft vote within {rep.soft_vote_bound:.3g}")
        if any(t["kind"] == "oblique" for t in rep.trees) and rep.dtype == "f32":
            why.append("oblique float32 arithmetic")
        boosted = rep.vote.startswith("sum")
        if boosted and rep.dtype == "q15":
            why.append("leaf values rounded to int32_t, tests on the Q15 grid")
        elif boosted:
            why.append(f"{rep.target}'s float arithmetic is not IEEE-754 throughout")
        elif rep.dtype == "q15" and not all(t["exact"] for t in rep.trees):
            why.append("inexact coefficients, thresholds fitted to the data given")
        key = "fixed_vs_float" if rep.dtype == "q15" else "f32_vs_float"
        if rep.agreement and "class_agreement" in rep.agreement:     # boosted f32: the C mirror's classes
            key = "class_agreement"
        measured = (f"; measured {100 * rep.agreement[key]:.2f} % agreement on the {rep.agreement['rows']} rows of --data"
                    if rep.agreement and key in rep.agreement else "; give --data to measure the agreement")
        if rep.task == "regression":
            why.append("leaf values rounded" if rep.dtype == "q15" else "leaf values in float32")
            measured = ("; value differences measured on --data: see values" if rep.agreement
                        else "; give --data to measure the value differences")
        print(f"exact           no ({', '.join(why) or 'not proven'}){measured}")
        print(f"guarantee       {rep.guarantee}")
    if rep.dtype == "q15" and rep.agreement is not None:
        moved = len(rep.unresolved_rows)
        print(f"quantisation    {'no' if moved == 0 else moved} data row{'' if moved == 1 else 's'} of --data "
              f"{'takes' if moved == 1 else 'take'} another branch than in the float model")
    print(f"estimated size  {rep.estimated_bytes} bytes  (tables{' + code estimate' if rep.layout == 'unrolled' else ''})")
    if rep.flash_bytes is None:
        print(f"flash / RAM     {rep.size_note}")
    else:
        alone = ("" if rep.flash_bytes_inference is None
                 else f"; inference path alone {rep.flash_bytes_inference} bytes flash")
        print(f"flash / RAM     {rep.flash_bytes} / {rep.ram_bytes} bytes{alone}")
        print(f"                ({rep.size_note})")
    _print_linked(rep)
    agr = rep.agreement
    if agr is not None and "raw_bit_equal" in agr:    # boosted (vote sum) f32: the C mirror's raw scores vs the model's
        cls = f", classes {100 * agr['class_agreement']:.2f} %" if "class_agreement" in agr else ""
        print(f"agreement       raw scores bit-equal on {100 * agr['raw_bit_equal']:.2f} % of {agr['rows']} rows{cls}")
    elif agr is not None and rep.task == "regression":
        key = "fixed" if rep.dtype == "q15" else "f32"
        print(f"difference      RMSE {agr[f'{key}_vs_float_rmse']:.3g}, max {agr[f'{key}_vs_float_max_abs']:.3g} "
              f"{'fixed-point' if key == 'fixed' else 'float32'} vs float  ({agr['rows']} rows)")
        if f"rmse_{key}" in agr:
            print(f"RMSE            float {agr['rmse_float']:.6g}, {'fixed-point' if key == 'fixed' else 'float32'} "
                  f"{agr[f'rmse_{key}']:.6g}")
    elif agr is not None:
        if "fixed_vs_float" in agr:
            print(f"agreement       {100 * agr['fixed_vs_float']:.2f} % fixed-point vs float  ({agr['rows']} rows)")
        if "accuracy_float" in agr:
            fixed = f", fixed-point {100 * agr['accuracy_fixed']:.2f} %" if "accuracy_fixed" in agr else ""
            print(f"accuracy        float {100 * agr['accuracy_float']:.2f} %{fixed}")
    for note in rep.notes:
        print(f"note            {note}")
    write_json(args.json, {"command": "export", "model": str(args.model), **d})
    return 0


def _print_linked(rep) -> None:
    """The flash / RAM each entry point costs in a linked image (beside the object-file figure above)."""
    from treegen.emit.size import probe_entries

    names = {key: fn for key, fn, _ in probe_entries(rep.entry_points)}
    parts = [f"{what} {names[key]}: {d['flash_bytes']} / {d['ram_bytes']} bytes" for what, key, d in
             (("Q15 entry", "q15", rep.linked_q15), ("float entry", "float", rep.linked_float))
             if d is not None and key in names]
    if parts:
        print(f"linked          {'; '.join(parts)} flash / RAM")
    print(f"                ({rep.linked_note})")


def _print_library_use(args, out: Path, name: str) -> None:
    """How to use the exported folder (library layout) and, with --example, how to build the example."""
    from treegen.emit.export import example_path, library_src_dir

    src = library_src_dir(out, args.lib_layout)
    if args.lib_layout == "platformio":
        print(f"library         PlatformIO library: copy {out} into your project's lib/ folder")
    elif args.lib_layout == "arduino":
        print(f"library         Arduino library: copy {out} into your sketchbook's libraries/ folder "
              "(or zip it and use Sketch > Include Library > Add .ZIP Library)")
    elif args.lib_layout == "cmake":
        print(f"library         CMake: add_subdirectory({out}) and target_link_libraries(your_app PRIVATE "
              f"treegen::{name})")
    elif args.lib_layout == "zephyr":
        print(f"library         Zephyr module: add {out} to ZEPHYR_EXTRA_MODULES and CONFIG_TG_{name.upper()}=y "
              "to prj.conf")
    elif args.lib_layout == "espidf":
        print(f"library         ESP-IDF component: copy {out} into your project's components/ "
              "(REQUIRES: the folder's name)")
    else:
        print(f"library         add {src / (name + '.c')} to your build and {src} to its include path (no main)")
    if args.example:
        ex = example_path(out, name, args.lib_layout)
        if args.lib_layout == "arduino":
            print(f"example         {ex} (File > Examples > {name} in the Arduino IDE)")
        elif args.lib_layout == "zephyr":
            print(f"example         west build -b <board> {out / 'example'}  (a Zephyr sample: CMakeLists.txt, "
                  "prj.conf, sample.yaml, src/main.c)")
        else:
            print(f"example         cc -std=c99 -O2 -I {src} {src / (name + '.c')} {ex} -o {name}_example")


def cmd_export_train(args) -> int:
    """``treegen export MODEL_OR_DATA --train --target T -o DIR [--max-depth D] [--max-rows N]``."""
    from treegen.device.train_firmware import export_train_library, params_from_model, training_rows
    from treegen.learn.vicinal import DEFAULT_SIGMA2

    if args.vicinity_sigma2 is not None and args.risk != "vicinal":
        raise TreegenError("--vicinity-sigma2 goes with --risk vicinal")
    risk_kw = {}
    if args.risk == "vicinal":
        risk_kw = {"risk": "vicinal",
                   "vicinity_sigma2": DEFAULT_SIGMA2 if args.vicinity_sigma2 is None else args.vicinity_sigma2}
    target = get_target(args.target)
    source = Path(args.model)
    model = None
    try:
        model = load(source)
    except ModelFileError:
        if source.suffix == ".json" or not source.is_file():
            raise
    data = None
    n_attr = n_classes = None
    if model is None:                                   # a training CSV: its rows go into flash
        ds = load_csv(source, label=args.label, **csv_options(args))
        Xq, y, C, scaling = training_rows(ds.X, ds.labels)
        data = (Xq, y, C)
        params = replace(EFTIParams(), max_depth=args.max_depth) if args.max_depth else EFTIParams()
        what = f"data {source.name} ({ds.n_rows} rows, {ds.n_features} features, {C} classes; scaling {scaling.method})"
    else:
        params = params_from_model(model, max_depth=args.max_depth)
        n_attr, n_classes = model.n_features, model.n_classes
        what = f"model {source.name} ({model.n_features} features, {model.n_classes} classes)"
        if args.data is not None:
            ds = load_for_model(args.data, model.n_features, label=args.label,
                                feature_names=model_names(args, model), **csv_options(args))
            Xq, y, C, _ = training_rows(ds.X, ds.labels, model=model)
            data = (Xq, y, C)
    max_rows = args.max_rows
    if model is not None and data is None and max_rows is None:
        max_rows = (model.metadata or {}).get("n_train")
        if not max_rows:
            raise TreegenError("--max-rows is needed with a model: how many training rows the device keeps")
    rep = export_train_library(args.output, target, params, max_rows=int(max_rows or 0), n_attr=n_attr or 0,
                               n_classes=n_classes or 0, data=data,
                               dsp=args.variant, data_source=source.name if model is None else str(args.data),
                               force=args.force, example=args.example, **risk_kw)
    s, ram = rep.spec, rep.ram
    print(f"source          {what}")
    print(f"target          {target.name}  ({target.core}; {target.ram_kb} KiB RAM, {target.flash_kb} KiB flash)")
    print(f"files           {', '.join(rep.files)}  in {args.output}")
    print(f"engine          {s['max_rows']} rows x {s['n_attr']} attributes, up to {s['n_classes']} classes, depth "
          f"{s['max_depth']}; partial reclassification {'on' if s['partial'] else 'off'}; "
          f"{ {'mve': 'VMLALDAVA (MVE)', 'dsp': 'SMLALD (DSP)'}.get(s['variant'], 'scalar')} dot product"
          f"{'; vicinal risk (sigma2 ' + str(s['vicinity_sigma2']) + ')' if s['risk'] == 'vicinal' else ''}")
    print(f"data            {'in flash (tg_efti_data.c): ' + str(s['flash_rows']) + ' rows' if s['flash_rows'] else 'your firmware fills a RAM buffer (see --example)'}")
    print(f"RAM             {ram['total']} bytes needed of {target.ram_bytes} (engine {ram['engine']}, buffers "
          f"{ram['train_buffers']}, stack {ram['stack']})")
    print(f"flash (est.)    {rep.flash_estimate} bytes (tables, data, code)")
    print(f"parameters      {params.max_iter} iterations in the example main, oversize weight "
          f"{params.oversize_weight} (--oversize-weight); parameter digest {s['params_digest']}")
    if args.example:
        print(f"example         cc -std=c99 -O2 -I {args.output} "
              f"{' '.join(str(Path(args.output) / f) for f in rep.files if f.endswith('.c'))}")
    if rep.notes and any("off (RAM)" in n for n in rep.notes):
        print("note            partial reclassification is off: it would not fit in RAM (same trees, slower)")
    write_json(args.json, {"command": "export", "train": True, **rep.to_dict()})
    return 0
