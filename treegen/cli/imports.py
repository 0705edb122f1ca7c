"""``treegen import FILE -o MODEL.json``: a model of another library -> a treegen model file.

    treegen import model.json -o m.json               (XGBoost JSON / UBJSON, CatBoost .cbm / JSON, Treelite
                                                       checkpoint, LightGBM model text, ONNX)
    treegen import clf.joblib --trust-pickle -o m.json  (a pickled scikit-learn / XGBoost / LightGBM estimator)
    treegen import model.txt --data train.csv -o m.json (the data fit the input scaling of the q15 export)
"""

from __future__ import annotations

from treegen.cli.commands import add_command
from treegen.cli.paths import input_, output
from treegen.core.output import STDOUT, write_text


def register(sub) -> None:
    """Add import to the subcommands ``sub``."""
    p = add_command(sub, "import")
    input_(p.add_argument("source", metavar="FILE",
                          help="XGBoost JSON/UBJSON model, CatBoost .cbm/JSON model, Treelite checkpoint, LightGBM model "
                               "text, ONNX model, or a pickle/joblib estimator"),
           "foreign-model")
    output(p.add_argument("-o", "--output", required=True, metavar="MODEL.json", help="model file to write"),
           "model file")
    input_(p.add_argument("--data", metavar="CSV",
                          help="data the model will see (header row, label column last or --label): fits the "
                               "input scaling of the q15 export (default: the range of the thresholds)"), "data")
    p.add_argument("--label", metavar="NAME", help="label column of --data (default: last)")
    p.add_argument("--trust-pickle", action="store_true",
                   help="allow a pickle/joblib file (loading it runs code from the file: only files you trust)")
    p.set_defaults(func=cmd_import)


def cmd_import(args) -> int:
    from treegen.core.data import load_csv
    from treegen.core.model import save
    from treegen.importers.files import import_model

    X = None
    if args.data is not None:
        X = load_csv(args.data, label=args.label, missing=True).X   # the libraries route NaN
    model = import_model(args.source, trust_pickle=args.trust_pickle, X=X)
    if args.output == STDOUT:
        write_text(STDOUT, model.to_json() + "\n", "model file")
    else:
        save(model, args.output)
    md = model.metadata
    what = (f"{model.n_classes} classes" if model.task == "classification" else "regression")
    summary = f"vote {model.vote}"
    if model.boost is not None:
        summary += f", {model.boost['sum_dtype']} sums, link {model.boost['link']}"
    print(f"imported {md.get('source', '?')} ({md.get('algorithm', '?')}): {len(model.trees)} trees, "
          f"{model.n_features} features, {what}, {summary}")
    decision = md.get("library_decision") or md.get("voting") or "not recorded by the importer"
    print(f"library decision: {decision}; NaN inputs "
          f"{'routed as the library routes them' if model.handles_missing else 'refused'}")
    return 0
