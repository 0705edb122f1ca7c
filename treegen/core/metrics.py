"""Classification metrics and summary statistics (numpy only, no scipy).

* :func:`accuracy` — fraction of equal labels.
* :func:`confusion_matrix` — rows = true class, columns = predicted class.
* :func:`per_class_scores` — precision, recall, F1 and support per class from a confusion matrix;
  a zero denominator gives 0.0 (never NaN, never a warning).
* :func:`classification_report` — all of the above as one JSON-ready dict.
* :func:`regression_scores` — RMSE, MAE and R² of predicted values (scikit-learn's definitions).
* :func:`mean_ci95` — mean and half-width of the 95 % confidence interval of the mean,
  ``t_{0.975, n-1} * s / sqrt(n)`` (Student t, sample standard deviation ``s``); ``n == 1`` -> 0.
* :func:`t_quantile` — exact Student t quantile (regularised incomplete beta + bisection).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from treegen.core.errors import TreegenError


# ---------------------------------------------------------------------- classification metrics
def accuracy(y_true, y_pred) -> float:
    """Fraction (0..1) of positions where ``y_pred`` equals ``y_true``."""
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1:
        raise TreegenError(f"accuracy: label arrays of shapes {y_true.shape} and {y_pred.shape} do not match")
    if y_true.shape[0] == 0:
        raise TreegenError("accuracy: no labels")
    return float(np.mean(y_true == y_pred))


def confusion_matrix(y_true, y_pred, labels: Sequence | None = None) -> tuple[np.ndarray, list]:
    """Confusion matrix ``cm[i, j]`` = number of rows of true class ``labels[i]`` predicted ``labels[j]``.

    ``labels`` defaults to the sorted union of the labels present in both arrays. A label not in
    ``labels`` raises :class:`TreegenError`. Returns ``(cm, labels)``.
    """
    y_true = list(np.asarray(y_true, dtype=object).tolist())
    y_pred = list(np.asarray(y_pred, dtype=object).tolist())
    if len(y_true) != len(y_pred):
        raise TreegenError(f"confusion matrix: {len(y_true)} true labels but {len(y_pred)} predictions")
    if labels is None:
        labels = sorted(set(y_true) | set(y_pred), key=_label_key)
    labels = list(labels)
    index = {lab: i for i, lab in enumerate(labels)}
    if len(index) != len(labels):
        raise TreegenError("confusion matrix: duplicate labels")
    cm = np.zeros((len(labels), len(labels)), dtype=np.int64)
    try:
        rows = np.fromiter((index[v] for v in y_true), dtype=np.int64, count=len(y_true))
        cols = np.fromiter((index[v] for v in y_pred), dtype=np.int64, count=len(y_pred))
    except KeyError as exc:
        raise TreegenError(f"confusion matrix: label {exc.args[0]!r} is not in the label list") from None
    np.add.at(cm, (rows, cols), 1)
    return cm, labels


def _label_key(v):
    # ints before strings, each in natural order (labels of one dataset are all ints or all strings)
    return (isinstance(v, str), v if isinstance(v, str) else float(v))


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den != 0)
    return out


def per_class_scores(cm: np.ndarray) -> dict[str, np.ndarray]:
    """Per-class ``precision``, ``recall``, ``f1`` (float arrays) and ``support`` (int array).

    Zero division (a class never predicted, never present, or precision + recall == 0) gives 0.0.
    """
    cm = np.asarray(cm)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise TreegenError(f"confusion matrix must be square, got shape {cm.shape}")
    tp = np.diag(cm).astype(np.float64)
    support = cm.sum(axis=1)
    predicted = cm.sum(axis=0)
    precision = _safe_div(tp, predicted)
    recall = _safe_div(tp, support)
    f1 = _safe_div(2 * precision * recall, precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1, "support": support.astype(np.int64)}


def classification_report(y_true, y_pred, labels: Sequence | None = None) -> dict:
    """Accuracy (fraction), confusion matrix and per-class / macro / weighted scores, JSON-ready."""
    cm, labels = confusion_matrix(y_true, y_pred, labels)
    scores = per_class_scores(cm)
    support = scores["support"]
    total = int(support.sum())
    per_class = [
        {"class": labels[i], "precision": float(scores["precision"][i]), "recall": float(scores["recall"][i]),
         "f1": float(scores["f1"][i]), "support": int(support[i])}
        for i in range(len(labels))
    ]
    macro = {k: float(np.mean(scores[k])) if len(labels) else 0.0 for k in ("precision", "recall", "f1")}
    weighted = {k: float(np.sum(scores[k] * support) / total) if total else 0.0
                for k in ("precision", "recall", "f1")}
    return {
        "accuracy": float(np.trace(cm) / total) if total else 0.0,
        "n": total,
        "correct": int(np.trace(cm)),
        "labels": list(labels),
        "confusion_matrix": cm.tolist(),
        "per_class": per_class,
        "macro_avg": macro,
        "weighted_avg": weighted,
    }


# ---------------------------------------------------------------------- Student t
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Cumulative distribution function of Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise TreegenError("t distribution needs df > 0")
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Quantile ``t_{p, df}`` of Student's t (``0 < p < 1``), to ~1e-12 relative precision."""
    if not 0.0 < p < 1.0:
        raise TreegenError("t quantile needs 0 < p < 1")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


