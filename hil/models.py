"""The HIL suite's default models: EFTI and CART trees fitted with fixed seeds on shared datasets.

Every case is deterministic (same tree, same model hash on every machine), so a real board flashed
with one of them is recognised by its INFO hash. Write the model files with::

    python -m hil.models -o hil-models        # hil-models/efti-veh.json, cart-seg.json, ...

and flash one with ``treegen flash hil-models/efti-veh.json --target nucleo_f446re``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from treegen import CARTClassifier, EFTIClassifier, make_estimator, save
from treegen.core.data import load_csv, load_for_model
from treegen.core.model import Model, load

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


@dataclass(eq=False)
class Case:
    """A model under test and the rows streamed to the device."""
    name: str
    algo: str                    # efti, cart, or "file" (--hil-model)
    model: Model
    X_raw: np.ndarray
    labels: np.ndarray | None
    layout: str                  # layout built for it (emulated and native targets)
    data: str                    # where the rows come from

    @cached_property
    def ref(self):
        """The expected answers (:class:`treegen.device.hil.Reference`): Q15 rows, fixed-point and float classes."""
        from treegen.device.hil import random_rows, reference

        if self.X_raw.shape[0] == 0:
            return reference(self.model, q15=random_rows(self.model.n_features))
        return reference(self.model, self.X_raw, self.labels)


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
    model's metadata, else none (X_raw of 0 rows: the suite then streams seeded random Q15 rows)."""
    model = load(model_path)
    data = Path(data_path) if data_path else None
    if data is None:
        name = str((model.metadata or {}).get("dataset") or "")
        candidate = DATASETS / Path(name).name if name else None
        if candidate is not None and candidate.is_file():
            data = candidate
    if data is not None:
        ds = load_for_model(data, model.n_features)
        labels = ds.labels if ds.labels.shape[0] else None
        return Case(f"file-{Path(model_path).stem}", "file", model, ds.X, labels, "table", str(data))
    return Case(f"file-{Path(model_path).stem}", "file", model, np.zeros((0, model.n_features)), None, "table",
                "seeded random Q15 rows")


def forest_case() -> Case:
    """A scikit-learn RandomForest (8 trees, min_samples_leaf=3: impure leaves) on scikit-learn's
    bundled wine data (float features), imported with its soft vote: the device serves PROBA."""
    from sklearn.datasets import load_wine
    from sklearn.ensemble import RandomForestClassifier

    from treegen.emit.importers import from_sklearn

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
