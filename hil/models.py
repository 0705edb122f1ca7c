"""The HIL suite's default models: EFTI and CART trees fitted with fixed seeds on shared datasets.

Every case is deterministic (same tree, same model hash on every machine), so a real board flashed
with one of them is recognised by its INFO hash. Write the model files with::

    python -m hil.models -o hil-models        # hil-models/efti-veh.json, cart-seg.json, ...

and flash one with ``treegen flash hil-models/efti-veh.json --target nucleo_f446re``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from treegen import CARTClassifier, EFTIClassifier, make_estimator, save
from treegen.core.data import load_csv
from treegen.hil.cases import Case
from treegen.hil.cases import file_case as _file_case

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"

EFTI_PARAMS = {"max_iter": 20000, "random_state": 1}
CART_PARAMS = {"max_depth": 6}

#: case name -> (algorithm, dataset, layout built for it); both layouts are covered for both algorithms
CASES = {
    "efti-veh": ("efti", "veh", "table"),
    "efti-seg": ("efti", "seg", "unrolled"),
    "efti-pid": ("efti", "pid", "table"),
    "cart-veh": ("cart", "veh", "unrolled"),
    "cart-seg": ("cart", "seg", "table"),
    "cart-pid": ("cart", "pid", "unrolled"),
}


#: the alternative inducers (issue 12), one model each, checked by hil/test_alternatives.py on one
#: emulated board each: case name -> (algorithm, dataset, layout, target, estimator options).
#: Trained on the even rows; the device then gets every row (half of them never trained on).
ALTERNATIVE_CASES = {
    "de-pdt-pid": ("de-pdt", "pid", "table", "qemu-m4",
                   {"population": 20, "generations": 150, "height": 4, "random_state": 1}),
    "de-cart-seg": ("de-cart", "seg", "table", "qemu-m3", {"max_depth": 8, "random_state": 1}),
    "de-id3-veh": ("de-id3", "veh", "unrolled", "qemu-m7", {"max_depth": 8, "random_state": 1}),
    "id3-car": ("id3", "car", "unrolled", "qemu-m4", {"categorical": "0,1,2,3,4,5", "pruning": "pessimistic"}),
}


def dataset_path(name: str) -> Path:
    path = DATASETS / f"{name}.csv.gz"
    if not path.is_file():
        raise FileNotFoundError(f"shared dataset {path} not found: the HIL suite needs ../shared beside the repo")
    return path


def fit_case(name: str) -> Case:
    """Fit the default case ``name`` (see :data:`CASES`)."""
    algo, dataset, layout = CASES[name]
    path = dataset_path(dataset)
    ds = load_csv(path)
    est = EFTIClassifier(**EFTI_PARAMS) if algo == "efti" else CARTClassifier(**CART_PARAMS)
    est.fit(ds.X, ds.labels, feature_names=ds.feature_names)
    model = est.model_
    model.metadata["dataset"] = path.name
    model.metadata.get("params", {}).pop("callback", None)
    return Case(name, algo, model, ds.X, ds.labels, layout, str(path))


def fit_alternative_case(name: str) -> Case:
    """Fit the alternative-inducer case ``name`` (see :data:`ALTERNATIVE_CASES`) on the even rows."""
    algo, dataset, layout, _target, params = ALTERNATIVE_CASES[name]
    path = dataset_path(dataset)
    ds = load_csv(path)
    est = make_estimator(algo, **params)
    est.fit(ds.X[::2], ds.labels[::2], feature_names=ds.feature_names)
    model = est.model_
    model.metadata["dataset"] = path.name
    model.metadata.get("params", {}).pop("callback", None)
    return Case(name, algo, model, ds.X, ds.labels, layout, str(path))


def file_case(model_path, data_path=None) -> Case:
    """A case for a model file: rows from ``data_path``, else from the shared dataset named in the
    model's metadata, else seeded random Q15 rows (:func:`treegen.hil.cases.file_case`)."""
    return _file_case(model_path, data_path, datasets_dir=DATASETS)


def forest_case() -> Case:
    """A scikit-learn RandomForest (8 trees, min_samples_leaf=3: impure leaves) on scikit-learn's
    bundled wine data (float features), imported with its soft vote: the device serves PROBA."""
    from sklearn.datasets import load_wine
    from sklearn.ensemble import RandomForestClassifier

    from treegen.importers import from_sklearn

    X, y = load_wine(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=8, min_samples_leaf=3, random_state=0).fit(X, y)
    model = from_sklearn(rf, X=X)
    model.metadata["dataset"] = "sklearn-wine"
    rng = np.random.default_rng(0)
    rows = np.vstack([X, rng.uniform(X.min(axis=0), X.max(axis=0), size=(600, X.shape[1]))])
    return Case("forest-wine", "forest", model, rows, None, "table", "wine rows + 600 seeded random rows")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hil.models", description="write the HIL suite's default models")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for <case>.json files")
    p.add_argument("cases", nargs="*", metavar="CASE",
                   help=f"cases (default all: {', '.join([*CASES, *ALTERNATIVE_CASES])})")
    args = p.parse_args(argv)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.cases or [*CASES, *ALTERNATIVE_CASES]:
        if name not in CASES and name not in ALTERNATIVE_CASES:
            p.error(f"unknown case {name!r} (choose from {', '.join([*CASES, *ALTERNATIVE_CASES])})")
        case = fit_case(name) if name in CASES else fit_alternative_case(name)
        path = save(case.model, out / f"{name}.json")
        print(f"{path}  sha256 {case.model.hash()[:16]}  ({case.data})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
