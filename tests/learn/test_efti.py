"""EFTI components: dipole initialisation, fitness, mutations, selection, partial reclassification."""

import numpy as np
import pytest
from conftest import load_shared

from treegen import EFTIClassifier, TreegenError
from treegen.learn.inducers import efti
from treegen.learn.inducers.efti import EFTIParams, Evolver, induce


def _data(name="veh"):
    X, y = load_shared(name)
    return X.astype(np.float64), (y - 1).astype(np.int64), int(y.max())


def _evolver(name="veh", seed=0, **kw):
    Xq, y, C = _data(name)
    ev = Evolver(Xq, y, C, EFTIParams(**kw), seed)
    ev.init_root()
    ev.evaluate_current()
    return ev


def test_dipole_hyperplane_separates_its_dipole():
    ev = _evolver("gls")
    for _ in range(300):
        state = ev.rng.state
        w, theta = ev.dipole_hyperplane(None, ev.root)
        # replay the draws to recover the dipole
        ev.rng.state = state
        i = ev.rng.below(ev.n)
        j = i
        while ev.y[j] == ev.y[i]:
            j = ev.rng.below(ev.n)
        ev.rng.below(90)
        assert ev.y[i] != ev.y[j]
        assert np.array_equal(w, ev.X[i] - ev.X[j])
        assert w @ ev.X[i] > theta          # x_i on the right side
        assert w @ ev.X[j] <= theta         # x_j on the left side


def test_dipole_prefers_the_leaf_members_when_they_hold_two_classes():
    ev = _evolver("irs")
    members = np.concatenate([np.flatnonzero(ev.y == 1)[:20], np.flatnonzero(ev.y == 2)[:20]])
    for _ in range(50):
        w, theta = ev.dipole_hyperplane(members, ev.root)
        # w is a difference of two member rows: every dipole end must be a member
        diffs = ev.X[members][:, None, :] - ev.X[members][None, :, :]
        assert np.any(np.all(diffs == w, axis=2))


def test_fitness_formula_oversize_and_missing():
    p = EFTIParams(oversize_weight=0.01, missing_weight=0.5)
    # 80 hits of 100, 6 leaves, 3 classes of 4 present
    oversize = (6 - 4) / 4
    missing = (4 - 3) / 4
    expected = 0.8 * (1 - 0.01 * oversize ** 2) * (1 - 0.5 * missing)
    assert efti.fitness(80, 100, 6, 3, 4, p) == pytest.approx(expected, abs=2e-5)
    # fewer leaves than classes is penalised too (oversize squared)
    assert efti.fitness(100, 100, 2, 4, 4, p) == pytest.approx(1 - 0.01 * 0.25, abs=2e-5)
    assert efti.fitness(100, 100, 4, 4, 4, p) == 1.0


def _state(ev):
    return (ev.root, ev.W.copy(), ev.T.copy(), ev.L.copy(), ev.R.copy(), ev.par.copy(),
            list(ev.leaves), list(ev.internal))


def _same_state(a, b):
    return (a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1:6], b[1:6]))
            and a[6] == b[6] and a[7] == b[7])


@pytest.mark.parametrize("partial", [False, True])
def test_mutate_then_revert_restores_the_tree_exactly(partial):
    ev = _evolver("seg", seed=5)
    # grow a tree first by accepting every mutation
    for _ in range(60):
        undo = ev.mutate()
        ev.adopt(*ev.evaluate_mutant(undo))
        ev.commit_topology(undo)
    ev.set_partial(partial)
    ev.evaluate_current()
    P_before = ev.P.copy()
    for _ in range(300):
        before = _state(ev)
        undo = ev.mutate()
        ev.evaluate_mutant(undo)
        ev.revert(undo)
        assert _same_state(before, _state(ev))
    if partial:
        ia = ev.internal_arr
        assert np.array_equal(ev.P[:, ia], P_before[:, ia])


def test_add_and_remove_keep_the_tree_valid():
    ev = _evolver("veh", seed=3, max_depth=5)
    X01 = ev.X / 32768.0
    seen_add = seen_remove = 0
    for _ in range(400):
        undo = ev.mutate()
        if undo["topo"]:
            seen_add += undo["topo"][0] == "add"
            seen_remove += undo["topo"][0] == "remove"
        ev.adopt(*ev.evaluate_mutant(undo))
        ev.commit_topology(undo)
        snap = ev.snapshot()
        tree = ev.to_tree(snap, X01)          # validates
        assert tree.n_leaves == len(ev.leaves)
        assert tree.depth <= 5
        # the incremental distribution equals a recount from scratch
        assert np.array_equal(ev.counts, ev._counts_full(ev._classify_all()))
    assert seen_add > 10 and seen_remove > 10


