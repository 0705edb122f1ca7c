"""treegen.core.stats against published worked examples.

* Demšar (JMLR 7, 2006): Table 2, AUC of C4.5 with and without m tuning on 14 datasets (Wilcoxon:
  R+ = 93, R- = 12, T = 12 < 21, the critical value); section 3.2.2, the average ranks 3.143 2.000
  2.893 1.964 of four C4.5 variants (chi2_F = 9.28, F_F = 3.69 > F(3, 39) = 2.85; Nemenyi
  q_0.05 = 2.569, CD = 1.25; q_0.10 = 2.291, CD = 1.12).
* The VRM paper (shared/seeds/002, Table 4): test errors of C4.5, ERM and VRM on 18 datasets, mean
  ranks 2.4167 2.2500 1.3333, Iman-Davenport F = 8.77 for (2, 34) df, Holm with VRM as control:
  p = 1.15e-3 (C4.5) and 5.96e-3 (ERM); C4.5 as control against ERM: p = 0.617. (The paper's
  p-value of its F, 2.4e-3, is not asserted: F(2, 34) = 8.77 has p = 8.5e-4, and its chi-square
  12.25 has p = 2.2e-3; neither is 2.4e-3.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from treegen.core import stats
from treegen.core.errors import TreegenError

# Demšar 2006, Table 2: AUC of C4.5 and C4.5+m on 14 datasets
DEMSAR = np.array([
    [0.763, 0.768],   # adult (sample)
    [0.599, 0.591],   # breast cancer
    [0.954, 0.971],   # breast cancer wisconsin
    [0.628, 0.661],   # cmc
    [0.882, 0.888],   # ionosphere
    [0.936, 0.931],   # iris
    [0.661, 0.668],   # liver disorders
    [0.583, 0.583],   # lung cancer
    [0.775, 0.838],   # lymphography
    [1.000, 1.000],   # mushroom
    [0.940, 0.962],   # primary tumor
    [0.619, 0.666],   # rheum
    [0.972, 0.981],   # voting
    [0.957, 0.978],   # wine
])
# Demšar 2006, Table 6: average ranks of C4.5, C4.5+m, C4.5+cf, C4.5+m+cf over the same 14 datasets
DEMSAR_RANKS = [3.143, 2.000, 2.893, 1.964]

# VRM paper, Table 4: test errors (lower is better) of C4.5, ERM, VRM
VRM = np.array([
    [0.1540, 0.1594, 0.1540], [0.1609, 0.1549, 0.1490], [0.3699, 0.3650, 0.3489], [0.3780, 0.3902, 0.3902],
    [0.1557, 0.1485, 0.1454], [0.2884, 0.2944, 0.2866], [0.2793, 0.2628, 0.2876], [0.2784, 0.2961, 0.2725],
    [0.2556, 0.2452, 0.2430], [0.1850, 0.1763, 0.1650], [0.1216, 0.1247, 0.1068], [0.1723, 0.1775, 0.1828],
    [0.2613, 0.2556, 0.2462], [0.2784, 0.2770, 0.2671], [0.2470, 0.2425, 0.2298], [0.2644, 0.2798, 0.2442],
    [0.0477, 0.0423, 0.0385], [0.0709, 0.0693, 0.0621],
])


def test_wilcoxon_demsar_table2():
    w = stats.wilcoxon(DEMSAR[:, 1], DEMSAR[:, 0])          # C4.5+m against C4.5
    assert (w["r_plus"], w["r_minus"], w["statistic"]) == (93.0, 12.0, 12.0)
    assert (w["wins"], w["ties"], w["losses"]) == (10, 2, 2)
    # Demšar: T = 12 is below the critical 21 for N = 14 at alpha 0.05 (two-sided) -> significant
    assert 0.005 < w["p_value"] < 0.05
    # swapping the arguments swaps the rank sums and keeps the p-value
    v = stats.wilcoxon(DEMSAR[:, 0], DEMSAR[:, 1])
    assert (v["r_plus"], v["r_minus"], v["p_value"]) == (12.0, 93.0, w["p_value"])
    # lower-is-better on negated scores is the same test
    u = stats.wilcoxon(-DEMSAR[:, 1], -DEMSAR[:, 0], higher_is_better=False)
    assert (u["r_plus"], u["r_minus"]) == (93.0, 12.0)


def test_wilcoxon_exact_small_sample():
    # no ties, no zeros: scipy's exact distribution; all 6 differences positive -> p = 2/2^6
    w = stats.wilcoxon([2, 3, 4, 5, 6, 7], [1.5, 2.4, 3.3, 4.2, 5.1, 6.0])
    assert (w["r_plus"], w["r_minus"]) == (21.0, 0.0)
    assert w["p_value"] == pytest.approx(2 / 64)


def test_wilcoxon_all_equal_and_bad_input():
    w = stats.wilcoxon([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert w["p_value"] == 1.0 and w["ties"] == 3
    with pytest.raises(TreegenError, match="at least 2"):
        stats.wilcoxon([1.0], [2.0])
    with pytest.raises(TreegenError, match="NaN"):
        stats.wilcoxon([1.0, float("nan")], [2.0, 1.0])


def test_friedman_demsar_table6():
    f = stats.friedman_from_ranks(DEMSAR_RANKS, 14, ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"])
    assert f["chi2"] == pytest.approx(9.28, abs=0.01)
    assert f["iman_davenport"] == pytest.approx(3.69, abs=0.005)
    assert f["df"] == [3, 39]
    # Demšar: the critical F(3, 39) at 0.05 is 2.85 < 3.69 -> reject
    assert f["p_value"] < 0.05
    assert stats._st().f.isf(0.05, 3, 39) == pytest.approx(2.85, abs=0.005)
    assert f["nemenyi"]["q_alpha"] == pytest.approx(2.569, abs=0.0005)
    assert f["nemenyi"]["cd"] == pytest.approx(1.25, abs=0.005)
    # Demšar: at 0.05 no pair differs by more than the CD (the largest gap is 1.179); at 0.10
    # (q = 2.291, CD = 1.12) C4.5 is worse than C4.5+m and C4.5+m+cf
    assert not any(p["significant"] for p in f["nemenyi"]["pairs"])
    f10 = stats.friedman_from_ranks(DEMSAR_RANKS, 14, ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"], alpha=0.10)
    assert f10["nemenyi"]["q_alpha"] == pytest.approx(2.291, abs=0.0005)
    assert f10["nemenyi"]["cd"] == pytest.approx(1.12, abs=0.005)
    assert {(p["a"], p["b"]) for p in f10["nemenyi"]["pairs"] if p["significant"]} == {
        ("C4.5", "C4.5+m"), ("C4.5", "C4.5+m+cf")}
    assert f["holm"]["control"] == "C4.5+m+cf"


def test_friedman_vrm_table4():
    f = stats.friedman(VRM, ["C4.5", "ERM", "VRM"], higher_is_better=False)
    assert np.round(f["average_ranks"], 4).tolist() == [2.4167, 2.25, 1.3333]
    assert f["df"] == [2, 34]
    assert f["iman_davenport"] == pytest.approx(8.77, abs=0.005)
    assert f["chi2"] == pytest.approx(12.25, abs=0.005)
    holm = {t["method"]: t for t in f["holm"]["tests"]}
    assert f["holm"]["control"] == "VRM"
    assert holm["C4.5"]["p_value"] == pytest.approx(1.15e-3, abs=0.005e-3)
    assert holm["ERM"]["p_value"] == pytest.approx(5.96e-3, abs=0.005e-3)
    assert holm["C4.5"]["reject"] and holm["ERM"]["reject"]
    # C4.5 against ERM: z = (2.4167 - 2.25) / sqrt(3 * 4 / (6 * 18)) = 0.5
    z = (f["average_ranks"][0] - f["average_ranks"][1]) / math.sqrt(3 * 4 / (6 * 18))
    assert 2 * stats._st().norm.sf(abs(z)) == pytest.approx(0.617, abs=0.0005)


def test_holm_step_down():
    # thresholds 0.05/3, 0.05/2, 0.05/1 for the sorted p-values; stops at the first failure
    out = stats.holm([0.03, 0.01, 0.04])
    assert [o["reject"] for o in out] == [False, True, False]
    assert [o["threshold"] for o in out] == pytest.approx([0.025, 0.05 / 3, 0.05])
    assert [o["p_adjusted"] for o in out] == pytest.approx([0.06, 0.03, 0.06])
    assert [o["reject"] for o in stats.holm([0.001, 0.02, 0.04])] == [True, True, True]


def test_friedman_identical_rankings_and_bad_input():
    f = stats.friedman([[0.9, 0.8], [0.7, 0.6], [0.5, 0.4]])
    assert f["average_ranks"] == [1.0, 2.0] and f["p_value"] == 0.0 and math.isinf(f["iman_davenport"])
    with pytest.raises(TreegenError, match="at least 2 datasets"):
        stats.friedman([[0.9, 0.8]])
    with pytest.raises(TreegenError, match="names"):
        stats.friedman(DEMSAR, ["a", "b", "c"])
