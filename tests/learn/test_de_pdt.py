"""DE-PDT (treegen.learn.inducers.de_pdt): operators against hand-computed cases, legitimacy,
pruning into the IR, integer exactness, determinism, estimator and CLI errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_user_error, load_shared

from treegen import DEPDTClassifier
from treegen.core.errors import TreegenError
from treegen.core.rng import Pcg32, take_u32
from treegen.learn.inducers import de_pdt
from treegen.learn.inducers.de_pdt import (
    DEPDTParams,
    Population,
    grow_legitimacy,
    pruned_tree,
    replacement_indices,
    selected,
    stale_individuals,
    swap_leaves,
)


def test_take_u32_is_the_sequential_stream():
    a, b = Pcg32(42, 54), Pcg32(42, 54)
    seq = [a.next_u32() for _ in range(9000)]
    got = np.concatenate([take_u32(b, 5), take_u32(b, 0), take_u32(b, 8995)])
    assert got.tolist() == seq and a.state == b.state


def test_swap_movement_hand_case():
    a = np.array([0, 1, 2, 0, 3, 1])
    b = np.array([0, 2, 2, 1, 1, 1])
    c = np.array([1, 1, 0, 0, 2, 1])
    # i0: a==b -> c=1; i1: a==c -> b=2; i2: a==b -> c=0; i3: a==c -> b=1; i4: neither -> a=3; i5: a==b==c -> 1
    assert swap_leaves(a, b, c, np.ones(6, bool)).tolist() == [1, 2, 0, 1, 3, 1]
    gate = np.array([True, False, True, False, True, True])      # a draw not below F: no move
    assert swap_leaves(a, b, c, gate).tolist() == [1, 1, 0, 0, 3, 1]


def test_replacement_worst_fraction_and_below_chance_never_the_best():
    # 10 individuals, 3 classes, all evaluated on 30 rows; score = hits * 65536 (no size penalty)
    hits = np.array([25, 9, 30, 20, 20, 15, 12, 28, 10, 22])
    evaluated = np.full(10, 30)
    score = hits * 65536
    # floor(0.2 * 10) = 2 worst: hits 9 (1) and 10 (8); below 1/3 accuracy (hits*3 < 30): 1 and 8
    assert replacement_indices(hits, score, evaluated, 3, 0.2).tolist() == [1, 8]
    # 50 % = 5 worst: hits 9 (1), 10 (8), 12 (6), 15 (5), then the tie 20 (3) / 20 (4): the higher index
    assert replacement_indices(hits, score, evaluated, 3, 0.5).tolist() == [1, 4, 5, 6, 8]
    # rates, not counts: 10/12 beats 24/30, so the 24/30 one (index 1) is the worst
    h2, e2 = np.array([10, 24, 29, 30]), np.array([12, 30, 30, 30])
    assert replacement_indices(h2, h2 * 65536, e2, 2, 0.25).tolist() == [1]
    # all below 1/C: everybody goes except the best
    h3 = np.array([1, 3, 2, 0])
    assert replacement_indices(h3, h3 * 65536, np.full(4, 30), 3, 0.0).tolist() == [0, 2, 3]


def test_selection_rules_compare_rates_exactly():
    # targets: 20/30, 20/30, 10/12, 29/30; trials all evaluated on l = 30 rows
    score = np.array([20, 20, 10, 29]) * 65536
    evaluated = np.array([30, 30, 12, 30])
    trial = np.array([21, 20, 25, 29]) * 65536
    # 21/30 > 20/30 yes; tie 20/30 no (the paper: "if y is better than x"); 25/30 == 10/12 tie no; tie no
    assert selected(trial, 30, score, evaluated, "better").tolist() == [0]
    # ties accepted with "not-worse" (the default, Storn's DE code: <=)
    assert selected(trial, 30, score, evaluated, "not-worse").tolist() == [0, 1, 2, 3]
    assert selected(trial, 30, score, evaluated).tolist() == [0, 1, 2, 3]
    assert selected(trial - 65536, 30, score, evaluated, "not-worse").tolist() == [0]


def test_legitimacy_growth():
    obj = np.array([1.0, 2.0, 3.0])                      # sigma = sqrt(2/3)
    assert grow_legitimacy(20, obj, 100, 1e-6) == 21     # ceil(20 * (1 + 1.22e-6)) = 21
    assert grow_legitimacy(99, obj, 100, 1e-6) == 100
    assert grow_legitimacy(100, obj, 100, 1e-6) == 100   # capped at N
    assert grow_legitimacy(20, np.array([4, 4, 4]), 100, 1e-6) == 100     # sigma = 0 -> N
    # a large delta: ceil(20 * (1 + 8/0.8165)) = ceil(215.96...) -> capped at N = 200
    assert grow_legitimacy(20, obj, 200, 8.0) == 200
    assert grow_legitimacy(10, obj, 1000, 0.5) == int(np.ceil(10 * (1 + 0.5 / np.std(obj))))


def test_stale_individuals_hand_case():
    evaluated = np.array([20, 25, 20, 30, 18])
    eval_gen = np.array([0, 3, 5, 0, 10])
    # generation 15, l = 30, t = 10: age >= 10 and evaluated < 30 -> 0 (age 15), 1 (age 12), 2 (age 10)
    assert stale_individuals(evaluated, eval_gen, 15, 30, 10).tolist() == [0, 1, 2]


def _small(seed=3):
    X, y = load_shared("irs")
    return X.astype(np.float64), (y - 1).astype(np.int64)


def test_reevaluation_after_t_generations_uses_the_current_legitimacy():
    X, y = _small()
    p = DEPDTParams(population=6, generations=0, height=3, replacement=0.0, reevaluate_after=2)
    pop = Population(X, y, 3, p, seed=5)
    pop.initialise()
    assert pop.l == 8 and np.all(pop.evaluated == 8)     # l starts at 2 x attributes
    pop.l = 40
    pop.evaluated[:] = 8
    pop.eval_gen[:] = 0
    pop.eval_gen[2] = 1                                  # evaluated more recently
    before = pop.hits.copy()
    stale = stale_individuals(pop.evaluated, pop.eval_gen, 2, pop.l, 2)
    assert stale.tolist() == [0, 1, 3, 4, 5]
    pop.evaluate_at(stale, pop.l, 2)
    assert pop.evaluated.tolist() == [40, 40, 8, 40, 40, 40]
    h, _ = pop.evaluate(pop.W[[0]], pop.T[[0]], pop.leaf[[0]], pop.Xo[:40], pop.yo[:40])
    assert pop.hits[0] == h[0] and pop.hits[2] == before[2]


def test_step_grows_legitimacy_and_keeps_the_best(monkeypatch):
    """Every generation the best individual after selection (highest objective rate, lowest index)
    survives the replacement by random trees: same genome, same figures; the best rate after the
    step is not below it. Half the generations also mark every individual below chance (hits 0), so
    that the replacement wants all of them: the best must still be kept."""
    X, y = _small()
    p = DEPDTParams(population=8, generations=0, height=3)
    pop = Population(X, y, 3, p, seed=1)
    pop.initialise()
    seen = {}
    original = de_pdt.replacement_indices

    def spy(hits, score, evaluated, n_classes, fraction):
        rate = score / evaluated            # the state after selection, before the replacement
        b = int(np.flatnonzero(rate == rate.max())[0])
        seen.update(best=b, W=pop.W[b].copy(), T=pop.T[b].copy(), leaf=pop.leaf[b].copy(),
                    figures=(int(score[b]), int(evaluated[b]), int(hits[b])), rate=float(rate[b]))
        return original(hits, score, evaluated, n_classes, fraction)

    monkeypatch.setattr(de_pdt, "replacement_indices", spy)
    replaced_the_rest = 0
    for g in range(1, 30):
        l_before = pop.l
        if g % 2 == 0:
            pop.hits[:] = 0                 # every individual below chance: all are candidates
        n_replaced = pop.step(g)
        assert pop.l >= l_before and pop.l <= pop.n
        b = seen["best"]
        assert np.array_equal(pop.W[b], seen["W"]) and np.array_equal(pop.T[b], seen["T"]), g
        assert np.array_equal(pop.leaf[b], seen["leaf"]), g
        assert (int(pop.score[b]), int(pop.evaluated[b]), int(pop.hits[b])) == seen["figures"], g
        best = pop.best_index()
        assert pop.score[best] / pop.evaluated[best] >= seen["rate"], g
        replaced_the_rest += n_replaced == p.population - 1
    assert replaced_the_rest > 0           # the below-chance generations did replace all but the best
    assert pop.l > 8


def test_route_is_the_integer_test():
    X, y = _small()
    pop = Population(X, y, 3, DEPDTParams(population=4, height=4), seed=2)
    pop.initialise()
    rng = np.random.default_rng(0)
    R = rng.integers(0, 32768, (500, 4)).astype(np.float64)
    lv = pop.route(pop.W, pop.T, R)
    for q in range(4):
        for r in range(0, 500, 37):
            k = 0
            while k < pop.M:
                acc = int(np.dot(pop.W[q, k].astype(np.int64), R[r].astype(np.int64)))
                k = 2 * k + 1 if acc + int(pop.T[q, k]) < 0 else 2 * k + 2
            assert lv[r, q] == k - pop.M


def test_ir_of_a_genome_decides_exactly_as_the_integer_genome():
    """With every leaf reached (nothing removed; merging keeps predictions), the IR tree predicts what
    the integer genome predicts on every row, including rows placed exactly on a hyperplane."""
    X, y = _small()
    pop = Population(X, y, 3, DEPDTParams(population=4, height=4), seed=9)
    pop.initialise()
    rng = np.random.default_rng(3)
    R = rng.integers(0, 32768, (4000, 4)).astype(np.float64)
    # a fresh tree's hyperplanes pass through training rows (theta = -w.x): those rows sit exactly on
    # a boundary (acc + theta == 0 goes right; the IR: acc <= -theta - 1 goes left)
    R = np.vstack([R, pop.X])
    acc = np.einsum("ra,qma->rqm", R, pop.W) + pop.T[None]
    assert np.count_nonzero(acc == 0) >= 4 * pop.M
    for q in range(4):
        lv = pop.route(pop.W[[q]], pop.T[[q]], R)[:, 0]
        every_leaf = np.arange(pop.LV)
        tree = pruned_tree(pop.W[q], pop.T[q], pop.leaf[q], every_leaf, pop.leaf[q] % 3, 3).validate()
        assert np.array_equal(tree.predict_index(R / 32768.0), pop.leaf[q][lv])


def test_pruned_tree_removes_empty_subtrees_and_merges_same_class_leaves():
    # height 3: nodes 0, 1, 2; leaves 3..6 (leaf index 0..3). 1 feature.
    W = np.array([[32767.0], [32767.0], [32767.0]])
    T = np.array([-16384.0 * 32767, -8192.0 * 32767, -24576.0 * 32767])
    leaf = np.array([0, 0, 1, 2])
    # rows reach leaves 0, 1 (same class 0: merged) and 3 (leaf 2 empty: node 2 replaced by leaf 3)
    leaf_of = np.array([0, 0, 1, 3, 3])
    y = np.array([0, 0, 0, 2, 2])
    tree = pruned_tree(W, T, leaf, leaf_of, y, 3).validate()
    assert tree.n_leaves == 2 and tree.n_internal == 1
    assert tree.leaf_class[tree.left[0]] == 0 and tree.leaf_class[tree.right[0]] == 2
    assert tree.threshold[0] == (16384.0 * 32767 - 1) / 2**30 and tree.weights[0, 0] == 32767 / 32768


def test_ir_tree_equals_the_integer_genome_on_unseen_rows():
    X, y = _small()
    clf = DEPDTClassifier(population=12, generations=60, height=4, random_state=4).fit(X[::2], y[::2])
    info = clf.fit_info_
    assert info["complete_leaves"] == 8 and info["complete_nodes"] == 15
    assert info["pruned_leaves"] == clf.tree_.n_leaves <= 8
    # rows not trained on, and random Q15 rows: the float IR decides exactly as integer arithmetic
    R = np.vstack([X[1::2], np.random.default_rng(1).integers(0, 32768, (3000, 4))]).astype(np.int64)
    tree = clf.tree_
    node = np.zeros(R.shape[0], dtype=np.int64)
    for _ in range(tree.depth):
        wq = np.rint(tree.weights[node] * 32768).astype(np.int64)
        acc = np.einsum("ij,ij->i", wq, R)
        tq = np.rint(tree.threshold[node] * 2**30).astype(np.int64)
        internal = tree.left[node] >= 0
        node = np.where(internal, np.where(acc <= tq, tree.left[node], tree.right[node]), node)
    assert np.array_equal(tree.leaf_class[node], tree.predict_index(R / 32768.0))


def test_same_seed_same_tree_other_seed_differs():
    X, y = _small()
    kw = dict(population=10, generations=40, height=3)
    a = DEPDTClassifier(random_state=7, **kw).fit(X, y).tree_
    b = DEPDTClassifier(random_state=7, **kw).fit(X, y).tree_
    c = DEPDTClassifier(random_state=8, **kw).fit(X, y).tree_
    assert a.equals(b)
    assert not a.equals(c)


def test_learns_iris_and_options():
    X, y = _small()
    clf = DEPDTClassifier(population=20, generations=300, random_state=1).fit(X, y)
    assert clf.score(X, y) >= 0.9
    assert clf.get_params()["height"] == 5 and clf.set_params(height=3).height == 3
    v = DEPDTClassifier(population=10, generations=20, validation_fraction=0.3, oversize_weight=0.1,
                        random_state=2).fit(X, y)
    assert 0 <= v.fit_info_["validation_accuracy"] <= 1


@pytest.mark.parametrize("kw, match", [({"height": 1}, "height"), ({"height": 13}, "height"),
                                       ({"population": 3}, "population"), ({"replacement": 1.0}, "replacement"),
                                       ({"selection": "tie"}, "selection")])
def test_bad_params(kw, match):
    X, y = _small()
    with pytest.raises(TreegenError, match=match):
        DEPDTClassifier(**kw).fit(X, y)


@pytest.mark.parametrize("args, match", [(["--height", "1"], "--height"), (["--height", "13"], "--height"),
                                         (["--population", "3"], "--population")])
def test_cli_bad_options(capsys, tmp_path, datasets_dir, args, match):
    assert_user_error(capsys, ["fit", datasets_dir / "irs.csv.gz", "--algo", "de-pdt", *args,
                               "-o", tmp_path / "m.json"], match)


def test_cli_option_of_another_algorithm(capsys, tmp_path, datasets_dir):
    assert_user_error(capsys, ["fit", datasets_dir / "irs.csv.gz", "--algo", "de-pdt", "--ccp-alpha", "0.1",
                               "-o", tmp_path / "m.json"], "--ccp-alpha does not apply to --algo de-pdt")
    assert_user_error(capsys, ["fit", datasets_dir / "irs.csv.gz", "--algo", "cart", "--height", "4",
                               "-o", tmp_path / "m.json"], "--height does not apply to --algo cart")


def test_inducer_rejects_off_grid_input():
    with pytest.raises(TreegenError, match="Q15"):
        de_pdt.induce(np.array([[0.1], [0.2]]), np.array([0, 1]), 2)


def test_native_kernel_gives_the_identical_tree():
    X, y = _small()
    kw = dict(population=10, generations=30, height=4, random_state=5)
    a = DEPDTClassifier(engine="python", **kw).fit(X, y)
    b = DEPDTClassifier(engine="native", **kw).fit(X, y)
    def same(info):
        return {k: v for k, v in info.items() if k not in ("engine", "elapsed_s", "de_pdt_params")}

    assert a.tree_.equals(b.tree_) and same(a.fit_info_) == same(b.fit_info_)
    assert (a.fit_info_["engine"], b.fit_info_["engine"]) == ("python", "native")
    # the kernel itself on random rows and trees, rows on hyperplanes included
    pop = Population(X, y, 3, DEPDTParams(population=6, height=5, engine="native"), seed=2)
    pop.initialise()
    R = np.vstack([np.random.default_rng(0).integers(0, 32768, (2000, 4)), X]).astype(np.float64)
    from treegen.learn import native_de_pdt

    assert np.array_equal(native_de_pdt.route(R.astype(np.int16), pop.W, pop.T, 4),
                          Population(X, y, 3, DEPDTParams(population=6, height=5), seed=2).route(pop.W, pop.T, R))
