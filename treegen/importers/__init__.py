"""Public alias of :mod:`treegen.emit.importers` (``from treegen.importers import from_sklearn``)."""

from __future__ import annotations

from treegen.emit.importers import from_sklearn

__all__ = ["from_sklearn"]
