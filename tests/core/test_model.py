"""Model file: exact save/load round trip, content hash, error reporting, ensembles."""

from __future__ import annotations

import json

import numpy as np
import pytest

import treegen
from treegen.core.errors import ModelFileError, TreegenError
from treegen.core.model import FORMAT_VERSION, Model, load, save
from treegen.core.scaling import InputScaling
from treegen.core.tree import LEAF, Tree

AWKWARD = [0.1, 1 / 3, 1e-300, -2.5e-17, 5e-324, 2.0**-15, 0.30000000000000004, -1e300]


def awkward_tree(n_classes: int = 3) -> Tree:
    """Oblique 3-feature tree with weights/thresholds that do not survive a lossy float format."""
    weights = np.array([
        [0.1, 1 / 3, 1e-300],
        [0, 0, 0],
        [-2.5e-17, 5e-324, 0.30000000000000004],
        [0, 0, 0],
        [0, 0, 0],
    ])
    return Tree(
        weights=weights,
        threshold=np.array([1 / 3, 0, -1e300, 0, 0]),
        left=np.array([1, LEAF, 3, LEAF, LEAF]),
        right=np.array([2, LEAF, 4, LEAF, LEAF]),
        leaf_class=np.array([0, n_classes - 1, 0, 0, 1]),
        class_counts=np.arange(5 * n_classes).reshape(5, n_classes),
    ).validate()


def make_model(classes=(1, 2, 3), metadata=None) -> Model:
    scaling = InputScaling(offset=np.array([0.1, -1 / 3, 1e-300]), scale=np.array([1 / 3, 0.1, 2.0**-15]),
                           method="minmax")
    return Model(
        trees=[awkward_tree(len(classes))],
        feature_names=["petal length", "a,b", "ünïcode"],
        classes=list(classes),
        scaling=scaling,
        metadata=metadata if metadata is not None else {
            "algorithm": "efti", "seed": 7, "fitness": 1 / 3, "train_accuracy": 0.1,
            "params": {"max_iter": 500, "oversize_weight": 0.01, "scaling": "auto", "flag": True, "none": None},
            "treegen_version": treegen.__version__,
        },
    )


def assert_models_identical(a: Model, b: Model) -> None:
    assert len(a.trees) == len(b.trees)
    for ta, tb in zip(a.trees, b.trees):
        assert ta.equals(tb)
    assert a.feature_names == b.feature_names
    assert a.classes == b.classes
    assert [type(c) for c in a.classes] == [type(c) for c in b.classes]
    assert a.scaling.method == b.scaling.method
    assert np.array_equal(a.scaling.offset, b.scaling.offset)
    assert np.array_equal(a.scaling.scale, b.scaling.scale)
    assert a.metadata == b.metadata


# ---------------------------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("classes", [(1, 2, 3), (-5, 0, 1000), ("setosa", "versicolor", "1")],
                         ids=["int-labels", "signed-int-labels", "string-labels"])
