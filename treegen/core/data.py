"""Reading datasets: CSV with a header row (gzip allowed), numeric features, label column.

The label column is the last one unless ``label`` names another. Labels are all numbers (compared
by value: ``1`` and ``1.0`` are one class, the integer 1) or all text; a column mixing both is
refused. Class order is numeric for numeric labels and lexicographic for text labels.
Every problem is reported as a one-line :class:`~treegen.core.errors.DataError`.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import sys
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from treegen.core.errors import DataError
from treegen.core.limits import MAX_COLUMNS, MAX_DATA_BYTES, MAX_ROWS, gunzip_bounded, read_bounded


@dataclass(eq=False)
class Dataset:
    X: np.ndarray              # float64 (n_rows, n_features), raw values
    labels: np.ndarray         # object array of original labels (int or str)
    feature_names: list[str]
    label_name: str
    source: str = ""
    named: bool = True         # False: the file had no header (names generated, columns matched by position)

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"


def _display(path) -> str:
    return "standard input" if str(path) == STDIN else str(path)


def read_bytes(path, what: str = "data") -> bytes:
    """All bytes of ``path``, read from the stream exactly once.

    ``-`` is standard input; FIFOs, ``/dev/stdin`` and ``<(...)`` process substitutions work like
    files because nothing is opened twice and nothing is sought. A gzip stream (magic ``1f 8b`` in
    the first two bytes) is decompressed in memory.
    """
    name = _display(path)
    if str(path) == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise DataError(f"cannot read {what} from standard input: it is closed")
        try:
            raw = read_bounded(stream, MAX_DATA_BYTES, name, DataError)
        except OSError as exc:
            raise DataError(f"cannot read {what} from standard input: {exc.strerror or exc}") from None
    else:
        p = Path(path)
        if p.is_dir():
            raise DataError(f"{what} path is a directory: {p}")
        try:
            with open(p, "rb") as fh:
                raw = read_bounded(fh, MAX_DATA_BYTES, name, DataError)
        except FileNotFoundError:
            raise DataError(f"{what} file not found: {p}") from None
        except OSError as exc:
            raise DataError(f"cannot read {p}: {exc.strerror or exc}") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gunzip_bounded(raw, MAX_DATA_BYTES, name, DataError)
        except (OSError, EOFError, zlib.error) as exc:  # corrupt or truncated gzip stream
            raise DataError(f"cannot read {name}: corrupt gzip data ({exc})") from None
    return raw


def read_text(path, what: str = "data") -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`), a leading byte-order mark removed."""
    raw = read_bytes(path, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{_display(path)} is not a UTF-8 text CSV file") from None


def check_delimiter(delimiter: str) -> str:
    """A one-character CSV delimiter (``tab`` and ``\\t`` mean a tab)."""
    delimiter = {"tab": "\t", "\\t": "\t"}.get(delimiter, delimiter)
    if len(delimiter) != 1 or delimiter in "\"\r\n" or delimiter.isalnum() or delimiter in ".-+":
        raise DataError(f"CSV delimiter must be one character that cannot be part of a number, got {delimiter!r}")
    return delimiter


def read_rows(path, delimiter: str = ",", header: bool = True) -> list[list[str]]:
    """The non-blank CSV rows of ``path`` (header first); one read of the stream. Without a
    ``header`` a generated one is put first: ``x0, x1, ...`` and ``label`` for the last column."""
    name = _display(path)
    text = read_text(path)
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=check_delimiter(delimiter)))
    except csv.Error as exc:
        raise DataError(f"{name}: malformed CSV ({exc})") from None
    rows = [r for r in rows if r and any(cell.strip() for cell in r)]
    if not rows:
        raise DataError(f"{name} is empty")
    if not header:
        rows.insert(0, [f"x{i}" for i in range(len(rows[0]) - 1)] + ["label"])
    return rows