@pytest.mark.parametrize("name", ["veh", "seg", "gls"])
def test_partial_reclassification_gives_the_identical_tree(name):
    Xq, y, C = _data(name)
    X = Xq / 32768.0
    t_full, i_full = induce(X, y, C, EFTIParams(max_iter=4000, partial_reclassification=False), seed=11)
    t_part, i_part = induce(X, y, C, EFTIParams(max_iter=4000, partial_reclassification=True), seed=11)
    assert i_part["rerouted_fraction"] < 0.9          # partial reclassification really ran
    assert i_full["rerouted_fraction"] == 1.0
    assert t_full.equals(t_part)
    assert i_full["fitness"] == i_part["fitness"]


def test_same_seed_same_tree_different_seed_different_tree():
    Xq, y, C = _data("pid")
    X = Xq / 32768.0
    p = EFTIParams(max_iter=3000)
    a, _ = induce(X, y, C, p, seed=1)
    b, _ = induce(X, y, C, p, seed=1)
    c, _ = induce(X, y, C, p, seed=2)
    assert a.equals(b)
    assert not a.equals(c)


def test_result_is_exact_fixed_point_and_consistent():
    Xq, y, C = _data("bcw")
    X = Xq / 32768.0
    tree, info = induce(X, y, C, EFTIParams(max_iter=3000, oversize_weight=0.02), seed=4)
    internal = ~tree.is_leaf
    wq = tree.weights[internal] * 32768
    tq = tree.threshold[internal] * 2.0 ** 30
    assert np.array_equal(wq, np.round(wq)) and np.abs(wq).max() <= 32767
    assert np.array_equal(tq, np.round(tq))
    # reported fitness == fitness recomputed from the tree's own class counts
    leaf_counts = tree.class_counts[tree.is_leaf]
    hits = int(leaf_counts.max(axis=1).sum())
    assert hits == int(np.sum(tree.predict_index(X) == y))
    expected = efti.fitness(hits, len(y), tree.n_leaves, C, C, EFTIParams(oversize_weight=0.02))
    assert info["fitness"] == pytest.approx(expected, abs=1e-12)


def test_callback_reports_non_decreasing_best_fitness():
    Xq, y, C = _data("irs")
    calls = []
    induce(Xq / 32768.0, y, C, EFTIParams(max_iter=3000), seed=2, callback=lambda *a: calls.append(a))
    its = [c[0] for c in calls]
    fits = [c[1] for c in calls]
    assert its[0] == 0 and its[-1] == 3000
    assert all(b >= a for a, b in zip(fits, fits[1:]))
    assert len(calls) >= 3


def test_zero_iterations_returns_the_initial_dipole_tree():
    Xq, y, C = _data("irs")
    tree, info = induce(Xq / 32768.0, y, C, EFTIParams(max_iter=0), seed=1)
    assert tree.n_leaves == 2 and info["iterations"] == 0


def test_max_depth_is_respected():
    Xq, y, C = _data("seg")
    tree, _ = induce(Xq / 32768.0, y, C, EFTIParams(max_iter=3000, max_depth=2, oversize_weight=0.0), seed=1)
    assert tree.depth <= 2


def test_learns_an_easy_oblique_concept():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 32768, size=(400, 3)) / 32768.0
    y = (X[:, 0] + 0.5 * X[:, 1] > 0.75).astype(np.int64)
    tree, _ = induce(X, y, 2, EFTIParams(max_iter=3000), seed=0)
    assert np.mean(tree.predict_index(X) == y) > 0.97


@pytest.mark.parametrize("kw, msg", [
    ({"max_iter": -1}, "max_iter"),
    ({"oversize_weight": -0.1}, "oversize_weight"),
    ({"missing_weight": 2.0}, "missing_weight"),
    ({"topology_mutation_rate": 1.5}, "topology_mutation_rate"),
    ({"search_probability": 0.0}, "search_probability"),
    ({"max_depth": 0}, "max_depth"),
    ({"node_features": -1}, "node_features"),
    ({"node_features": 2.5}, "node_features"),
])
def test_bad_parameters_are_rejected(kw, msg):
    with pytest.raises(TreegenError, match=msg):
        EFTIParams(**kw).validate()


