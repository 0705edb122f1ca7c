"""scikit-learn style regressors: trees and forests whose leaves output numbers (issue #25).

:class:`TreeRegressor` is :class:`treegen.learn.base.TreeClassifier`'s contract with a numeric
target: the same parameters handling, checks, scaling and fitted attributes (no ``classes_``), a
model with ``task="regression"`` and vote ``mean`` (:mod:`treegen.core.model`), ``predict``
returning values and ``score`` the coefficient of determination R² (scikit-learn's regressors).
Regressors are looked up by name in :data:`REGRESSORS` (``--task regression`` of the CLI).

Examples
--------
>>> import numpy as np
>>> from treegen.learn.regressors import CARTRegressor
>>> X = np.array([[0.1], [0.2], [0.8], [0.9]] * 5)
>>> y = np.array([1.0, 1.5, 4.0, 4.5] * 5)
>>> reg = CARTRegressor(max_depth=1).fit(X, y)
>>> reg.predict([[0.15], [0.85]]).tolist()
[1.25, 4.25]
"""

from __future__ import annotations

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.metrics import regression_scores
from treegen.core.model import Model
from treegen.core.scaling import InputScaling
from treegen.core.tree import Tree
from treegen.learn.base import TreeClassifier
from treegen.learn.estimators import RFClassifier
from treegen.learn.validation import check_target

__all__ = ["CARTRegressor", "EFTIRegressor", "REGRESSORS", "RFRegressor", "TreeRegressor", "make_regressor"]


class TreeRegressor(TreeClassifier):
    """Base class of the regressors: numeric targets, value trees, vote ``mean``."""

    def _check_targets(self, y, n_rows: int) -> tuple:
        return None, check_target(y, n_rows, type(self).__name__), 1

    def _make_model(self, trees: list[Tree], feature_names: list[str], classes, scaling: InputScaling) -> Model:
        return Model(trees, feature_names, [], scaling, vote="mean", task="regression")

    def _train_scores(self, model: Model, Xn: np.ndarray, y: np.ndarray) -> dict:
        scores = regression_scores(y, model.predict_value_normalised(Xn))
        return {"train_rmse": scores["rmse"], "train_mae": scores["mae"], "train_r2": scores["r2"]}

    def predict(self, X) -> np.ndarray:
        """Predicted values (float64): the mean target of the training rows in the leaf each row
        reaches (a forest: the mean over its trees)."""
        X = self._validate_X(X)
        return self.model_.predict_value(X)

    def predict_proba(self, X):
        raise TreegenError(f"{type(self).__name__} predicts values; it has no class probabilities")

    def score(self, X, y) -> float:
        """Coefficient of determination R² of ``predict(X)`` (scikit-learn's ``r2_score``)."""
        y = check_target(y, np.asarray(X).shape[0] if np.ndim(X) == 2 else -1, type(self).__name__)
        return regression_scores(y, self.predict(X))["r2"]

    def __sklearn_tags__(self):
        from sklearn.utils import RegressorTags, Tags, TargetTags  # type: ignore

        return Tags(estimator_type="regressor", target_tags=TargetTags(required=True),
                    regressor_tags=RegressorTags())


class CARTRegressor(TreeRegressor):
    """Axis-parallel CART regression tree (squared error), with depth/size limits and minimal
    cost-complexity pruning (:mod:`treegen.learn.inducers.cart_reg`): scikit-learn's
    ``DecisionTreeRegressor`` with deterministic ties (lowest feature index, lowest threshold).

    Parameters
    ----------
    max_depth : int or None
    min_samples_split : int
    min_samples_leaf : int
    ccp_alpha : float
        Complexity parameter of minimal cost-complexity pruning on the mean squared error (0 = none).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
        Accepted for API symmetry (recorded as ``seed_``); CART is deterministic.
    """

    algorithm = "cart"

    def __init__(self, *, max_depth: int | None = None, min_samples_split: int = 2, min_samples_leaf: int = 1,
                 ccp_alpha: float = 0.0, scaling: str = "auto", random_state: int | None = None):
        self._store_params(locals())

    def _induce(self, X, y, n_outputs):
        from treegen.learn.inducers import cart_reg

        return cart_reg.induce(X, y, max_depth=self.max_depth, min_samples_split=self.min_samples_split,
                               min_samples_leaf=self.min_samples_leaf, ccp_alpha=self.ccp_alpha)


