"""treegen: decision trees for microcontrollers.

Induce trees on the host (EFTI oblique trees, CART), export them as fixed-point C, build them for
Cortex-M targets and verify them on the device over a serial link.

Every command of the ``treegen`` CLI has a Python counterpart (``docs/api.md``): the estimators
(``fit``), :meth:`Model.predict` (``predict``), :func:`evaluate` (``eval``), :func:`cross_validate`
(``cv``), :func:`render_text` / :func:`render_dot` (``show``), :func:`compare` (``compare``),
:func:`export_model` (``export``), :func:`all_targets` (``targets``), :func:`plot_tree` and the other
``plot_*`` (``plot``); ``build``, ``flash`` and ``hil`` are in :mod:`treegen.device.commands`
(``build_firmware``, ``start_emulator`` / ``upload_firmware``, ``run_hil``).

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
    from treegen.learn.regressors import CARTRegressor, RFRegressor, make_regressor

#: public name -> (module, attribute), imported on first use
_LAZY = {
    "Model": ("treegen.core.model", "Model"), "load": ("treegen.core.model", "load"),
    "save": ("treegen.core.model", "save"), "Tree": ("treegen.core.tree", "Tree"),
    **{name: ("treegen.learn.estimators", name) for name in (
        "ALGORITHMS", "CARTClassifier", "DECARTClassifier", "DEID3Classifier", "DEPDTClassifier", "EFTIClassifier",
        "GPClassifier", "ID3Classifier", "RFClassifier", "make_estimator")},
    **{name: ("treegen.learn.regressors", name) for name in ("CARTRegressor", "RFRegressor", "make_regressor")},
    "evaluate": ("treegen.core.metrics", "evaluate"),
    "cross_validate": ("treegen.learn.cv", "cross_validate"),
    "compare": ("treegen.learn.compare", "compare"),
    "render_text": ("treegen.emit.show", "render_text"),
    "render_dot": ("treegen.emit.show", "render_dot"),
    "export_model": ("treegen.emit.export", "export_model"),
    "all_targets": ("treegen.core.targets", "all_targets"),
    "get_target": ("treegen.core.targets", "get"),
    "plot_tree": ("treegen.emit.plot", "plot_tree"),
    "plot_partition": ("treegen.emit.plot", "plot_partition"),
    "plot_confusion": ("treegen.emit.plot", "plot_confusion"),
    "plot_cv": ("treegen.emit.plot", "plot_cv"),
    "plot_hil": ("treegen.emit.plot", "plot_hil"),
    "from_sklearn": ("treegen.importers.sklearn", "from_sklearn"),
}

__all__ = ["__version__", "TreegenError", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'treegen' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
