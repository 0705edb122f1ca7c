"""Which code a bench result came from: the commit it records (light: no treegen import)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def commit_of(repo: Path, *, digits: int | None = None, mark_uncommitted: bool = False) -> str:
    """``git rev-parse --short[=digits] HEAD`` of ``repo``, with ``+uncommitted changes`` when
    ``mark_uncommitted`` and tracked files differ from HEAD; ``unknown`` outside a git checkout."""
    short = "--short" if digits is None else f"--short={digits}"
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", short, "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = mark_uncommitted and subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
            text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+uncommitted changes" if dirty else "")
