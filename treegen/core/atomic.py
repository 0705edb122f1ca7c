"""Atomic file writes: a temporary file in the target's folder, renamed over the target when complete,
so an interrupted or failed write leaves the previous file (or none), never half a file."""

from __future__ import annotations

import os
import stat
import tempfile


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
