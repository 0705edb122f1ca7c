"""CART regression (treegen.learn.inducers.cart_reg) and the regressors: scikit-learn's trees, R², forests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.tree import DecisionTreeRegressor

from treegen.core.errors import TreegenError
from treegen.core.scaling import InputScaling
from treegen.learn.cv import cross_validate, kfold_ids
from treegen.learn.inducers import cart_reg
from treegen.learn.regressors import CARTRegressor, RFRegressor, make_regressor
from treegen.learn.validation import label_kind


@pytest.fixture(scope="module")
def diab():
    X, y = load_diabetes(return_X_y=True)
    return InputScaling.fit(X).transform(X), y


@pytest.mark.parametrize("params", [{}, {"max_depth": 4}, {"min_samples_leaf": 7}, {"ccp_alpha": 40.0},
                                    {"min_samples_split": 30, "max_depth": 6}])
def test_same_tree_as_sklearn(diab, params):
    X, y = diab
    tree, info = cart_reg.induce(X, y, **params)
    sk = DecisionTreeRegressor(random_state=0, **params).fit(X, y)
    assert tree.n_leaves == sk.get_n_leaves() and tree.depth == sk.get_depth() == info["depth"]
    assert np.array_equal(tree.predict_value(X), sk.predict(X))
    assert tree.class_counts[0, 0] == X.shape[0] and np.all(tree.leaf_class == 0)


def test_constant_target_is_one_leaf_and_ties_go_to_the_lowest_feature():
    X = np.array([[0.1, 0.1], [0.2, 0.2], [0.8, 0.8], [0.9, 0.9]])
    tree, _ = cart_reg.induce(X, np.full(4, 3.5))
    assert tree.n_nodes == 1 and tree.leaf_value[0] == 3.5
    tree, _ = cart_reg.induce(X, np.array([0.0, 0.0, 1.0, 1.0]))     # both features split equally well
    assert tree.n_leaves == 2 and tree.weights[0, 0] == 1.0 and tree.weights[0, 1] == 0.0
    with pytest.raises(TreegenError, match="NaN or infinite"):
        cart_reg.induce(X, np.array([0.0, np.nan, 1.0, 1.0]))


def test_regressor_model_score_and_importances(diab):
    X, y = diab
    reg = CARTRegressor(max_depth=3, random_state=0).fit(X, y)
    m = reg.model_
    assert m.task == "regression" and m.vote == "mean" and m.classes == [] and not hasattr(reg, "classes_")
    sk = DecisionTreeRegressor(max_depth=3).fit(X, y)
    assert reg.score(X, y) == pytest.approx(sk.score(X, y), abs=1e-12)
    assert m.metadata["train_r2"] == pytest.approx(sk.score(X, y), abs=1e-12)
    assert np.allclose(reg.feature_importances_, sk.feature_importances_, atol=1e-12)
    with pytest.raises(TreegenError, match="no class probabilities"):
        reg.predict_proba(X)
    with pytest.raises(TreegenError, match="numeric target"):
        CARTRegressor().fit(X[:3], ["a", "b", "c"])


def test_random_forest_regressor_is_deterministic_and_averages(diab):
    X, y = diab
    a = RFRegressor(n_trees=5, max_depth=4, random_state=3).fit(X, y)
    b = RFRegressor(n_trees=5, max_depth=4, random_state=3, n_jobs=2).fit(X, y)
    assert a.model_.hash() == b.model_.hash()
    mean = np.mean([t.predict_value(a.scaling_.transform(X)) for t in a.trees_], axis=0)
    assert np.allclose(a.predict(X), mean, rtol=0, atol=1e-9)
    assert 0 < a.oob_score_ < 1 and a.score(X, y) > 0.5
    with pytest.raises(TreegenError, match="no regression variant"):
        make_regressor("efti-x")


def test_regression_cv_uses_kfold_and_reports_rmse_mae_r2(diab):
    X, y = diab
    res = cross_validate(X, y, "cart", {"max_depth": 2}, folds=3, seed=5, task="regression")
    assert res["task"] == "regression" and "accuracy" not in res
    assert [round(f["r2"], 12) for f in res["folds"]] == [round(f["r2"], 12) for f in
                                                          cross_validate(X, y, "cart", {"max_depth": 2}, folds=3,
                                                                         seed=5, task="regression")["folds"]]
    fold_of = kfold_ids(X.shape[0], 3, np.random.default_rng(5))
    test = fold_of == 0
    sk = DecisionTreeRegressor(max_depth=2).fit(X[~test], y[~test])
    assert res["folds"][0]["r2"] == pytest.approx(sk.score(X[test], y[test]), abs=1e-12)
    assert np.bincount(fold_of).tolist() == [148, 147, 147]


@pytest.mark.parametrize("labels, kind", [
    (["a", "b"] * 30, "text"), ([1, 2, 3] * 20, "levels"), (list(range(60)) * 100, "discrete"),
    ([0.5, 1.0] * 10, "continuous"), (list(range(214)) * 2, "continuous"), (list(range(150)) * 100, "continuous"),
])
def test_label_kind(labels, kind):
    assert label_kind(np.asarray(labels, dtype=object))[0] == kind
