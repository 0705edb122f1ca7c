"""ID3 (treegen.learn.inducers.id3): entropy and gain, C4.5's U_CF, multiway categorical splits lowered
into binary IR nodes, pessimistic pruning, estimator and CLI."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_user_error, load_shared, run_cli

from treegen import ID3Classifier
from treegen.core.errors import TreegenError
from treegen.core.model import load
from treegen.learn.inducers import id3


def test_entropy_and_information_gain_hand_values():
    assert id3.entropy([[5, 5]])[0] == pytest.approx(1.0)
    assert id3.entropy([[4, 0]])[0] == 0.0
    # Quinlan's play-tennis "outlook": 9+/5-, branches 2/3, 4/0, 3/2 -> gain 0.2467
    assert id3.information_gain([9, 5], [[2, 3], [4, 0], [3, 2]]) == pytest.approx(0.2467, abs=1e-4)


def test_binomial_upper_matches_quinlans_table():
    # C4.5 book, ch. 4: U25%(0,6) = 0.206, U25%(0,9) = 0.143, U25%(0,1) = 0.750
    assert id3.binomial_upper(0, 6, 0.25) == pytest.approx(0.206, abs=1e-3)
    assert id3.binomial_upper(0, 9, 0.25) == pytest.approx(0.143, abs=1e-3)
    assert id3.binomial_upper(0, 1, 0.25) == pytest.approx(0.750, abs=1e-3)
    # e >= 1: the exact binomial bound (the book's 0.157 for (1, 16) is C4.5's normal approximation):
    # P(X <= 1 | 16, p) = (1-p)^16 + 16 p (1-p)^15 = 0.25
    p = id3.binomial_upper(1, 16, 0.25)
    assert (1 - p) ** 16 + 16 * p * (1 - p) ** 15 == pytest.approx(0.25, abs=1e-9)
    assert p == pytest.approx(0.1596, abs=1e-4)
    assert id3.binomial_upper(5, 5, 0.25) == 1.0


def test_categorical_multiway_split_is_lowered_into_a_chain():
    # one categorical attribute with values .1 .2 .3 .4 (classes 0 1 2 0), one useless numeric one
    v = np.array([.1, .2, .3, .4] * 5)
    X = np.column_stack([v, np.zeros_like(v)])
    y = np.array([0, 1, 2, 0] * 5)
    tree, info = id3.induce(X, y, 3, id3.ID3Params(categorical=(0,)))
    assert info["multiway_nodes"] == 1
    assert tree.n_internal == 3 and tree.n_leaves == 4       # a 4-way split -> 3 chained tests
    assert np.allclose(tree.threshold[~tree.is_leaf], [0.15, 0.25, 0.35])
    assert np.array_equal(tree.predict_index(X), y)
    # unseen values fall to the nearest seen value by the midpoints
    assert tree.predict_index(np.array([[0.12, 0], [0.26, 0], [0.9, 0]])).tolist() == [0, 2, 0]


def test_a_categorical_attribute_is_used_once_per_path_numeric_again():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 3, 300) / 4.0
    x = rng.integers(0, 32768, 300) / 32768.0
    y = ((c > 0.3) ^ (x > 0.5) ^ (x > 0.8)).astype(np.int64)
    tree, _ = id3.induce(np.column_stack([c, x]), y, 2, id3.ID3Params(categorical=(0,)))
    feat = np.argmax(tree.weights, axis=1)
    internal = ~tree.is_leaf
    # root chain on attribute 0, below it only attribute 1 (used several times)
    depth = tree.node_depths()
    assert feat[0] == 0
    assert np.all(feat[internal & (depth >= 2)] == 1)
    assert np.count_nonzero(feat[internal] == 1) >= 4
    assert tree.predict_index(np.column_stack([c, x])).tolist() == y.tolist()


def test_pessimistic_pruning_collapses_noise():
    rng = np.random.default_rng(2)
    X = rng.integers(0, 32768, (400, 3)) / 32768.0
    y = (X[:, 0] > 0.5).astype(np.int64)
    noisy = np.where(rng.random(400) < 0.1, 1 - y, y)
    full, _ = id3.induce(X, noisy, 2)
    pruned, info = id3.induce(X, noisy, 2, id3.ID3Params(pruning="pessimistic"))
    assert info["pruned_subtrees"] > 0 and pruned.n_leaves < full.n_leaves / 2
    Xt = rng.integers(0, 32768, (2000, 3)) / 32768.0
    yt = (Xt[:, 0] > 0.5).astype(np.int64)
    assert np.mean(pruned.predict_index(Xt) == yt) > np.mean(full.predict_index(Xt) == yt)


def test_estimator_categorical_by_name_and_index():
    X, y = load_shared("car")
    names = [f"a{i}" for i in range(6)]
    a = ID3Classifier(categorical="a0,a1,2,3,a4,5").fit(X, y, feature_names=names)
    b = ID3Classifier(categorical=list(range(6))).fit(X, y)
    assert a.tree_.equals(b.tree_) and a.fit_info_["multiway_nodes"] > 0
    assert a.score(X, y) == 1.0
    with pytest.raises(TreegenError, match="neither a feature name"):
        ID3Classifier(categorical="nope").fit(X, y, feature_names=names)
    with pytest.raises(TreegenError, match="out of range"):
        ID3Classifier(categorical=[6]).fit(X, y)
    with pytest.raises(TreegenError, match="pruning"):
        ID3Classifier(pruning="sometimes").fit(X, y)


def test_cli_fit_show_and_errors(capsys, tmp_path, datasets_dir):
    out = tmp_path / "m.json"
    code, text, _ = run_cli(capsys, ["fit", datasets_dir / "car.csv.gz", "--algo", "id3", "--categorical",
                                     "a0,a1,a2,a3,a4,a5", "--pruning", "pessimistic", "-o", out])
    assert code == 0 and "algorithm       id3" in text
    assert load(out).metadata["params"]["categorical"] == "a0,a1,a2,a3,a4,a5"
    code, text, _ = run_cli(capsys, ["show", out])
    assert code == 0 and "a5 <=" in text
    code, text, _ = run_cli(capsys, ["cv", datasets_dir / "car.csv.gz", "--algo", "id3", "--categorical",
                                     "a0,a1,a2,a3,a4,5", "--folds", "2", "-q"])
    assert code == 0 and "categorical=0,1,2,3,4,5" in text          # names -> indices for the folds
    assert_user_error(capsys, ["fit", datasets_dir / "car.csv.gz", "--algo", "cart", "--categorical", "a0",
                               "-o", out], "--categorical does not apply to --algo cart")
    assert_user_error(capsys, ["fit", datasets_dir / "car.csv.gz", "--algo", "id3", "--categorical", "zz",
                               "-o", out], "categorical column 'zz'")
    assert_user_error(capsys, ["fit", datasets_dir / "car.csv.gz", "--algo", "id3", "--confidence", "1.5",
                               "-o", out], "--confidence")
