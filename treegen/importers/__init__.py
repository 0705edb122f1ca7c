"""Importers: trees trained by other libraries -> a treegen :class:`~treegen.core.model.Model`.

``sklearn``        fitted scikit-learn trees, forests, regressors and gradient boosting
                   (:func:`from_sklearn`; value models through ``sklearn_values``)
``xgboost_json``   XGBoost models, boosters and JSON / UBJSON files (:func:`from_xgboost`)
``lightgbm_text``  LightGBM models, boosters and model text files (:func:`from_lightgbm`)
``catboost_json``  CatBoost models, ``.cbm`` and JSON files (:func:`from_catboost`)
``treelite_json``  Treelite models and checkpoints (:func:`from_treelite`)
``onnx_ml``        ONNX-ML TreeEnsembleRegressor / TreeEnsembleClassifier (:func:`from_onnx`)
``files``          a model file recognised by its content (:func:`import_model`, ``treegen import``)
``ensemble``       the neutral parsed form of a value-tree ensemble and its reference evaluation;
``value_model``    that form -> a treegen model (vote "sum" / "mean").

The source libraries are optional: each is imported only when its importer needs it.

A layer of its own: a peer of :mod:`treegen.learn` (the other way a model comes into being) and of
:mod:`treegen.emit` (what a model becomes); imports only :mod:`treegen.core`.
"""

from __future__ import annotations

from treegen.importers.catboost_json import from_catboost
from treegen.importers.files import import_model
from treegen.importers.lightgbm_text import from_lightgbm
from treegen.importers.onnx_ml import from_onnx
from treegen.importers.sklearn import from_sklearn
from treegen.importers.treelite_json import from_treelite
from treegen.importers.xgboost_json import from_xgboost

__all__ = ["from_sklearn", "from_xgboost", "from_lightgbm", "from_onnx", "from_catboost", "from_treelite",
           "import_model"]
