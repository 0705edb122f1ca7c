"""EFTI regression (treegen.learn.inducers.efti_reg, EFTIRegressor): deterministic, partial and full
reclassification give the same tree, leaves are the training means, the squared-error fitness."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_friedman1

from treegen.core.errors import TreegenError
from treegen.core.scaling import InputScaling
from treegen.learn.inducers import efti, efti_reg
from treegen.learn.regressors import EFTIRegressor


@pytest.fixture(scope="module")
def data():
    X, y = make_friedman1(n_samples=300, noise=0.5, random_state=0)
    return InputScaling.fit(X).transform(X), y


def test_partial_and_full_reclassification_give_the_same_tree(data):
    X, y = data
    a, info = efti_reg.induce(X, y, efti.EFTIParams(max_iter=1500), seed=3, target_leaves=6)
    b, _ = efti_reg.induce(X, y, efti.EFTIParams(max_iter=1500, partial_reclassification=False), seed=3,
                           target_leaves=6)
    c, _ = efti_reg.induce(X, y, efti.EFTIParams(max_iter=1500), seed=4, target_leaves=6)
    assert a.equals(b) and not a.equals(c)
    assert not a.is_axis_parallel() and a.n_leaves >= 3 and info["train_r2_search"] > 0.3
    leaves = a.apply(X)
    for leaf in np.unique(leaves):
        assert a.leaf_value[leaf] == np.mean(y[leaves == leaf])


def test_regressor_fits_and_refuses_a_constant_target(data):
    X, y = data
    reg = EFTIRegressor(max_iter=800, random_state=1).fit(X, y)
    assert reg.model_.task == "regression" and reg.model_.metadata["train_r2"] == pytest.approx(reg.score(X, y))
    with pytest.raises(TreegenError, match="two distinct target values"):
        EFTIRegressor(max_iter=10).fit(X, np.ones(len(y)))
    with pytest.raises(TreegenError, match="target_leaves"):
        EFTIRegressor(max_iter=10, target_leaves=1).fit(X, y)
