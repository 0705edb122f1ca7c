"""Writing result files: early checks of output paths, text and JSON writers with one-line errors.

Used by every layer that writes a user's file (the CLI's ``--json``/``--junit``/``-o``), so that a
path that cannot be written fails before a long run, and a write error is a :class:`TreegenError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from treegen.core.errors import TreegenError
from treegen.core.model import plain


def check_output(path: str | None, what: str) -> None:
    """Fail early (before a long fit) if ``path`` obviously cannot be written."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise TreegenError(f"cannot write {what} {p}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TreegenError(f"cannot write {what} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise TreegenError(f"cannot write {what} {p}: permission denied")


def write_text(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (UTF-8, newlines as given); ``what`` names the file in errors."""
    try:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except OSError as exc:
        raise TreegenError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def write_json(path: str | None, obj: dict) -> None:
    """Write ``obj`` (numpy values made plain) as indented JSON; nothing when ``path`` is None."""
    if path is not None:
        write_text(path, json.dumps(plain(obj), indent=2, allow_nan=False) + "\n", "JSON file")
