"""The checks every importer applies to a foreign model before anything is built from it.

:class:`Fields` is bound to the name of the file (or object) being read; each method checks one field
and returns it in the form the importer uses, or raises :class:`~treegen.core.errors.TreegenError` with
the one line ``<file>: <field>: <problem>`` naming the value (``x.json: learner...trees[0]
.split_indices[2]: feature index -3 is out of range 0..3``). The rules, the same for every format:

* types first: a list where a string belongs, a float where an integer belongs, a bool for a number;
* integers are integers (``2.7`` as a child index is refused, never truncated) and within their range
  (every count and every index against the array it indexes);
* numbers are finite (thresholds, leaf values, base scores) unless the caller states what an infinity
  means for that library (``finite=False``);
* arrays that describe one node each have one length (:meth:`Fields.same_length`);
* the limits of :mod:`treegen.core.limits` (features, classes, trees, nodes) are applied while reading.

The importer calls these *before* a source library (xgboost, lightgbm, onnxruntime) sees the model,
so a hostile index never reaches a library's predictor.
"""

from __future__ import annotations

import math
import re

import numpy as np

from treegen.core.errors import TreegenError

__all__ = ["Fields", "show"]

_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")


def show(value) -> str:
    """``value`` for a one-line message: short, an integer of many digits by its length."""
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int) and abs(value) >= 10 ** 20:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return repr(text).replace("\n", "\\n")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, np.integer)):
        return "an integer"
    if isinstance(value, (float, np.floating)):
        return "a number"
    if isinstance(value, (str, bytes)):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Fields:
    """Field checks for the model read from ``source`` (a file name, or a description of an object)."""

    def __init__(self, source: str):
        self.source = str(source)

    def fail(self, field: str, problem: str):
        raise TreegenError(f"{self.source}: {field}: {problem}" if field else f"{self.source}: {problem}")

    # ------------------------------------------------------------------------------- containers
    def obj(self, value, field: str) -> dict:
        if not isinstance(value, dict):
            self.fail(field, f"must be an object, got {kind(value)}")
        return value

    def get(self, d: dict, key: str, field: str):
        """``d[key]``; missing -> refused (``field``: where ``d`` is)."""
        if key not in d:
            self.fail(f"{field}.{key}" if field else key, "missing")
        return d[key]

    def list(self, value, field: str, lo: int = 0, hi: int | None = None) -> list:
        if not isinstance(value, (list, tuple)):
            self.fail(field, f"must be a list, got {kind(value)}")
        if len(value) < lo or (hi is not None and len(value) > hi):
            want = f"{lo}" if lo == hi else f"{lo}..{hi}" if hi is not None else f"at least {lo}"
            self.fail(field, f"has {len(value)} entries, expected {want}")
        return list(value)

    def same_length(self, arrays: dict, field: str, n: int | None = None) -> int:
        """Every array of ``arrays`` (name -> sequence) has one length (``n`` when given): the length."""
        items = list(arrays.items())
        if n is None:
            n = len(items[0][1])
        for name, arr in items:
            if len(arr) != n:
                self.fail(f"{field}.{name}" if field else name,
                          f"has {len(arr)} entries, the other node arrays {n}")
        return n

    def text(self, value, field: str, max_len: int = 4096) -> str:
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                self.fail(field, "is not UTF-8 text")
        if not isinstance(value, str):
            self.fail(field, f"must be a string, got {kind(value)}")
        if len(value) > max_len:
            self.fail(field, f"is longer than {max_len} characters")
        return value

    # ------------------------------------------------------------------------------- scalars
    def int(self, value, field: str, lo: int, hi: int, what: str = "value") -> int:
        """An integer (a Python/numpy integer, not a bool, not a float) in ``lo..hi``."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            if isinstance(value, (float, np.floating)):
                self.fail(field, f"{what} {show(float(value))} is not an integer")
            self.fail(field, f"{what} must be an integer, got {kind(value)}")
        value = int(value)
        if not lo <= value <= hi:
            self.fail(field, f"{what} {show(value)} is out of range {lo}..{hi}")
        return value

    def int_text(self, value, field: str, lo: int, hi: int, what: str = "value") -> int:
        """An integer written as text (``"4"``: XGBoost's model parameters, LightGBM's header) or an
        integer; ``"1e9"``, ``"2.5"``, ``"abc"`` are refused."""
        if isinstance(value, str):
            text = value.strip()
            if not _INT_TEXT.match(text):
                self.fail(field, f"{what} {show(value)} is not an integer")
            digits = len(text.lstrip("+-"))
            if digits > 19:      # beyond int64 whatever the range: refused without converting it
                self.fail(field, f"{what} of {digits} digits is out of range {lo}..{hi}")
            value = int(text)
        return self.int(value, field, lo, hi, what)

    def number(self, value, field: str, what: str = "value", finite: bool = True) -> float:
        """A number (int or float, not a bool); finite unless ``finite=False`` (NaN is refused always)."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            self.fail(field, f"{what} must be a number, got {kind(value)}")
        try:
            x = float(value)
        except OverflowError:
            self.fail(field, f"{what} {show(value)} is too large")
        if math.isnan(x) or (finite and math.isinf(x)):
            self.fail(field, f"{what} {show(value)} is not finite")
        return x

    def number_text(self, value, field: str, what: str = "value", finite: bool = True) -> float:
        """A number written as text (``"0.5"``, ``"5E-1"``) or a number."""
        if isinstance(value, str):
            text = value.strip()
            try:
                value = float(text) if len(text) <= 64 else None
            except ValueError:
                value = None
            if value is None:
                self.fail(field, f"{what} {show(text)} is not a number")
        return self.number(value, field, what, finite)

    # ------------------------------------------------------------------------------- arrays
    def ints(self, values, field: str, lo: int, hi: int, what: str = "value", n: int | None = None) -> np.ndarray:
        """A list of integers in ``lo..hi`` (``n`` of them when given) as int64."""
        values = self.list(values, field, n if n is not None else 0, n)
        if not all(type(v) is int for v in values):
            for i, v in enumerate(values):
                self.int(v, f"{field}[{i}]", lo, hi, what)
        arr = _int64(values)
        if arr is None or (arr.size and (arr.min() < lo or arr.max() > hi)):
            for i, v in enumerate(values):
                self.int(v, f"{field}[{i}]", lo, hi, what)
        return arr

    def numbers(self, values, field: str, what: str = "value", n: int | None = None,
                finite: bool = True) -> np.ndarray:
        """A list of numbers (``n`` of them when given) as float64; finite unless ``finite=False``
        (NaN always refused)."""
        values = self.list(values, field, n if n is not None else 0, n)
        ok = all(type(v) in (int, float) for v in values)
        arr = None
        if ok:
            try:
                arr = np.asarray(values, dtype=np.float64)
            except OverflowError:
                ok = False
        if not ok or np.isnan(arr).any() or (finite and np.isinf(arr).any()):
            for i, v in enumerate(values):
                self.number(v, f"{field}[{i}]", what, finite)
        return arr

    def tokens(self, text, field: str, n: int) -> list[str]:
        """The ``n`` whitespace-separated values of a text field (LightGBM's node arrays)."""
        toks = self.text(text, field, max_len=1 << 30).strip("\r").split(" ")
        if "" in toks:
            self.fail(field, "an empty value (two spaces, or a space at an end)")
        if len(toks) != n:
            self.fail(field, f"has {len(toks)} values, expected {n}")
        return toks

    def int_tokens(self, text, field: str, n: int, lo: int, hi: int, what: str = "value") -> np.ndarray:
        toks = self.tokens(text, field, n)
        out = np.empty(n, dtype=np.int64)
        for i, tok in enumerate(toks):
            out[i] = self.int_text(tok, f"{field}[{i}]", lo, hi, what)
        return out

    def number_tokens(self, text, field: str, n: int, what: str = "value", finite: bool = True) -> np.ndarray:
        toks = self.tokens(text, field, n)
        out = np.empty(n, dtype=np.float64)
        for i, tok in enumerate(toks):
            out[i] = self.number_text(tok, f"{field}[{i}]", what, finite)
        return out


def _int64(values) -> np.ndarray | None:
    try:
        return np.asarray(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return None