def test_save_load_round_trip_is_exact(tmp_path, classes):
    model = make_model(classes)
    path = save(model, tmp_path / "m.json")
    assert path == tmp_path / "m.json"
    back = load(path)
    assert_models_identical(model, back)
    assert back.hash() == model.hash()
    # and it is a fixed point: saving the loaded model writes the same bytes
    save(back, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    # every awkward float survived bit for bit
    w = back.tree.weights
    for value in AWKWARD[:5]:
        assert np.any(w == value) or np.any(back.tree.threshold == value)
    assert back.tree.weights[2, 1] == 5e-324


def test_file_layout(tmp_path):
    path = save(make_model(), tmp_path / "m.json")
    d = json.loads(path.read_text())
    assert d["format"] == "treegen-model"
    assert d["format_version"] == FORMAT_VERSION == 1
    assert set(d) == {"format", "format_version", "feature_names", "classes", "scaling", "trees", "metadata"}
    assert len(d["trees"]) == 1
    assert path.read_text().endswith("\n")


def test_metadata_numpy_values_become_json_values(tmp_path):
    meta = {"seed": np.int64(3), "fitness": np.float64(0.25), "curve": np.array([1.5, 2.5]),
            "nan": float("nan"), "nested": {"k": (np.int32(1), np.float32(0.5))}, 5: "int key"}
    back = load(save(make_model(metadata=meta), tmp_path / "m.json"))
    assert back.metadata == {"seed": 3, "fitness": 0.25, "curve": [1.5, 2.5], "nan": None,
                             "nested": {"k": [1, 0.5]}, "5": "int key"}
    assert type(back.metadata["seed"]) is int


def test_predict_round_trip_and_labels(tmp_path):
    model = make_model(("b", "a", "c"))
    rng = np.random.default_rng(0)
    X = rng.uniform(-5, 5, size=(300, 3))
    back = load(save(model, tmp_path / "m.json"))
    assert np.array_equal(back.predict_index(X), model.predict_index(X))
    pred = back.predict(X)
    assert set(pred.tolist()) <= {"a", "b", "c"}
    assert np.array_equal(pred, np.asarray(["b", "a", "c"], dtype=object)[model.predict_index(X)])


def test_predict_rejects_wrong_feature_count():
    with pytest.raises(TreegenError, match="data has 2 features, the model expects 3"):
        make_model().predict(np.zeros((4, 2)))
    with pytest.raises(TreegenError, match="the model expects 3"):
        make_model().predict_index(np.zeros(3))


# ---------------------------------------------------------------------------------------------- hash
def test_hash_is_stable():
    a, b = make_model(), make_model()
    assert a.hash() == b.hash()
    assert len(a.hash()) == 64 and int(a.hash(), 16) >= 0
    assert a.hash() == a.hash()
    # The hash identifies a model on a device, so it must not change between runs, processes or
    # releases. If the file format is changed on purpose, update these values (and format_version).
    assert a.hash() == "13d1f3ece6a13bb73743d91a562ea51e28d4e9dcca7a18dc75b54a5674c02f23"
    assert make_model(("a", "b", "c")).hash() == "3ef3b0b44cb9fa3dedb96af5cc4e9f8c8c68ba8aaea7897c0f1808861bd9f06b"


def test_hash_ignores_metadata_but_not_content():
    base = make_model().hash()
    assert make_model(metadata={"algorithm": "cart"}).hash() == base

    changed_weight = make_model()
    changed_weight.tree.weights[0, 0] = np.nextafter(0.1, 1.0)
    assert changed_weight.hash() != base

    changed_threshold = make_model()
    changed_threshold.tree.threshold[0] = np.nextafter(1 / 3, 0.0)
    assert changed_threshold.hash() != base

    changed_leaf = make_model()
    changed_leaf.tree.leaf_class[4] = 2
    assert changed_leaf.hash() != base

    changed_scaling = make_model()
    changed_scaling.scaling.scale[2] = 2.0**-14
    assert changed_scaling.hash() != base

    assert make_model(classes=("1", "2", "3")).hash() != base  # string vs int labels
    renamed = make_model()
    renamed.feature_names[0] = "sepal length"
    assert renamed.hash() != base


def test_hash_survives_round_trip(tmp_path):
    model = make_model(("x", "y", "z"))
    assert load(save(model, tmp_path / "m.json")).hash() == model.hash()


# ---------------------------------------------------------------------------------------------- errors
def _write(tmp_path, content) -> str:
    path = tmp_path / "model.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _good_dict() -> dict:
    return make_model().to_dict()


def _without(key):
    def edit(d):
        del d[key]
        return d
    return edit


def _tree_edit(fn):
    def edit(d):
        fn(d["trees"][0])
        return d
    return edit


BAD_FILES = {
    "corrupt JSON": ('{"format": "treegen-model", "format_version": 1,', "not valid JSON"),
    "truncated file": (lambda: make_model().to_json()[:200], "not valid JSON"),
    "empty file": ("", "not valid JSON"),
    "binary garbage": (bytes(range(256)) * 4, "is not a text file"),
    "JSON list": ([1, 2, 3], "not a treegen model file"),
    "JSON string": ("\"treegen-model\"", "not a treegen model file"),
    "other JSON object": ({"name": "something else"}, "not a treegen model file"),
    "wrong format name": (lambda: {**_good_dict(), "format": "sklearn-model"}, "not a treegen model file"),
    "format_version 2": (lambda: {**_good_dict(), "format_version": 2}, "unsupported model format version 2"),
    "format_version 0": (lambda: {**_good_dict(), "format_version": 0}, "unsupported model format version 0"),
    "format_version string": (lambda: {**_good_dict(), "format_version": "1"}, "unsupported model format version '1'"),
    "format_version missing": (lambda: _without("format_version")(_good_dict()), "unsupported model format version None"),
    "trees missing": (lambda: _without("trees")(_good_dict()), "trees: missing"),
    "classes missing": (lambda: _without("classes")(_good_dict()), "classes: missing"),
    "scaling missing": (lambda: _without("scaling")(_good_dict()), "scaling: missing"),
    "feature_names missing": (lambda: _without("feature_names")(_good_dict()),
                              "feature_names: missing"),
    "no trees": (lambda: {**_good_dict(), "trees": []}, "trees: has 0 entries"),
    "trees not a list": (lambda: {**_good_dict(), "trees": 5}, "trees: must be a list"),
    "tree field missing": (lambda: _tree_edit(lambda t: t.pop("left"))(_good_dict()), "trees[0].left: missing"),
    "tree child out of range": (lambda: _tree_edit(lambda t: t["left"].__setitem__(0, 99))(_good_dict()),
                                "trees[0].left[0]: child index 99 is out of range"),
    "tree cycle": (lambda: _tree_edit(lambda t: t["right"].__setitem__(2, 2))(_good_dict()), "reached twice"),
    "tree leaf class out of range": (lambda: _tree_edit(lambda t: t["leaf_class"].__setitem__(4, 3))(_good_dict()),
                                     "trees[0].leaf_class[4]: class index 3 is out of range"),
    "tree NaN weight": (lambda: json.dumps(_tree_edit(lambda t: t["weights"][0].__setitem__(0, float("nan")))(
        _good_dict())), "trees[0].weights[0][0]: weight nan is not finite"),
    "tree width mismatch": (lambda: _tree_edit(lambda t: t.update(
        n_features=1, weights=[[w[0]] for w in t["weights"]]))(_good_dict()), "trees[0].n_features: feature count 1 does not match the model"),
    "scaling width mismatch": (lambda: {**_good_dict(), "scaling": {"method": "q15", "offset": [0], "scale": [1]}},
                               "scaling.offset: has 1 entries, expected 3"),
    "scaling non-finite": (lambda: {**_good_dict(), "scaling": {"method": "q15", "offset": [0, 0, 0],
                                                                "scale": [1, None, 1]}}, "scaling.scale[1]: scale must be a number"),
    "duplicate classes": (lambda: {**_good_dict(), "classes": [1, 1, 2]}, "not unique"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_model_file_raises_one_line_model_file_error(tmp_path, case):
    content, message = BAD_FILES[case]
    if callable(content):
        content = content()
    path = _write(tmp_path, content)
    with pytest.raises(ModelFileError) as info:
        load(path)
    text = str(info.value)
    assert message in text
    assert "\n" not in text and text.strip() == text
    assert isinstance(info.value, TreegenError) and isinstance(info.value, ValueError)


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="model file not found") as info:
        load(tmp_path / "nope.json")
    assert "nope.json" in str(info.value) and "\n" not in str(info.value)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read model file"):
        load(tmp_path)


def test_save_to_unwritable_location(tmp_path):
    with pytest.raises(TreegenError, match="cannot write model file"):
        save(make_model(), tmp_path / "no-such-dir" / "m.json")


def test_model_validation_on_construction():
    good = make_model()
    with pytest.raises(TreegenError, match="no tree"):
        Model([], good.feature_names, good.classes, good.scaling)
    with pytest.raises(TreegenError, match="no class labels"):
        Model([Tree.leaf_only(3, 1)], good.feature_names, [], good.scaling)
    with pytest.raises(TreegenError, match="not unique"):
        Model(good.trees, good.feature_names, [1, 1, 2], good.scaling)
    with pytest.raises(TreegenError, match="does not match the model"):
        Model(good.trees, good.feature_names, [1, 2], good.scaling)
    with pytest.raises(TreegenError, match="scaling does not match"):
        Model(good.trees, good.feature_names, good.classes, InputScaling(np.zeros(2), np.ones(2)))
    # labels 1 and "1" are different classes
    Model([Tree.leaf_only(3, 2)], good.feature_names, [1, "1"], good.scaling)


# ---------------------------------------------------------------------------------------------- ensemble
def _stump(threshold: float, left_class: int, right_class: int) -> Tree:
    return Tree(np.array([[1.0], [0], [0]]), np.array([threshold, 0, 0]), np.array([1, LEAF, LEAF]),
                np.array([2, LEAF, LEAF]), np.array([left_class, left_class, right_class]), np.zeros((3, 3)))


def _ensemble(trees) -> Model:
    return Model(trees, ["x"], ["a", "b", "c"], InputScaling(np.zeros(1), np.full(1, 1 / 32768), "q15"))


def test_ensemble_majority_vote(tmp_path):
    A = _stump(0.5, 0, 1)             # x <= 0.5 -> a, else b
    B = _stump(0.25, 0, 2)            # x <= 0.25 -> a, else c
    C = Tree.leaf_only(1, 3, leaf_class=2)  # always c
    model = _ensemble([A, B, C])
    X_raw = np.array([[3277], [13107], [29491], [16384], [8192]])  # q15 values of 0.1, 0.4, 0.9, 0.5, 0.25
    # votes:           a,a,c -> a   a,c,c -> c   b,c,c -> c   a,c,c -> c   a,a,c -> a
    assert model.predict_index(X_raw).tolist() == [0, 2, 2, 2, 0]
    assert model.predict(X_raw).tolist() == ["a", "c", "c", "c", "a"]
    with pytest.raises(TreegenError, match="ensemble of 3 trees"):
        model.tree
    back = load(save(model, tmp_path / "ens.json"))
    assert len(back.trees) == 3
    assert_models_identical(model, back)
    assert back.predict(X_raw).tolist() == ["a", "c", "c", "c", "a"]


def test_ensemble_tie_goes_to_lowest_class_index():
    A = _stump(0.5, 0, 1)
    B = _stump(0.25, 0, 2)
    model = _ensemble([B, A])  # tree order must not matter
    X = np.array([[0.1], [0.4], [0.9]])
    # votes: a,a -> a;  c,a (tie) -> a;  c,b (tie) -> b
    assert model.predict_index_normalised(X).tolist() == [0, 0, 1]
    assert _ensemble([A, B]).predict_index_normalised(X).tolist() == [0, 0, 1]


def _leaf(counts) -> Tree:
    """A one-leaf tree (one feature, three classes) with these class counts (its leaf class: the argmax)."""
    counts = np.asarray([counts], dtype=np.int64)
    return Tree(np.zeros((1, 1)), np.zeros(1), np.array([LEAF]), np.array([LEAF]),
                np.array([int(counts[0].argmax())]), counts)


def test_soft_vote_is_the_mean_probability_not_the_majority(tmp_path):
    """Issue 24 mutation audit: a model that votes hard where it promises soft must fail here. Two
    trees lean to b (0.4 a / 0.6 b), one is sure of a: the majority says b, the mean probability
    (0.6 a, 0.4 b) says a."""
    trees = [_leaf([4, 6, 0]), _leaf([4, 6, 0]), _leaf([10, 0, 0])]
    scaling = InputScaling(np.zeros(1), np.full(1, 1 / 32768), "q15")
    X = np.array([[100], [20000]])
    soft = Model(trees, ["x"], ["a", "b", "c"], scaling, vote="soft")
    hard = Model(trees, ["x"], ["a", "b", "c"], scaling, vote="hard")
    assert soft.predict(X).tolist() == ["a", "a"]
    assert hard.predict(X).tolist() == ["b", "b"]
    assert np.allclose(soft.predict_proba(X), [[0.6, 0.4, 0.0]] * 2)
    back = load(save(soft, tmp_path / "soft.json"))          # the promise survives the model file
    assert back.vote == "soft" and back.predict(X).tolist() == ["a", "a"]
    assert soft.predict_index(X, vote="hard").tolist() == [1, 1]


def test_single_tree_model_tree_property():
    model = make_model()
    assert model.tree is model.trees[0]
    assert (model.n_features, model.n_classes) == (3, 3)
