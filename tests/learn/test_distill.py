"""Distillation (issue #38): a tree learns from pseudo-samples labelled by a teacher
(treegen.learn.distill). Deterministic by seed, the same on both EFTI engines, the teacher trained only
on the rows the student is given (so never on a test fold), model-file teachers mapped to the
student's classes, bad teachers refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_user_error, load_shared, run_cli
from treegen import CARTClassifier, EFTIClassifier, save
from treegen.core.errors import TreegenError
from treegen.learn import distill
from treegen.learn.cv import cross_validate


@pytest.fixture(scope="module")
def irs():
    return load_shared("irs")


def test_munge_rows_are_seeded_on_the_grid_and_near_their_rows(irs):
    X, _ = irs
    Xn = X / 32768.0
    a, b = distill.munge(Xn, 2.0, seed=7), distill.munge(Xn, 2.0, seed=7)
    assert np.array_equal(a, b) and a.shape == (2 * len(X), X.shape[1])
    assert not np.array_equal(a, distill.munge(Xn, 2.0, seed=8))
    assert np.array_equal(a * 32768, np.rint(a * 32768)) and a.min() >= 0 and a.max() <= 32767 / 32768
    # each pseudo-sample keeps about half its row's attributes (swap probability 0.5)
    base = Xn[np.arange(len(a)) % len(X)]
    kept = np.mean(a == base)
    assert 0.4 < kept < 0.75, kept
    assert distill.munge(Xn, 0, seed=1).shape == (0, X.shape[1])


def test_nearest_other_is_never_the_row_itself():
    rng = np.random.default_rng(0)
    X = rng.random((300, 5))
    nn = distill.nearest_other(X)
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    assert np.array_equal(nn, d.argmin(1)) and np.all(nn != np.arange(300))


def test_same_seed_same_tree_on_both_engines(irs):
    X, y = irs
    kw = dict(max_iter=1500, teacher="rf", teacher_samples=1.0, random_state=3)
    a = EFTIClassifier(engine="python", **kw).fit(X, y)
    b = EFTIClassifier(engine="native", **kw).fit(X, y)
    assert a.model_.hash() == b.model_.hash()
    assert a.fit_info_["teacher"] == "rf" and a.fit_info_["teacher_samples"] == len(X)
    c = EFTIClassifier(engine="native", **kw).fit(X, y)
    assert c.model_.hash() == b.model_.hash()


def test_the_teacher_sees_only_the_rows_given_to_fit(irs, monkeypatch):
    """In cross-validation the student's fit gets the training fold only; so must its teacher."""
    seen = []
    real = distill.forest_votes

    def spy(Xn, y, n_classes, rows, **k):
        seen.append(np.asarray(Xn).copy())
        return real(Xn, y, n_classes, rows, **k)

    monkeypatch.setattr(distill, "forest_votes", spy)
    X, y = irs
    res = cross_validate(X, y, "cart", {"teacher": "rf", "teacher_samples": 0.5, "max_depth": 3}, folds=3,
                         repeats=1, seed=1, jobs=1)
    assert len(seen) == 3
    full = {tuple(r) for r in (X / 32768.0)}
    for rows, fold in zip(seen, res["folds"]):
        assert len(rows) == fold["n_train"] < len(X)
        assert {tuple(r) for r in rows} <= full


def test_the_rf_teacher_is_the_rf_estimator(irs):
    """forest_votes builds RFClassifier's forest tree by tree: the same votes as the estimator's predict."""
    from treegen import RFClassifier

    X, y = irs
    Xn = X / 32768.0
    rows = distill.munge(Xn, 1.0, seed=4)
    rf = RFClassifier(n_trees=15, random_state=9, scaling="q15").fit(X, y)
    got = distill.forest_votes(Xn, np.searchsorted(rf.classes_, y),
                               3, rows, seed=9, n_trees=15)
    assert np.array_equal(got, rf.model_.predict_index_normalised(rows))


