"""scikit-learn style estimators over the shared tree model.

Each estimator only stores its parameters in ``__init__``; validation happens in ``fit``; fitted
state lives in trailing-underscore attributes (``model_``, ``tree_``, ``classes_``,
``n_features_in_``, ``scaling_``, ``fit_info_``). Inducers are looked up by name in
:data:`ALGORITHMS`.

Examples
--------
>>> import numpy as np
>>> from treegen import EFTIClassifier
>>> X = np.array([[0.1, 0.2], [0.2, 0.1], [0.8, 0.9], [0.9, 0.8]] * 5)
>>> y = np.array([0, 0, 1, 1] * 5)
>>> clf = EFTIClassifier(max_iter=500, random_state=1).fit(X, y)
>>> clf.score(X, y)
1.0
"""

from __future__ import annotations

import inspect
import sys
import warnings
from typing import Callable

import numpy as np

from treegen.core.errors import DataError, TreegenError
from treegen.core.model import Model
from treegen.core.scaling import InputScaling
from treegen.core.tree import Tree
from treegen.core.version import __version__


class DataConversionWarning(UserWarning):
    """Input data was converted (e.g. a column-vector ``y`` was flattened); same name and meaning as
    scikit-learn's warning, defined here so the package does not import scikit-learn."""


class NotFittedError(TreegenError, AttributeError):
    """``predict`` called before ``fit``.

    When scikit-learn is already loaded, the error raised is also an instance of
    ``sklearn.exceptions.NotFittedError`` (see :func:`_not_fitted_error`).
    """


_SKLEARN_NOT_FITTED: type | None = None


def _not_fitted_error(message: str) -> Exception:
    """A :class:`NotFittedError`; when scikit-learn has been imported by the caller, one that is
    also sklearn's ``NotFittedError`` (what sklearn tools expect). scikit-learn is never imported here."""
    global _SKLEARN_NOT_FITTED
    sk_exceptions = sys.modules.get("sklearn.exceptions")
    sk_cls = getattr(sk_exceptions, "NotFittedError", None)
    if isinstance(sk_cls, type) and issubclass(sk_cls, Exception):
        if _SKLEARN_NOT_FITTED is None or not issubclass(_SKLEARN_NOT_FITTED, sk_cls):
            _SKLEARN_NOT_FITTED = type("NotFittedError", (NotFittedError, sk_cls), {"__module__": __name__})
        return _SKLEARN_NOT_FITTED(message)
    return NotFittedError(message)


