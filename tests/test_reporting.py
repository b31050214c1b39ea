import numpy as np
import pandas as pd

from dmlnb.reporting import (
    FAILS, HOLDS, INCONCLUSIVE, NOT_TESTED, Claim, claims_table, compare, compare_to_threshold, format_mean_std,
    group_verdict, holds_for_every, interior_optimum, not_tested, reported_vs_reproduced, summarize_runs,
)


def test_summarize_runs_matches_numpy():
    runs = {"A": [{"R@1": 0.5, "NMI": 0.2}, {"R@1": 0.7, "NMI": 0.4}, {"R@1": 0.6, "NMI": 0.3}],
            "B": [{"R@1": 0.9, "NMI": 0.8}]}
    s = summarize_runs(runs, ["R@1", "NMI"])
    assert np.isclose(s.loc["A", ("R@1", "mean")], 0.6)
    assert np.isclose(s.loc["A", ("NMI", "std")], np.std([0.2, 0.4, 0.3], ddof=1))
    assert s.loc["A", ("R@1", "n")] == 3
    assert np.isnan(s.loc["B", ("R@1", "std")])
    text = format_mean_std(s)
    assert text.loc["A", "R@1"] == "60.0 ± 10.0"
    assert text.loc["B", "R@1"] == "90.0"


def test_reported_vs_reproduced_labels_sources_and_fills_missing():
    reported = pd.DataFrame({"R@1": [51.0, 60.0]}, index=["triplet", "EPSHN"])
    reproduced = pd.DataFrame({"R@1": ["40.1 ± 1.0"], "MAP@R": ["20.0 ± 0.5"]}, index=["EPSHN"])
    t = reported_vs_reproduced(reported, reproduced, "reported (CUB)", "reproduced (omniglot-small)")
    assert list(t.columns.get_level_values("source")).count("reported (CUB)") == 2
    assert t.loc["EPSHN", ("R@1", "reported (CUB)")] == 60.0
    assert t.loc["EPSHN", ("R@1", "reproduced (omniglot-small)")] == "40.1 ± 1.0"
    assert t.loc["triplet", ("R@1", "reproduced (omniglot-small)")] == "—"
    assert t.loc["triplet", ("MAP@R", "reported (CUB)")] == "—"