def mean_ci95(values: Iterable[float]) -> tuple[float, float]:
    """``(mean, ci95)`` of a sample; ``ci95 = t_{0.975, n-1} * s / sqrt(n)``, 0 for ``n == 1``."""
    x = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64).ravel()
    n = x.shape[0]
    if n == 0:
        raise TreegenError("mean of an empty sample")
    if not np.all(np.isfinite(x)):
        raise TreegenError("sample contains NaN or infinite values")
    mean = float(np.mean(x))
    if n == 1:
        return mean, 0.0
    s = float(np.std(x, ddof=1))
    return mean, float(t_quantile(0.975, n - 1) * s / math.sqrt(n))


def summary(values: Iterable[float]) -> dict:
    """``{"mean": ..., "ci95": ...}`` of a sample (see :func:`mean_ci95`)."""
    mean, ci = mean_ci95(values)
    return {"mean": mean, "ci95": ci}


# ---------------------------------------------------------------------- regression metrics
SQUARE_SAFE = 1e150     # values up to this magnitude: sums of squared errors stay finite for 2**60 rows
def regression_scores(y_true, y_pred) -> dict:
    """``{"rmse", "mae", "r2", "n"}`` of predicted values: root mean squared error, mean absolute error
    and the coefficient of determination ``1 - SS_res / SS_tot`` (scikit-learn's ``r2_score``: for
    constant true values 1.0 when every prediction is exact, else 0.0).

    Values up to the float64 maximum are scored without overflow: when a square could overflow
    (values beyond 1e150) every value is first divided by the largest magnitude ``s`` (errors then lie
    within 2) and the RMSE / MAE are multiplied back by ``s``; R² is a ratio and needs no scaling.
    A score beyond the float64 range (an RMSE above 1.8e308) is refused, never printed as ``inf``."""
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_true.shape != y_pred.shape or y_true.ndim != 1:
        raise TreegenError(f"regression scores: value arrays of shapes {y_true.shape} and {y_pred.shape} "
                           "do not match")
    if y_true.shape[0] == 0:
        raise TreegenError("regression scores: no values")
    if not (np.all(np.isfinite(y_true)) and np.all(np.isfinite(y_pred))):
        raise TreegenError("regression scores: a true or predicted value is NaN or infinite")
    n = y_true.shape[0]
    scale = float(max(np.max(np.abs(y_true)), np.max(np.abs(y_pred))))
    if scale <= SQUARE_SAFE:
        scale = 1.0
    t, p = y_true / scale, y_pred / scale
    err = t - p
    ss_res = float(np.sum(err * err))
    ss_tot = float(np.sum((t - np.mean(t)) ** 2))
    if ss_tot > 0:
        r2 = 1.0 - ss_res / ss_tot
    else:
        r2 = 1.0 if ss_res == 0 else 0.0
    with np.errstate(over="ignore"):
        rmse = float(np.float64(scale) * math.sqrt(ss_res / n))
        mae = float(np.float64(scale) * np.mean(np.abs(err)))
    if not (math.isfinite(rmse) and math.isfinite(mae)):
        raise TreegenError("regression scores: the errors are beyond the float64 range (RMSE above 1.8e308)")
    return {"rmse": rmse, "mae": mae, "r2": r2, "n": int(n)}


