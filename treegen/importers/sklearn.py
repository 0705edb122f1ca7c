"""Public alias of :mod:`treegen.emit.importers.sklearn`
(``from treegen.importers.sklearn import from_sklearn``)."""

from __future__ import annotations

from treegen.emit.importers.sklearn import f32_split, from_sklearn

__all__ = ["from_sklearn", "f32_split"]
