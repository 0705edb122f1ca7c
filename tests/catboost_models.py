"""The CatBoost models the import, export and HIL tests check (issue #36): binary, multiclass and
regression on three datasets each (scikit-learn bundled data and the shared datasets), NaN optional."""

from __future__ import annotations

import numpy as np
from conftest import load_shared
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine, make_friedman1


def _shared_regression(name):
    X, _ = load_shared(name)          # regress the first column on the others (a continuous target)
    return X[:, 1:].astype(np.float64), X[:, 0].astype(np.float64)


DATA = {
    "bc": lambda: load_breast_cancer(return_X_y=True),
    "pid": lambda: tuple(a.astype(np.float64) for a in load_shared("pid")),
    "ion": lambda: tuple(a.astype(np.float64) for a in load_shared("ion")),
    "iris": lambda: load_iris(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
    "veh": lambda: tuple(a.astype(np.float64) for a in load_shared("veh")),
    "diab": lambda: load_diabetes(return_X_y=True),
    "friedman": lambda: make_friedman1(n_samples=400, noise=0.5, random_state=0),
    "pid-reg": lambda: _shared_regression("pid"),
}
CASES = [("bc", "Logloss"), ("pid", "CrossEntropy"), ("ion", "Logloss"),
         ("iris", "MultiClass"), ("wine", "MultiClass"), ("veh", "MultiClass"),
         ("diab", "RMSE"), ("friedman", "MAE"), ("pid-reg", "Quantile:alpha=0.7")]


def fit(name, loss, nan, nan_mode="Min", iterations=40, depth=5):
    X, y = DATA[name]()
    X = np.asarray(X, dtype=np.float64).copy()
    if nan:
        X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    import catboost
    kw = dict(iterations=iterations, depth=depth, verbose=0, random_seed=0, thread_count=1, loss_function=loss,
              nan_mode=nan_mode, allow_writing_files=False)
    if loss in ("Logloss", "CrossEntropy", "MultiClass"):
        y = np.asarray(y)
        if loss == "CrossEntropy":
            y = (y == y.max()).astype(np.float64)   # CrossEntropy: targets in [0, 1]
        est = catboost.CatBoostClassifier(**kw) if loss != "CrossEntropy" else catboost.CatBoost(kw)
    else:
        est = catboost.CatBoostRegressor(**kw)
    est.fit(X, y)
    return est, X


def raw_of(est, Z):
    return np.asarray(est.predict(Z, prediction_type="RawFormulaVal"), dtype=np.float64)