# ---------------------------------------------------------------------- agreement with the float model
#: the one definition of agreement, used by ``treegen export``, ``treegen hil`` and the docs
AGREEMENT_DEFINITION = ("the share of the data rows on which the exported code (or the device) gives the class "
                        "of the float model for the same raw row -- the source library's own prediction for an "
                        "imported model -- never the float model on the already-quantised row; regression: the "
                        "RMSE and largest |difference| of the values on the same terms")


def agreement(got, reference) -> float:
    """Classification agreement (:data:`AGREEMENT_DEFINITION`): the fraction 0..1 of rows whose class
    index ``got`` equals ``reference`` (the float model's / library's class of the same raw row)."""
    got = np.asarray(got, dtype=np.int64)
    reference = np.asarray(reference, dtype=np.int64)
    if got.shape != reference.shape or got.ndim != 1:
        raise TreegenError(f"agreement: class arrays of shapes {got.shape} and {reference.shape} do not match")
    if got.shape[0] == 0:
        raise TreegenError("agreement: no rows")
    return float(np.mean(got == reference))


def value_difference(got, reference) -> dict:
    """Regression agreement (:data:`AGREEMENT_DEFINITION`): ``{"rmse", "max_abs", "equal"}`` of the
    values ``got`` against ``reference`` (the float model's / library's values of the same raw rows);
    ``equal`` the fraction of rows with the same value."""
    got = np.asarray(got, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if got.shape != reference.shape or got.ndim != 1:
        raise TreegenError(f"value difference: arrays of shapes {got.shape} and {reference.shape} do not match")
    if got.shape[0] == 0:
        raise TreegenError("value difference: no rows")
    diff = got - reference
    return {"rmse": math.sqrt(float(np.mean(diff * diff))), "max_abs": float(np.max(np.abs(diff))),
            "equal": float(np.mean(got == reference))}


# ---------------------------------------------------------------------- ROC AUC
def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``, ties sharing their average rank."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], xs.size]
    avg = (starts + ends + 1) / 2.0            # mean of the 1-based ranks starts+1..ends
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def roc_auc_binary(positive, score) -> float:
    """Area under the ROC curve: the probability that a random positive row scores above a random
    negative one (ties count 1/2), by the Mann-Whitney rank sum. Needs both kinds of rows."""
    pos = np.asarray(positive, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    if pos.shape != s.shape or pos.ndim != 1:
        raise TreegenError(f"roc auc: {pos.shape} labels but {s.shape} scores")
    n_pos = int(pos.sum())
    n_neg = pos.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise TreegenError("roc auc needs positive and negative rows")
    r = _average_ranks(s)
    return float((r[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def roc_auc_ovr(y_true, proba) -> dict:
    """ROC AUC of class probabilities (``proba[:, k]`` = P(class index k); ``y_true`` = class indices).

    Two classes: the AUC of column 1 (scikit-learn's binary ``roc_auc_score(y, proba[:, 1])``).
    More classes: one-vs-rest AUC per class and their unweighted mean (scikit-learn's
    ``multi_class='ovr', average='macro'``); a class with no row or only rows (AUC undefined) is
    left out of the mean and listed as ``None``.
    Returns ``{"auc": float or None, "per_class": [float or None, ...]}``.
    """
    y = np.asarray(y_true, dtype=np.int64)
    P = np.asarray(proba, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != y.shape[0]:
        raise TreegenError(f"roc auc: probabilities of shape {P.shape} for {y.shape[0]} rows")
    k = P.shape[1]
    per_class = []
    for c in range(k):
        pos = y == c
        per_class.append(roc_auc_binary(pos, P[:, c]) if 0 < pos.sum() < y.size else None)
    if k == 2:
        return {"auc": per_class[1], "per_class": per_class}
    defined = [v for v in per_class if v is not None]
    return {"auc": float(np.mean(defined)) if defined else None, "per_class": per_class}


# ---------------------------------------------------------------------- a model on labelled rows
def evaluate(model, X, y) -> dict:
    """What ``treegen eval`` reports for a model on labelled rows (the Python counterpart of the command).

    Parameters
    ----------
    model : treegen.core.model.Model
    X : array-like (n_rows, n_features)
        Raw inputs, columns in the model's feature order.
    y : array-like (n_rows,)
        True labels (the model's class labels; unknown labels count as errors and get their own row
        of the confusion matrix).

    Returns
    -------
    dict
        ``accuracy`` (a fraction 0..1), ``correct``, ``n``, ``classes`` (the model's, then unknown
        labels), ``confusion_matrix`` (rows: true class), ``per_class``, ``macro_avg``,
        ``weighted_avg`` (precision, recall, F1 as fractions), ``roc_auc`` (one-vs-rest macro for more
        than two classes; None when the model has no class counts or the rows hold fewer than two of
        its classes), ``roc_auc_per_class``, ``predict_seconds``.
    """
    import time

    X = np.asarray(X, dtype=np.float64)
    if getattr(model, "is_regression", False):
        return evaluate_regression(model, X, y)
    y = np.asarray(y)
    t0 = time.perf_counter()
    pred = model.predict(X)
    predict_seconds = time.perf_counter() - t0
    known = set(model.classes)
    extra = sorted({v for v in y.tolist() if v not in known}, key=lambda v: (isinstance(v, str), str(v)))
    labels = list(model.classes) + extra
    rep = classification_report(y, pred, labels=labels)
    auc = None
    if all(t.has_class_counts for t in model.trees):
        index = {c: i for i, c in enumerate(model.classes)}
        yi = np.array([index.get(v, -1) for v in y.tolist()], dtype=np.int64)
        keep = yi >= 0
        if np.unique(yi[keep]).size >= 2:
            auc = roc_auc_ovr(yi[keep], model.predict_proba(X[keep]))
    return {
        "accuracy": rep["accuracy"], "correct": rep["correct"], "n": rep["n"], "classes": labels,
        "unknown_classes": extra, "confusion_matrix": rep["confusion_matrix"], "per_class": rep["per_class"],
        "macro_avg": rep["macro_avg"], "weighted_avg": rep["weighted_avg"],
        "roc_auc": None if auc is None else auc["auc"],
        "roc_auc_per_class": None if auc is None else auc["per_class"],
        "predict_seconds": predict_seconds,
    }


def evaluate_regression(model, X, y) -> dict:
    """What ``treegen eval`` reports for a regression model on rows with true values: ``rmse``,
    ``mae``, ``r2`` (:func:`regression_scores`), ``n``, ``predict_seconds``. ``y`` must be numbers."""
    import time

    try:
        y = np.asarray(np.asarray(y).tolist(), dtype=np.float64)
    except (TypeError, ValueError):
        raise TreegenError("a regression model is evaluated on numeric target values, got text labels") from None
    if not np.all(np.isfinite(y)):
        raise TreegenError("target values contain NaN or infinite values")
    t0 = time.perf_counter()
    pred = model.predict_value(np.asarray(X, dtype=np.float64))
    predict_seconds = time.perf_counter() - t0
    return {**regression_scores(y, pred), "predict_seconds": predict_seconds}
