"""scikit-learn style estimators over the shared tree model.

Each estimator only stores its parameters in ``__init__``; validation happens in ``fit``; fitted
state lives in trailing-underscore attributes (``model_``, ``tree_``, ``classes_``,
``n_features_in_``, ``feature_names_in_`` (when fitted on a pandas DataFrame with string column
names, as in scikit-learn, or given ``feature_names=``), ``scaling_``, ``fit_info_``, ``seed_``;
``feature_importances_`` and ``predict_proba`` as in scikit-learn). ``random_state=None`` draws a fresh
seed from the operating system (scikit-learn's meaning); the seed used is ``seed_`` and the model's
``metadata["seed"]``, so ``random_state=est.seed_`` repeats the run exactly. Inducers are looked up by name in
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
from treegen.core.limits import MAX_TREES, capped_jobs
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
        names_in = _column_names(X)
        if feature_names is None:
            feature_names = names_in
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
        self.seed_ = resolve_seed(getattr(self, "random_state", None))
        scaling = InputScaling.fit(X, getattr(self, "scaling", "auto"))
        Xn = scaling.transform(X)
        tree, info = self._induce(Xn, y_idx, classes.shape[0])
        tree = tree.validate()
        names_given = feature_names is not None
        if feature_names is None:
            feature_names = [f"x{i}" for i in range(X.shape[1])]
        if len(feature_names) != X.shape[1]:
            raise DataError(f"{len(feature_names)} feature names given for {X.shape[1]} features")
        train_pred = tree.predict_index(Xn)
        metadata = {
            "algorithm": self.algorithm,
            "params": {k: v for k, v in self.get_params().items() if _is_plain(v)},
            "seed": self.seed_,
            "n_train": int(X.shape[0]),
            "train_accuracy": float(np.mean(train_pred == y_idx)),
            "treegen_version": __version__,
            **info,
        }
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        if names_given:
            # names the user gave (DataFrame string columns, as scikit-learn, or feature_names=)
            self.feature_names_in_ = np.asarray(list(map(str, feature_names)), dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
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

    def _validate_X(self, X) -> np.ndarray:
        """``X`` for predict: the fitted number of features; a DataFrame's columns matched to
        ``feature_names_in_`` by name (reordered when only the order differs, else an error naming the
        missing and unexpected columns)."""
        self._check_fitted()
        names = _column_names(X)
        X = _check_X(X)
        if X.shape[1] != self.n_features_in_:
            raise DataError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                            f"{self.n_features_in_} features as input")
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None and names != list(fitted):
            fitted = list(fitted)
            if len(set(names)) == len(names) and set(names) == set(fitted):
                return X[:, [names.index(n) for n in fitted]]
            missing = [n for n in fitted if n not in names]
            extra = [n for n in names if n not in fitted]
            raise DataError(f"the columns of X do not match the feature names seen at fit (missing "
                            f"{', '.join(missing) or 'none'}; unexpected {', '.join(extra) or 'none'})")
        return X

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity-based feature importances, ``(n_features_in_,)``, summing to 1.

        Axis-parallel trees: scikit-learn's mean decrease in impurity (the criterion the tree was
        grown with: Gini, or entropy for ``criterion='entropy'``, ID3 and DE-ID3). Oblique trees
        (EFTI, DE-PDT): each node's impurity decrease is shared among the features in proportion to
        the absolute weights of its test on the normalised inputs, ``|w_a| / sum_b |w_b|``. Forests
        average their trees'. See :meth:`treegen.core.tree.Tree.feature_importances`.
        """
        self._check_fitted()
        return self.model_.feature_importances(self._impurity_criterion())

    def _impurity_criterion(self) -> str:
        criterion = getattr(self, "criterion", None) or getattr(self, "_criterion", None)
        return criterion if criterion in ("gini", "entropy") else ("entropy" if self.algorithm == "id3" else "gini")

    def predict(self, X) -> np.ndarray:
        X = self._validate_X(X)
        return self.classes_[self.model_.predict_index(X)]

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: the class-count frequencies of the training rows in the leaf each row
        reaches (one-hot of the leaf's class for an empty leaf).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; ``argmax`` (first maximum) equals ``predict`` except
            for a leaf whose class is not its most frequent one (EFTI keeps a leaf's class when a
            mutation empties it).
        """
        X = self._validate_X(X)
        return self.model_.predict_proba(X)

    def score(self, X, y) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # sklearn >= 1.6 tag protocol (used only when scikit-learn is installed)
    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, Tags, TargetTags  # type: ignore

        tags = Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags())
        return tags


def resolve_seed(random_state) -> int:
    """The seed a fit uses: ``random_state`` itself (an integer >= 0), or for ``None`` a fresh one
    drawn from the operating system's entropy (scikit-learn's meaning of ``None``: a new random run
    each time). The seed used is kept as ``seed_`` and in the model's ``metadata["seed"]``, so a run
    with ``random_state=None`` can be repeated exactly with ``random_state=est.seed_``."""
    if random_state is None:
        import secrets

        return secrets.randbits(32)
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise TreegenError(f"random_state must be None or an integer >= 0, got {random_state!r}")
    return int(random_state)


def _is_plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _plain_scalar(v):
    """numpy scalar -> Python value (for readable messages); other objects unchanged."""
    return v.item() if isinstance(v, np.generic) else v


def _column_names(X) -> list[str] | None:
    """A DataFrame's column names when they are all strings (scikit-learn's rule for
    ``feature_names_in_``), else None."""
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, np.ndarray):
        return None
    names = list(columns)
    return names if names and all(isinstance(n, str) for n in names) else None


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
    engine : {'auto', 'python', 'native'} or callable
        ``native`` runs the C engine compiled for the host (the same source as on a device;
        identical results, ~10x faster); ``python`` the numpy reference; ``auto`` = native when a C
        compiler is available. A callable with the signature of ``treegen.learn.engine.induce`` is
        used as the inducer (``treegen fit --engine device`` passes one that trains on a device).
    partial_reclassification : bool
        Re-evaluate only the instances a mutation can affect (same result, faster on deep trees).
    scaling : {'auto', 'q15', 'minmax'}
        Input scaling (see :mod:`treegen.core.scaling`).
    random_state : int or None
        Seed; the same seed gives the same tree. None (the default) draws a fresh seed from the
        operating system, as in scikit-learn; the seed used is ``seed_``.
    callback : callable or None
        ``callback(iteration, fitness, leaves, accuracy)`` after every accepted improvement.
    risk : {'empirical', 'vicinal'}
        What the fitness rewards: correctly classified rows (EFTI) or each row's probability of
        being classified correctly under a Gaussian kernel (vicinal risk, Cao & Rockett 2015; see
        :mod:`treegen.learn.vicinal`); the size penalty is kept. ``vicinal`` runs on the Python
        engine (``engine='native'`` refuses it).
    vicinity_sigma2 : float or 'auto'
        Kernel variance per attribute variance (default 0.1, the paper's); ``'auto'`` chooses it
        from (0.001, 0.01, 0.1, 1) by 3-fold inner cross-validation.

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
                 random_state: int | None = None, callback: Callable | None = None, risk: str = "empirical",
                 vicinity_sigma2: float | str = 0.1):
        self.risk = risk
        self.vicinity_sigma2 = vicinity_sigma2
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
        seed = efti.check_seed(self.seed_)
        params.validate()
        if callable(self.engine):       # an inducer with engine.induce's signature (e.g. training on a device)
            return self.engine(X, y, n_classes, params, seed=seed, callback=self.callback)
        if self.risk != "empirical":
            from treegen.learn import vicinal

            vicinal.check_risk(self.risk)
            vicinal.check_sigma2(self.vicinity_sigma2)
            resolve_engine(self.engine)
            if self.engine == "native":
                raise TreegenError("the native EFTI engine does not implement risk='vicinal' "
                                   "(use engine='python' or 'auto')")
            sigma2, auto = _resolve_sigma2(self, X, y, n_classes, seed)
            tree, info = efti.induce(X, y, n_classes, params, seed=seed, callback=self.callback,
                                     risk=self.risk, vicinity_sigma2=sigma2)
            info["engine"] = "python"
            info.update(auto)
            return tree, info
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
        Accepted for API symmetry (recorded as ``seed_``); CART is deterministic.
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


class DEPDTClassifier(TreeClassifier):
    """Perceptron decision tree evolved by differential evolution (DE-PDT, seed 004).

    A population of complete oblique trees of height ``height`` evolves by DE/rand/1/bin (F in
    [0.4, 1], CR in [0.9, 1] per individual) with swap-movement leaf crossover, replacement of the
    worst ``replacement`` fraction and of trees below 1/n_classes accuracy, and legitimacy (a sample
    of the rows that grows as the population converges). Integer-exact (Q15 inputs, int16 weights):
    the exported C decides exactly as the model. The best tree is pruned into the IR (empty subtrees
    removed, same-class sibling leaves merged); ``fit_info_`` reports complete and pruned sizes.
    See :mod:`treegen.learn.inducers.de_pdt`.

    Parameters
    ----------
    population : int
        Individuals (>= 4). Paper default 50.
    generations : int
        Generations. Paper default 2000.
    height : int
        Height h of the complete tree, 2..12 (2**(h-1)-1 nodes, 2**(h-1) leaves). Paper default 5.
    replacement : float
        Fraction of worst individuals replaced by random trees every generation. Paper default 0.1.
    legitimacy_delta : float
        delta of the legitimacy growth rate alpha = 1 + delta/sigma (paper: 1e-6).
    reevaluate_after : int
        t: generations after which a kept individual is re-evaluated at the current legitimacy (10).
    oversize_weight : float
        treegen extra: EFTI's size penalty Ko on the leaves reached (0 = the paper's objective).
    validation_fraction : float
        treegen extra: stratified hold-out of the training rows that picks the final tree (0 = off).
    engine : {'auto', 'python', 'native'}
        ``native``: the C evaluation kernel compiled for the host (identical trees, faster);
        ``python``: numpy; ``auto``: native when a C compiler exists.
    selection : {'not-worse', 'better'}
        DE selection: a trial replaces its target when not worse (default; Storn's DE code, ``<=``)
        or only when strictly better (``better``, the literal reading of the paper's prose).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Seed; the same seed gives the same tree. None (the default) draws a fresh seed from the
        operating system, as in scikit-learn; the seed used is ``seed_``.
    callback : callable or None
        ``callback(generation, objective_rate, leaves, accuracy)`` every 16 generations.

    Attributes
    ----------
    model_, tree_, classes_, n_features_in_, scaling_, fit_info_
    """

    algorithm = "de-pdt"

    def __init__(self, *, population: int = 50, generations: int = 2000, height: int = 5,
                 replacement: float = 0.1, legitimacy_delta: float = 1e-6, reevaluate_after: int = 10,
                 oversize_weight: float = 0.0, validation_fraction: float = 0.0, engine: str = "auto",
                 selection: str = "not-worse", scaling: str = "auto", random_state: int | None = None,
                 callback: Callable | None = None):
        self.population = population
        self.generations = generations
        self.height = height
        self.replacement = replacement
        self.legitimacy_delta = legitimacy_delta
        self.reevaluate_after = reevaluate_after
        self.oversize_weight = oversize_weight
        self.validation_fraction = validation_fraction
        self.engine = engine
        self.selection = selection
        self.scaling = scaling
        self.random_state = random_state
        self.callback = callback

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import de_pdt

        params = de_pdt.DEPDTParams(
            population=self.population, generations=self.generations, height=self.height,
            replacement=self.replacement, legitimacy_delta=self.legitimacy_delta,
            reevaluate_after=self.reevaluate_after, oversize_weight=self.oversize_weight,
            validation_fraction=self.validation_fraction, engine=resolve_engine(self.engine),
            selection=self.selection)
        seed = self.seed_
        tree, info = de_pdt.induce(X, y, n_classes, params, seed=seed, callback=self.callback)
        info["engine"] = params.engine
        return tree, info


class DECARTClassifier(TreeClassifier):
    """CART whose split attribute is chosen by the Separation Measure and whose threshold is found by
    differential evolution (seven strategies chosen by Population-level Dynamic Probabilities; F and
    Cr by Success-History Adaptation) instead of enumerating every cut point (seed 001). Gini.
    See :mod:`treegen.learn.inducers.de_split`.

    Parameters
    ----------
    population : int
        Threshold-DE population per node (>= 4).
    generations : int
        Threshold-DE generations per node.
    max_depth, min_samples_split, min_samples_leaf, ccp_alpha
        As :class:`CARTClassifier`.
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Seed of the threshold DE; None draws a fresh one (recorded in ``seed_``).
    """

    algorithm = "de-cart"
    _criterion = "gini"

    def __init__(self, *, population: int = 20, generations: int = 30, max_depth: int | None = None,
                 min_samples_split: int = 2, min_samples_leaf: int = 1, ccp_alpha: float = 0.0,
                 scaling: str = "auto", random_state: int | None = None):
        self.population = population
        self.generations = generations
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.ccp_alpha = ccp_alpha
        self.scaling = scaling
        self.random_state = random_state

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import de_split

        params = de_split.DESplitParams(
            criterion=self._criterion, population=self.population, generations=self.generations,
            max_depth=self.max_depth, min_samples_split=self.min_samples_split,
            min_samples_leaf=self.min_samples_leaf, ccp_alpha=self.ccp_alpha)
        seed = self.seed_
        return de_split.induce(X, y, n_classes, params, seed=seed)


class DEID3Classifier(DECARTClassifier):
    """As :class:`DECARTClassifier` with the information gain (entropy) criterion (DE-ID3)."""

    algorithm = "de-id3"
    _criterion = "entropy"


class ID3Classifier(TreeClassifier):
    """ID3: information-gain tree; numeric attributes split by threshold, categorical ones multiway
    (lowered into chains of binary threshold nodes); optional C4.5 pessimistic pruning.
    See :mod:`treegen.learn.inducers.id3`.

    Parameters
    ----------
    max_depth : int or None
    min_samples_split : int
    min_samples_leaf : int
    categorical : str, sequence or None
        Categorical columns: indices or feature names (a sequence, or a comma-separated string).
    pruning : {'none', 'pessimistic'}
    confidence : float
        C4.5 confidence factor CF of pessimistic pruning (default 0.25).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Accepted for API symmetry (recorded as ``seed_``); ID3 is deterministic.
    """

    algorithm = "id3"

    def __init__(self, *, max_depth: int | None = None, min_samples_split: int = 2, min_samples_leaf: int = 1,
                 categorical=None, pruning: str = "none", confidence: float = 0.25, scaling: str = "auto",
                 random_state: int | None = None):
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.categorical = categorical
        self.pruning = pruning
        self.confidence = confidence
        self.scaling = scaling
        self.random_state = random_state

    def fit(self, X, y, feature_names: list[str] | None = None) -> "ID3Classifier":
        self._feature_names = feature_names if feature_names is not None else _column_names(X)
        return super().fit(X, y, feature_names=feature_names)

    def _categorical_columns(self, n_features: int) -> tuple:
        spec = self.categorical
        if spec is None or spec == "":
            return ()
        items = [s.strip() for s in spec.split(",") if s.strip()] if isinstance(spec, str) else list(spec)
        names = list(getattr(self, "_feature_names", None) or [])
        cols = []
        for item in items:
            if isinstance(item, str) and item in names:
                cols.append(names.index(item))
                continue
            try:
                col = int(item)
            except (TypeError, ValueError):
                raise TreegenError(f"categorical column {item!r} is neither a feature name nor an index") from None
            if not 0 <= col < n_features:
                raise TreegenError(f"categorical column {col} out of range 0..{n_features - 1}")
            cols.append(col)
        return tuple(sorted(set(cols)))

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import id3

        params = id3.ID3Params(max_depth=self.max_depth, min_samples_split=self.min_samples_split,
                               min_samples_leaf=self.min_samples_leaf,
                               categorical=self._categorical_columns(X.shape[1]), pruning=self.pruning,
                               confidence=self.confidence)
        return id3.induce(X, y, n_classes, params)


def _resolve_sigma2(est: TreeClassifier, X: np.ndarray, y: np.ndarray, n_classes: int,
                    seed: int) -> tuple[float, dict]:
    """The estimator's ``vicinity_sigma2``; for ``'auto'``, the value of
    :data:`treegen.learn.vicinal.AUTO_GRID` with the fewest errors in a 3-fold stratified inner
    cross-validation on the (normalised) training rows (ties -> the smaller value)."""
    from treegen.learn import vicinal

    sigma2 = vicinal.check_sigma2(est.vicinity_sigma2)
    if sigma2 != "auto":
        return float(sigma2), {}
    folds = 3
    fold_of = vicinal.inner_folds(y, folds, seed)
    errors = []
    for cand in vicinal.AUTO_GRID:
        params = {**est.get_params(), "vicinity_sigma2": cand}
        if "callback" in params:
            params["callback"] = None
        inner = type(est)(**params)
        inner.seed_ = seed
        wrong = 0
        for f in range(folds):
            tr = fold_of != f
            if np.unique(y[tr]).size < 2:
                continue
            tree, _ = inner._induce(X[tr], y[tr], n_classes)
            wrong += int(np.sum(tree.predict_index(X[~tr]) != y[~tr]))
        errors.append(wrong)
    best = int(np.argmin(errors))
    return float(vicinal.AUTO_GRID[best]), {
        "vicinity_sigma2_auto": {"grid": list(vicinal.AUTO_GRID), "inner_cv_errors": errors, "folds": folds}}


class GPClassifier(TreeClassifier):
    """Axis-parallel decision tree by multi-objective genetic programming, trained by vicinal or
    empirical risk minimisation (Cao & Rockett 2015). See :mod:`treegen.learn.inducers.gp`.

    Parameters
    ----------
    max_iter : int
        Steady-state iterations (one pair of children each; the paper used 200 000 on UCI data).
    population : int
        Population (the paper's 100).
    max_depth : int
        Static depth limit (the paper's 10).
    risk : {'vicinal', 'empirical'}
        The first objective: vicinal risk (VRM) or the training error (ERM); the second is the
        node count.
    vicinity_sigma2 : float or 'auto'
        Kernel variance per attribute variance (the paper's 0.1); ``'auto'`` = 3-fold inner CV
        over (0.001, 0.01, 0.1, 1).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Seed; the same seed gives the same tree. None (the default) draws a fresh seed from the
        operating system, as in scikit-learn; the seed used is ``seed_``.
    callback : callable or None
        ``callback(iteration, risk, leaves, accuracy)`` of the lowest-risk member every 256 iterations.

    Attributes
    ----------
    model_, tree_, classes_, n_features_in_, scaling_, fit_info_ : as :class:`EFTIClassifier`
        ``fit_info_`` holds the training risk, the final front size and the chosen sigma^2.
    """

    algorithm = "gp"

    def __init__(self, *, max_iter: int = 20_000, population: int = 100, max_depth: int = 10,
                 risk: str = "vicinal", vicinity_sigma2: float | str = 0.1, scaling: str = "auto",
                 random_state: int | None = None, callback: Callable | None = None):
        self.max_iter = max_iter
        self.population = population
        self.max_depth = max_depth
        self.risk = risk
        self.vicinity_sigma2 = vicinity_sigma2
        self.scaling = scaling
        self.random_state = random_state
        self.callback = callback

    def _induce(self, X, y, n_classes):
        from treegen.learn import vicinal
        from treegen.learn.inducers import gp

        vicinal.check_risk(self.risk)
        seed = self.seed_
        sigma2, auto = (_resolve_sigma2(self, X, y, n_classes, seed) if self.risk == "vicinal"
                        else (vicinal.DEFAULT_SIGMA2, {}))
        params = gp.GPParams(population=self.population, max_iter=self.max_iter,
                             max_depth=self.max_depth, init_max_depth=min(5, self.max_depth),
                             risk=self.risk, sigma2=sigma2)
        tree, info = gp.induce(X, y, n_classes, params, seed=seed, callback=self.callback)
        info.update(auto)
        if self.risk == "vicinal":
            info["vicinity_sigma2"] = sigma2
        return tree, info


class RFClassifier(TreeClassifier):
    """Random forest of treegen trees: bagging + random feature subsets (see :mod:`treegen.learn.forest`).

    The forest is one model with ``n_trees`` trees (majority vote in the exported C; class
    probabilities = averaged leaf class frequencies, :meth:`predict_proba`).

    Parameters
    ----------
    n_trees : int
        Number of trees.
    base : {'cart', 'efti', 'gp'}
        Base tree learner (``efti`` gives oblique forests; keep its ``max_iter`` short).
    max_features : {'sqrt', 'log2', 'all'}, int or float
        Features per split (``feature_bagging='split'``) or per tree (``'tree'``); scikit-learn's
        default ``sqrt``.
    feature_bagging : {'auto', 'split', 'tree'}
        ``auto`` = per split for CART, per tree for the other bases.
    sample_fraction : float
        Bootstrap sample size / training rows (1.0 = |T|; the seed's 2/3 = 0.6667).
    criterion, max_depth, min_samples_leaf : CART options of the base trees.
    max_iter : int
        Iterations per tree of the ``efti``/``gp`` bases (default 2000: short runs).
    oversize_weight : float
        ``efti`` base: size penalty.
    n_jobs : int
        Trees fitted in parallel by joblib (the result does not depend on it).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Seed of the bootstraps, feature draws and base learners; None draws a fresh one (``seed_``).

    Attributes
    ----------
    model_ : Model with ``n_trees`` trees
    trees_ : list of Tree
    tree_ : Tree (the first tree)
    oob_score_ : float
        Out-of-bag accuracy (rows out of every sample are not scored; NaN if none can be).
    oob_decision_function_ : ndarray (n_samples, n_classes)
    classes_, n_features_in_, scaling_, fit_info_
    """

    algorithm = "rf"

    def __init__(self, *, n_trees: int = 100, base: str = "cart", max_features="sqrt", feature_bagging: str = "auto",
                 sample_fraction: float = 1.0, criterion: str = "gini", max_depth: int | None = None,
                 min_samples_leaf: int = 1, max_iter: int = 2000, oversize_weight: float = 0.01, n_jobs: int = 1,
                 scaling: str = "auto", random_state: int | None = None):
        self.n_trees = n_trees
        self.base = base
        self.max_features = max_features
        self.feature_bagging = feature_bagging
        self.sample_fraction = sample_fraction
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_iter = max_iter
        self.oversize_weight = oversize_weight
        self.n_jobs = n_jobs
        self.scaling = scaling
        self.random_state = random_state

    def _check_forest_params(self, n_features: int) -> tuple[str, int, dict]:
        from treegen.learn import forest

        n = self.n_trees
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_TREES:
            raise TreegenError(f"n_trees must be an integer 1..{MAX_TREES} (the most a model file holds), got {n!r}")
        if self.base not in forest.BASES:
            raise TreegenError(f"base learner {self.base!r} is not a tree learner "
                               f"(choose from {', '.join(forest.BASES)})")
        if self.feature_bagging not in forest.BAGGING:
            raise TreegenError(f"feature_bagging must be one of {', '.join(forest.BAGGING)}, "
                               f"got {self.feature_bagging!r}")
        sf = self.sample_fraction
        if isinstance(sf, bool) or not isinstance(sf, (int, float, np.number)) or not 0 < sf <= 10 or sf != sf:
            raise TreegenError(f"sample_fraction must be a number in (0, 10], got {sf!r}")
        if isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, (int, np.integer)) or self.n_jobs == 0:
            raise TreegenError(f"n_jobs must be a non-zero integer, got {self.n_jobs!r}")
        k = forest.resolve_max_features(self.max_features, n_features)
        bagging = self.feature_bagging
        if bagging == "auto":
            bagging = "split" if self.base == "cart" else "tree"
        if bagging == "split" and self.base != "cart" and k < n_features:
            raise TreegenError(f"feature_bagging='split' needs base='cart' (base {self.base!r} can only "
                               "sample features per tree: feature_bagging='tree')")
        if self.base == "cart":
            base_params = {"criterion": self.criterion, "max_depth": self.max_depth,
                           "min_samples_leaf": self.min_samples_leaf}
        elif self.base == "efti":
            base_params = {"max_iter": self.max_iter, "oversize_weight": self.oversize_weight,
                           **({"max_depth": self.max_depth} if self.max_depth is not None else {})}
        else:
            base_params = {"max_iter": self.max_iter,
                           **({"max_depth": self.max_depth} if self.max_depth is not None else {})}
        return bagging, k, base_params

    def _induce(self, X, y, n_classes):
        from joblib import Parallel, delayed

        from treegen.learn import forest

        bagging, k, base_params = self._check_forest_params(X.shape[1])
        seed = self.seed_
        jobs = Parallel(n_jobs=capped_jobs(int(self.n_jobs), int(self.n_trees)))(
            delayed(forest.fit_one)(t, X, y, n_classes, seed=seed, base=self.base, base_params=base_params,
                                    sample_fraction=float(self.sample_fraction), bagging=bagging, k=k,
                                    engine=resolve_engine("auto") if self.base == "efti" else "python")
            for t in range(int(self.n_trees)))
        trees = [tr for tr, _, _ in jobs]
        in_bag = [b for _, b, _ in jobs]
        score, decision, scored = forest.oob(trees, in_bag, X, y)
        self._forest = (trees, score, decision)
        info = {"n_trees": len(trees), "base": self.base, "feature_bagging": bagging, "max_features": k,
                "oob_score": score, "oob_rows": scored,
                "leaves_total": int(sum(t.n_leaves for t in trees)),
                "tree_seconds": round(float(sum(s for _, _, s in jobs)), 4)}
        return trees[0], info

    def fit(self, X, y, feature_names: list[str] | None = None) -> "RFClassifier":
        super().fit(X, y, feature_names=feature_names)
        trees, score, decision = self._forest
        del self._forest
        m = self.model_
        metadata = dict(m.metadata)
        self.model_ = Model(trees, m.feature_names, m.classes, m.scaling, metadata)
        Xn = self.scaling_.transform(_check_X(X))
        y_idx = np.searchsorted(self.classes_, np.asarray(y).ravel())
        metadata["train_accuracy"] = float(np.mean(self.model_.predict_index_normalised(Xn) == y_idx))
        metadata["oob_score"] = score
        self.trees_ = trees
        self.oob_score_ = score
        self.oob_decision_function_ = decision
        return self



ALGORITHMS: dict[str, type[TreeClassifier]] = {
    "efti": EFTIClassifier,
    "cart": CARTClassifier,
    "de-pdt": DEPDTClassifier,
    "de-cart": DECARTClassifier,
    "de-id3": DEID3Classifier,
    "id3": ID3Classifier,
    "gp": GPClassifier,
    "rf": RFClassifier,
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
