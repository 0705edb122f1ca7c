"""treegen: decision trees for microcontrollers.

Induce trees on the host (EFTI oblique trees, CART), export them as fixed-point C, build them for
Cortex-M targets and verify them on the device over a serial link.
"""

__version__ = "0.1.0"

from .errors import TreegenError  # noqa: E402
from .model import Model, load, save  # noqa: E402
from .tree import Tree  # noqa: E402
from .estimators import ALGORITHMS, CARTClassifier, EFTIClassifier, make_estimator  # noqa: E402

__all__ = [
    "__version__", "TreegenError", "Model", "Tree", "load", "save",
    "EFTIClassifier", "CARTClassifier", "ALGORITHMS", "make_estimator",
]
