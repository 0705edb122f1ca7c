"""DE-split CART / ID3 (treegen.learn.inducers.de_split): Separation Measure, PDP probabilities, SHA
update, cut fitness and the threshold DE against hand-computed cases; determinism; pruning options."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_shared

from treegen import CARTClassifier, DECARTClassifier, DEID3Classifier
from treegen.core.errors import TreegenError
from treegen.core.rng import Pcg32
from treegen.learn.inducers.de_split import (
    STRATEGIES,
    CutFitness,
    ThresholdDE,
    pdp_probabilities,
    separation_measure,
    sha_update,
)


def test_separation_measure_two_classes_hand_case():
    # attribute 0: class 0 [.1 .2 .6] mean .3, class 1 [.5 .8 .9] mean .7333, midpoint .51667:
    #   class 1 at/above: .8 .9 -> 2; class 0 below: .1 .2 -> 2; d = 4
    # attribute 1: equal class means -> 0
    # attribute 2: class 0 has the larger mean (.8 vs .2), midpoint .5: 3 above, 3 below -> 9
    X = np.array([[.1, .5, .9], [.2, .5, .8], [.6, .5, .7], [.5, .5, .1], [.8, .5, .2], [.9, .5, .3]])
    y = np.array([0, 0, 0, 1, 1, 1])
    assert separation_measure(X, y, 2).tolist() == [4.0, 0.0, 9.0]
    # a row exactly at the midpoint counts as at/above (x >= x*)
    X2 = np.array([[0.0], [0.5], [1.0], [0.5]])
    assert separation_measure(X2, np.array([0, 0, 1, 1]), 2).tolist() == [1.0 * 2]   # means .25/.75, mid .5


def test_separation_measure_multiclass_is_the_best_pair():
    # three classes on one attribute: 0 at [0, 0], 1 at [1, 1, 1], 2 at [2, 2, 2, 2]
    # pairs: (0,1) mid .5 -> 3*2 = 6; (0,2) mid 1 -> 4*2 = 8; (1,2) mid 1.5 -> 4*3 = 12 -> d = 12
    X = np.array([[0.0], [0], [1], [1], [1], [2], [2], [2], [2]])
    y = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2])
    assert separation_measure(X, y, 3).tolist() == [12.0]
    # class 3 absent at the node: ignored
    assert separation_measure(X, y, 4).tolist() == [12.0]


def test_pdp_probabilities_hand_case():
    n = len(STRATEGIES)
    assert n == 7
    assert np.allclose(pdp_probabilities(np.zeros(n), np.zeros(n)), 1 / 7)
    success = np.array([2, 0, 1, 0, 0, 0, 0])
    used = np.array([4, 0, 2, 1, 0, 0, 0])
    # r = [4/4, 0, 1/2, 0, ...], scale = 1.5, p_all = 0.2/7, 1 - n p_all = 0.8
    p = pdp_probabilities(success, used)
    want = np.full(7, 0.2 / 7)
    want[0] += 1.0 * 0.8 / 1.5
    want[2] += 0.5 * 0.8 / 1.5
    assert np.allclose(p, want) and abs(p.sum() - 1.0) < 1e-12
    assert p.min() >= 0.2 / 7 - 1e-15                   # every strategy keeps p_all


def test_sha_update_hand_case():
    # w = [1, 3] / 4; s1 = .25*.04 + .75*.36 = .28; s2 = .25*.2 + .75*.6 = .5; Lehmer .56; (0.5 + .56)/2
    assert sha_update(0.5, [0.2, 0.6], [1.0, 3.0]) == pytest.approx(0.53, abs=1e-12)
    assert sha_update(0.7, [], []) == 0.7                # no success: unchanged
    assert sha_update(0.5, [0.9], [2.0]) == pytest.approx(0.7)


def test_cut_fitness_hand_case():
    v = np.array([0.4, 0.1, 0.3, 0.2])
    y = np.array([1, 0, 1, 0])
    f = CutFitness(v, y, 2, "gini", 1)
    assert f.positions(np.array([0.25, 0.05, 0.4])).tolist() == [2, 0, 4]
    g = f(np.array([0.25, 0.15, 0.05]))
    assert g[0] == pytest.approx(0.5)                    # perfect split of gini 0.5
    assert g[1] == pytest.approx(0.5 - 0.75 * (1 - (1 / 3) ** 2 - (2 / 3) ** 2))
    assert g[2] == -1.0                                  # nothing on the left: invalid
    assert f.threshold(2) == 0.25
    e = CutFitness(v, y, 2, "entropy", 1)
    assert e(np.array([0.25]))[0] == pytest.approx(1.0)  # information gain of 1 bit
    assert CutFitness(v, y, 2, "gini", 2).admissible_positions().tolist() == [2]


def test_threshold_de_finds_the_best_cut_and_adapts():
    rng = np.random.default_rng(0)
    v = rng.integers(0, 32768, 400) / 32768.0
    y = (v > 0.61).astype(np.int64)
    flip = rng.random(400) < 0.05
    y = np.where(flip, 1 - y, y)
    f = CutFitness(v, y, 2, "gini", 1)
    best = f.of_positions(f.admissible_positions()).max()
    de = ThresholdDE(f, 20, Pcg32(3))
    s, fit = de.run(30)
    assert fit == pytest.approx(best, rel=1e-3)
    assert de.used.sum() == 20 * 30 and de.success.sum() > 0
    assert (de.MF, de.MCR) != (0.5, 0.5)
    # the same seed, the same run
    de2 = ThresholdDE(f, 20, Pcg32(3))
    assert de2.run(30) == (s, fit) and de2.MF == de.MF


def _data(name="veh"):
    X, y = load_shared(name)
    return X.astype(np.float64), y


def test_same_seed_same_tree_and_accuracy_near_cart():
    X, y = _data()
    tr, te = np.arange(0, X.shape[0], 2), np.arange(1, X.shape[0], 2)
    a = DECARTClassifier(random_state=5).fit(X[tr], y[tr])
    b = DECARTClassifier(random_state=5).fit(X[tr], y[tr])
    assert a.tree_.equals(b.tree_)
    assert a.fit_info_["de_nodes"] > 0 and a.fit_info_["enumerated_nodes"] > 0
    cart = CARTClassifier().fit(X[tr], y[tr])
    assert abs(a.score(X[te], y[te]) - cart.score(X[te], y[te])) < 0.08
    assert a.tree_.is_axis_parallel()


def test_stopping_and_pruning_options():
    X, y = _data()
    X, y = X[::2], y[::2]
    full = DEID3Classifier(random_state=1).fit(X, y)
    assert full.score(X, y) == 1.0                        # grown to purity
    assert DEID3Classifier(max_depth=3, random_state=1).fit(X, y).tree_.depth <= 3
    assert DEID3Classifier(ccp_alpha=0.01, random_state=1).fit(X, y).tree_.n_leaves < full.tree_.n_leaves
    small = DECARTClassifier(min_samples_leaf=20, random_state=1).fit(X, y)
    assert small.tree_.class_counts[small.tree_.is_leaf].sum(axis=1).min() >= 20


@pytest.mark.parametrize("kw, match", [({"population": 3}, "population"), ({"generations": -1}, "generations"),
                                       ({"max_depth": 0}, "max_depth")])
def test_bad_params(kw, match):
    X, y = _data()
    with pytest.raises(TreegenError, match=match):
        DECARTClassifier(**kw).fit(X, y)