def _parse_label(text: str):
    """A label's value: an integer, else a finite number (``1.0`` is the integer 1: labels are
    compared by value), else the text itself."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        return text
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def load_csv(path: str | Path, label: str | None = None, *, has_label: bool = True, delimiter: str = ",",
             header: bool = True, missing: bool | None = None) -> Dataset:
    """Load a CSV dataset. With ``has_label=False`` every column is a feature and ``labels`` is empty.
    ``header=False``: the file has no header row (features ``x0, x1, ...``, the label last).
    ``missing``: see :func:`rows_to_dataset` (``None``, training data: missing and infinite cells refused)."""
    _check_label_option(label, header)
    ds = rows_to_dataset(read_rows(path, delimiter, header), _display(path), label=label, has_label=has_label,
                         missing=missing)
    return ds if header else replace(ds, named=False)


def _check_label_option(label, header: bool) -> None:
    if label is not None and not header:
        raise DataError("--label names a header column; a file without a header has its label last")


#: feature cells read as a missing value (NaN) where the model routes missing values (case-insensitive)
MISSING_CELLS = ("", "nan")

#: why a missing or infinite cell is refused for a model without missing-value routing
NO_MISSING = ("this model has no direction for missing values (only an imported model whose library routes "
              "NaN has one: XGBoost, LightGBM, HistGradientBoosting); fill or drop the row")


def rows_to_dataset(rows: list[list[str]], path: str, label: str | None = None, *,
                    has_label: bool = True, missing: bool | None = None) -> Dataset:
    """Parse CSV ``rows`` (header first, blank rows removed) read from ``path`` (named in errors).
    ``missing``: ``True`` (rows for a model that routes missing values), cells of :data:`MISSING_CELLS`
    are NaN and infinities are kept; ``False`` (rows for a model that does not) and ``None`` (training
    data), a missing, NaN or infinite cell is an error (``False`` says why: :data:`NO_MISSING`)."""
    header = [h.strip() for h in rows[0]]
    body = rows[1:]
    if not body:
        raise DataError(f"{path} has a header but no data rows")
    if len(header) > MAX_COLUMNS:
        raise DataError(f"{path} has {len(header)} columns, more than the {MAX_COLUMNS} treegen reads "
                        f"({MAX_COLUMNS - 1} features and a label)")
    if len(body) > MAX_ROWS:
        raise DataError(f"{path} has {len(body)} data rows, more than the {MAX_ROWS} treegen reads")
    if len(header) < 2 and has_label:
        raise DataError(f"{path} needs at least one feature column and a label column")
    if not has_label:
        label_col = -1
    elif label is None:
        label_col = len(header) - 1
    else:
        if label not in header:
            raise DataError(f"label column {label!r} not found in {path} (columns: {', '.join(header)})")
        label_col = header.index(label)
    feature_cols = [i for i in range(len(header)) if i != label_col]
    n_cols = len(header)
    X = np.empty((len(body), len(feature_cols)), dtype=np.float64)
    labels, texts = [], []
    for r, row in enumerate(body):
        line = r + 2
        if len(row) != n_cols:
            raise DataError(f"{path}: line {line} has {len(row)} fields, expected {n_cols}")
        for j, col in enumerate(feature_cols):
            cell = row[col].strip()
            if cell.lower() in MISSING_CELLS:
                if not missing:
                    what = "empty (a missing value)" if cell == "" else f"value {cell!r} is NaN (a missing value)"
                    raise DataError(f"{path}: line {line}, column {header[col]!r}: {what}; {NO_MISSING}"
                                    if missing is not None else
                                    f"{path}: line {line}, column {header[col]!r}: {what}")
                X[r, j] = math.nan
                continue
            try:
                value = float(cell)
            except ValueError:
                raise DataError(
                    f"{path}: line {line}, column {header[col]!r}: non-numeric value {cell!r}") from None
            if not math.isfinite(value) and not missing:
                raise DataError(f"{path}: line {line}, column {header[col]!r}: value {cell!r} is NaN or infinite"
                                + (f"; {NO_MISSING}" if missing is not None else ""))
            X[r, j] = value
        if label_col < 0:
            continue
        lab = row[label_col].strip()
        if lab == "":
            raise DataError(f"{path}: line {line}: empty label")
        labels.append(_parse_label(lab))
        texts.append(lab)
    return Dataset(X=X, labels=_label_array(labels, texts, path), feature_names=[header[i] for i in feature_cols],
                   label_name=header[label_col] if label_col >= 0 else "", source=str(path))


def load_for_model(path: str | Path, n_features: int, label: str | None = None,
                   feature_names: list[str] | None = None, *, delimiter: str = ",", header: bool = True,
                   missing: bool = False) -> Dataset:
    """Load data to be classified by a model with ``n_features`` features.

    The file may carry a label column (``n_features + 1`` columns, or ``label`` given) or not
    (exactly ``n_features`` columns); any other width is an error naming both counts.
    The stream is read once (``-`` = standard input).

    ``feature_names`` (the model's): the columns are matched by name (:func:`match_feature_names`):
    reordered when the file holds the same names in another order, an error naming the missing and
    unexpected columns when the names differ. ``None`` matches by position.
    ``missing`` (the model's ``handles_missing``): empty and ``nan`` cells are missing values (NaN),
    infinities are kept; else they are refused, saying the model has no direction for them.
    """
    _check_label_option(label, header)
    rows = read_rows(path, delimiter, header)
    name = _display(path)
    if not header and len(rows[0]) == n_features:       # no label column: the generated header has none
        rows[0] = [f"x{i}" for i in range(n_features)]
    ds = rows_to_dataset(rows, name, label=label, has_label=label is not None or len(rows[0]) != n_features,
                         missing=missing)
    if ds.n_features != n_features:
        raise DataError(f"{name} has {ds.n_features} features, the model expects {n_features}")
    if not header:
        return replace(ds, named=False)
    return ds if feature_names is None else match_feature_names(ds, feature_names)


def generic_names(names: list[str]) -> bool:
    """True for the names an estimator gives features it was not told the names of (x0, x1, ...)."""
    return list(names) == [f"x{i}" for i in range(len(names))]


def match_feature_names(ds: Dataset, names: list[str]) -> Dataset:
    """``ds`` with its columns in the order of the model's feature ``names``.

    Same names in the same order: unchanged. The same names in another order: the columns are
    reordered (a model never silently reads a feature in another's place). Different names: a
    :class:`DataError` naming the missing and the unexpected columns. Models whose names were
    generated (``x0, x1, ...``: fitted on arrays without names) match by position.
    """
    names = [str(n) for n in names]
    have = list(ds.feature_names)
    if have == names or generic_names(names):
        return ds
    if len(set(have)) == len(have) and set(have) == set(names):
        order = [have.index(n) for n in names]
        return replace(ds, X=ds.X[:, order], feature_names=list(names))
    missing = [n for n in names if n not in have]
    extra = [n for n in have if n not in names]
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    if extra:
        parts.append(f"unexpected {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    if not parts:
        parts.append("duplicated column names")
    raise DataError(f"{ds.source or 'data'}: the columns do not match the model's features ({'; '.join(parts)}); "
                    "rename them, or match by position with --ignore-names")


def _label_array(labels: list, texts: list | None = None, path: str = "data") -> np.ndarray:
    """The labels as an object array. Numeric labels are compared by value (``1``, ``1.0`` and
    ``+1`` are one class; a warning shows the mapping of every text that is not the value's own);
    a column mixing numbers and other text is refused (a :class:`DataError` naming one of each)."""
    is_text = [isinstance(v, str) for v in labels]
    if any(is_text) and not all(is_text):
        first_num = next(i for i, t in enumerate(is_text) if not t)
        first_text = next(i for i, t in enumerate(is_text) if t)
        shown = texts if texts is not None else labels
        raise DataError(f"{path}: the label column mixes numbers and text (line {first_num + 2}: "
                        f"{shown[first_num]!r}, line {first_text + 2}: {shown[first_text]!r}); "
                        "labels must be all numbers or all text")
    if texts is not None and labels and not any(is_text):
        mapped = {}
        for v, t in zip(labels, texts):
            if t != str(v) and t not in mapped:
                mapped[t] = v
        if mapped:
            import warnings

            shown = ", ".join(f"{t!r} -> {v!r}" for t, v in list(mapped.items())[:8])
            warnings.warn(f"{path}: numeric labels compared by value: {shown}"
                          f"{' ...' if len(mapped) > 8 else ''}", UserWarning, stacklevel=4)
    arr = np.empty(len(labels), dtype=object)
    arr[:] = labels
    return arr


def class_list(labels: np.ndarray) -> list:
    """Sorted distinct labels (numeric order for ints, lexicographic for strings)."""
    return sorted(set(labels.tolist()))


def encode(labels: np.ndarray, classes: list) -> np.ndarray:
    """Map original labels to class indices; unknown labels raise :class:`DataError`."""
    index = {c: i for i, c in enumerate(classes)}
    try:
        return np.fromiter((index[v] for v in labels.tolist()), dtype=np.int64, count=len(labels))
    except KeyError as exc:
        raise DataError(f"label {exc.args[0]!r} is not one of the model's classes") from None
