"""Hostile model files for ``treegen import`` (issue #33): each case of the issue's round is refused with one
line naming the file and the field (exit 2), or, for valid files read from a stream, imported; never a
traceback, a crash of the interpreter or a silently different model. Regression figures on huge labels
are computed without overflow."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import subprocess
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest

from conftest import assert_user_error, run_cli
from treegen.core.model import load

pytest.importorskip("sklearn")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
onnx = pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")
joblib = pytest.importorskip("joblib")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """Small real models of every library (deterministic) and their data."""
    from sklearn.ensemble import GradientBoostingClassifier

    d = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(33)
    X = rng.normal(size=(300, 5)).astype(np.float32).astype(np.float64)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    booster = xgb.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1, random_state=0).fit(X, y).get_booster()
    booster.save_model(d / "x.json")
    booster.save_model(d / "x.ubj")
    lgb.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y).booster_.save_model(d / "l.txt")
    gb = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    (d / "o.onnx").write_bytes(skl2onnx.to_onnx(gb, X[:1].astype(np.float32),
                                                options={"zipmap": False}).SerializeToString())
    return {"dir": d, "X": X, "y": y, "xgb": json.loads((d / "x.json").read_text()),
            "lgb": (d / "l.txt").read_text(), "onnx": (d / "o.onnx").read_bytes(), "booster": booster}


def _refused(capsys, path, *match):
    line = assert_user_error(capsys, ["import", path, "-o", path.with_suffix(".out.json")], match[0])
    for m in match[1:]:
        assert m in line, line
    assert str(path) in line, line        # the line names the file
    assert not path.with_suffix(".out.json").exists()
    return line


# ------------------------------------------------------------------------------------------------ XGBoost
def _tree0(doc):
    return doc["learner"]["gradient_booster"]["model"]["trees"][0]


def _param(doc):
    return doc["learner"]["learner_model_param"]


XGB_CASES = {
    "num_feature 1e9": (lambda d: _param(d).update(num_feature="1e9"), "num_feature", "'1e9' is not an integer"),
    "num_feature 1000000000": (lambda d: _param(d).update(num_feature="1000000000"), "num_feature",
                               "1000000000 is out of range"),
    "num_feature -1": (lambda d: _param(d).update(num_feature="-1"), "num_feature", "-1 is out of range"),
    "num_feature 0": (lambda d: _param(d).update(num_feature="0"), "num_feature", "0 is out of range"),
    "num_class 1e9": (lambda d: _param(d).update(num_class="1000000000"), "num_class", "out of range"),
    "num_class 70000": (lambda d: _param(d).update(num_class="70000"), "num_class", "70000 is out of range"),
    "base_score 1e400": (lambda d: _param(d).update(base_score="[1e400]"), "base_score", "not finite"),
    "unequal node arrays": (lambda d: _tree0(d)["split_conditions"].pop(), "split_conditions", "entries"),
    "a list for a string": (lambda d: d["learner"]["objective"].update(name=["binary:logistic"]),
                            "objective.name", "must be a string, got a list"),
    "a list for an object": (lambda d: d["learner"].update(learner_model_param=[]), "learner_model_param",
                             "must be an object, got a list"),
    "child 2.7": (lambda d: _tree0(d).update(left_children=[x + 0.7 if x > 0 else x
                                                           for x in _tree0(d)["left_children"]]),
                  "left_children[0]", "is not an integer"),
    "child 1.2": (lambda d: _tree0(d).update(right_children=[x - 0.8 if x > 0 else x
                                                            for x in _tree0(d)["right_children"]]),
                  "right_children[0]", "is not an integer"),
    "feature -1 named": (lambda d: _tree0(d)["split_indices"].__setitem__(0, -1), "split_indices[0]",
                         "feature index -1 is out of range"),
    "5000 trees": (lambda d: d["learner"]["gradient_booster"]["model"].update(
        trees=[_tree0(d)] * 5000, tree_info=[0] * 5000), "trees", "5000 entries, expected 1..4096"),
}


@pytest.mark.parametrize("case", list(XGB_CASES))
def test_xgboost_json_refused(src, capsys, case):
    """Each malformed field of the issue's round: one line naming the file, the field and the value
    (before: tracebacks, and 2.7/1.2 children truncated into a different model, exit 0)."""
    doc = copy.deepcopy(src["xgb"])
    change, field, problem = XGB_CASES[case]
    change(doc)
    path = src["dir"] / f"x_{case.replace(' ', '_')}.json"
    path.write_text(json.dumps(doc))
    _refused(capsys, path, field, problem)


def test_xgboost_json_depth_and_digits(src, capsys):
    """JSON nested 100,000 deep and a 5,000-digit number (before: RecursionError / ValueError tracebacks)."""
    d = src["dir"]
    deep = d / "deep.json"
    deep.write_text('{"learner": ' + "[" * 100_000 + "]" * 100_000 + ', "version": [3]}')
    _refused(capsys, deep, "nested 100001 levels deep")
    digits = json.dumps(src["xgb"]).replace('"num_feature": "5"', '"num_feature": ' + "9" * 5000, 1)
    (d / "digits.json").write_text(digits)
    _refused(capsys, d / "digits.json", "an integer of 5000 digits")
    float_digits = json.dumps(src["xgb"]).replace('"tree_info": [0', '"tree_info": [0.' + "1" * 5000, 1)
    (d / "fdigits.json").write_text(float_digits)
    _refused(capsys, d / "fdigits.json", "a number of 5002 characters")


def test_xgboost_hostile_split_index_never_reaches_xgboost(src, tmp_path):
    """split_indices -3 ended the interpreter with SIGSEGV inside XGBoost's predictor: now refused before
    xgboost sees the model (JSON and UBJSON). A subprocess, so that the old crash fails the test instead
    of ending pytest."""
    from import_fuzz import ubj_encode

    doc = copy.deepcopy(src["xgb"])
    _tree0(doc)["split_indices"][0] = -3
    (tmp_path / "segv.json").write_text(json.dumps(doc))
    (tmp_path / "segv.ubj").write_bytes(ubj_encode(doc))
    for name in ("segv.json", "segv.ubj"):
        proc = subprocess.run([sys.executable, "-m", "treegen", "import", str(tmp_path / name), "-o",
                               str(tmp_path / "out.json")], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("treegen: error: "), proc.stderr[-2000:]
        assert "split_indices[0]: feature index -3 is out of range 0..4" in lines[0]


# ----------------------------------------------------------------------------------------------- LightGBM
def _lgb_set(text: str, key: str, value: str, tree: bool = True) -> str:
    """The model text with the first ``key=`` line (in the first tree, or the header) set to ``value``;
    ``tree_sizes`` recomputed so that LightGBM itself would read the file."""
    from import_fuzz import fix_tree_sizes

    lines = text.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("Tree=")) if tree else 0
    i = next(i for i in range(start, len(lines)) if lines[i].startswith(key + "="))
    lines[i] = f"{key}={value}"
    return fix_tree_sizes("\n".join(lines))


def _first_token(text: str, key: str, value: str) -> str:
    """The first tree's ``key`` line with its first value replaced by ``value``."""
    line = next(l for l in text.split("Tree=0", 1)[1].split("\n") if l.startswith(key + "="))
    return " ".join([value] + line.split("=", 1)[1].split()[1:])