class TreeClassifier:
    """Base class: data validation, scaling, label encoding and the model object.

    Subclasses implement :meth:`_induce` (normalised X, class indices -> Tree, info dict).
    """

    algorithm: str = ""

    # ------------------------------------------------------------------ params
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind == p.KEYWORD_ONLY]

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "TreeClassifier":
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for {type(self).__name__}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if defaults.get(k) is not v and defaults.get(k) != v]
        return f"{type(self).__name__}({', '.join(changed)})"

    # ------------------------------------------------------------------ fit / predict
    def fit(self, X, y, feature_names: list[str] | None = None) -> "TreeClassifier":
        X = _check_X(X)
        if y is None:
            raise DataError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y = np.asarray(y)
        if y.ndim != 1:
            if y.ndim == 2 and y.shape[1] == 1:
                warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the "
                              "shape of y to (n_samples,), for example using ravel().",
                              DataConversionWarning, stacklevel=2)
                y = y.ravel()
            else:
                raise DataError(f"y should be a 1d array of labels, got an array of shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise DataError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
        if y.dtype.kind == "c":
            raise DataError("Unknown label type: complex labels")
        if y.dtype.kind == "f":
            if not np.all(np.isfinite(y)):
                raise DataError("labels contain NaN or infinite values")
            if np.any(y != np.round(y)):
                raise DataError("Unknown label type: continuous (non-integer float labels); "
                                "a classifier needs discrete class labels")
        try:
            classes = np.unique(y)
        except TypeError:
            raise DataError("Unknown label type: labels of mixed, unorderable types") from None
        if classes.shape[0] < 2:
            raise DataError(f"training data has a single class ({_plain_scalar(classes[0])!r}): one class is not enough, "
                            "at least two are needed")
        y_idx = np.searchsorted(classes, y).astype(np.int64)
        scaling = InputScaling.fit(X, getattr(self, "scaling", "auto"))
        Xn = scaling.transform(X)
        tree, info = self._induce(Xn, y_idx, classes.shape[0])
        tree = tree.validate()
        if feature_names is None:
            feature_names = [f"x{i}" for i in range(X.shape[1])]
        if len(feature_names) != X.shape[1]:
            raise DataError(f"{len(feature_names)} feature names given for {X.shape[1]} features")
        train_pred = tree.predict_index(Xn)
        metadata = {
            "algorithm": self.algorithm,
            "params": {k: v for k, v in self.get_params().items() if _is_plain(v)},
            "seed": getattr(self, "random_state", None),
            "n_train": int(X.shape[0]),
            "train_accuracy": float(np.mean(train_pred == y_idx)),
            "treegen_version": __version__,
            **info,
        }
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        self.scaling_ = scaling
        self.tree_ = tree
        self.fit_info_ = info
        if "max_iter" in self._param_names():
            self.n_iter_ = int(info.get("n_iter", info.get("iterations", self.max_iter)))
        self.model_ = Model([tree], list(map(str, feature_names)), classes.tolist(), scaling, metadata)
        return self

    def _induce(self, X: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[Tree, dict]:
        raise NotImplementedError

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise _not_fitted_error(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    def predict(self, X) -> np.ndarray:
        self._check_fitted()
        X = _check_X(X)
        if X.shape[1] != self.n_features_in_:
            raise DataError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                            f"{self.n_features_in_} features as input")
        return self.classes_[self.model_.predict_index(X)]

    def score(self, X, y) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # sklearn >= 1.6 tag protocol (used only when scikit-learn is installed)
    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, Tags, TargetTags  # type: ignore

        tags = Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags())
        return tags


def _is_plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _plain_scalar(v):
    """numpy scalar -> Python value (for readable messages); other objects unchanged."""
    return v.item() if isinstance(v, np.generic) else v


def _check_X(X) -> np.ndarray:
    if type(X).__module__.startswith("scipy.sparse") or hasattr(X, "tocsr"):
        raise DataError("sparse input is not supported; pass a dense array (e.g. X.toarray())")
    try:
        X = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise DataError(f"X must be a numeric 2-D array ({exc})") from None
    if X.dtype.kind == "c":
        raise DataError("Complex data not supported; X must be real-valued")
    try:
        X = X.astype(np.float64, copy=False)
    except ValueError as exc:
        raise DataError(f"X must be a numeric 2-D array ({exc})") from None
    except TypeError as exc:  # e.g. a dict inside an object array: keep the TypeError (sklearn convention)
        raise TypeError(f"X must be a numeric 2-D array: {exc}") from None
    if X.ndim != 2:
        raise DataError(f"X must be a 2-D array, got {X.ndim} dimension(s). Reshape your data with "
                        "X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample")
    if X.shape[0] < 1:
        raise DataError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.shape[1] < 1:
        raise DataError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if not np.all(np.isfinite(X)):
        raise DataError("X contains NaN or infinite values")
    return X


class EFTIClassifier(TreeClassifier):
    """Oblique decision tree by Evolutionary Full Tree Induction (EFTI).

    A (1+1) evolution strategy over whole trees: coefficient and topology mutation, mixed-dipole
    node initialisation, fitness = accuracy x (1 - Ko*oversize^2) x (1 - Km*missing), selection
    with search probability and return-to-best, partial reclassification.
    See :mod:`treegen.learn.inducers.efti` for the details and defaults.

    Parameters
    ----------
    max_iter : int
        Number of evolution iterations.
    oversize_weight : float
        Ko, weight of the squared relative oversize (leaves - classes) / classes.
    missing_weight : float
        Km, weight of the fraction of classes that no leaf predicts.
    topology_mutation_rate : float
        rho, upper bound of the per-iteration topology mutation probability.
    search_probability : float
        Temperature of the Metropolis-like acceptance of worse individuals.
    search_probability_raise : float
        Raise of the search probability per stagnant iteration.
    return_to_best_probability : float
        Per-iteration probability of going back to the best tree while searching.
    max_depth : int
        Depth limit of evolved trees.
    coefficient_mutation_rate : float
        alpha: 1 + floor(alpha * internal_nodes * (features + 1)) coefficients change per iteration.
    dipole : {'global', 'node'}
        Draw the mixed dipole of a new node from the whole training set or from the leaf's instances.
    engine : {'auto', 'python', 'native'}
        ``native`` runs the C engine compiled for the host (the same source as on a device;
        identical results, ~10x faster); ``python`` the numpy reference; ``auto`` = native when a C
        compiler is available.
    partial_reclassification : bool
        Re-evaluate only the instances a mutation can affect (same result, faster on deep trees).
    scaling : {'auto', 'q15', 'minmax'}
        Input scaling (see :mod:`treegen.core.scaling`).
    random_state : int or None
        Seed; the same seed gives the same tree.
    callback : callable or None
        ``callback(iteration, fitness, leaves, accuracy)`` after every accepted improvement.

    Attributes
    ----------
    model_ : treegen.core.model.Model
    tree_ : treegen.core.tree.Tree
    classes_ : ndarray
    n_features_in_ : int
    scaling_ : treegen.core.scaling.InputScaling
    fit_info_ : dict
        fitness, iterations, etc.
    """

    algorithm = "efti"

    def __init__(self, *, max_iter: int = 50_000, oversize_weight: float = 0.01, missing_weight: float = 0.0,
                 topology_mutation_rate: float = 0.6, search_probability: float = 0.05,
                 search_probability_raise: float = 5e-5, return_to_best_probability: float = 1e-4,
                 max_depth: int = 8, coefficient_mutation_rate: float = 0.0, dipole: str = "global",
                 partial_reclassification: bool = True, engine: str = "auto", scaling: str = "auto",
                 random_state: int | None = None, callback: Callable | None = None):
        self.max_iter = max_iter
        self.oversize_weight = oversize_weight
        self.missing_weight = missing_weight
        self.topology_mutation_rate = topology_mutation_rate
        self.search_probability = search_probability
        self.search_probability_raise = search_probability_raise
        self.return_to_best_probability = return_to_best_probability
        self.max_depth = max_depth
        self.coefficient_mutation_rate = coefficient_mutation_rate
        self.dipole = dipole
        self.partial_reclassification = partial_reclassification
        self.engine = engine
        self.scaling = scaling
        self.random_state = random_state
        self.callback = callback

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import efti

        params = efti.EFTIParams(
            max_iter=self.max_iter, oversize_weight=self.oversize_weight, missing_weight=self.missing_weight,
            topology_mutation_rate=self.topology_mutation_rate, search_probability=self.search_probability,
            search_probability_raise=self.search_probability_raise,
            return_to_best_probability=self.return_to_best_probability, max_depth=self.max_depth,
            coefficient_mutation_rate=self.coefficient_mutation_rate, dipole=self.dipole,
            partial_reclassification=self.partial_reclassification,
        )
        seed = 0 if self.random_state is None else efti.check_seed(self.random_state)
        params.validate()
        engine = resolve_engine(self.engine)
        if engine == "native":
            from treegen.learn import engine as native

            return native.induce(X, y, n_classes, params, seed=seed, callback=self.callback)
        tree, info = efti.induce(X, y, n_classes, params, seed=seed, callback=self.callback)
        info["engine"] = "python"
        return tree, info


ENGINES = ("auto", "python", "native")


def resolve_engine(engine: str) -> str:
    """'auto' -> 'native' when a host C compiler is available, else 'python'."""
    import os
    import shutil

    if engine not in ENGINES:
        raise TreegenError(f"unknown EFTI engine {engine!r} (choose from {', '.join(ENGINES)})")
    if engine == "auto":
        return "native" if shutil.which(os.environ.get("CC", "cc")) else "python"
    return engine


class CARTClassifier(TreeClassifier):
    """Axis-parallel CART tree (Gini or entropy), with depth/size limits and minimal
    cost-complexity pruning. Deterministic: ties between splits go to the lowest feature index
    and lowest threshold.

    Parameters
    ----------
    criterion : {'gini', 'entropy'}
    max_depth : int or None
    min_samples_split : int
    min_samples_leaf : int
    ccp_alpha : float
        Complexity parameter of minimal cost-complexity pruning (0 = no pruning).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Accepted for API symmetry; CART is deterministic.
    """

    algorithm = "cart"

    def __init__(self, *, criterion: str = "gini", max_depth: int | None = None, min_samples_split: int = 2,
                 min_samples_leaf: int = 1, ccp_alpha: float = 0.0, scaling: str = "auto",
                 random_state: int | None = None):
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.ccp_alpha = ccp_alpha
        self.scaling = scaling
        self.random_state = random_state

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import cart

        return cart.induce(X, y, n_classes, criterion=self.criterion, max_depth=self.max_depth,
                           min_samples_split=self.min_samples_split, min_samples_leaf=self.min_samples_leaf,
                           ccp_alpha=self.ccp_alpha)


ALGORITHMS: dict[str, type[TreeClassifier]] = {
    "efti": EFTIClassifier,
    "cart": CARTClassifier,
}


def make_estimator(algorithm: str, **params) -> TreeClassifier:
    """Estimator for an algorithm name; unknown names and parameters raise :class:`TreegenError`."""
    try:
        cls = ALGORITHMS[algorithm]
    except KeyError:
        raise TreegenError(f"unknown algorithm {algorithm!r} (choose from {', '.join(ALGORITHMS)})") from None
    valid = cls._param_names()
    unknown = [k for k in params if k not in valid]
    if unknown:
        raise TreegenError(f"algorithm {algorithm!r} has no option {unknown[0]!r}")
    return cls(**params)
