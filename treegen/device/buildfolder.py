"""Build folders shared by ``treegen build``, ``flash`` and ``hil``: one lock per folder, and a stamp
that ties a built firmware to the project (and so to the model) it was built from.

Lock: ``<parent>/.<folder>.treegen-lock``, an exclusive ``flock`` held while a command writes,
builds or runs the folder's firmware. A second command on the same folder waits for it (saying
so on stderr) and then proceeds; the lock is released when the process ends, however it ends.
It is re-entrant within one process.

Stamp: ``firmware.stamp`` beside ``firmware.elf``, written only after a successful build, holding
the SHA-256 of ``platformio.ini`` (which names the model hash, layout, variant and target) and of
the ELF. Writing a project deletes the stamp first, so an interrupted or failed build, or an ELF
built for another model, never counts as up to date: it is rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from treegen.core.errors import TreegenError

STAMP_NAME = "firmware.stamp"
_held: dict[str, tuple[int, int]] = {}      # lock path -> (fd, depth)
_guard = threading.Lock()


def lock_path(folder) -> Path:
    folder = Path(folder).resolve()
    return folder.parent / f".{folder.name}.treegen-lock"


@contextmanager
def locked(folder, *, note=None):
    """Hold the exclusive lock of build ``folder`` for the ``with`` block (waiting for another holder)."""
    path = lock_path(folder)
    key = str(path)
    with _guard:
        if key in _held:
            fd, depth = _held[key]
            _held[key] = (fd, depth + 1)
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _guard:
                fd, depth = _held[key]
                _held[key] = (fd, depth - 1)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise TreegenError(f"cannot lock the build folder {folder}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            message = f"build folder {folder} is in use by another treegen; waiting for it"
            if note is not None:
                note(message)
            else:
                print(f"treegen: {message}", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        with _guard:
            _held[key] = (fd, 1)
        try:
            yield
        finally:
            with _guard:
                _held.pop(key, None)
    finally:
        os.close(fd)      # releases the flock


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def stamp_path(elf) -> Path:
    return Path(elf).with_name(STAMP_NAME)


def clear_stamp(elf) -> None:
    try:
        stamp_path(elf).unlink()
    except FileNotFoundError:
        pass


def _stamp_text(project: Path, elf: Path) -> str:
    return f"platformio.ini {_sha256(project / 'platformio.ini')}\nfirmware.elf {_sha256(elf)}\n"


def write_stamp(project, elf) -> None:
    """After a successful build: record which project the ELF was built from."""
    from treegen.core.atomic import atomic_write

    atomic_write(stamp_path(elf), _stamp_text(Path(project), Path(elf)).encode())


def stamp_matches(project, elf) -> bool:
    """Whether ``elf`` exists and was built, completely, from the project as it is now."""
    try:
        return stamp_path(elf).read_text() == _stamp_text(Path(project), Path(elf))
    except OSError:
        return False
