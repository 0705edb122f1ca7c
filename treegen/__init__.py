"""treegen: decision trees for microcontrollers.

Induce trees on the host (EFTI oblique trees, CART), export them as fixed-point C, build them for
Cortex-M targets and verify them on the device over a serial link.

The names below are loaded on first use (PEP 562), so that ``import treegen.<subpackage>`` — e.g. the
pytest plugin :mod:`treegen.hil.plugin`, which pytest loads wherever treegen is installed — does not
import numpy and the learners.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from treegen.core.errors import TreegenError
from treegen.core.version import __version__

if TYPE_CHECKING:     # the same names, for type checkers and readers (and tests/test_layers.py)
    from treegen.core.model import Model, load, save
    from treegen.core.tree import Tree
    from treegen.learn.estimators import (ALGORITHMS, CARTClassifier, DECARTClassifier, DEID3Classifier,
                                          DEPDTClassifier, EFTIClassifier, GPClassifier, ID3Classifier,
                                          RFClassifier, make_estimator)

#: public name -> the module defining it
_LAZY = {
    "Model": "treegen.core.model", "load": "treegen.core.model", "save": "treegen.core.model",
    "Tree": "treegen.core.tree",
    **{name: "treegen.learn.estimators" for name in (
        "ALGORITHMS", "CARTClassifier", "DECARTClassifier", "DEID3Classifier", "DEPDTClassifier", "EFTIClassifier",
        "GPClassifier", "ID3Classifier", "RFClassifier", "make_estimator")},
}

__all__ = [
    "__version__", "TreegenError", "Model", "Tree", "load", "save",
    "EFTIClassifier", "CARTClassifier", "ALGORITHMS", "make_estimator",
    "DEPDTClassifier", "DECARTClassifier", "DEID3Classifier", "ID3Classifier", "GPClassifier", "RFClassifier",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'treegen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
