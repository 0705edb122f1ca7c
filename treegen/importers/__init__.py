"""Importers: trees trained by other libraries -> a treegen :class:`~treegen.core.model.Model`.

``sklearn``        fitted scikit-learn trees, forests, regressors and gradient boosting
                   (:func:`from_sklearn`; value models through ``sklearn_values``)
``xgboost_json``   XGBoost models, boosters and JSON / UBJSON files (:func:`from_xgboost`)
``lightgbm_text``  LightGBM models, boosters and model text files (:func:`from_lightgbm`)
``catboost_json``  CatBoost models, ``.cbm`` and JSON files (:func:`from_catboost`)
``treelite_json``  Treelite models and checkpoints (:func:`from_treelite`)
``onnx_ml``        ONNX-ML TreeEnsembleRegressor / TreeEnsembleClassifier (:func:`from_onnx`)
``files``          a model file recognised by its content (:func:`import_model`, ``treegen import``)
``reader``, ``validate``, ``sklearn_checks``: the checks every importer applies (below);
``ensemble``       the neutral parsed form of a value-tree ensemble and its reference evaluation;
``value_model``    that form -> a treegen model (vote "sum" / "mean").

The source libraries are optional: each is imported only when its importer needs it.

How every importer reads an untrusted file (the reader discipline, written once -- a new importer,
e.g. CatBoost or Treelite, reuses it rather than writing its own checks):

``reader``         :func:`~treegen.importers.reader.read_source` reads a path (a pipe, ``/dev/stdin``)
                   once with a cap (``MAX_IMPORT_BYTES``; never trusts ``st_size``), ``files`` detects the
                   format on those bytes and hands the *same bytes* to the importer (``XGBoostBytes``,
                   ``LightGBMBytes``, ``OnnxBytes``: bytes carrying the file name); ``loads_json`` (depth
                   pre-scan, 64 levels; integers of at most 20 digits; no NaN literals; duplicate keys
                   refused) and ``loads_ubjson`` (iterative, bounded) decode documents.
``validate``       :class:`~treegen.importers.validate.Fields`, bound to the file name: ``obj``/``list``/
                   ``get``/``text`` (types), ``int``/``int_text`` (integers that are integers, in range),
                   ``number``/``number_text`` (finite unless stated), ``ints``/``numbers`` (arrays, each
                   element checked, the offending index named), ``same_length`` (node arrays), ``tokens``
                   (whitespace-separated text values). Each failure is one line
                   ``<file>: <field>: <problem>`` naming the value.
``sklearn_checks`` the same rules for an unpickled scikit-learn estimator; ``check_links`` (children
                   form one tree from node 0, bounded depth) is reusable for any node-array format.

The rule: every count and index is checked against the arrays it indexes, every limit of
:mod:`treegen.core.limits` (features, classes, trees, nodes, depth) while reading, *before* the source
library (xgboost, lightgbm, onnxruntime, scikit-learn) loads or predicts with the model: a hostile index
must never reach a library's predictor (XGBoost's crashes the interpreter). A file the library itself
refuses is refused. ``tests/importers/test_import_fuzz.py`` (and ``bench/fuzz_import.py``) fuzz every
format: a new format adds its seeds and mutator to ``tests/importers/import_fuzz.py``.

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