LGB_CASES = {
    "max_feature_idx 1e9": ("max_feature_idx", "1000000000", False, "max_feature_idx", "out of range 0..65534"),
    "max_feature_idx 1e30": ("max_feature_idx", "1e30", False, "max_feature_idx", "'1e30' is not an integer"),
    "sigmoid:abc": ("objective", "binary sigmoid:abc", False, "objective", "sigmoid 'abc' is not a number"),
    "split_feature 2^70": ("split_feature", str(2 ** 70), True, "split_feature[0]", "of 22 digits is out of range"),
    "left_child 2^70": ("left_child", str(2 ** 70), True, "left_child[0]", "of 22 digits is out of range"),
    "decision_type 2^70": ("decision_type", str(2 ** 70), True, "decision_type[0]", "of 22 digits is out of range"),
    "decision_type 1026": ("decision_type", "1026", True, "decision_type[0]", "1026 is out of range 0..15"),
    "left_child 2.7": ("left_child", "2.7", True, "left_child[0]", "'2.7' is not an integer"),
}


@pytest.mark.parametrize("case", list(LGB_CASES))
def test_lightgbm_refused(src, capsys, case):
    """Before: a MemoryError after a minute (max_feature_idx 1e9), ValueError / OverflowError tracebacks,
    and decision_type 2^70 imported silently (exit 0)."""
    key, value, tree, field, problem = LGB_CASES[case]
    text = src["lgb"]
    if tree:
        value = _first_token(text, key, value)
    path = src["dir"] / f"l_{case.replace(' ', '_').replace(':', '_').replace('^', '')}.txt"
    path.write_text(_lgb_set(text, key, value, tree))
    _refused(capsys, path, field, problem)


def test_lightgbm_trees_counted_while_reading(src, capsys):
    """5,000 trees are refused while the text is read (before: 100,000 trees took 861 s, refused only when
    the model was written)."""
    text = src["lgb"]
    head = text.split("Tree=0")[0].replace("tree_sizes=", "old_tree_sizes=")
    one = "Tree={}\nnum_leaves=1\nnum_cat=0\nleaf_value=0.5\nshrinkage=1\n\n\n"
    body = "".join(one.format(i) for i in range(5000))
    path = src["dir"] / "l_5000.txt"
    path.write_text(head + body + "end of trees\n")
    _refused(capsys, path, "more than 4096 trees")


