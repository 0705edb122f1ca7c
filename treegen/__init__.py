"""treegen: decision trees for microcontrollers.

Induce trees on the host (EFTI oblique trees, CART), export them as fixed-point C, build them for
Cortex-M targets and verify them on the device over a serial link.
"""

from treegen.core.errors import TreegenError
from treegen.core.model import Model, load, save
from treegen.core.tree import Tree
from treegen.core.version import __version__
from treegen.learn.estimators import (ALGORITHMS, CARTClassifier, DECARTClassifier, DEID3Classifier,
                                      DEPDTClassifier, EFTIClassifier, GPClassifier, ID3Classifier, RFClassifier,
                                      make_estimator)

__all__ = [
    "__version__", "TreegenError", "Model", "Tree", "load", "save",
    "EFTIClassifier", "CARTClassifier", "ALGORITHMS", "make_estimator",
    "DEPDTClassifier", "DECARTClassifier", "DEID3Classifier", "ID3Classifier", "GPClassifier", "RFClassifier",
]
