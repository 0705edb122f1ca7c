"""random_state=None = fresh randomness (scikit-learn's meaning), with the seed used recorded in
``seed_`` and the model's metadata so that the run can be repeated exactly."""

import numpy as np
import pytest

from tests.learn.fast_settings import FAST
from treegen import ALGORITHMS, make_estimator
from treegen.core.model import Model
from treegen.learn.cv import cross_validate

STOCHASTIC = ("efti", "de-pdt", "de-cart", "de-id3", "gp", "rf")


def _data(n=80, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 4))
    y = ((X[:, 0] + 0.7 * X[:, 1] + rng.normal(0, 1.5, n)) > 8).astype(int) + (X[:, 2] > 7)
    return X, y


def test_every_algorithm_has_fast_settings():
    assert set(FAST) == set(ALGORITHMS)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_none_draws_a_seed_and_the_recorded_seed_reproduces(algo):
    X, y = _data()
    a = make_estimator(algo, **FAST[algo]).fit(X, y)
    b = make_estimator(algo, **FAST[algo]).fit(X, y)
    assert a.random_state is None and isinstance(a.seed_, int) and a.seed_ >= 0
    assert a.seed_ != b.seed_                                  # fresh randomness (2^-32 chance of a clash)
    assert a.model_.metadata["seed"] == a.seed_                # recorded in the model ...
    again = Model.from_dict(a.model_.to_dict())
    assert again.metadata["seed"] == a.seed_                   # ... and in its file
    # refit with the recorded seed: the identical model
    c = make_estimator(algo, **FAST[algo], random_state=a.seed_).fit(X, y)
    assert c.seed_ == a.seed_
    assert len(c.model_.trees) == len(a.model_.trees)
    assert all(t1.equals(t2) for t1, t2 in zip(a.model_.trees, c.model_.trees))


def test_none_usually_gives_different_trees():
    X, y = _data()
    trees = [make_estimator("efti", **FAST["efti"]).fit(X, y).tree_ for _ in range(4)]
    assert any(not trees[0].equals(t) for t in trees[1:])


def test_an_integer_seed_is_kept_and_bad_seeds_are_refused():
    X, y = _data()
    assert make_estimator("efti", **FAST["efti"], random_state=7).fit(X, y).seed_ == 7
    from treegen.core.errors import TreegenError
    for bad in (-1, 1.5, "3"):
        with pytest.raises(TreegenError, match="random_state"):
            make_estimator("cart", random_state=bad).fit(X, y)


def test_cross_validate_seed_none_is_recorded_and_reproduces():
    X, y = _data()
    a = cross_validate(X, y, "cart", folds=3, seed=None)
    b = cross_validate(X, y, "cart", folds=3, seed=a["seed"])
    assert isinstance(a["seed"], int)
    assert [f["accuracy"] for f in a["folds"]] == [f["accuracy"] for f in b["folds"]]


def test_cli_seed_random(tmp_path, capsys):
    from tests.conftest import run_cli

    X, y = _data()
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", header="a,b,c,d,label", comments="", fmt="%.4f")
    out = []
    for i in range(2):
        code, stdout, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--max-iter", "200", "--engine", "python",
                                             "--seed", "random", "-o", tmp_path / f"m{i}.json"])
        assert code == 0, err
        out.append(stdout)
    import json
    seeds = [json.loads((tmp_path / f"m{i}.json").read_text())["metadata"]["seed"] for i in range(2)]
    assert seeds[0] != seeds[1]
    assert f"seed={seeds[0]}" in out[0]
    code, _, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--max-iter", "200", "--engine", "python",
                                    "--seed", seeds[0], "-o", tmp_path / "again.json"])
    assert code == 0, err
    m0 = json.loads((tmp_path / "m0.json").read_text())
    m2 = json.loads((tmp_path / "again.json").read_text())
    assert m0["trees"] == m2["trees"]
