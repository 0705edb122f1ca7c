"""Value trees (issue #25): regression ('mean') and additive ('sum') models, NaN routing, the file format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from treegen.core.errors import ModelFileError, TreegenError
from treegen.core.model import Model, from_json, load, save
from treegen.core.scaling import InputScaling
from treegen.core.tree import LEAF, Tree, float32_below, float32_floor


def value_stump(threshold: float, left: float, right: float, feature: int = 0, n_features: int = 2,
                raw: bool = False, missing_left: bool | None = None) -> Tree:
    w = np.zeros((3, n_features))
    w[0, feature] = 1.0
    return Tree(weights=w, threshold=np.array([threshold, 0, 0]), left=np.array([1, LEAF, LEAF]),
                right=np.array([2, LEAF, LEAF]), leaf_class=np.zeros(3), class_counts=np.array([[5], [2], [3]]),
                raw_threshold=np.array([threshold, 0, 0]) if raw else None,
                leaf_value=np.array([(2 * left + 3 * right) / 5, left, right]),
                missing_left=None if missing_left is None else np.array([missing_left, False, False])).validate()


def scaling(n: int = 2) -> InputScaling:
    return InputScaling(np.zeros(n), np.full(n, 32767 / 32768), "minmax")   # x in [0, 1) -> itself on the grid


def regression(trees, vote="mean", boost=None) -> Model:
    return Model(trees, ["a", "b"], [], scaling(), {"target_name": "y"}, vote=vote, task="regression", boost=boost)


def boost(n_trees, base=(0.0,), outputs=None, link="identity", dtype="float64") -> dict:
    return {"base_score": list(base), "tree_output": outputs or [0] * n_trees, "link": link, "sum_dtype": dtype}


X = np.array([[0.1, 0.9], [0.6, 0.2], [0.5, 0.5]])


def test_mean_vote_is_float64_sum_in_tree_order_divided_by_n_trees(tmp_path):
    trees = [value_stump(0.5, 0.1, 0.2), value_stump(0.5, 0.7, 1 / 3, feature=1), value_stump(0.3, -1e-17, 5.0)]
    m = regression(trees)
    got = m.predict_value(X)
    Xn = m.scaling.transform(X)
    expected = np.zeros(3)
    for t in trees:
        expected = expected + t.leaf_value[t.apply(Xn)]
    assert np.array_equal(got, expected / 3)
    assert np.array_equal(m.predict(X), got)
    assert m.n_outputs == 1 and m.n_classes == 0 and m.is_regression
    back = load(save(m, tmp_path / "r.json"))
    assert back.task == "regression" and back.vote == "mean" and back.classes == []
    assert all(a.equals(b) for a, b in zip(m.trees, back.trees))
    assert back.hash() == m.hash() and np.array_equal(back.predict_value(X), got)
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["task"] == "regression" and "boost" not in d and d["trees"][0]["n_classes"] == 1
    assert "missing_left" not in d["trees"][0]


def test_classification_files_gain_no_keys():
    t = Tree.leaf_only(2, 2)
    d = Model([t], ["a", "b"], [0, 1], scaling()).to_dict()
    assert not {"task", "boost"} & set(d) and not {"leaf_value", "missing_left"} & set(d["trees"][0])


def test_sum_accumulates_in_the_sum_dtype_in_tree_order():
    # float32 (ulp 8 at 1e8): 0.5 + 1e8 and then + 1 round back to 1e8, so the sum is 0; float64 keeps 1.5
    trees = [value_stump(2.0, 1e8, 0.0), value_stump(2.0, 1.0, 0.0), value_stump(2.0, -1e8, 0.0)]
    f32 = regression(trees, vote="sum", boost=boost(3, base=(0.5,), dtype="float32"))
    f64 = regression(trees, vote="sum", boost=boost(3, base=(0.5,), dtype="float64"))
    assert np.array_equal(f32.predict_value(X), [0.0] * 3)
    assert np.array_equal(f64.predict_value(X), [1.5] * 3)
    # base score and leaf values are rounded to float32 before the float32 additions
    one = regression([value_stump(2.0, 0.1, 0.0)], vote="sum", boost=boost(1, base=(0.2,), dtype="float32"))
    assert one.predict_value(X)[0] == float(np.float32(0.2) + np.float32(0.1))


def test_binary_sum_classifier_class_one_iff_raw_above_zero(tmp_path):
    trees = [value_stump(0.5, -1.0, 2.0), value_stump(0.5, 1.0, -0.5, feature=1)]
    m = Model(trees, ["a", "b"], ["no", "yes"], scaling(), vote="sum", boost=boost(2, base=(0.0,), link="logistic"))
    raw = m.decision_function(X)          # rows: (-1 + -0.5), (2 + 1), (-1 + 1) = 0 exactly
    assert np.array_equal(raw, [-1.5, 3.0, 0.0])
    assert list(m.predict(X)) == ["no", "yes", "no"]          # a tie (raw 0) is class 0
    p = m.predict_proba(X)
    assert np.allclose(p[:, 1], 1 / (1 + np.exp(-raw))) and np.allclose(p.sum(axis=1), 1.0)
    back = load(save(m, tmp_path / "b.json"))
    assert back.boost == m.boost and np.array_equal(back.decision_function(X), raw)


def test_multiclass_sum_argmax_ties_lowest_and_softmax():
    trees = [value_stump(0.5, 1.0, 0.0), value_stump(0.5, 1.0, 0.0), value_stump(0.5, 0.0, 3.0)]
    m = Model(trees, ["a", "b"], [10, 20, 30], scaling(), vote="sum",
              boost=boost(3, base=(0.0, 0.0, 0.0), outputs=[0, 1, 2], link="softmax"))
    raw = m.decision_function(X)
    assert raw.shape == (3, 3)
    assert list(m.predict(X)) == [10, 30, 10]        # row 0 and 2: classes 0 and 1 tie at 1.0 -> 0
    p = m.predict_proba(X)
    assert np.allclose(p, np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True))


def test_nan_routing_follows_missing_left():
    nan = np.array([[np.nan, 0.2], [np.nan, 0.9]])
    for go_left in (True, False):
        t = value_stump(0.5, 10.0, 20.0, raw=True, missing_left=go_left)
        m = regression([t], vote="sum", boost=boost(1))
        assert m.handles_missing
        assert np.array_equal(m.predict_value(nan), [10.0 if go_left else 20.0] * 2)
        assert np.array_equal(m.predict_value([[np.inf, 0.0], [-np.inf, 0.0]]), [20.0, 10.0])
        # the normalised path routes NaN the same way (no raw thresholds)
        grid = value_stump(0.5, 10.0, 20.0, missing_left=go_left)
        assert np.array_equal(grid.predict_value(np.array([[np.nan, 0.1]])), [10.0 if go_left else 20.0])
        # a NaN in a feature the test does not use changes nothing
        assert np.array_equal(grid.predict_value(np.array([[0.1, np.nan], [0.9, np.nan]])), [10.0, 20.0])
    plain = regression([value_stump(0.5, 10.0, 20.0, raw=True)])
    with pytest.raises(TreegenError, match="NaN"):
        plain.predict_value(nan)


def test_float32_threshold_conversions():
    rng = np.random.default_rng(0)
    t64 = np.concatenate([rng.normal(size=200), rng.normal(size=50) * 1e-30, [0.0, 1.0, 0.1, -0.1]])
    for t in t64:
        t32 = np.float32(t)
        xs = np.array([np.nextafter(t32, np.float32(-np.inf)), t32, np.nextafter(t32, np.float32(np.inf)),
                       np.float32(t) * np.float32(0.5)], dtype=np.float32)
        below, floor = np.float32(float32_below(t)), np.float32(float32_floor(t))
        assert float(below) == float32_below(t) and float(floor) == float32_floor(t)
        assert np.array_equal(xs < t32, xs <= below)
        assert np.array_equal(xs.astype(np.float64) <= t, xs <= floor)


def test_value_feature_importances_are_squared_error_decreases():
    t = value_stump(0.5, 1.0, 3.0)       # counts 5 = 2 + 3, mean 2.2
    assert np.array_equal(t.feature_importances(), [1.0, 0.0])
    m = regression([t, value_stump(0.5, 0.0, 0.0, feature=1)])
    assert np.allclose(m.feature_importances(), [1.0, 0.0])


def test_refit_values_means_and_counts():
    t = value_stump(0.5, 0.0, 0.0)
    t.refit_values(np.array([[0.1, 0], [0.2, 0], [0.9, 0]]), [1.0, 2.0, 10.0])
    assert np.array_equal(t.class_counts[:, 0], [3, 2, 1])
    assert np.array_equal(t.leaf_value, [13 / 3, 1.5, 10.0])


@pytest.mark.parametrize("kwargs, message", [
    (dict(vote="mean", task="classification"), "'mean' combines regression trees"),
    (dict(vote="hard", task="regression"), "regression model combines its trees by 'mean' or 'sum'"),
    (dict(vote="sum", task="regression"), "boost: missing"),
    (dict(vote="mean", task="regression", boost=boost(1)), "only a model with vote 'sum'"),
    (dict(vote="sum", task="regression", boost=boost(2)), r"tree_output: has 2 entries, expected 1"),
    (dict(vote="sum", task="regression", boost=boost(1, base=(0.0, 1.0))), "one output, not 2"),
    (dict(vote="sum", task="regression", boost=boost(1, link="logistic")), "link is identity"),
    (dict(vote="sum", task="regression", boost=boost(1) | {"sum_dtype": "float16"}), "sum_dtype"),
    (dict(vote="mean", task="oops"), "task: must be one of"),
])
def test_model_validation(kwargs, message):
    with pytest.raises(TreegenError, match=message):
        Model([value_stump(0.5, 1.0, 2.0)], ["a", "b"], [], scaling(), **kwargs)


def test_value_trees_and_classes_must_match_the_vote():
    with pytest.raises(TreegenError, match="no class labels"):
        Model([value_stump(0.5, 1.0, 2.0)], ["a", "b"], [0, 1], scaling(), vote="mean", task="regression")
    with pytest.raises(TreegenError, match="tree 0 is a classification tree"):
        Model([Tree.leaf_only(2, 1)], ["a", "b"], [], scaling(), vote="mean", task="regression")
    with pytest.raises(TreegenError, match="tree 0 is a value tree"):
        Model([value_stump(0.5, 1.0, 2.0)], ["a", "b"], [0], scaling())
    with pytest.raises(TreegenError, match="one output .binary. needs 2 classes"):
        Model([value_stump(0.5, 1.0, 2.0)], ["a", "b"], [0, 1, 2], scaling(), vote="sum", boost=boost(1))
    with pytest.raises(TreegenError, match="predicts values, not classes"):
        regression([value_stump(0.5, 1.0, 2.0)]).predict_index(X)
    with pytest.raises(TreegenError, match="leaf_class 0"):
        t = value_stump(0.5, 1.0, 2.0)
        t.leaf_class[1] = 1
        t.validate()
    with pytest.raises(TreegenError, match="leaf has missing_left"):
        Tree.value_leaf(2, 1.0).__class__(**{**value_stump(0.5, 1, 2, missing_left=True).__dict__,
                                             "missing_left": np.array([True, True, False])}).validate()
    with pytest.raises(TreegenError, match="non-finite leaf values"):
        Tree(**{**value_stump(0.5, 1, 2).__dict__, "leaf_value": np.array([0, np.inf, 0])}).validate()


def _file(**edits) -> str:
    d = regression([value_stump(0.5, 1.0, 2.0, missing_left=True)], vote="sum", boost=boost(1)).to_dict()
    for path, value in edits.items():
        target = d
        keys = path.split("__")
        for k in keys[:-1]:
            target = target[int(k)] if k.isdigit() else target[k]
        if value is ...:
            del target[keys[-1]]
        else:
            target[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return json.dumps(d)


@pytest.mark.parametrize("edits, message", [
    (dict(trees__0__leaf_value=...), r"trees\[0\]\.leaf_value: missing"),
    (dict(trees__0__leaf_value=[0, 1, "x"]), r"trees\[0\]\.leaf_value\[2\]: leaf value must be a number"),
    (dict(trees__0__missing_left=[True, 1, False]), r"trees\[0\]\.missing_left\[1\]: must be true or false"),
    (dict(trees__0__missing_left=[True, True, False]), r"trees\[0\]\.missing_left\[1\]: a leaf routes"),
    (dict(trees__0__leaf_class=[0, 1, 0]), r"trees\[0\]\.leaf_class\[1\]: a value tree has leaf_class 0"),
    (dict(classes=[1]), "classes: a regression model has no class labels"),
    (dict(boost=...), "boost: missing"),
    (dict(boost__link="tanh"), "boost.link: must be one of"),
    (dict(boost__tree_output=[1]), r"boost.tree_output\[0\]: output index 1 is out of range 0..0"),
    (dict(boost__extra=1), "boost.extra: unknown field"),
    (dict(task="ranking"), "task: must be one of classification, regression"),
    (dict(vote="soft"), "vote: a regression model combines its trees by 'mean' or 'sum'"),
])
def test_bad_value_model_files_name_the_field(edits, message):
    with pytest.raises(ModelFileError, match=message):
        from_json(_file(**edits))


def test_leaf_value_in_a_classification_file_is_refused():
    d = Model([Tree.leaf_only(2, 2)], ["a", "b"], [0, 1], scaling()).to_dict()
    d["trees"][0]["leaf_value"] = [1.0]
    with pytest.raises(ModelFileError, match=r"trees\[0\]\.leaf_value: only the trees of a model with vote"):
        from_json(json.dumps(d))
    assert from_json(_file()).handles_missing
