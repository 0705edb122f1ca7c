"""treegen.emit.show: text and Graphviz renderings of hand-built models."""

from __future__ import annotations

import re

import numpy as np
import pytest

from treegen.core.model import Model
from treegen.core.scaling import InputScaling
from treegen.core.tree import LEAF, Tree
from treegen.core.errors import TreegenError
from treegen.emit.show import format_test, raw_test, render_dot, render_text, render_tree_text

NAMES = ["sepal_len", "sepal_wid", "petal_len", "petal_wid"]


def q15(n):
    return InputScaling(np.zeros(n), np.full(n, 1 / 32768), "q15")


def small_tree() -> Tree:
    # 0: oblique root; 1: axis-parallel (weight 1); 2: leaf; 3: leaf; 4: single negative weight; 5, 6: leaves
    w = np.zeros((7, 4))
    w[0] = [0.31, 0.0, 0.0, -0.2]
    w[1, 2] = 1.0
    w[4, 1] = -2.0
    thr = np.array([0.113, 0.45, 0, 0, 0.5, 0, 0])
    left = [1, 2, LEAF, LEAF, 5, LEAF, LEAF]
    right = [4, 3, LEAF, LEAF, 6, LEAF, LEAF]
    leaf_class = [0, 0, 0, 1, 2, 2, 1]
    counts = np.array([[10, 8, 7], [10, 5, 0], [10, 0, 0], [0, 5, 0], [0, 3, 7], [0, 0, 7], [0, 3, 0]])
    return Tree(w, thr, left, right, leaf_class, counts).validate()


def small_model(trees=None) -> Model:
    return Model(trees or [small_tree()], NAMES, ["setosa", "versicolor", "virginica"], q15(4),
                 {"algorithm": "efti", "train_accuracy": 1.0})


def test_format_test_variants():
    assert format_test(np.array([0.31, 0, 0, -0.2]), 0.113, NAMES) == "0.31*sepal_len - 0.2*petal_wid <= 0.113"
    assert format_test(np.array([-0.5, 1.0, 0, 0]), -0.25, NAMES) == "-0.5*sepal_len + sepal_wid <= -0.25"
    assert format_test(np.array([0, 0, 1.0, 0]), 0.45, NAMES) == "petal_len <= 0.45"
    assert format_test(np.array([0, 0, 0.5, 0]), 0.2, NAMES) == "petal_len <= 0.4"
    assert format_test(np.array([0, -2.0, 0, 0]), 0.5, NAMES) == "sepal_wid >= -0.25"
    assert format_test(np.array([0.123456789, 0, 0, 0.5]), 1 / 3, NAMES, digits=3) == \
        "0.123*sepal_len + 0.5*petal_wid <= 0.333"


def test_render_text_structure():
    text = render_text(small_model(), units="normalised")
    assert text.startswith("model: efti, 1 tree, 4 leaves, depth 2\n")
    assert "sepal_len, sepal_wid, petal_len, petal_wid" in text
    assert "classes (3): setosa, versicolor, virginica" in text
    body = text.split("\n\n", 1)[1].splitlines()
    assert body == [
        "0.31*sepal_len - 0.2*petal_wid <= 0.113  (n=25)",
        "├── yes: petal_len <= 0.45  (n=15)",
        "│   ├── yes: class setosa  (n=10; setosa: 10, versicolor: 0, virginica: 0)",
        "│   └── no:  class versicolor  (n=5; setosa: 0, versicolor: 5, virginica: 0)",
        "└── no:  sepal_wid >= -0.25  (n=10)",
        "    ├── yes: class virginica  (n=7; setosa: 0, versicolor: 0, virginica: 7)",
        "    └── no:  class versicolor  (n=3; setosa: 0, versicolor: 3, virginica: 0)",
    ]


def test_render_single_leaf():
    tree = Tree.leaf_only(2, 2, leaf_class=1)
    assert render_tree_text(tree, ["a", "b"], [0, 1]) == "class 1  (n=0; 0: 0, 1: 0)"


def test_render_deep_tree_without_recursion():
    depth = 3000  # far beyond Python's default recursion limit
    n = 2 * depth + 1
    w = np.zeros((n, 1))
    thr = np.zeros(n)
    left = np.full(n, LEAF)
    right = np.full(n, LEAF)
    for d in range(depth):
        node = 2 * d
        w[node, 0] = 1.0
        thr[node] = 0.5
        left[node] = node + 1           # a leaf
        right[node] = node + 2          # next test (or the final leaf)
    tree = Tree(w, thr, left, right, np.zeros(n, dtype=np.int32), np.zeros((n, 2), dtype=np.int64)).validate()
    model = Model([tree], ["x"], [0, 1], q15(1))
    text = render_text(model, units="normalised")
    assert text.count("x <= 0.5") == depth
    assert render_text(model).count("x <= 16384") == depth        # raw units: 15-bit integers
    dot = render_dot(model)
    assert dot.count("->") == 2 * depth


