"""Public alias of :mod:`treegen.emit.importers`
(``from treegen.importers import from_sklearn, from_xgboost, from_lightgbm, from_onnx, import_model``)."""

from __future__ import annotations

from treegen.emit.importers import from_lightgbm, from_onnx, from_sklearn, from_xgboost
from treegen.emit.importers.files import import_model

__all__ = ["from_sklearn", "from_xgboost", "from_lightgbm", "from_onnx", "import_model"]
