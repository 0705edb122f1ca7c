"""Writing result files: early checks of output paths, text and JSON writers with one-line errors.

Used by every layer that writes a user's file (the CLI's ``--json``/``--junit``/``-o``), so that a
path that cannot be written fails before a long run, and a write error is a :class:`TreegenError`.

Every file is written atomically: the text goes to a temporary file in the same folder, which is
renamed over the target only when complete, so an interrupted or failed write leaves the old file
(or none), never half a file. An output path that is one of the command's inputs is refused
(:func:`check_output` with ``inputs``), before anything is read or written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from treegen.core.atomic import atomic_write
from treegen.core.errors import TreegenError
from treegen.core.model import plain


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name the same file (an existing file compared by inode)."""
    if a is None or b is None or str(a) == "-" or str(b) == "-":
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def check_output(path: str | None, what: str, *, inputs=()) -> None:
    """Fail early (before a long fit) if ``path`` obviously cannot be written, or is one of ``inputs``."""
    if path is None:
        return
    for src in inputs:
        if same_file(path, src):
            raise TreegenError(f"{what} {path} is also an input of this command: choose another output path")
    p = Path(path)
    if p.is_dir():
        raise TreegenError(f"cannot write {what} {p}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TreegenError(f"cannot write {what} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise TreegenError(f"cannot write {what} {p}: permission denied")


def write_text(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8, newlines as given); ``what`` names the file in errors."""
    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        raise TreegenError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def write_json(path: str | None, obj: dict) -> None:
    """Write ``obj`` (numpy values made plain) as indented JSON; nothing when ``path`` is None."""
    if path is not None:
        write_text(path, json.dumps(plain(obj), indent=2, allow_nan=False) + "\n", "JSON file")