def test_render_dot():
    dot = render_dot(small_model(), units="normalised")
    assert dot.startswith("digraph treegen {") and dot.rstrip().endswith("}")
    nodes = re.findall(r"^\s+(t0n\d+) \[label=", dot, flags=re.M)
    assert sorted(nodes) == sorted(f"t0n{i}" for i in range(7))
    edges = re.findall(r"(t0n\d+) -> (t0n\d+) \[label=\"(yes|no)\"\]", dot)
    assert set(edges) == {("t0n0", "t0n1", "yes"), ("t0n0", "t0n4", "no"), ("t0n1", "t0n2", "yes"),
                          ("t0n1", "t0n3", "no"), ("t0n4", "t0n5", "yes"), ("t0n4", "t0n6", "no")}
    assert 'label="0.31*sepal_len - 0.2*petal_wid <= 0.113\\nn=25"' in dot
    assert 'label="class virginica\\nn=7: [0, 0, 7]"' in dot
    assert dot.count("{") == dot.count("}")


def test_render_dot_escapes_names():
    tree = small_tree()
    names = ['a"b', "c\\d", "e", "f"]
    model = Model([tree], names, ["x", 'y"z', "w"], q15(4))
    dot = render_dot(model, units="normalised")
    assert '0.31*a\\"b' in dot
    assert 'class y\\"z' in dot
    # no unescaped quote inside a label
    for label in re.findall(r'label="((?:[^"\\]|\\.)*)"', dot):
        assert '"' not in label.replace('\\"', "")


def test_render_ensemble():
    model = small_model([small_tree(), small_tree()])
    text = render_text(model)
    assert "2 trees (majority vote)" in text and "tree 0:" in text and "tree 1:" in text
    dot = render_dot(model)
    assert "subgraph cluster_0" in dot and "subgraph cluster_1" in dot
    assert "t1n6" in dot


@pytest.mark.parametrize("digits", [2, 6])
def test_digits(digits):
    text = render_text(small_model(), digits=digits, units="normalised")
    assert "0.31*sepal_len" in text


# ---------------------------------------------------------------------- raw units
def test_raw_units_of_the_small_tree():
    body = render_text(small_model()).split("\n\n", 1)[1].splitlines()
    # q15 data: x = r / 32768, so 0.31*x0 - 0.2*x3 <= 0.113 is r0 - 0.6452*r3 <= 0.113*32768/0.31
    assert body[0] == "sepal_len - 0.6452*petal_wid <= 1.194e+04  (n=25)"
    assert body[1] == "├── yes: petal_len <= 14745  (n=15)"           # floor(0.45 * 32768)
    assert body[4] == "└── no:  sepal_wid >= -8192  (n=10)"           # x >= -0.25
    assert "tests in raw input units" in render_text(small_model())


def test_raw_axis_boundary_is_exact_for_every_raw_value():
    """Minmax scaling: the shown boundary b separates the raw values whose Q15 value passes the
    test from those that fail it (every float64 on a fine sweep and both neighbours of b)."""
    scaling = InputScaling.fit(np.array([[-3.0], [7.5]]), "minmax")
    for thr, w in ((0.3, 1.0), (0.61, 2.0), (-0.2, -1.0), (0.7, -0.5)):
        text = raw_test(np.array([w]), thr, scaling, ["r"], digits=17)
        op, b = text.split()[1], float(text.split()[2])
        r = np.concatenate([np.linspace(-4, 9, 20001), [b, np.nextafter(b, -np.inf), np.nextafter(b, np.inf)]])
        x = scaling.transform(r[:, None])[:, 0]
        holds = w * x <= thr
        shown = r < b if op == "<" else r >= b
        at_b = np.isclose(r, b, rtol=0, atol=1e-9)     # the boundary itself follows round-half-even
        assert np.array_equal(holds[~at_b], shown[~at_b]), (thr, w, text)


def test_raw_oblique_is_the_same_half_plane():
    rng = np.random.default_rng(3)
    scaling = InputScaling.fit(rng.uniform([-100, 0, 5], [100, 1e-3, 6], size=(50, 3)), "minmax")
    w, thr = np.array([0.4, -0.7, 0.2]), 0.05
    text = raw_test(w, thr, scaling, ["a", "b", "c"], digits=17)
    lhs, rhs = text.split(" <= ")
    coef = {n: 0.0 for n in "abc"}
    for term in lhs.replace(" - ", " + -").split(" + "):
        c, _, name = term.rpartition("*")
        coef[name.lstrip("-")] = (-1.0 if term.startswith("-") and not c else 1.0) if not c else float(c)
    r = rng.uniform([-100, 0, 5], [100, 1e-3, 6], size=(5000, 3))
    x_float = (r - scaling.offset) * scaling.scale                 # before the Q15 snap
    shown = r @ np.array([coef["a"], coef["b"], coef["c"]]) <= float(rhs)
    margin = np.abs(x_float @ w - thr) > 1e-9
    assert np.array_equal((x_float @ w <= thr)[margin], shown[margin])


def test_unknown_units():
    with pytest.raises(TreegenError, match="unknown units"):
        render_text(small_model(), units="furlongs")
