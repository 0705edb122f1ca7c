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
import stat
import tempfile
from pathlib import Path

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


def atomic_write(path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    A path that exists and is not a regular file (``/dev/stdout``, a FIFO) is written directly.
    The new file gets the mode of the file it replaces, or the default mode (0666 minus umask).
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "wb") as fh:
            fh.write(data)
        return
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            mode = stat.S_IMODE(st.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
