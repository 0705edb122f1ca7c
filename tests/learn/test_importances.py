"""feature_importances_, feature_names_in_ / n_features_in_ and predict_proba on every estimator."""

import numpy as np
import pytest

from tests.learn.fast_settings import FAST as FAST_SETTINGS
from treegen import ALGORITHMS, CARTClassifier, EFTIClassifier, RFClassifier, make_estimator
from treegen.core.errors import DataError
from treegen.core.tree import LEAF, Tree

# EFTI with 400 iterations here (this file's trees; the shared setting has 300)
FAST = {**FAST_SETTINGS, "efti": {"max_iter": 400, "engine": "python"}}


def _data(n=120, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 4))
    y = (X[:, 0] + 0.5 * X[:, 2] > 7).astype(int) + (X[:, 1] > 6).astype(int)
    return X, y


def _same_tree(sk, tg) -> bool:
    """The same features tested in the same node order (pre-order) and the same leaf sizes."""
    sk_feat = [int(f) for f in sk.tree_.feature if f >= 0]
    tg_feat = [int(np.flatnonzero(tg.tree_.weights[t])[0]) for t in tg.tree_.preorder() if tg.tree_.left[t] != LEAF]
    return tg_feat == sk_feat and sorted(tg.tree_.class_counts[tg.tree_.left == LEAF].sum(axis=1)) == \
        sorted(sk.tree_.n_node_samples[sk.tree_.feature < 0])


def test_cart_importances_equal_sklearn_on_the_same_tree():
    """Where both build the same tree (checked: no ties between splits), treegen's CART importances
    are scikit-learn's DecisionTreeClassifier's, for Gini and entropy."""
    from sklearn.datasets import load_wine
    from sklearn.tree import DecisionTreeClassifier

    cases = [(load_wine(return_X_y=True), "gini")]
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X = np.round(rng.uniform(0, 100, size=(300, 5)), 2)
        y = ((X[:, 0] + 0.6 * X[:, 1] + rng.normal(0, 15, 300)) > 80).astype(int) + (X[:, 3] > 70)
        cases += [((X, y), "gini"), ((X, y), "entropy")]
    for (X, y), criterion in cases:
        sk = DecisionTreeClassifier(criterion=criterion, max_depth=3, random_state=0).fit(X, y)
        tg = CARTClassifier(criterion=criterion, max_depth=3).fit(X, y)
        assert _same_tree(sk, tg), criterion
        np.testing.assert_allclose(tg.feature_importances_, sk.feature_importances_, rtol=0, atol=1e-12)


def test_imported_sklearn_tree_and_forest_keep_sklearn_importances():
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    from treegen.importers.sklearn import from_sklearn

    X, y = load_breast_cancer(return_X_y=True)
    dt = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    np.testing.assert_allclose(from_sklearn(dt, X=X).feature_importances(), dt.feature_importances_, atol=1e-12)
    # a forest without bootstrap: the class counts are the unweighted ones sklearn's impurities use
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, bootstrap=False, max_features=3, random_state=0).fit(X, y)
    np.testing.assert_allclose(from_sklearn(rf, X=X).feature_importances(), rf.feature_importances_, atol=1e-12)


def test_hand_computed_oblique_importances():
    """Root 2*x0 - 6*x1 <= t on 10 rows (5 a, 5 b) -> left 4a/1b, right 1a/4b (Gini).
    decrease = 10*0.5 - 5*0.32 - 5*0.32 = 1.8, shared 1/4 : 3/4 by |w| -> [0.25, 0.75, 0]."""
    W = np.array([[2.0, -6.0, 0.0], [0, 0, 0], [0, 0, 0]])
    t = Tree(W, np.array([0.1, 0, 0]), np.array([1, LEAF, LEAF]), np.array([2, LEAF, LEAF]), np.array([0, 0, 1]),
             np.array([[5, 5], [4, 1], [1, 4]]))
    np.testing.assert_allclose(t.feature_importances(), [0.25, 0.75, 0.0])
    assert Tree.leaf_only(3, 2).feature_importances().tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_every_estimator_has_importances_proba_and_names(algo):
    pd = pytest.importorskip("pandas")
    X, y = _data()
    df = pd.DataFrame(X, columns=["speed", "load", "temp", "noise"])
    est = make_estimator(algo, **FAST[algo], random_state=1).fit(df, y)
    assert est.n_features_in_ == 4
    assert list(est.feature_names_in_) == ["speed", "load", "temp", "noise"]
    assert est.model_.feature_names == ["speed", "load", "temp", "noise"]
    imp = est.feature_importances_
    assert imp.shape == (4,) and np.all(imp >= 0) and imp.sum() == pytest.approx(1.0)
    proba = est.predict_proba(df)
    assert proba.shape == (len(y), 3) and np.allclose(proba.sum(axis=1), 1.0)
    # columns by name: reordered columns give the same predictions; wrong names are an error
    assert np.array_equal(est.predict(df[["noise", "temp", "load", "speed"]]), est.predict(df))
    with pytest.raises(DataError, match="missing speed; unexpected velocity"):
        est.predict(df.rename(columns={"speed": "velocity"}))
    # a plain array: no feature_names_in_ (scikit-learn's rule), generated names in the model
    plain = make_estimator(algo, **FAST[algo], random_state=1).fit(X, y)
    assert not hasattr(plain, "feature_names_in_") and plain.model_.feature_names[0] == "x0"
    assert np.array_equal(plain.predict(df), est.predict(X))


def test_importances_find_the_informative_features():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(300, 5))
    y = (X[:, 1] > 0.5).astype(int)
    for est in (CARTClassifier(), EFTIClassifier(max_iter=2000, engine="python", random_state=0),
                RFClassifier(n_trees=10, random_state=0)):
        imp = est.fit(X, y).feature_importances_
        assert int(np.argmax(imp)) == 1 and imp[1] > 0.5, (type(est).__name__, imp)
