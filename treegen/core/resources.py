"""Locate the data shipped with the package (templates/, targets/).

In an installed wheel they live inside the package (``treegen/templates``); in a source checkout
(editable install) they are the top-level ``templates/`` and ``targets/`` folders.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]   # the treegen package folder


def resource_dir(name: str) -> Path:
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"treegen resource folder {name!r} not found (broken installation?)")


def templates_dir() -> Path:
    return resource_dir("templates")


def targets_dir() -> Path:
    return resource_dir("targets")
