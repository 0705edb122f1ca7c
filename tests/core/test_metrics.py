"""treegen.core.metrics: accuracy, confusion matrix, per-class scores, Student-t confidence intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from treegen.core.errors import TreegenError
from treegen.core.metrics import (accuracy, classification_report, confusion_matrix, mean_ci95, per_class_scores,
                                  summary, t_cdf, t_quantile)


def test_accuracy():
    assert accuracy([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
    assert accuracy(np.array(["a", "b"], dtype=object), np.array(["a", "b"], dtype=object)) == 1.0
    with pytest.raises(TreegenError):
        accuracy([1, 2], [1])
    with pytest.raises(TreegenError):
        accuracy([], [])


def test_confusion_matrix_rows_true_columns_predicted():
    y_true = [1, 1, 2, 3, 3, 3]
    y_pred = [1, 2, 2, 3, 1, 3]
    cm, labels = confusion_matrix(y_true, y_pred)
    assert labels == [1, 2, 3]
    assert cm.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    assert cm.sum() == len(y_true)


def test_confusion_matrix_explicit_labels_and_unknown_label():
    cm, labels = confusion_matrix(["b", "a"], ["b", "b"], labels=["c", "b", "a"])
    assert labels == ["c", "b", "a"]
    assert cm.tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 0]]
    with pytest.raises(TreegenError, match="not in the label list"):
        confusion_matrix(["x"], ["a"], labels=["a"])
    with pytest.raises(TreegenError):
        confusion_matrix([1, 2], [1])


def test_per_class_zero_division_gives_zero():
    # class 2 is never predicted and class 3 never present nor predicted
    cm, _ = confusion_matrix([1, 1, 2], [1, 1, 1], labels=[1, 2, 3])
    s = per_class_scores(cm)
    assert s["precision"].tolist() == pytest.approx([2 / 3, 0.0, 0.0])
    assert s["recall"].tolist() == [1.0, 0.0, 0.0]
    assert s["f1"].tolist() == pytest.approx([0.8, 0.0, 0.0])
    assert s["support"].tolist() == [2, 1, 0]
    assert not np.any(np.isnan(s["f1"]))
    with pytest.raises(TreegenError):
        per_class_scores(np.zeros((2, 3)))


def test_classification_report_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 4, 200)
    y_pred = np.where(rng.random(200) < 0.7, y_true, rng.integers(0, 4, 200))
    rep = classification_report(y_true, y_pred)
    p, r, f, s = metrics.precision_recall_fscore_support(y_true, y_pred, zero_division=0)
    assert [c["precision"] for c in rep["per_class"]] == pytest.approx(p.tolist())
    assert [c["recall"] for c in rep["per_class"]] == pytest.approx(r.tolist())
    assert [c["f1"] for c in rep["per_class"]] == pytest.approx(f.tolist())
    assert [c["support"] for c in rep["per_class"]] == s.tolist()
    assert rep["accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred))
    assert rep["confusion_matrix"] == metrics.confusion_matrix(y_true, y_pred).tolist()
    assert rep["macro_avg"]["f1"] == pytest.approx(metrics.f1_score(y_true, y_pred, average="macro"))
    assert rep["weighted_avg"]["f1"] == pytest.approx(metrics.f1_score(y_true, y_pred, average="weighted"))


# two-sided 95 % critical values from printed tables
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 19: 2.093, 29: 2.045,
        30: 2.042, 60: 2.000, 120: 1.980}


@pytest.mark.parametrize("df,expected", sorted(T975.items()))
def test_t_quantile_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)


def test_t_quantile_limits_and_symmetry():
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7))
    assert t_cdf(t_quantile(0.9, 4), 4) == pytest.approx(0.9, abs=1e-12)
    with pytest.raises(TreegenError):
        t_quantile(1.0, 3)
    with pytest.raises(TreegenError):
        t_cdf(1.0, 0)


def test_t_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4, 6, 14, 49, 99, 499):
        assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-10)
        for t in (-4.0, -0.3, 0.0, 1.1, 25.0):
            assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-12)


def test_mean_ci95():
    mean, ci = mean_ci95([1.0, 2.0, 3.0, 4.0])
    s = np.std([1, 2, 3, 4], ddof=1)
    assert mean == 2.5
    assert ci == pytest.approx(3.182446305284 * s / 2.0, rel=1e-9)
    assert mean_ci95([7.5]) == (7.5, 0.0)
    assert mean_ci95(np.array([3.0, 3.0, 3.0])) == (3.0, 0.0)
    assert summary([10, 20]) == {"mean": 15.0, "ci95": pytest.approx(12.706204736 * math.sqrt(50) / math.sqrt(2))}
    with pytest.raises(TreegenError):
        mean_ci95([])
    with pytest.raises(TreegenError):
        mean_ci95([1.0, float("nan")])
