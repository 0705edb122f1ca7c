"""The resumable results file of a comparison: one finished task per line (JSON), appended as tasks
finish, read back on a rerun so finished tasks are not run again.

The file is trusted for nothing: every line is checked when it is read (a JSON object; the fields
of a task record with their types and ranges: :func:`record_problem`), and a record used for a task
of this run must be that task's (:meth:`ResultsFile.done`: same algorithm, repetition, fold, run, seed
and an accuracy that is a count of test rows). A bad line is refused with its line number
(:class:`TreegenError`), or skipped with a warning when the caller asks for it (``skip_bad``). The
one exception is a last line cut short without its newline (a run killed while writing): it is left
out, and the next record written replaces it.

A regression task's record (``"task": "regression"``) has ``rmse``, ``mae`` (>= 0), ``r2`` (<= 1) and
optionally ``train_rmse`` instead of the accuracies; a record without ``task`` is a classification's.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Iterable

from treegen.core.errors import TreegenError

#: required fields of a task record: name -> (types, minimum); accuracy is checked on its own
_INT = (int,)
_NUM = (int, float)
REQUIRED = {"key": (str,), "dataset": (str,), "method": (str,), "algorithm": (str,),
            "repeat": _INT, "fold": _INT, "seed": _INT, "n_train": _INT, "n_test": _INT,
            "accuracy": _NUM, "leaves": _INT, "depth": _INT, "train_seconds": _NUM}
MINIMUM = {"repeat": 0, "fold": 0, "seed": 0, "n_train": 1, "n_test": 1, "leaves": 1, "depth": 0,
           "train_seconds": 0}
#: optional fields: name -> (types, minimum); None is allowed for the flash sizes (not measurable)
OPTIONAL = {"measure_seconds": (_NUM, 0), "flash_bytes": (_INT, 0), "flash_bytes_inference": (_INT, 0),
            "converted_from": ((str,), None), "run": (_INT, 0), "train_accuracy": (_NUM, 0)}
#: a regression task's record (``"task": "regression"``) has these test figures instead of ``accuracy``
#: (R² is at most 1, and may be negative), and optionally ``train_rmse``
REGRESSION_REQUIRED = {"rmse": _NUM, "mae": _NUM, "r2": _NUM}
REGRESSION_MINIMUM = {"rmse": 0, "mae": 0}
TASKS = ("classification", "regression")


def _type_name(types) -> str:
    return {(str,): "a string", _INT: "an integer", _NUM: "a number"}[types]


def _check_value(name: str, value, types, minimum) -> str | None:
    if isinstance(value, bool) or not isinstance(value, types):
        return f"{name} must be {_type_name(types)}, got {json.dumps(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} must be finite, got {value}"
    if minimum is not None and value < minimum:
        return f"{name} must be >= {minimum}, got {value}"
    if types == (str,) and not value:
        return f"{name} must not be empty"
    return None


def record_problem(rec) -> str | None:
    """What is wrong with one parsed line as a task record (None: nothing). Accuracy may be a fraction
    (records of today) or a percentage (record version 1): 0..100 here, the fraction range is checked
    when the record is used (:meth:`ResultsFile.done`)."""
    if not isinstance(rec, dict):
        return f"not a JSON object (a {type(rec).__name__})"
    task = rec.get("task", "classification")
    if task not in TASKS:
        return f"task must be one of {', '.join(TASKS)}, got {json.dumps(task)}"
    regression = task == "regression"
    required = ({**{k: v for k, v in REQUIRED.items() if k != "accuracy"}, **REGRESSION_REQUIRED} if regression
                else REQUIRED)
    missing = [k for k in required if k not in rec]
    if missing:
        return f"field{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing"
    for name, types in required.items():
        problem = _check_value(name, rec[name], types, MINIMUM.get(name, REGRESSION_MINIMUM.get(name)))
        if problem:
            return problem
    if regression:
        if rec["r2"] > 1:
            return f"r2 must be at most 1, got {rec['r2']}"
        if "train_rmse" in rec:
            return _check_value("train_rmse", rec["train_rmse"], _NUM, 0)
        return None
    if not 0 <= rec["accuracy"] <= 100:
        return f"accuracy must be a fraction 0..1, got {rec['accuracy']}"
    for name, (types, minimum) in OPTIONAL.items():
        if name in rec and not (rec[name] is None and name.startswith("flash")):
            problem = _check_value(name, rec[name], types, minimum)
            if problem:
                return problem
    if rec.get("train_accuracy", 0) > 1:
        return f"train_accuracy must be a fraction 0..1, got {rec['train_accuracy']}"
    return None


def _correct_rows(accuracy: float, n_test: int) -> int | None:
    """Correct test rows behind a fractional accuracy (None: no whole number of rows gives it)."""
    correct = round(accuracy * n_test)
    return correct if abs(correct - accuracy * n_test) <= 1e-6 * max(1, n_test) else None


class ResultsFile:
    """Finished tasks, one JSON object per line, appended as they arrive (``path`` None: in memory only).

    Every line is validated (:func:`record_problem`); a bad one raises :class:`TreegenError` naming the
    file and line, or, with ``skip_bad``, is left out with a warning (``skipped`` lists them). Records
    are looked up by ``key`` (a hash of everything the result depends on), so a file may hold tasks
    of other comparisons — other datasets, settings or seeds: they are kept, and never used.
    """

    def __init__(self, path: str | os.PathLike | None, *, skip_bad: bool = False):
        self.path = None if path is None else Path(path)
        self.records: dict[str, dict] = {}
        self.line_of: dict[str, int] = {}
        self.skip_bad = skip_bad
        self.skipped: list[str] = []
        self.cut_line = False            # the last line was cut short (a run killed while writing)
        self._tail_checked = False
        if self.path is None or not self.path.exists():
            return
        if self.path.is_dir():
            raise TreegenError(f"results file {self.path} is a directory")
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TreegenError(f"cannot read results file {self.path}: {exc}") from None
        lines = text.split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                if number == len(lines):          # no newline after it: cut short, not a bad record
                    self.cut_line = True
                    continue
                self._bad(number, f"not valid JSON ({exc.msg})")
                continue
            problem = record_problem(rec)
            if problem:
                self._bad(number, problem)
                continue
            self.records[rec["key"]] = rec
            self.line_of[rec["key"]] = number
        self._warn_skipped(0)

    def _warn_skipped(self, since: int) -> None:
        new = self.skipped[since:]
        if new:
            warnings.warn(f"results file {self.path}: skipped {len(new)} bad line(s) (--skip-bad-results): "
                          f"{new[0]}{' ...' if len(new) > 1 else ''}", UserWarning, stacklevel=3)

    def _where(self, number: int) -> str:
        return f"results file {self.path} line {number}"

    def _bad(self, number: int, problem: str) -> None:
        if not self.skip_bad:
            raise TreegenError(f"{self._where(number)}: {problem} (correct or delete the line, or skip bad lines "
                               "with --skip-bad-results)")
        self.skipped.append(f"line {number}: {problem}")

    def _mismatch(self, task, rec: dict) -> str | None:
        """How a record found under ``task``'s key differs from the task (None: it is the task's). A record
        without ``run`` (written before runs per fold) is run 0, one without ``task`` a classification."""
        for name, want, default in (("task", getattr(task, "task", "classification"), "classification"),
                                    ("algorithm", task.algorithm, 0), ("repeat", task.repeat, 0),
                                    ("fold", task.fold, 0), ("seed", task.seed, 0),
                                    ("run", getattr(task, "run", 0), 0)):
            if rec.get(name, default) != want:
                return (f"the record for dataset {task.dataset}, {task.method}, repetition {task.repeat}, fold "
                        f"{task.fold} has {name} {json.dumps(rec.get(name, default))}, this comparison's task has "
                        f"{json.dumps(want)}")
        return None

    def done(self, tasks: Iterable) -> dict[str, dict]:
        """The finished records among ``tasks`` (by key), each checked against its task (algorithm,
        repetition, fold, seed; the accuracy a count of the test rows): a record that is not its
        task's is refused (or skipped with ``skip_bad``), never mixed in.

        A task finished by an older treegen (record version 1: the same fit, accuracy in percent) is
        taken from its record, the accuracy recomputed as correct rows / test rows — the very float
        ``run_task`` gives (``"converted_from"`` names the old key); the converted record is appended."""
        out, skipped_before = {}, len(self.skipped)
        for t in tasks:
            key, percent = (t.key, False) if t.key in self.records else \
                (t.key_v1, True) if t.key_v1 and t.key_v1 in self.records else (None, False)
            if key is None:
                continue
            rec = self.records[key]
            scale = 100.0 if percent else 1.0
            problem = self._mismatch(t, rec)
            if problem is None and rec.get("task") == "regression":      # no accuracy: nothing to count
                out[t.key] = rec
                continue
            correct = _correct_rows(float(rec["accuracy"]) / scale, rec["n_test"]) if "accuracy" in rec else None
            if problem is None and (rec["accuracy"] > scale or correct is None):
                problem = (f"accuracy {rec['accuracy']} is not a count of {rec['n_test']} test rows"
                           + (" (in percent: record version 1)" if percent else " (a fraction 0..1)"))
            if problem is not None:
                self._bad(self.line_of.get(key, 0), problem)
                del self.records[key]
                continue
            if percent:
                rec = {**rec, "key": t.key, "accuracy": correct / rec["n_test"], "converted_from": t.key_v1}
                self.add(rec)
            out[t.key] = rec
        self._warn_skipped(skipped_before)
        return out

    def add(self, record: dict) -> None:
        """Keep ``record`` and append it as one line (a last line cut short by a killed run is dropped first)."""
        self.records[record["key"]] = record
        if self.path is None:
            return
        try:
            with open(self.path, "ab+") as fh:
                if not self._tail_checked:
                    _drop_cut_line(fh)
                    self._tail_checked = True
                fh.write((json.dumps(record, allow_nan=False) + "\n").encode("utf-8"))
        except OSError as exc:
            raise TreegenError(f"cannot write results file {self.path}: {exc.strerror or exc}") from None


def _drop_cut_line(fh) -> None:
    """Truncate an open file after its last newline (the partial line a killed writer left)."""
    size = fh.seek(0, os.SEEK_END)
    end = size
    while end > 0:
        start = max(0, end - 4096)
        fh.seek(start)
        chunk = fh.read(end - start)
        if end == size and chunk.endswith(b"\n"):
            return
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            fh.truncate(start + nl + 1)
            return
        end = start
    fh.truncate(0)
