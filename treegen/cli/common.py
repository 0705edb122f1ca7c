"""What the command modules share: option value types, table/percent formatting, and the CLI's
own errors (a usage error; a HIL run whose device disagrees, which exits with status 1)."""

from __future__ import annotations

import argparse
import math

from treegen.core.errors import TreegenError
from treegen.core.limits import check_timeout


class CLIError(TreegenError):
    """A command-line usage error (bad option, missing argument)."""


class HilFailed(TreegenError):
    """The device answered, but not as the host model: exit status 1 (not a usage error)."""





# ---------------------------------------------------------------------- option value types
def int_at_least(minimum: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} expected, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number expected, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def job_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer expected, got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("must not be 0 (1 = sequential, -1 = all cores)")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number expected, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """Seconds to wait: finite, >= 0, at most :data:`treegen.core.limits.MAX_TIMEOUT`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number expected, got {text!r}") from None
    if value == 0:
        return 0.0
    return timeout_seconds(text)


def timeout_seconds(text: str) -> float:
    """A timeout in seconds: finite, > 0, at most :data:`treegen.core.limits.MAX_TIMEOUT`."""
    try:
        return check_timeout(text, "timeout")
    except TreegenError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("timeout ")) from None


def int_range(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"an integer expected, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {lo}..{hi}, got {value}")
        return value
    return parse



def scheduler_address(text: str) -> str:
    """``--scheduler``: ``tcp://HOST:PORT`` or ``HOST:PORT`` (checked here, before anything runs)."""
    from treegen.learn.scheduler import parse_address

    try:
        parse_address(text)
    except TreegenError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def pct(fraction: float) -> float:
    return 100.0 * float(fraction)


def params_text(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def table(rows: list[list[str]], align_left: int = 1) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [cell.ljust(widths[c]) if c < align_left else cell.rjust(widths[c]) for c, cell in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)



def kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"



def add_ignore_names(p) -> None:
    """The ``--ignore-names`` option of commands that read data for a model."""
    p.add_argument("--ignore-names", action="store_true",
                   help="match the data's columns to the model's features by position (default: by name; "
                        "reordered when only the order differs)")


def model_names(args, model) -> list[str] | None:
    """The feature names the data's columns are matched by (None: by position, --ignore-names)."""
    return None if getattr(args, "ignore_names", False) else list(model.feature_names)


def add_csv_options(p) -> None:
    """``--delimiter`` and ``--no-header`` of commands that read a CSV file."""
    p.add_argument("--delimiter", default=",", metavar="C",
                   help="CSV field separator (default ','; 'tab' for tab-separated files)")
    p.add_argument("--no-header", action="store_true",
                   help="the CSV has no header row: features x0, x1, ..., the label last; columns are "
                        "matched to a model's features by position")


def csv_options(args) -> dict:
    """The CSV reading options of a command line, as keyword arguments of the data loaders."""
    return {"delimiter": getattr(args, "delimiter", ","), "header": not getattr(args, "no_header", False)}


def refuse_continuous_labels(ds, path, command: str) -> None:
    """``command`` (compare, tune) classifies: a label column that looks like a continuous target
    (:func:`treegen.learn.validation.label_kind`) is refused with one line naming the regression commands."""
    from treegen.core.errors import DataError
    from treegen.learn.validation import label_kind

    kind, n = label_kind(ds.labels)
    if kind == "continuous":
        raise DataError(f"{path}: the label column {ds.label_name!r} has {n} distinct numeric values, a continuous "
                        f"target: {command} handles classifiers only (regression: treegen fit/cv --task regression)")
