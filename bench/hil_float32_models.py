"""The two models of bench/results/hil_float32_acceptance.md (issue #25, acceptance 1 over HIL): a
100-tree XGBoost binary classifier on pid (the shared dataset) and a 100-tree LightGBM regressor on
scikit-learn's diabetes, saved as the libraries' own files with their data as CSV.

Usage: python bench/hil_float32_models.py OUT   (then treegen import / treegen hil, see the results file)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main(out: Path) -> None:
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.datasets import load_diabetes

    out.mkdir(parents=True, exist_ok=True)
    src = REPO.parent / "shared" / "datasets" / "pid.csv.gz"
    data = np.loadtxt(src, delimiter=",", skiprows=1, dtype=np.int64)
    X, y = data[:, :-1].astype(np.float64), data[:, -1]
    clf = xgb.XGBClassifier(n_estimators=100, max_depth=4, n_jobs=1, random_state=0).fit(X, (y == y.max()).astype(int))
    clf.save_model(out / "xgb_pid.json")
    header = ",".join([f"a{i}" for i in range(X.shape[1])] + ["class"])
    np.savetxt(out / "pid.csv", np.column_stack([X, (y == y.max()).astype(int)]), delimiter=",", fmt="%.17g",
               header=header, comments="")
    Xr, yr = load_diabetes(return_X_y=True)
    reg = lgb.LGBMRegressor(n_estimators=100, num_leaves=16, verbose=-1, n_jobs=1, random_state=0).fit(Xr, yr)
    reg.booster_.save_model(str(out / "lgbm_diabetes.txt"))
    header = ",".join([f"x{i}" for i in range(Xr.shape[1])] + ["target"])
    np.savetxt(out / "diabetes.csv", np.column_stack([Xr, yr]), delimiter=",", fmt="%.17g", header=header,
               comments="")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
