"""Writing result files: early checks of output paths, text and JSON writers with one-line errors.

Used by every layer that writes a user's file (the CLI's ``--json``/``--junit``/``-o``), so that a
path that cannot be written fails before a long run, and a write error is a :class:`TreegenError`.

Every file is written atomically: the text goes to a temporary file in the same folder, which is
renamed over the target only when complete, so an interrupted or failed write leaves the old file
(or none), never half a file. An output path that is one of the command's inputs is refused
(:func:`check_output` with ``inputs``, or :func:`check_paths` for all of a command's outputs at once),
before anything is read or written.

``-`` as a text output means standard output (:func:`write_text`); while a command writes data there,
its human-readable report goes to standard error (:func:`stdout_for_data`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from treegen.core.atomic import atomic_write
from treegen.core.errors import TreegenError
from treegen.core.jsonvalues import plain


STDOUT = "-"

#: kinds of output: ``text`` (a file, or ``-`` = standard output), ``binary`` (a file that cannot go to
#: standard output: a picture), ``folder`` (a directory written into), ``file`` (a file that cannot be
#: standard output, e.g. one that is also read back)
OUTPUT_KINDS = ("text", "binary", "folder", "file")


@dataclass(frozen=True)
class Output:
    """One output of a command: its ``path``, what it is (``"JSON file"``, for messages) and its kind."""

    path: str
    what: str
    kind: str = "text"

    def __post_init__(self):
        if self.kind not in OUTPUT_KINDS:
            raise ValueError(f"output kind must be one of {OUTPUT_KINDS}, got {self.kind!r}")


def _stat(path):
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _is_stream(path) -> bool:
    """An existing path that is not a regular file or directory (``/dev/null``, ``/dev/stdout``, a FIFO):
    writing to it replaces no file, and two such paths may name one terminal without harm."""
    st = _stat(path)
    return st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


def _real(path) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _inside(path, folder) -> bool:
    """Whether ``path`` lies inside ``folder`` (by its written path or once symbolic links are resolved)."""
    for p, f in ((os.path.abspath(path), os.path.abspath(folder)), (_real(path), _real(folder))):
        if os.path.commonpath([p, f]) == f and p != f:
            return True
    return False


def _same_output(a, b) -> bool:
    """Whether two paths that may not exist yet name one file (same inode, or the same resolved path)."""
    return same_file(a, b) or _real(a) == _real(b)


def check_paths(outputs: Sequence[Output], inputs: Sequence = ()) -> None:
    """Refuse, with one line and before any work, outputs that would destroy an input or each other.

    ``inputs``: every file the command reads (``-`` = standard input and missing files are skipped).
    An output is refused when it is an input (the same path, a hard link or a symbolic link to it),
    when an output folder holds an input, when two outputs are one file, when two outputs go to
    standard output, or when ``-`` is given for an output that is not text (a picture, a folder).
    Then every output file is checked as by :func:`check_output` (folder: not a regular file).
    """
    outs = [o for o in outputs if o.path is not None]
    ins = [str(i) for i in inputs if i is not None and str(i) != STDOUT]
    ins = [i for i in ins if _stat(i) is not None and not _is_stream(i)]
    to_stdout = []
    for o in outs:
        path = str(o.path)
        if path == STDOUT:
            if o.kind != "text":
                noun = "a directory" if o.kind == "folder" else "a file name"
                raise TreegenError(f"{o.what} cannot be standard output ('-'): give {noun}")
            to_stdout.append(o)
            continue
        if _is_stream(path):
            continue
        for src in ins:
            if same_file(path, src) or _real(path) == _real(src):
                raise TreegenError(f"{o.what} {path} is also an input of this command: choose another output path")
            if o.kind == "folder" and _inside(src, path):
                raise TreegenError(f"{o.what} {path} holds {src}, an input of this command that it could "
                                   f"overwrite: choose another output folder (or move the input)")
    if len(to_stdout) > 1:
        raise TreegenError(f"only one output can go to standard output ('-'): {to_stdout[0].what} and "
                           f"{to_stdout[1].what} both do")
    files = [o for o in outs if str(o.path) != STDOUT and not _is_stream(str(o.path))]
    for i, a in enumerate(files):
        for b in files[i + 1:]:
            if _same_output(a.path, b.path):
                raise TreegenError(f"{a.what} and {b.what} are the same file {a.path}: choose distinct output paths")
    for o in files:
        if o.kind == "folder":
            p = Path(o.path)
            if p.exists() and not p.is_dir():
                raise TreegenError(f"{o.what} {p} is a file, not a directory")
        else:
            check_output(str(o.path), o.what)


_data_stdout = None


def data_stdout():
    """The stream ``-`` writes to: the command's real standard output (see :func:`stdout_for_data`)."""
    return _data_stdout if _data_stdout is not None else sys.stdout


@contextlib.contextmanager
def stdout_for_data(active: bool = True) -> Iterator[None]:
    """While active, standard output is kept for the data written to ``-`` and the report that a
    command prints (``print``) goes to standard error, so ``treegen eval M D --json - | jq`` gets
    JSON only."""
    global _data_stdout
    if not active:
        yield
        return
    previous, saved = _data_stdout, sys.stdout
    _data_stdout = saved
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = saved
        _data_stdout = previous


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name the same file (an existing file compared by inode)."""
    if a is None or b is None or str(a) == "-" or str(b) == "-":
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def check_output(path: str | None, what: str, *, inputs=()) -> None:
    """Fail early (before a long fit) if ``path`` obviously cannot be written, or is one of ``inputs``
    (``-``, standard output, always can)."""
    if path is None or str(path) == STDOUT:
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
    """Write ``text`` to ``path`` atomically (UTF-8, newlines as given); ``what`` names the file in errors.
    ``-``: standard output (:func:`data_stdout`)."""
    if str(path) == STDOUT:
        stream = data_stdout()
        stream.write(text)
        stream.flush()
        return
    try:
        atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        raise TreegenError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def write_json(path: str | None, obj: dict) -> None:
    """Write ``obj`` (numpy values made plain) as indented JSON; nothing when ``path`` is None."""
    if path is not None:
        write_text(path, json.dumps(plain(obj), indent=2, allow_nan=False) + "\n", "JSON file")