def _seeds_at(effect_in_se: float, n: int = 3) -> tuple[list[float], list[float]]:
    """Two sides of ``n`` runs with equal spread whose mean difference is ``effect_in_se``
    standard errors of the difference (Welch)."""
    base = np.array([-1.0, 0.0, 1.0] * (n // 3))  # std 1 (ddof=1) for n = 3
    se = np.sqrt(2 * base.var(ddof=1) / n)
    return list(0.5 + 0.01 * (base + effect_in_se * se)), list(0.5 + 0.01 * base)


def test_one_run_per_side_never_holds_or_fails():
    for a, b in [([0.6], [0.5]), ([0.4], [0.5]), ([0.5], [0.5]), ([0.9, 0.91], [0.1, 0.11])]:
        v = compare(a, b)
        assert v == INCONCLUSIVE and "fewer than 3" in v.note


def test_three_vs_three_at_1_2_standard_errors_is_inconclusive():
    # the old rule said "holds" for anything beyond one standard error
    a, b = _seeds_at(1.2)
    v = compare(a, b)
    assert v == INCONCLUSIVE and v.low < 0 < v.high and v.n == (3, 3)
    # with 3 vs 3 runs and equal spread Welch has 4 degrees of freedom: t(0.95, 4) = 2.132
    assert compare(*_seeds_at(2.2)) == HOLDS and compare(*_seeds_at(2.0)) == INCONCLUSIVE
    assert compare(*reversed(_seeds_at(2.2))) == FAILS


def test_welch_interval_matches_scipy():
    from scipy import stats

    a, b = [0.61, 0.64, 0.60, 0.66], [0.55, 0.50, 0.58]
    v = compare(a, b)
    res = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
    lo = res.confidence_interval(0.95).low
    assert np.isclose(v.low, lo) and np.isclose(v.effect, np.mean(a) - np.mean(b))
    assert (v == HOLDS) == (res.pvalue < 0.05)


def test_identical_results_are_inconclusive_and_exact_differences_decide():
    assert compare([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]) == INCONCLUSIVE
    assert compare([0.6, 0.6, 0.6], [0.5, 0.5, 0.5]) == HOLDS
    assert compare([0.4, 0.4, 0.4], [0.5, 0.5, 0.5]) == FAILS


def test_large_effect_holds_and_its_mirror_fails():
    hi, lo = [0.8, 0.82, 0.81], [0.5, 0.52, 0.49]
    assert compare(hi, lo) == HOLDS and compare(lo, hi) == FAILS
    assert compare(lo, hi, higher_is_better=False) == HOLDS
    assert compare([], lo) == NOT_TESTED
    v = compare(hi, lo, scale=100, unit=" pts")
    assert v.evidence()["effect"] == "+30.7 pts" and v.evidence()["runs per side"] == "3 vs 3"


def test_claim_with_its_own_threshold():
    # "the overhead is below 1% of a step"
    assert compare_to_threshold([0.004, 0.005, 0.006], 0.01, higher_is_better=False) == HOLDS
    assert compare_to_threshold([0.03, 0.032, 0.031], 0.01, higher_is_better=False) == FAILS
    assert compare_to_threshold([0.002, 0.01, 0.02], 0.01, higher_is_better=False) == INCONCLUSIVE
    assert compare_to_threshold([0.03], 0.01, higher_is_better=False) == INCONCLUSIVE  # one run


def test_universal_claim_fails_on_one_counterexample():
    assert holds_for_every([True] * 10, "batches") == HOLDS
    v = holds_for_every([True] * 9 + [False], "batches")
    assert v == FAILS and v.note == "1 of 10 batches fail"
    assert holds_for_every([True, True], "batches") == INCONCLUSIVE


def test_interior_optimum_needs_an_interior_point_beating_both_ends():
    pts = {1: [0.50, 0.51, 0.49], 4: [0.70, 0.71, 0.69], 40: [0.60, 0.61, 0.59]}
    assert interior_optimum(pts)[0] == HOLDS
    one_seed = {k: v[:1] for k, v in pts.items()}
    assert interior_optimum(one_seed)[0] == INCONCLUSIVE
    rising = {1: [0.50, 0.51, 0.49], 4: [0.60, 0.61, 0.59], 40: [0.70, 0.71, 0.69]}
    assert interior_optimum(rising)[0] == FAILS
    assert interior_optimum({1: [0.5], 2: [0.6]})[0] == NOT_TESTED


def test_claims_refuse_typed_verdicts_and_show_the_evidence():
    import pytest

    with pytest.raises(TypeError, match="never typed"):
        Claim("A beats B", "Table 1", "R@1 60 vs 50", "holds")
    t = claims_table([Claim("A beats B", "Table 1", "R@1", compare([0.8, 0.82, 0.81], [0.5, 0.52, 0.49]))])
    assert list(t.columns) == ["claim", "paper's evidence", "our evidence", "verdict", "effect", "90% interval",
                               "runs per side", "note"]
    assert t.iloc[0]["verdict"] == "holds" and t.iloc[0]["runs per side"] == "3 vs 3"
    assert claims_table([Claim("x", "y", "z", not_tested("60 steps, not 450"))]).iloc[0]["note"] == "60 steps, not 450"


def test_group_verdict():
    hi, lo = [0.8, 0.81, 0.79], [0.5, 0.52, 0.51]
    assert group_verdict({"a": hi, "b": hi}, {"c": lo})[0] == HOLDS
    assert group_verdict({"a": lo}, {"c": hi, "d": hi})[0] == FAILS
    v, table = group_verdict({"a": hi, "b": lo}, {"c": [0.6, 0.61, 0.62]})
    assert v == "does not hold: 1 of 2 pairs hold" and len(table) == 2 and v.high < 0
    assert group_verdict({"a": hi, "b": [0.60, 0.70]}, {"c": [0.58, 0.69]})[0] == INCONCLUSIVE
    assert group_verdict({"a": lo}, {"c": hi}, higher_is_better=False)[0] == HOLDS
    assert group_verdict({}, {"c": hi})[0] == NOT_TESTED
