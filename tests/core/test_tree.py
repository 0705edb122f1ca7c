"""Tree: structural invariants, inference convention, transforms and scale (deep trees)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from treegen.core.errors import TreegenError
from treegen.core.tree import LEAF, Tree


def oblique_tree() -> Tree:
    """A small oblique tree whose node numbering is deliberately *not* pre-order.

    node 0: x0 + x1 <= 1          -> node 2, else node 1
    node 1: leaf, class 2
    node 2: 0.5*x0 - x1 <= 0      -> node 3, else node 4
    node 3: leaf, class 0
    node 4: leaf, class 1
    """
    weights = np.array([[1.0, 1.0], [0, 0], [0.5, -1.0], [0, 0], [0, 0]])
    threshold = np.array([1.0, 0, 0.0, 0, 0])
    left = np.array([2, LEAF, 3, LEAF, LEAF])
    right = np.array([1, LEAF, 4, LEAF, LEAF])
    leaf_class = np.array([2, 2, 0, 0, 1])
    counts = np.array([[4, 3, 5], [0, 0, 5], [4, 3, 0], [4, 1, 0], [0, 2, 0]])
    return Tree(weights, threshold, left, right, leaf_class, counts)


def axis_tree() -> Tree:
    """x1 <= 0.5 -> leaf class 0, else leaf class 1 (pre-order numbering)."""
    return Tree(
        weights=np.array([[0.0, 1.0], [0, 0], [0, 0]]),
        threshold=np.array([0.5, 0, 0]),
        left=np.array([1, LEAF, LEAF]),
        right=np.array([2, LEAF, LEAF]),
        leaf_class=np.array([0, 0, 1]),
        class_counts=np.zeros((3, 2)),
    )


def chain_tree(depth: int) -> Tree:
    """A chain of ``depth`` tests on one feature: node 2k tests x0 <= (k+1)/(depth+1), its left child
    (2k+1) is a leaf of class k % 2, its right child (2k+2) the next test; the last node is a leaf."""
    n = 2 * depth + 1
    weights = np.zeros((n, 1))
    threshold = np.zeros(n)
    left = np.full(n, LEAF)
    right = np.full(n, LEAF)
    leaf_class = np.zeros(n, dtype=np.int64)
    for k in range(depth):
        node = 2 * k
        weights[node, 0] = 1.0
        threshold[node] = (k + 1) / (depth + 1)
        left[node] = node + 1
        right[node] = node + 2
        leaf_class[node + 1] = k % 2
    leaf_class[n - 1] = depth % 2
    return Tree(weights, threshold, left, right, leaf_class, np.zeros((n, 2)))


# ---------------------------------------------------------------------------------------------- validate
def test_validate_accepts_good_trees():
    assert oblique_tree().validate() is not None
    axis_tree().validate()
    Tree.leaf_only(3, 4, leaf_class=3).validate()
    chain_tree(5).validate()


def test_constructor_normalises_dtypes():
    t = oblique_tree()
    assert t.weights.dtype == np.float64 and t.threshold.dtype == np.float64
    assert t.left.dtype == np.int32 and t.right.dtype == np.int32 and t.leaf_class.dtype == np.int32
    assert t.class_counts.dtype == np.int64
    assert (t.n_nodes, t.n_features, t.n_classes) == (5, 2, 3)


def _extend_with_unreachable_leaf(t: Tree) -> None:
    t.weights = np.vstack([t.weights, np.zeros((1, t.n_features))])
    t.threshold = np.append(t.threshold, 0.0)
    t.left = np.append(t.left, LEAF).astype(np.int32)
    t.right = np.append(t.right, LEAF).astype(np.int32)
    t.leaf_class = np.append(t.leaf_class, 0).astype(np.int32)
    t.class_counts = np.vstack([t.class_counts, np.zeros((1, t.n_classes), dtype=np.int64)])


def _set(attr, index, value):
    def mutate(t: Tree) -> None:
        getattr(t, attr)[index] = value
    return mutate


def _replace(attr, make):
    def mutate(t: Tree) -> None:
        setattr(t, attr, make(t))
    return mutate


BROKEN = {
    # structure
    "one child missing (left)": (_set("left", 2, LEAF), "exactly one child"),
    "one child missing (right)": (_set("right", 0, LEAF), "exactly one child"),
    "child index past the end": (_set("left", 0, 5), "left child index out of range at node 0"),
    "child index far past the end": (_set("right", 2, 1000), "right child index out of range at node 2"),
    "negative child index": (_set("right", 0, -7), "right child index out of range at node 0"),
    "root used as a child": (_set("left", 2, 0), "left child index out of range at node 2"),
    "shared child": (_set("left", 2, 1), "reached twice"),
    "self loop": (_set("right", 2, 2), "reached twice"),
    "cycle through a descendant": (
        lambda t: (_set("left", 4, 2)(t), _set("right", 4, 3)(t)), "reached twice"),
    "unreachable node": (_extend_with_unreachable_leaf, "node 5 is not reachable"),
    # leaves
    "leaf with a non-zero weight": (_set("weights", (3, 1), 0.25), "leaf has non-zero test coefficients"),
    "leaf with a non-zero threshold": (_set("threshold", 1, 0.5), "leaf has non-zero test coefficients"),
    "leaf class too large": (_set("leaf_class", 4, 3), "leaf class index out of range"),
    "leaf class negative": (_set("leaf_class", 3, -1), "leaf class index out of range"),
    "internal class out of range": (_set("leaf_class", 0, 9), "leaf class index out of range"),
    # values
    "negative counts": (_set("class_counts", (3, 1), -1), "negative class counts"),
    "NaN weight": (_set("weights", (0, 1), np.nan), "non-finite"),
    "infinite weight": (_set("weights", (2, 0), -np.inf), "non-finite"),
    "NaN threshold": (_set("threshold", 0, np.nan), "non-finite"),
    "infinite threshold": (_set("threshold", 2, np.inf), "non-finite"),
    # shapes
    "threshold too short": (_replace("threshold", lambda t: t.threshold[:-1]), "threshold has shape"),
    "right too long": (_replace("right", lambda t: np.append(t.right, LEAF)), "right has shape"),
    "leaf_class 2-D": (_replace("leaf_class", lambda t: t.leaf_class[:, None]), "leaf_class has shape"),
    "weights row missing": (_replace("weights", lambda t: t.weights[:-1]), "weights have shape"),
    "weights 1-D": (_replace("weights", lambda t: t.weights[:, 0]), "weights have shape"),
    "class_counts row missing": (_replace("class_counts", lambda t: t.class_counts[:-1]), "class_counts have shape"),
    "class_counts without classes": (
        _replace("class_counts", lambda t: np.zeros((t.n_nodes, 0), dtype=np.int64)), "class_counts have shape"),
    "class_counts 1-D": (_replace("class_counts", lambda t: t.class_counts[:, 0]), "class_counts have shape"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_validate_rejects_broken_invariant(case):
    mutate, message = BROKEN[case]
    tree = oblique_tree()
    mutate(tree)
    with pytest.raises(TreegenError, match=re.escape(message)) as info:
        tree.validate()
    assert "\n" not in str(info.value)


def test_validate_rejects_empty_tree():
    t = Tree(np.zeros((0, 2)), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros((0, 2)))
    with pytest.raises(TreegenError, match="no nodes"):
        t.validate()


def test_error_is_a_value_error():
    t = oblique_tree()
    t.left[2] = LEAF
    with pytest.raises(ValueError):
        t.validate()


# ---------------------------------------------------------------------------------------------- inference
def test_apply_and_predict_oblique_tree_with_rows_on_thresholds():
    t = oblique_tree()
    above = np.nextafter(0.5, 1.0)  # the smallest float above 0.5
    X = np.array([
        [0.5, 0.5],      # x0+x1 == 1 exactly -> left; 0.25-0.5 < 0 -> left    => leaf 3
        [0.5, 0.25],     # 0.75 <= 1 -> left; 0.25-0.25 == 0 exactly -> left   => leaf 3
        [0.75, 0.25],    # 1.0 == 1 exactly -> left; 0.375-0.25 > 0 -> right   => leaf 4
        [1.0, 0.0],      # 1.0 == 1 -> left; 0.5 > 0 -> right                 => leaf 4
        [above, above],  # sum = 1 + 2**-52, the next float above 1 -> right => leaf 1
        [0.75, 0.3],     # 1.05 > 1 -> right                                  => leaf 1
        [0.0, 0.0],      # 0 <= 1 -> left; 0 <= 0 -> left                     => leaf 3
    ])
    leaves = t.apply(X)
    assert leaves.tolist() == [3, 3, 4, 4, 1, 1, 3]
    pred = t.predict_index(X)
    assert pred.tolist() == [0, 0, 1, 1, 2, 2, 0]
    assert pred.dtype == np.int64


def test_apply_on_axis_parallel_threshold_goes_left():
    t = axis_tree()
    X = np.array([[0.9, 0.5], [0.9, np.nextafter(0.5, 1)], [0.0, np.nextafter(0.5, 0)]])
    assert t.apply(X).tolist() == [1, 2, 1]


def test_apply_single_leaf_tree_and_empty_input():
    t = Tree.leaf_only(2, 3, leaf_class=1)
    assert t.apply(np.zeros((4, 2))).tolist() == [0, 0, 0, 0]
    assert t.predict_index(np.zeros((4, 2))).tolist() == [1, 1, 1, 1]
    assert oblique_tree().apply(np.zeros((0, 2))).shape == (0,)


@pytest.mark.parametrize("shape", [(3,), (3, 3), (3, 1), (2, 2, 2)])
def test_apply_rejects_wrong_feature_count(shape):
    with pytest.raises(TreegenError, match="expected 2 features"):
        oblique_tree().apply(np.zeros(shape))


# ---------------------------------------------------------------------------------------------- shape
def test_depth_leaves_and_axis_parallel():
    t = oblique_tree()
    assert t.depth == 2
    assert t.n_leaves == 3 and t.n_internal == 2
    assert t.leaves().tolist() == [1, 3, 4]
    assert t.node_depths().tolist() == [0, 1, 1, 2, 2]
    assert not t.is_axis_parallel()
    assert axis_tree().is_axis_parallel()
    assert axis_tree().depth == 1
    leaf = Tree.leaf_only(4, 2)
    assert leaf.depth == 0 and leaf.n_leaves == 1 and leaf.n_internal == 0 and leaf.is_axis_parallel()


def test_preorder():
    assert oblique_tree().preorder() == [0, 2, 3, 4, 1]
    assert axis_tree().preorder() == [0, 1, 2]


# ---------------------------------------------------------------------------------------------- transforms
def test_compact_renumbers_in_preorder_and_preserves_predictions():
    t = oblique_tree()
    c = t.compact()
    assert c.preorder() == list(range(c.n_nodes))
    # old 0,2,3,4,1 -> new 0,1,2,3,4
    assert c.left.tolist() == [1, 2, LEAF, LEAF, LEAF]
    assert c.right.tolist() == [4, 3, LEAF, LEAF, LEAF]
    assert c.leaf_class.tolist() == [2, 0, 0, 1, 2]
    assert np.array_equal(c.weights, t.weights[[0, 2, 3, 4, 1]])
    assert np.array_equal(c.threshold, t.threshold[[0, 2, 3, 4, 1]])
    assert np.array_equal(c.class_counts, t.class_counts[[0, 2, 3, 4, 1]])
    rng = np.random.default_rng(0)
    X = np.vstack([rng.random((500, 2)), [[0.5, 0.5], [0.5, 0.25], [0.75, 0.25]]])
    assert np.array_equal(c.predict_index(X), t.predict_index(X))
    # compacting twice changes nothing; the original is untouched
    assert c.compact().equals(c)
    assert t.left.tolist() == [2, LEAF, 3, LEAF, LEAF]


def test_compact_drops_unreachable_nodes():
    t = oblique_tree()
    _extend_with_unreachable_leaf(t)
    with pytest.raises(TreegenError):
        t.validate()
    c = t.compact()
    assert c.n_nodes == 5
    X = np.random.default_rng(1).random((200, 2))
    assert np.array_equal(c.predict_index(X), oblique_tree().predict_index(X))


def test_refit_counts_relabels_with_majority_and_ties_to_lowest_class():
    t = oblique_tree()
    X = np.array([
        [0.5, 0.5], [0.5, 0.5], [0.0, 0.0],   # leaf 3
        [1.0, 0.0], [1.0, 0.0],               # leaf 4 (tie 0 vs 2)
        # leaf 1 gets nothing
    ])
    y = np.array([1, 1, 0, 2, 0])
    out = t.refit_counts(X, y)
    assert out is t
    assert t.class_counts.dtype == np.int64
    assert t.class_counts[3].tolist() == [1, 2, 0]
    assert t.class_counts[4].tolist() == [1, 0, 1]
    assert t.class_counts[1].tolist() == [0, 0, 0]
    assert t.class_counts[2].tolist() == [2, 2, 1]
    assert t.class_counts[0].tolist() == [2, 2, 1]
    assert t.leaf_class[3] == 1          # majority
    assert t.leaf_class[4] == 0          # tie -> lowest class index
    assert t.leaf_class[1] == 2          # empty leaf keeps its class
    t.validate()


def test_refit_counts_without_relabel_keeps_classes():
    t = oblique_tree()
    before = t.leaf_class.copy()
    t.refit_counts(np.array([[0.5, 0.5]] * 3), np.array([2, 2, 2]), relabel=False)
    assert np.array_equal(t.leaf_class, before)
    assert t.class_counts[3].tolist() == [0, 0, 3]
    assert t.class_counts[0].tolist() == [0, 0, 3]


def test_copy_is_deep():
    t = oblique_tree()
    c = t.copy()
    assert c.equals(t)
    c.weights[0, 0] = 2.0
    c.left[0] = 1
    assert t.weights[0, 0] == 1.0 and t.left[0] == 2


# ---------------------------------------------------------------------------------------------- equals / dict
def test_equals():
    t = oblique_tree()
    assert t.equals(oblique_tree())
    assert t.equals(t.copy())
    for mutate in (
        _set("weights", (0, 0), np.nextafter(1.0, 2.0)),
        _set("threshold", 2, 1e-300),
        _set("leaf_class", 4, 2),
        _set("class_counts", (0, 0), 5),
    ):
        other = oblique_tree()
        mutate(other)
        assert not t.equals(other)
        assert not other.equals(t)
    assert not t.equals(t.compact())  # same function, different numbering
    assert not t.equals(axis_tree())
    assert not axis_tree().equals(Tree.leaf_only(2, 2))


def test_dict_round_trip_is_exact():
    t = oblique_tree()
    t.weights[0] = [0.1, 1 / 3]
    t.threshold[0] = 1e-300
    t.weights[2] = [-2.5e-17, 5e-324]
    d = t.to_dict()
    assert d["n_features"] == 2 and d["n_classes"] == 3
    back = Tree.from_dict(d)
    assert back.equals(t)
    assert Tree.from_dict(json.loads(json.dumps(d))).equals(t)


@pytest.mark.parametrize("breakage", ["missing key", "wrong width", "bad invariant", "not numbers"])
def test_from_dict_rejects_malformed(breakage):
    d = oblique_tree().to_dict()
    if breakage == "missing key":
        del d["left"]
    elif breakage == "wrong width":
        d["n_features"] = 3
    elif breakage == "bad invariant":
        d["left"][0] = 17
    else:
        d["threshold"] = ["a"] * 5
    with pytest.raises(TreegenError):
        Tree.from_dict(d)


# ---------------------------------------------------------------------------------------------- scale
def test_deep_chain_tree_has_no_recursion_limit():
    depth = 3000
    t = chain_tree(depth)
    assert t.validate() is t
    assert t.depth == depth
    assert t.n_nodes == 2 * depth + 1 and t.n_leaves == depth + 1
    assert t.node_depths().max() == depth
    assert t.preorder() == list(range(t.n_nodes))
    assert t.compact().equals(t)

    # rows at, just above and just below every threshold, plus the extremes
    k = np.arange(depth)
    thr = (k + 1) / (depth + 1)
    X = np.concatenate([thr, np.nextafter(thr, 2.0), [0.0, 1.0]])[:, None]
    leaves = t.apply(X)
    expected = np.concatenate([2 * k + 1, np.append(2 * k[1:] + 1, 2 * depth), [1, 2 * depth]])
    assert np.array_equal(leaves, expected)
    assert np.array_equal(t.predict_index(X), t.leaf_class[expected])

    y = t.predict_index(X)
    t.refit_counts(X, y)
    assert t.class_counts[0].sum() == X.shape[0]
    assert t.class_counts[2 * depth].sum() == 2  # nextafter(last threshold) and 1.0

    assert Tree.from_dict(t.to_dict()).equals(t)


def test_deep_chain_tree_compacts_from_reversed_numbering():
    """The same chain numbered back-to-front (children before parents, root kept at 0)."""
    depth = 3000
    t = chain_tree(depth)
    n = t.n_nodes
    # new index of old node i: 0 stays 0, others reversed into 1..n-1
    new_of_old = np.empty(n, dtype=np.int64)
    new_of_old[0] = 0
    new_of_old[1:] = np.arange(n - 1, 0, -1)
    old_of_new = np.argsort(new_of_old)

    def remap(child):
        return np.where(child == LEAF, LEAF, new_of_old[np.maximum(child, 0)])

    shuffled = Tree(t.weights[old_of_new], t.threshold[old_of_new], remap(t.left[old_of_new]),
                    remap(t.right[old_of_new]), t.leaf_class[old_of_new], t.class_counts[old_of_new])
    shuffled.validate()
    assert shuffled.depth == depth
    assert shuffled.compact().equals(t)
    X = np.linspace(0, 1, 7001)[:, None]
    assert np.array_equal(shuffled.predict_index(X), t.predict_index(X))