# --------------------------------------------------------------------------------------------------- ONNX
def _onnx_with(src, change):
    m = onnx.load_model_from_string(src["onnx"])
    node = next(n for n in m.graph.node if n.op_type == "TreeEnsembleClassifier")
    change(node)
    return m.SerializeToString()


def _attr(node, name):
    return next(a for a in node.attribute if a.name == name)


def _set_ints(node, name, fn):
    a = _attr(node, name)
    vals = fn(list(a.ints))
    del a.ints[:]
    a.ints.extend(vals)


def _set_floats(node, name, fn):
    a = _attr(node, name)
    vals = fn(list(a.floats))
    del a.floats[:]
    a.floats.extend(vals)


ONNX_CASES = {
    "nodes_modes short": (lambda n: _attr(n, "nodes_modes").strings.pop(), "nodes_modes", "entries"),
    "class_weights short": (lambda n: _set_floats(n, "class_weights", lambda v: v[:-1]), "class_weights",
                            "entries"),
    "no nodes_featureids": (lambda n: n.attribute.remove(_attr(n, "nodes_featureids")), "nodes_featureids",
                            "missing"),
    "NaN threshold": (lambda n: _set_floats(n, "nodes_values", lambda v: [float("nan")] + v[1:]),
                      "nodes_values[0]", "not finite"),
    "feature id 1e9": (lambda n: _set_ints(n, "nodes_featureids", lambda v: [10 ** 9] + v[1:]),
                       "nodes_featureids[0]", "1000000000 is out of range 0..4"),
    "over-long nodes_truenodeids": (lambda n: _set_ints(n, "nodes_truenodeids", lambda v: v + [1]),
                                    "nodes_truenodeids", "entries"),
    # found by the 30-minute fuzz run: two weights on one leaf for one output (onnxruntime sums them in
    # its own float32 order: 35 of 200 values differed)
    "two weights on a leaf": (lambda n: [_set_ints(n, k, lambda v: v + v[:1]) for k in
                                         ("class_treeids", "class_nodeids", "class_ids")]
                              and _set_floats(n, "class_weights", lambda v: v + v[:1]),
                              "class_nodeids", "a leaf has two weights for one output"),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_onnx_refused(src, capsys, case):
    """Before: KeyError / IndexError tracebacks, and an over-long nodes_truenodeids imported (onnxruntime
    refuses it)."""
    change, field, problem = ONNX_CASES[case]
    path = src["dir"] / f"o_{case.replace(' ', '_')}.onnx"
    path.write_bytes(_onnx_with(src, change))
    _refused(capsys, path, field, problem)


# ------------------------------------------------------------------------------------------------ pickles
class _Raises:
    def __reduce__(self):
        return (int, ("not a number",))


def test_trusted_pickles_that_fail(src, capsys):
    """A trusted pickle whose code raises, a GradientBoosting with no trees (before: tracebacks)."""
    from sklearn.ensemble import GradientBoostingRegressor

    d = src["dir"]
    (d / "raises.pkl").write_bytes(pickle.dumps(_Raises(), protocol=4))
    line = assert_user_error(capsys, ["import", d / "raises.pkl", "--trust-pickle", "-o", d / "r.json"],
                             "cannot unpickle (ValueError")
    assert "raises.pkl" in line
    gb = GradientBoostingRegressor(n_estimators=2, max_depth=2, random_state=0).fit(src["X"], src["y"] * 1.0)
    gb.estimators_ = gb.estimators_[:0]
    joblib.dump(gb, d / "empty.joblib")
    assert_user_error(capsys, ["import", d / "empty.joblib", "--trust-pickle", "-o", d / "e.json"],
                      "estimators_: holds no trees")


def test_forest_leaf_without_class_weight(src, capsys):
    """A forest leaf whose class fractions are all 0 (found by the 30-minute fuzz run): scikit-learn adds
    nothing for that tree, treegen's soft vote would count its leaf class: imported as a different model,
    exit 0. Now refused."""
    from sklearn.ensemble import RandomForestClassifier

    d = src["dir"]
    Xi = np.rint(src["X"] * 1000 + 16000)
    rf = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(Xi, src["y"])
    state = rf.estimators_[0].tree_.__getstate__()
    values = state["values"].copy()
    leaf = int(np.flatnonzero(state["nodes"]["left_child"] == -1)[0])
    values[leaf] = 0.0
    rf.estimators_[0].tree_.__setstate__(dict(state, values=values))
    joblib.dump(rf, d / "zero_leaf.joblib")
    assert_user_error(capsys, ["import", d / "zero_leaf.joblib", "--trust-pickle", "-o", d / "z.json"],
                      f"estimators_[0].tree_.value[{leaf}]: leaf class weights [0.0, 0.0]")


# ------------------------------------------------------------------------------------------------ streams
@pytest.mark.parametrize("name", ["x.json", "x.ubj", "l.txt", "o.onnx"])
def test_import_from_a_pipe(src, tmp_path, name):
    """``cat model | treegen import /dev/stdin`` imports the same model as the file (before: LightGBM and
    XGBoost refused, the first 4 KiB being read to detect the format and the stream read again)."""
    raw = (src["dir"] / name).read_bytes()
    proc = subprocess.run([sys.executable, "-m", "treegen", "import", "/dev/stdin", "-o", str(tmp_path / "p.json")],
                          input=raw, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    proc = subprocess.run([sys.executable, "-m", "treegen", "import", str(src["dir"] / name), "-o",
                           str(tmp_path / "f.json")], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert load(tmp_path / "p.json").to_dict()["trees"] == load(tmp_path / "f.json").to_dict()["trees"]


def test_endless_stream_cut_at_the_bound(tmp_path, monkeypatch, capsys):
    """An endless pipe is cut at the import bound with one line (before: read until a MemoryError, the
    1 GiB bound being taken from st_size, 0 for a pipe). The bound is lowered to 1 MiB for the test; the
    writer stops after 64 MiB so that a reader without a bound ends too."""
    from treegen.importers import reader

    monkeypatch.setattr(reader, "MAX_IMPORT_BYTES", 1 << 20)
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)

    def write():
        try:
            with open(fifo, "wb") as fh:
                chunk = b"tree\nversion=v4\n" + b"x" * 65519
                for _ in range(1024):
                    fh.write(chunk)
        except BrokenPipeError:
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    line = assert_user_error(capsys, ["import", fifo, "-o", tmp_path / "m.json"], "more than 1.0 MiB")
    assert str(fifo) in line
    t.join(timeout=60)


# ------------------------------------------------------------------------------------- regression figures
def test_eval_regression_on_huge_labels(tmp_path, capsys):
    """``eval`` with labels of 1e308 / 1e200: the true RMSE, finite (before: RMSE inf, R² nan, exit 0)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    header = "a,b,c,y"
    np.savetxt(tmp_path / "train.csv", np.column_stack([X, X[:, 0]]), delimiter=",", header=header,
               comments="", fmt="%.6g")
    code, out, err = run_cli(capsys, ["fit", tmp_path / "train.csv", "--task", "regression", "--algo", "cart",
                                      "-o", tmp_path / "m.json"])
    assert code == 0, err
    model = load(tmp_path / "m.json")
    for big in (1e308, 1e200):
        yb = np.where(X[:, 0] > 0, big, -big)
        np.savetxt(tmp_path / "big.csv", np.column_stack([X, yb]), delimiter=",", header=header, comments="",
                   fmt="%.6g")
        code, out, err = run_cli(capsys, ["eval", tmp_path / "m.json", tmp_path / "big.csv", "--json", "-"])
        assert code == 0, err
        rep = json.loads(out)
        pred = model.predict_value(np.loadtxt(tmp_path / "big.csv", delimiter=",", skiprows=1)[:, :3])
        # the exact figure, from Python's fractions (scaled by the label magnitude before the square root)
        yt = np.loadtxt(tmp_path / "big.csv", delimiter=",", skiprows=1)[:, 3]
        ss = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(yt, pred))
        rmse = big * math.sqrt(float(ss / len(yt) / Fraction(big) ** 2))
        assert np.isfinite(rep["rmse"]) and np.isfinite(rep["r2"]), rep
        assert rep["rmse"] == pytest.approx(rmse, rel=1e-12)


def test_compare_regression_huge_labels_one_line(tmp_path):
    """``compare --task regression`` on labels of 1e200: one line, no numpy warnings (before: 15 lines
    of RuntimeWarnings with source paths, then the error)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    np.savetxt(tmp_path / "big.csv", np.column_stack([X, X[:, 0] * 1e200]), delimiter=",", header="a,b,c,y",
               comments="", fmt="%.6g")
    proc = subprocess.run([sys.executable, "-m", "treegen", "compare", str(tmp_path / "big.csv"), "--task",
                           "regression", "--algos", "cart", "--folds", "2", "--json", str(tmp_path / "c.json")],
                          capture_output=True, text=True, timeout=600)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("treegen: error: "), proc.stderr[-3000:]
    assert "beyond +-1e+150" in lines[0]
