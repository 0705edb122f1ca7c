"""Importers: trees trained by other libraries -> a treegen :class:`~treegen.core.model.Model`.

``sklearn``  fitted scikit-learn ``DecisionTreeClassifier`` / ``RandomForestClassifier``
             (:func:`treegen.importers.sklearn.from_sklearn`). scikit-learn is optional: it is
             imported only when an importer is called.
"""

from __future__ import annotations

from treegen.emit.importers.sklearn import from_sklearn

__all__ = ["from_sklearn"]
