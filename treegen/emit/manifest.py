"""The manifest of an export folder: ``DIR/.treegen-manifest.json`` lists every file treegen wrote
there (path relative to DIR, SHA-256 of the text written), so that the next export into DIR can
remove what the previous one wrote and this one does not (another library layout, another model
name) — and nothing else.

Rules (checked before anything is written or removed):

- a file of the previous export that this one does not write is removed if it still has the recorded
  content; if it was changed since (the user edited it) it is kept, and the export says so;
- a file this export writes over is refused without ``--force`` when it was changed since treegen
  wrote it (the manifest's hash differs), as a file treegen never wrote is
  (:func:`treegen.core.codegen.check_overwrite`);
- a file not in the manifest is never removed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from treegen.core.errors import TreegenError

MANIFEST = ".treegen-manifest.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read(out_dir) -> dict:
    """{relative path: sha256} of the previous export into ``out_dir`` ({} if none or unreadable)."""
    path = Path(out_dir) / MANIFEST
    try:
        files = json.loads(path.read_text(encoding="utf-8")).get("files", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def _current(path: Path) -> str | None:
    try:
        return _sha(path.read_bytes())
    except OSError:
        return None


def plan(out_dir, texts: dict, *, force: bool = False) -> tuple[list, list]:
    """(files to remove, files kept because the user changed them) before writing ``texts``
    ({path: text}) into ``out_dir``; raises :class:`TreegenError` when a file to be written was
    changed since treegen wrote it (unless ``force``)."""
    out = Path(out_dir)
    old = read(out)
    new = {Path(p).resolve().relative_to(out.resolve()).as_posix() for p in texts}
    if not force:
        for rel in sorted(new & set(old)):
            sha = _current(out / rel)
            if sha is not None and sha != old[rel]:
                raise TreegenError(f"{out / rel} was changed since treegen wrote it: not overwriting it "
                                   "(move your changes elsewhere, or --force)")
    remove, kept = [], []
    for rel in sorted(set(old) - new):
        sha = _current(out / rel)
        if sha is None:
            continue
        (remove if sha == old[rel] else kept).append(out / rel)
    return remove, kept


def apply(out_dir, texts: dict, remove: list) -> None:
    """Remove the stale files of :func:`plan` (and the folders they leave empty, up to ``out_dir``)
    and record ``texts`` as this export's files."""
    from treegen.core.atomic import atomic_write

    out = Path(out_dir)
    for path in remove:
        try:
            path.unlink()
        except OSError as exc:
            raise TreegenError(f"cannot remove {path} (written by the previous export): "
                               f"{exc.strerror or exc}") from None
        parent = path.parent
        while parent != out and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    files = {Path(p).resolve().relative_to(out.resolve()).as_posix(): _sha(t.encode("utf-8"))
             for p, t in texts.items()}
    body = {"generator": "treegen", "note": "files written by the last treegen export into this folder "
                                            "(removed by the next export if unchanged)",
            "files": dict(sorted(files.items()))}
    try:
        atomic_write(out / MANIFEST, (json.dumps(body, indent=1) + "\n").encode("utf-8"))
    except OSError as exc:
        raise TreegenError(f"cannot write {out / MANIFEST}: {exc.strerror or exc}") from None