class RFRegressor(TreeRegressor):
    """Random forest of CART regression trees: bootstrap samples and ``max_features`` features
    searched per split (the bootstraps and draws of :class:`~treegen.learn.estimators.RFClassifier`);
    the prediction is the mean of the trees' values (vote ``mean``).

    Parameters
    ----------
    n_trees : int
    max_features : {'sqrt', 'log2', 'all'}, int or float
        Features searched per split (default ``all``: scikit-learn's regression forests, ``1.0``).
    sample_fraction : float
        Bootstrap sample size / training rows.
    max_depth, min_samples_leaf : CART options of the trees.
    n_jobs : int
        Trees fitted in parallel by joblib (the result does not depend on it).
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None

    Attributes
    ----------
    oob_score_ : float
        Out-of-bag R² (NaN if no row is out of every sample).
    oob_prediction_ : ndarray (n_samples,)
    """

    algorithm = "rf"

    def __init__(self, *, n_trees: int = 100, max_features="all", sample_fraction: float = 1.0,
                 max_depth: int | None = None, min_samples_leaf: int = 1, n_jobs: int = 1, scaling: str = "auto",
                 random_state: int | None = None):
        self._store_params(locals())

    def _induce(self, X, y, n_outputs):
        from joblib import Parallel, delayed

        from treegen.core.limits import capped_jobs
        from treegen.learn import forest

        probe = RFClassifier(n_trees=self.n_trees, max_features=self.max_features, base="cart",
                             sample_fraction=self.sample_fraction, max_depth=self.max_depth,
                             min_samples_leaf=self.min_samples_leaf, n_jobs=self.n_jobs)
        _, k, base_params = probe._check_forest_params(X.shape[1])     # the forest's own checks
        base_params.pop("criterion")
        jobs = Parallel(n_jobs=capped_jobs(int(self.n_jobs), int(self.n_trees)))(
            delayed(forest.fit_one_regression)(t, X, y, seed=self.seed_, base_params=base_params,
                                               sample_fraction=float(self.sample_fraction), k=k)
            for t in range(int(self.n_trees)))
        trees = [tr for tr, _, _ in jobs]
        in_bag = [b for _, b, _ in jobs]
        score, pred, scored = forest.oob_regression(trees, in_bag, X, y)
        self.trees_, self.oob_score_, self.oob_prediction_ = trees, score, pred
        info = {"n_trees": len(trees), "base": "cart", "max_features": k, "oob_r2": score, "oob_rows": scored,
                "leaves_total": int(sum(t.n_leaves for t in trees)),
                "tree_seconds": round(float(sum(s for _, _, s in jobs)), 4)}
        return trees, info


class EFTIRegressor(TreeRegressor):
    """Oblique regression tree evolved by EFTI's (1+1) evolution strategy with a squared-error
    fitness (:mod:`treegen.learn.inducers.efti_reg`; Python engine). Deterministic for a seed.

    Parameters
    ----------
    max_iter : int
        Evolution iterations.
    oversize_weight : float
        Ko of the size factor ``1 - Ko * ((leaves - K) / K)**2``.
    target_leaves : int
        K: the leaf count the size factor does not penalise.
    max_depth : int
        Deepest tree the topology mutations build.
    scaling : {'auto', 'q15', 'minmax'}
    random_state : int or None
    """

    algorithm = "efti"

    def __init__(self, *, max_iter: int = 20_000, oversize_weight: float = 0.01, target_leaves: int = 8,
                 max_depth: int = 8, scaling: str = "auto", random_state: int | None = None):
        self._store_params(locals())

    def _induce(self, X, y, n_outputs):
        from treegen.learn.inducers import efti, efti_reg

        params = efti.EFTIParams(max_iter=self.max_iter, oversize_weight=self.oversize_weight,
                                 max_depth=self.max_depth)
        return efti_reg.induce(X, y, params, seed=self.seed_, target_leaves=self.target_leaves)


REGRESSORS: dict[str, type[TreeRegressor]] = {
    "cart": CARTRegressor,
    "rf": RFRegressor,
    "efti": EFTIRegressor,
}


def make_regressor(algorithm: str, **params) -> TreeRegressor:
    """Regressor for an algorithm name; unknown names and parameters raise :class:`TreegenError`."""
    try:
        cls = REGRESSORS[algorithm]
    except KeyError:
        raise TreegenError(f"algorithm {algorithm!r} has no regression variant (choose from "
                           f"{', '.join(REGRESSORS)})") from None
    unknown = [k for k in params if k not in cls._param_names()]
    if unknown:
        raise TreegenError(f"algorithm {algorithm!r} has no option {unknown[0]!r} for regression")
    return cls(**params)
