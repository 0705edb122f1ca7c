"""Labels are compared by value (issue 24): ``1`` and ``1.0`` (and ``0``/``0.0``) in one column are
one class each, with the mapping shown; a column mixing numbers and other text is refused in one
line; text labels keep working."""

from __future__ import annotations

import warnings

import pytest

from conftest import assert_user_error, run_cli
from treegen.core.data import class_list, load_csv
from treegen.core.errors import DataError
from treegen.core.model import load


def _csv(tmp_path, labels, name="d.csv"):
    rows = [f"{i % 7},{(i * 3) % 5},{lab}" for i, lab in enumerate(labels)]
    path = tmp_path / name
    path.write_text("a,b,y\n" + "\n".join(rows) + "\n")
    return path


def test_numeric_labels_equal_by_value_are_one_class(tmp_path):
    path = _csv(tmp_path, ["1", "1.0", "0", "0.0", "+1", "1e0", "-0.0", "0"] * 3)
    with pytest.warns(UserWarning, match=r"numeric labels compared by value: '1.0' -> 1, '0.0' -> 0, "
                                         r"'\+1' -> 1, '1e0' -> 1, '-0.0' -> 0"):
        ds = load_csv(path)
    assert class_list(ds.labels) == [0, 1]
    assert all(type(v) is int for v in ds.labels)


def test_non_integral_numbers_are_numbers(tmp_path):
    path = _csv(tmp_path, ["2.5", "2.50", "10", "-1.25"] * 3)
    with pytest.warns(UserWarning, match=r"'2.50' -> 2.5"):
        ds = load_csv(path)
    assert class_list(ds.labels) == [-1.25, 2.5, 10]    # numeric order, not lexicographic


def test_canonical_labels_give_no_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert class_list(load_csv(_csv(tmp_path, ["0", "1", "2"] * 3)).labels) == [0, 1, 2]
        assert class_list(load_csv(_csv(tmp_path, ["no", "yes", "nan", "inf"] * 3)).labels) == \
            ["inf", "nan", "no", "yes"]                  # not numbers: NaN/inf labels are text


def test_fit_shows_the_mapping_and_makes_two_classes(tmp_path, capsys):
    path = _csv(tmp_path, ["1", "1.0", "0", "0.0"] * 10)
    code, _out, err = run_cli(capsys, ["fit", str(path), "--algo", "cart", "-q", "-o", str(tmp_path / "m.json")])
    assert code == 0, err
    assert "treegen: warning: " in err and "'1.0' -> 1, '0.0' -> 0" in err, err
    assert load(tmp_path / "m.json").classes == [0, 1]


def test_mixed_column_is_refused_in_one_line(tmp_path, capsys):
    path = _csv(tmp_path, ["1", "0", "yes", "1"] * 3)
    with pytest.raises(DataError, match=r"the label column mixes numbers and text \(line 2: '1', line 4: 'yes'\)"):
        load_csv(path)
    line = assert_user_error(capsys, ["fit", str(path), "--algo", "cart", "-o", str(tmp_path / "m.json")],
                             "mixes numbers and text")
    assert "d.csv" in line
    assert not (tmp_path / "m.json").exists()


def test_predict_and_eval_match_by_value(tmp_path, capsys):
    """A model fitted on ``0``/``1`` evaluates data labelled ``0.0``/``1.0`` (same classes, by value)."""
    train = _csv(tmp_path, ["0", "1"] * 20, "train.csv")
    test = _csv(tmp_path, ["0.0", "1.0"] * 20, "test.csv")
    code, _out, err = run_cli(capsys, ["fit", str(train), "--algo", "cart", "-q", "-o", str(tmp_path / "m.json")])
    assert code == 0, err
    code, out, err = run_cli(capsys, ["eval", str(tmp_path / "m.json"), str(test)])
    assert code == 0 and "is not one of the model's classes" not in err, err
