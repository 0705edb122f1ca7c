"""scikit-learn style estimators over the shared tree model, one class per algorithm.

The contract they share is :class:`treegen.learn.base.TreeClassifier`; a class here states only its
parameters, its inducer call and its own checks. Each estimator only stores its parameters in
``__init__``; validation happens in ``fit``; fitted state lives in trailing-underscore attributes
(``model_``, ``tree_``, ``classes_``, ``n_features_in_``, ``feature_names_in_`` (when fitted on a
pandas DataFrame with string column names, as in scikit-learn, or given ``feature_names=``),
``scaling_``, ``fit_info_``, ``seed_``; ``feature_importances_`` and ``predict_proba`` as in
scikit-learn). ``random_state=None`` draws a fresh seed from the operating system (scikit-learn's
meaning); the seed used is ``seed_`` and the model's ``metadata["seed"]``, so
``random_state=est.seed_`` repeats the run exactly. Inducers are looked up by name in
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

from typing import Callable

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_TREES, capped_jobs
from treegen.core.native import have_compiler
from treegen.learn.base import NotFittedError, TreeClassifier, resolve_seed
from treegen.learn.validation import DataConversionWarning, column_names

__all__ = ["ALGORITHMS", "CARTClassifier", "DECARTClassifier", "DEID3Classifier", "DEPDTClassifier",
           "DataConversionWarning", "EFTIClassifier", "ENGINES", "GPClassifier", "ID3Classifier",
           "NotFittedError", "RFClassifier", "TreeClassifier", "make_estimator", "resolve_engine", "resolve_seed"]


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
    max_features : None, {'sqrt', 'log2', 'all'}, int or float
        Attribute sampling per node (the oblique counterpart of scikit-learn's ``max_features``): each
        new node draws this many attributes, and its dipole hyperplane and weight mutations use only
        those. None or ``'all'`` (the default): every attribute, no draws (EFTI as published).
        ``RFClassifier(base='efti', feature_bagging='node')`` uses it for every tree.
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
        :mod:`treegen.learn.vicinal`, computed in integers by :mod:`treegen.learn.vicinal_q16`); the
        size penalty is kept. Both engines implement it, with identical results (the native one for at
        most 65535 rows).
    vicinity_sigma2 : float or 'auto'
        Kernel variance per attribute variance (default 0.1, the paper's); ``'auto'`` chooses it
        from (0.001, 0.01, 0.1, 1) by 3-fold inner cross-validation.
    teacher : None, 'rf', a Model or a model file path
        Distillation (:mod:`treegen.learn.distill`): also learn from ``teacher_samples`` x rows pseudo-
        samples drawn around the training rows and labelled by the teacher — ``'rf'``, a 100-tree forest
        trained inside this fit on the same rows (never on a test fold), or any model with the same
        features (a treegen forest, an imported XGBoost/LightGBM/scikit-learn model). None: no teacher.
    teacher_samples : float
        Pseudo-samples per training row (default 2; 0..20).

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
                 max_features=None, partial_reclassification: bool = True, engine: str = "auto", scaling: str = "auto",
                 random_state: int | None = None, callback: Callable | None = None, risk: str = "empirical",
                 vicinity_sigma2: float | str = 0.1, teacher=None, teacher_samples: float = 2.0):
        self._store_params(locals())

    def _induce(self, X, y, n_classes):
        from treegen.learn.forest import resolve_max_features
        from treegen.learn.inducers import efti

        k = resolve_max_features(self.max_features, X.shape[1])
        params = self._params_for(efti.EFTIParams, node_features=k if k < X.shape[1] else 0)
        seed = efti.check_seed(self.seed_)
        params.validate()
        if callable(self.engine) and params.node_features:
            raise TreegenError("EFTI max_features (attribute sampling per node) runs in the python and "
                               "native engines only")
        vicinal_risk, auto = {}, {}
        if self.risk != "empirical":
            from treegen.learn import vicinal

            vicinal.check_risk(self.risk)
            if callable(self.engine) and vicinal.check_sigma2(self.vicinity_sigma2) == "auto":
                raise TreegenError("vicinity_sigma2 'auto' (inner cross-validation) runs on the host engines: "
                                   "give a number with a device engine")
            vicinal.check_sigma2(self.vicinity_sigma2)
            sigma2, auto = _resolve_sigma2(self, X, y, n_classes, seed)
            vicinal_risk = {"risk": self.risk, "vicinity_sigma2": sigma2}
        if callable(self.engine):       # an inducer with engine.induce's signature (e.g. training on a device)
            tree, info = self.engine(X, y, n_classes, params, seed=seed, callback=self.callback, **vicinal_risk)
            info.update(auto)
            return tree, info
        engine = resolve_engine(self.engine)
        if vicinal_risk and self.engine == "auto" and X.shape[0] > 65535:     # beyond the native vicinal risk's rows
            engine = "python"
        if engine == "native":
            from treegen.learn import engine as native

            tree, info = native.induce(X, y, n_classes, params, seed=seed, callback=self.callback, **vicinal_risk)
        else:
            tree, info = efti.induce(X, y, n_classes, params, seed=seed, callback=self.callback, **vicinal_risk)
            info["engine"] = "python"
        info.update(auto)
        return tree, info


ENGINES = ("auto", "python", "native")


def resolve_engine(engine: str) -> str:
    """'auto' -> 'native' when a host C compiler is available, else 'python'."""
    if engine not in ENGINES:
        raise TreegenError(f"unknown EFTI engine {engine!r} (choose from {', '.join(ENGINES)})")
    if engine == "auto":
        return "native" if have_compiler() else "python"
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
        Accepted for API symmetry (recorded as ``seed_``); CART is deterministic (the seed draws a
        teacher's pseudo-samples).
    teacher, teacher_samples
        Distillation, as for :class:`EFTIClassifier`.
    """

    algorithm = "cart"
    deterministic = True

    def __init__(self, *, criterion: str = "gini", max_depth: int | None = None, min_samples_split: int = 2,
                 min_samples_leaf: int = 1, ccp_alpha: float = 0.0, scaling: str = "auto",
                 random_state: int | None = None, teacher=None, teacher_samples: float = 2.0):
        self._store_params(locals())

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
        self._store_params(locals())

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import de_pdt

        params = self._params_for(de_pdt.DEPDTParams, engine=resolve_engine(self.engine))
        tree, info = de_pdt.induce(X, y, n_classes, params, seed=self.seed_, callback=self.callback)
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
        self._store_params(locals())

    def _induce(self, X, y, n_classes):
        from treegen.learn.inducers import de_split

        params = self._params_for(de_split.DESplitParams, criterion=self._criterion)
        return de_split.induce(X, y, n_classes, params, seed=self.seed_)


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
    deterministic = True

    def __init__(self, *, max_depth: int | None = None, min_samples_split: int = 2, min_samples_leaf: int = 1,
                 categorical=None, pruning: str = "none", confidence: float = 0.25, scaling: str = "auto",
                 random_state: int | None = None):
        self._store_params(locals())

    def fit(self, X, y, feature_names: list[str] | None = None) -> "ID3Classifier":
        self._feature_names = feature_names if feature_names is not None else column_names(X)
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

        params = self._params_for(id3.ID3Params, categorical=self._categorical_columns(X.shape[1]))
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
    engine : {'auto', 'python', 'native'}
        ``native`` runs the C engine compiled for the host (:mod:`treegen.learn.native_gp`; identical
        trees, faster); ``python`` the readable reference; ``auto`` = native when a C compiler is
        available.
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
                 risk: str = "vicinal", vicinity_sigma2: float | str = 0.1, engine: str = "auto",
                 scaling: str = "auto", random_state: int | None = None, callback: Callable | None = None):
        self._store_params(locals())

    def _induce(self, X, y, n_classes):
        from treegen.learn import vicinal
        from treegen.learn.inducers import gp

        vicinal.check_risk(self.risk)
        seed = self.seed_
        sigma2, auto = (_resolve_sigma2(self, X, y, n_classes, seed) if self.risk == "vicinal"
                        else (vicinal.DEFAULT_SIGMA2, {}))
        params = self._params_for(gp.GPParams, init_max_depth=min(5, self.max_depth), sigma2=sigma2)
        from treegen.learn import native_gp

        engine = resolve_engine(self.engine)
        if self.engine == "auto" and not native_gp.supports(params, n_classes):
            engine = "python"
        if engine == "native":
            tree, info = native_gp.induce(X, y, n_classes, params, seed=seed, callback=self.callback)
        else:
            tree, info = gp.induce(X, y, n_classes, params, seed=seed, callback=self.callback)
            info["engine"] = "python"
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
        Features per split (``feature_bagging='split'``), per tree (``'tree'``) or per node test of an
        EFTI tree (``'node'``); scikit-learn's default ``sqrt``.
    feature_bagging : {'auto', 'split', 'tree', 'node'}
        ``auto`` = per split for CART, per tree for the other bases; ``node`` (``efti`` base): each
        node of each tree draws its own ``max_features`` features (its dipole and weight mutations use
        only those), so no tree is cut off from a feature.
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
        self._store_params(locals())

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
            raise TreegenError(f"feature_bagging='split' needs base='cart' (base {self.base!r} samples "
                               "features per tree, feature_bagging='tree', or for efti per node, 'node')")
        if bagging == "node" and self.base != "efti":
            raise TreegenError(f"feature_bagging='node' needs base='efti' (for base {self.base!r}: "
                               "'tree', or 'split' with cart)")
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
        self.trees_, self.oob_score_, self.oob_decision_function_ = trees, score, decision
        info = {"n_trees": len(trees), "base": self.base, "feature_bagging": bagging, "max_features": k,
                "oob_score": score, "oob_rows": scored,
                "leaves_total": int(sum(t.n_leaves for t in trees)),
                "tree_seconds": round(float(sum(s for _, _, s in jobs)), 4)}
        return trees, info


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
