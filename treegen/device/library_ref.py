"""The float reference of a HIL run: what "agreement" compares a device with.

An imported value-tree ensemble (XGBoost, LightGBM, scikit-learn gradient boosting and regressors,
ONNX-ML) keeps the source library's own tests and sums in its model file
(``metadata["library_reference"]``, :meth:`treegen.importers.ensemble.ImportedEnsemble.to_dict`): the
reference is then the library's arithmetic itself (:meth:`~treegen.importers.ensemble.ImportedEnsemble.raw`,
+-inf and NaN included), not treegen's tree IR of it, so a conversion fault in the import (a threshold
moved, an infinity clipped) shows up as a device mismatch instead of passing on both sides. Any other
model: the float model on the raw rows (:meth:`treegen.core.model.Model.predict_index` /
``predict_value``; a model imported from scikit-learn trees: its source's float32 tests).

One definition of agreement (:func:`treegen.core.metrics.agreement`) for ``export`` and ``hil``: the
exported code's answer against this reference on the *raw* data rows (never the float model on the
already-quantised rows).
"""

from __future__ import annotations

import numpy as np

from treegen.core.model import Model
from treegen.importers.ensemble import ImportedEnsemble

__all__ = ["library_ensemble", "reference_classes", "reference_values", "reference_raw", "reference_name"]


def library_ensemble(model: Model) -> ImportedEnsemble | None:
    """The source library's ensemble kept in ``model`` (None: the model has none)."""
    d = model.metadata.get("library_reference")
    return None if d is None else ImportedEnsemble.from_dict(d)


def reference_name(model: Model) -> str:
    """What the reference is, in words (for reports)."""
    if model.metadata.get("library_reference") is not None:
        return f"the source library ({model.metadata.get('source', '?')})"
    return "the float model"


def reference_raw(model: Model, X_raw) -> np.ndarray:
    """A vote-'sum' model's raw scores ``(n, n_outputs)``, float64 holding the library's sums exactly."""
    X = np.asarray(X_raw, dtype=np.float64)
    ens = library_ensemble(model)
    if ens is not None:
        return ens.raw(X).astype(np.float64)
    raw = model.predict_value(X) if model.is_regression else model.decision_function(X)
    return np.asarray(raw, dtype=np.float64).reshape(X.shape[0], -1)


def reference_classes(model: Model, X_raw) -> np.ndarray:
    """Class index per raw row: the library's rule on its own raw scores, else the float model's."""
    X = np.asarray(X_raw, dtype=np.float64)
    ens = library_ensemble(model)
    if ens is not None:
        return ens.predict_index(X).astype(np.int64)
    return np.asarray(model.predict_index(X), dtype=np.int64)


def reference_values(model: Model, X_raw) -> np.ndarray:
    """A regression model's value per raw row (float64): the library's, else the float model's."""
    X = np.asarray(X_raw, dtype=np.float64)
    ens = library_ensemble(model)
    if ens is not None:
        return ens.predict_value(X)
    return np.asarray(model.predict_value(X), dtype=np.float64)
