"""Small settings per algorithm for tests that fit every algorithm (fast; such tests check the
estimator's interface — seeds, names, importances — not the tree's quality)."""

FAST = {
    "efti": {"max_iter": 300, "engine": "python"},
    "cart": {},
    "de-pdt": {"generations": 20, "population": 8, "height": 3, "engine": "python"},
    "de-cart": {"generations": 4, "population": 6, "max_depth": 3},
    "de-id3": {"generations": 4, "population": 6, "max_depth": 3},
    "id3": {},
    "gp": {"max_iter": 60, "population": 12, "risk": "empirical"},
    "rf": {"n_trees": 3, "max_depth": 3},
}
