"""Statistical comparison of classifiers over several datasets (Demšar, JMLR 7, 2006).

One score per (dataset, method) — e.g. the mean cross-validated accuracy — is the unit of every
test here; the datasets are the independent samples.

* :func:`wilcoxon` — Wilcoxon signed-rank test of two methods (``scipy.stats.wilcoxon``; zero
  differences split between the two rank sums, as in Demšar; differences equal to 1e-9 count as
  ties, so ``0.768 - 0.763`` and ``0.936 - 0.931`` share a rank).
* :func:`average_ranks` — rank of each method on each dataset (1 = best, ties share the mean rank)
  and their averages.
* :func:`friedman` — Friedman's chi-square over the average ranks (no tie correction, the formula of
  Demšar and of the EFTI/VRM papers), the Iman-Davenport F statistic with its p-value, and two
  post-hoc procedures: Nemenyi's critical difference (all pairs) and Holm's step-down test of every
  method against the best-ranked one (the control).

Distributions (chi-square, F, normal, studentized range) come from ``scipy.stats``.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Sequence

import numpy as np

from treegen.core.errors import TreegenError

# scipy is in the compare extra: `treegen compare` says so in one line, before any work. scipy.stats
# itself (2-3 s of CPU to import) loads on the first test computed: tune, cv and Dask workers import
# treegen.learn.compare and never compute one.
if importlib.util.find_spec("scipy") is None:
    raise TreegenError("scipy is not installed; treegen compare (its statistical tests) needs the compare extra: "
                       "pip install 'treegen[compare]'")


def _st():
    """``scipy.stats``, imported on first use."""
    from scipy import stats

    return stats

#: differences / scores closer than this are ties (rounded to 9 decimals before ranking)
TIE_DECIMALS = 9


def _scores(scores, what: str) -> np.ndarray:
    try:
        a = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise TreegenError(f"{what}: scores must be numbers") from None
    if a.ndim != 2:
        raise TreegenError(f"{what}: scores must be a (datasets x methods) table, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise TreegenError(f"{what}: scores contain NaN or infinite values")
    return a


def wilcoxon(a: Sequence[float], b: Sequence[float], *, higher_is_better: bool = True) -> dict:
    """Wilcoxon signed-rank test of paired scores ``a`` and ``b`` (one pair per dataset).

    Returns ``{"n", "wins", "ties", "losses", "r_plus", "r_minus", "statistic", "p_value"}``:
    wins/losses count datasets where ``a`` is better/worse; ``r_plus``/``r_minus`` are the rank sums
    of the differences in favour of ``a``/``b`` (zero differences split evenly between them);
    ``statistic = min(r_plus, r_minus)`` and ``p_value`` the two-sided p-value (exact for small
    samples without ties or zeros, else the normal approximation). All differences zero: p = 1.
    """
    x = _scores(np.column_stack([np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)]),
                "Wilcoxon test")
    n = x.shape[0]
    if n < 2:
        raise TreegenError(f"Wilcoxon test needs at least 2 paired scores, got {n}")
    d = np.round(x[:, 0] - x[:, 1], TIE_DECIMALS)
    if not higher_is_better:
        d = -d
    wins, losses = int(np.sum(d > 0)), int(np.sum(d < 0))
    ranks = _st().rankdata(np.abs(d))
    zero_half = 0.5 * float(ranks[d == 0].sum())
    r_plus = float(ranks[d > 0].sum()) + zero_half
    r_minus = float(ranks[d < 0].sum()) + zero_half
    if wins == 0 and losses == 0:
        p = 1.0
    else:
        p = float(_st().wilcoxon(d, zero_method="zsplit", alternative="two-sided").pvalue)
    return {"n": n, "wins": wins, "ties": n - wins - losses, "losses": losses, "r_plus": r_plus,
            "r_minus": r_minus, "statistic": min(r_plus, r_minus), "p_value": p}


def rank_table(scores, *, higher_is_better: bool = True) -> np.ndarray:
    """Rank of every method (column) on every dataset (row): 1 = best, ties get the mean rank."""
    x = np.round(_scores(scores, "ranking"), TIE_DECIMALS)
    return np.vstack([_st().rankdata(-row if higher_is_better else row) for row in x]) if x.shape[0] else x


def average_ranks(scores, *, higher_is_better: bool = True) -> np.ndarray:
    """Average rank of each method over the datasets (see :func:`rank_table`)."""
    x = _scores(scores, "ranking")
    if x.shape[0] == 0:
        raise TreegenError("ranking needs at least one dataset")
    return rank_table(x, higher_is_better=higher_is_better).mean(axis=0)


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """``(q_alpha, CD)``: Nemenyi's critical difference of average ranks for ``k`` methods on ``n`` datasets.

    ``q_alpha`` is the studentized range quantile (k groups, infinite df) divided by sqrt(2)
    (Demšar's table: 2.343 for k = 3, 2.569 for k = 4 at alpha 0.05); ``CD = q_alpha sqrt(k(k+1)/(6n))``.
    """
    q = float(_st().studentized_range.ppf(1.0 - alpha, k, np.inf)) / math.sqrt(2.0)
    return q, q * math.sqrt(k * (k + 1) / (6.0 * n))


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[dict]:
    """Holm's step-down procedure: for the i-th smallest p-value (i = 0, 1, ...) the threshold is
    ``alpha / (m - i)``; hypotheses are rejected until the first p-value above its threshold.

    Returns, in the input order, ``{"p_value", "p_adjusted", "threshold", "reject"}``
    (``p_adjusted``: Holm's adjusted p-value, monotone, at most 1).
    """
    p = np.asarray(p_values, dtype=np.float64)
    m = p.shape[0]
    order = np.argsort(p, kind="stable")
    out: list[dict] = [{} for _ in range(m)]
    rejecting, running = True, 0.0
    for i, j in enumerate(order):
        threshold = alpha / (m - i)
        rejecting = rejecting and p[j] <= threshold
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = {"p_value": float(p[j]), "p_adjusted": running, "threshold": threshold, "reject": bool(rejecting)}
    return out


def friedman(scores, names: Sequence[str] | None = None, *, higher_is_better: bool = True,
             alpha: float = 0.05) -> dict:
    """Friedman test with the Iman-Davenport correction and post-hoc tests.

    ``scores``: a (datasets x methods) table, at least 2 datasets and 2 methods. Returns::

        {"n_datasets": N, "k": k, "names": [...], "average_ranks": [...],
         "chi2": chi2_F, "chi2_p_value": p, "iman_davenport": F_F, "df": [k-1, (k-1)(N-1)], "p_value": p_F,
         "alpha": alpha, "nemenyi": {"q_alpha", "cd", "pairs": [{"a", "b", "rank_diff", "significant"}]},
         "holm": {"control": name, "tests": [{"method", "z", "p_value", "p_adjusted", "threshold", "reject"}]}}

    ``chi2_F = 12N/(k(k+1)) (sum R_j^2 - k(k+1)^2/4)``; ``F_F = (N-1) chi2_F / (N(k-1) - chi2_F)``,
    F-distributed with ``(k-1, (k-1)(N-1))`` degrees of freedom (p = 0 when every dataset ranks the
    methods the same way, F_F infinite). Holm: ``z = (R_i - R_control) / sqrt(k(k+1)/(6N))``,
    two-sided normal p-values.
    """
    x = _scores(scores, "Friedman test")
    n, k = x.shape
    if n < 2 or k < 2:
        raise TreegenError(f"Friedman test needs at least 2 datasets and 2 methods, got {n} x {k}")
    ranks = average_ranks(x, higher_is_better=higher_is_better)
    return friedman_from_ranks(ranks, n, names, alpha=alpha)


def friedman_from_ranks(average_ranks_, n: int, names: Sequence[str] | None = None, *,
                        alpha: float = 0.05) -> dict:
    """:func:`friedman` from the methods' average ranks over ``n`` datasets (as papers publish them)."""
    ranks = np.asarray(average_ranks_, dtype=np.float64)
    k = ranks.shape[0]
    if n < 2 or k < 2:
        raise TreegenError(f"Friedman test needs at least 2 datasets and 2 methods, got {n} x {k}")
    names = [str(s) for s in (names if names is not None else range(k))]
    if len(names) != k:
        raise TreegenError(f"Friedman test: {len(names)} names for {k} methods")
    chi2 = 12.0 * n / (k * (k + 1)) * (float(np.sum(ranks ** 2)) - k * (k + 1) ** 2 / 4.0)
    chi2 = max(chi2, 0.0)
    df1, df2 = k - 1, (k - 1) * (n - 1)
    denom = n * (k - 1) - chi2
    if denom <= 1e-12:
        ff, p_f = math.inf, 0.0
    else:
        ff = (n - 1) * chi2 / denom
        p_f = float(_st().f.sf(ff, df1, df2))
    q, cd = nemenyi_cd(k, n, alpha)
    pairs = [{"a": names[i], "b": names[j], "rank_diff": float(abs(ranks[i] - ranks[j])),
              "significant": bool(abs(ranks[i] - ranks[j]) > cd)}
             for i in range(k) for j in range(i + 1, k)]
    se = math.sqrt(k * (k + 1) / (6.0 * n))
    control = int(np.argmin(ranks))
    others = [i for i in range(k) if i != control]
    z = [float((ranks[i] - ranks[control]) / se) for i in others]
    p = [float(2.0 * _st().norm.sf(abs(v))) for v in z]
    tests = [{"method": names[i], "z": zi, **h} for i, zi, h in zip(others, z, holm(p, alpha))]
    return {
        "n_datasets": n, "k": k, "names": names, "average_ranks": [float(r) for r in ranks],
        "chi2": chi2, "chi2_p_value": float(_st().chi2.sf(chi2, df1)), "iman_davenport": ff,
        "df": [df1, df2], "p_value": p_f, "alpha": alpha,
        "nemenyi": {"q_alpha": q, "cd": cd, "pairs": pairs},
        "holm": {"control": names[control], "tests": tests},
    }