def test_a_model_file_teaches_in_its_own_labels(irs, tmp_path):
    X, y = irs
    teacher = EFTIClassifier(max_iter=2000, random_state=1).fit(X, y).model_
    student = CARTClassifier(max_depth=4, teacher=teacher, teacher_samples=3, random_state=2).fit(X, y)
    assert student.fit_info_["teacher"] == f"model {teacher.hash()[:16]}"
    path = tmp_path / "t.json"
    save(teacher, path)
    again = CARTClassifier(max_depth=4, teacher=str(path), teacher_samples=3, random_state=2).fit(X, y)
    assert again.model_.hash() == student.model_.hash()
    with pytest.raises(TreegenError, match="the teacher model has 4 features, the data 3"):
        CARTClassifier(teacher=teacher, random_state=1).fit(X[:, :3], y)
    with pytest.raises(TreegenError, match="teacher_samples must be a number in 0..20"):
        CARTClassifier(teacher="rf", teacher_samples=-1).fit(X, y)
    with pytest.raises(TreegenError, match="teacher must be one of rf"):
        CARTClassifier(teacher=42).fit(X, y)


def test_cli_fit_with_a_teacher(irs, tmp_path, capsys):
    X, y = irs
    data = tmp_path / "irs.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", fmt="%d", header="a,b,c,d,class", comments="")
    code, out, err = run_cli(capsys, ["fit", data, "--algo", "efti", "--max-iter", "1000", "--teacher", "rf",
                                      "--teacher-samples", "1", "--seed", "1", "-o", tmp_path / "d.json"])
    assert code == 0, err
    assert "teacher=rf" in out
    assert_user_error(capsys, ["fit", data, "--algo", "efti", "--teacher", tmp_path / "none.json",
                               "-o", tmp_path / "x.json"], "none.json")
    assert_user_error(capsys, ["fit", data, "--algo", "efti", "--teacher", "rf", "--teacher-samples", "50",
                               "-o", tmp_path / "x.json"], "teacher_samples must be a number in 0..20")


def test_the_teacher_forest_is_reused_only_for_the_same_inputs(irs):
    """teacher_forest keeps the last forests: the same rows, labels, seed and size give the kept trees; a
    changed value, label, seed or size trains the forest those inputs make (as with an empty cache)."""
    X, y = irs
    Xn = X / 32768.0
    yi = np.unique(y, return_inverse=True)[1].astype(np.int64)
    distill._forests.clear()
    kept = distill.teacher_forest(Xn, yi, 3, seed=1, n_trees=5)
    assert distill.teacher_forest(Xn.copy(), yi.copy(), 3, seed=1, n_trees=5) is kept
    Xc, yc = Xn.copy(), yi.copy()
    Xc[7] = 1.0 - Xc[7]
    yc[3] = (yc[3] + 1) % 3
    for args, kw in (((Xc, yi), {"seed": 1, "n_trees": 5}), ((Xn, yc), {"seed": 1, "n_trees": 5}),
                     ((Xn, yi), {"seed": 2, "n_trees": 5}), ((Xn, yi), {"seed": 1, "n_trees": 6})):
        distill._forests.clear()
        assert distill.teacher_forest(Xn, yi, 3, seed=1, n_trees=5) is not kept        # trained again: equal
        kept = distill.teacher_forest(Xn, yi, 3, seed=1, n_trees=5)
        got = distill.teacher_forest(*args, 3, **kw)                                    # with kept in the cache
        distill._forests.clear()
        fresh = distill.teacher_forest(*args, 3, **kw)
        assert got is not kept and _arrays(got) == _arrays(fresh) and _arrays(got) != _arrays(kept)


def _arrays(trees) -> list:
    import dataclasses

    return [tuple(np.asarray(getattr(t, f.name)).tobytes() for f in dataclasses.fields(t)) for t in trees]
