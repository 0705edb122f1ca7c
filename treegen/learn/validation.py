"""Input checks of the estimators (scikit-learn's rules and messages): ``X`` a dense finite 2-D array,
``y`` one discrete label per row, a DataFrame's string column names as feature names.

Every refusal is a :class:`~treegen.core.errors.DataError` (a ``ValueError``) with one clear line,
except a ``TypeError`` kept as such where scikit-learn's checks expect it.
"""

from __future__ import annotations

import warnings

import numpy as np

from treegen.core.errors import DataError
from treegen.core.limits import check_target_range


class DataConversionWarning(UserWarning):
    """Input data was converted (e.g. a column-vector ``y`` was flattened); same name and meaning as
    scikit-learn's warning, defined here so the package does not import scikit-learn."""


def plain_scalar(v):
    """numpy scalar -> Python value (for readable messages); other objects unchanged."""
    return v.item() if isinstance(v, np.generic) else v


def column_names(X) -> list[str] | None:
    """A DataFrame's column names when they are all strings (scikit-learn's rule for
    ``feature_names_in_``), else None."""
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, np.ndarray):
        return None
    names = list(columns)
    return names if names and all(isinstance(n, str) for n in names) else None


def check_X(X) -> np.ndarray:
    """``X`` as a float64 ``(n_samples, n_features)`` array with at least one of each, all finite."""
    if type(X).__module__.startswith("scipy.sparse") or hasattr(X, "tocsr"):
        raise DataError("sparse input is not supported; pass a dense array (e.g. X.toarray())")
    try:
        X = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise DataError(f"X must be a numeric 2-D array ({exc})") from None
    if X.dtype.kind == "c":
        raise DataError("Complex data not supported; X must be real-valued")
    try:
        X = X.astype(np.float64, copy=False)
    except ValueError as exc:
        raise DataError(f"X must be a numeric 2-D array ({exc})") from None
    except TypeError as exc:  # e.g. a dict inside an object array: keep the TypeError (sklearn convention)
        raise TypeError(f"X must be a numeric 2-D array: {exc}") from None
    if X.ndim != 2:
        raise DataError(f"X must be a 2-D array, got {X.ndim} dimension(s). Reshape your data with "
                        "X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample")
    if X.shape[0] < 1:
        raise DataError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.shape[1] < 1:
        raise DataError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if not np.all(np.isfinite(X)):
        raise DataError("X contains NaN or infinite values")
    return X


def check_y(y, n_rows: int, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """The sorted classes and each row's class index for the labels ``y`` of ``n_rows`` rows
    (``owner``: the estimator's class name, for the message when ``y`` is None). A column vector
    is flattened with a :class:`DataConversionWarning`; at least two classes are required."""
    if y is None:
        raise DataError(f"{owner} requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim != 1:
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the "
                          "shape of y to (n_samples,), for example using ravel().",
                          DataConversionWarning, stacklevel=3)
            y = y.ravel()
        else:
            raise DataError(f"y should be a 1d array of labels, got an array of shape {y.shape}")
    if y.shape[0] != n_rows:
        raise DataError(f"X has {n_rows} rows but y has {y.shape[0]} labels")
    if y.dtype.kind == "c":
        raise DataError("Unknown label type: complex labels")
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise DataError("labels contain NaN or infinite values")
        if np.any(y != np.round(y)):
            raise DataError("Unknown label type: continuous (non-integer float labels); "
                            "a classifier needs discrete class labels")
    try:
        classes = np.unique(y)
    except TypeError:
        raise DataError("Unknown label type: labels of mixed, unorderable types") from None
    if classes.shape[0] < 2:
        raise DataError(f"training data has a single class ({plain_scalar(classes[0])!r}): one class is not enough, "
                        "at least two are needed")
    return classes, np.searchsorted(classes, y).astype(np.int64)


# the label heuristics of fit/cv (a continuous target given to a classifier, class labels to a regressor)
MANY_LEVELS = 100    # more distinct numeric labels than this look like a continuous target,
SOME_LEVELS = 20     # and so do more than this many that average fewer than
ROWS_PER_LEVEL = 5   # rows each (the diabetes target: 214 values in 442 rows; bch: 60 classes, 5665 rows)
FEW_LEVELS = 10      # at most this many integer levels look like class labels


def check_target(y, n_rows: int, owner: str) -> np.ndarray:
    """The float64 targets of a regressor: one finite number per row (a column vector is flattened
    with a :class:`DataConversionWarning`)."""
    if y is None:
        raise DataError(f"{owner} requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the "
                      "shape of y to (n_samples,), for example using ravel().", DataConversionWarning, stacklevel=3)
        y = y.ravel()
    if y.ndim != 1:
        raise DataError(f"y should be a 1d array of target values, got an array of shape {y.shape}")
    if y.shape[0] != n_rows:
        raise DataError(f"X has {n_rows} rows but y has {y.shape[0]} values")
    try:
        y = np.asarray(y.tolist() if y.dtype == object else y, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("a regressor needs numeric target values, got text labels") from None
    if not np.all(np.isfinite(y)):
        raise DataError("target values contain NaN or infinite values")
    check_target_range(y, error=DataError)
    return y


def label_kind(labels) -> tuple[str, int]:
    """``(kind, n_distinct)`` of a label column: ``"text"`` (a string label), ``"continuous"``
    (numbers with a fractional part, more than :data:`MANY_LEVELS` distinct numbers, or more than
    :data:`SOME_LEVELS` averaging fewer than :data:`ROWS_PER_LEVEL` rows each), ``"levels"`` (at most
    :data:`FEW_LEVELS` distinct integers) or ``"discrete"`` (integers in between)."""
    values = np.asarray(labels, dtype=object).tolist()
    n_distinct = len(set(values))
    if any(isinstance(v, str) for v in values):
        return "text", n_distinct
    numbers = np.asarray(values, dtype=np.float64)
    sparse = n_distinct > SOME_LEVELS and len(values) < ROWS_PER_LEVEL * n_distinct
    if np.any(numbers != np.round(numbers)) or n_distinct > MANY_LEVELS or sparse:
        return "continuous", n_distinct
    return ("levels" if n_distinct <= FEW_LEVELS else "discrete"), n_distinct