def test_node_sampling_keeps_every_node_on_its_own_attributes():
    """node_features = k: each node's dipole and weight mutations touch only the k attributes it drew."""
    ev = _evolver("veh", seed=3, node_features=4, max_depth=5)
    drawn = set()
    for it in range(400):
        undo = ev.mutate()
        mutant = ev.evaluate_mutant(undo)
        if it % 3:                                     # accept two mutations of three, revert the third
            ev.adopt(*mutant)
            ev.commit_topology(undo)
        else:
            ev.revert(undo)
        for k in ev.internal:
            own = set(ev.F[k].tolist())
            assert len(own) == 4 and set(np.flatnonzero(ev.W[k]).tolist()) <= own
            drawn |= own
    assert len(ev.internal) > 3 and len(drawn) > 8     # nodes draw different subsets
    X, y, C = _data("veh")
    tree, _ = induce(X / 32768.0, y, C, EFTIParams(max_iter=800, node_features=4), seed=3)
    assert all(np.count_nonzero(tree.weights[j]) <= 4 for j in np.flatnonzero(tree.left >= 0))


def test_node_features_zero_or_all_makes_no_draws():
    X, y, C = _data("gls")
    X = X / 32768.0
    ref, _ = induce(X, y, C, EFTIParams(max_iter=600), seed=2)
    for k in (0, X.shape[1], 100):
        tree, _ = induce(X, y, C, EFTIParams(max_iter=600, node_features=k), seed=2)
        assert tree.equals(ref)
    sampled, _ = induce(X, y, C, EFTIParams(max_iter=600, node_features=3), seed=2)
    assert not sampled.equals(ref)


def test_input_off_the_q15_grid_is_rejected():
    with pytest.raises(TreegenError, match="Q15 grid"):
        induce(np.array([[0.1], [0.2]]), np.array([0, 1]), 2, EFTIParams(max_iter=1))


def test_estimator_end_to_end_on_raw_float_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4)) * 10 + 3
    y = np.where(X[:, 0] - X[:, 2] > 0, "pos", "neg")
    clf = EFTIClassifier(max_iter=2000, random_state=3).fit(X, y)
    assert set(clf.classes_) == {"neg", "pos"}
    assert clf.score(X, y) > 0.9
    assert clf.model_.metadata["algorithm"] == "efti"
    assert clf.model_.metadata["seed"] == 3
    again = EFTIClassifier(max_iter=2000, random_state=3).fit(X, y)
    assert again.tree_.equals(clf.tree_)


def test_integer_fitness_tables_follow_their_definition():
    p = EFTIParams(oversize_weight=0.05, missing_weight=0.25, search_probability=0.05,
                   search_probability_raise=5e-5)
    t = efti.FitnessTables(p, 4)
    for leaves in range(1, 40):
        over = (leaves - 4) / 4
        assert t.pen(leaves) == round(65536 * max(0.0, 1 - 0.05 * over * over))
    assert t.pen(4) == 65536 and t.pen(100) == 0          # floored at zero
    assert t.miss == [round(65536 * (1 - 0.25 * (4 - k) / 4)) for k in range(5)]
    assert t.fitness(10, 4, 4) == 10 * 65536 * 65536
    # search threshold: grows with stagnation, shrinks with the fitness loss, capped at 2**32
    f = t.fitness(500, 5, 4)
    small_loss, big_loss = t.fitness(499, 5, 4), t.fitness(400, 5, 4)
    assert t.search_threshold(10, f, small_loss) > t.search_threshold(10, f, big_loss)
    assert t.search_threshold(20, f, small_loss) > t.search_threshold(10, f, small_loss)
    assert t.search_threshold(10**9, f, f) == (1 << 32) - 1 or t.search_threshold(10**9, f, f) <= 1 << 32
    assert t.search_threshold(5, 0, 0) == 0
    d = ((f - small_loss) * 1024) // f
    expected = (min(10 * t.raise_q32, 1 << 32) * t.exp[d]) >> 32
    assert t.search_threshold(10, f, small_loss) == expected
