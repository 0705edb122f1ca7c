"""learn — inducing trees on the host.

One module per algorithm under :mod:`~treegen.learn.inducers`, the scikit-learn style estimators and
the algorithm registry (:mod:`~treegen.learn.estimators`) over their shared base
(:mod:`~treegen.learn.base`, input checks in :mod:`~treegen.learn.validation`), cross-validation
(:mod:`~treegen.learn.cv`) and the C EFTI engine compiled for the host (:mod:`~treegen.learn.engine`).

Imports only :mod:`treegen.core`; a peer of :mod:`treegen.emit` (neither imports the other).
"""
