import numpy as np
import pandas as pd

from dmlnb.reporting import (
    FAILS, HOLDS, NOT_TESTED, WITHIN_NOISE, format_mean_std, group_verdict, reported_vs_reproduced,
    summarize_runs,
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


def test_compare_verdicts():
    from dmlnb.reporting import FAILS, HOLDS, NOT_TESTED, WITHIN_NOISE, compare

    assert compare([0.8, 0.82, 0.81], [0.5, 0.52, 0.49]) == HOLDS
    assert compare([0.5, 0.52, 0.49], [0.8, 0.82, 0.81]) == FAILS
    assert compare([0.60, 0.70, 0.50], [0.58, 0.68, 0.52]) == WITHIN_NOISE
    # symmetric: a worse mean within the noise is inconclusive, not a failure
    assert compare([0.58, 0.68, 0.52], [0.60, 0.70, 0.50]) == WITHIN_NOISE
    assert compare([0.5], [0.5]) == FAILS  # single runs: not better
    assert compare([0.4], [0.5]) == FAILS and compare([0.6], [0.5]) == HOLDS
    assert compare([0.3], [0.5], higher_is_better=False) == HOLDS
    assert compare([], [0.5]) == NOT_TESTED


def test_claims_table_columns():
    from dmlnb.reporting import Claim, claims_table

    t = claims_table([Claim("A beats B", "Table 1", "R@1 60 vs 50", "holds")])
    assert list(t.columns) == ["claim", "paper's evidence", "our evidence", "verdict"]
    assert t.iloc[0]["verdict"] == "holds"


def test_group_verdict():
    hi, lo = [0.8, 0.81, 0.79], [0.5, 0.52, 0.51]
    assert group_verdict({"a": hi, "b": hi}, {"c": lo})[0] == HOLDS
    assert group_verdict({"a": lo}, {"c": hi, "d": hi})[0] == FAILS
    v, table = group_verdict({"a": hi, "b": lo}, {"c": [0.6, 0.61, 0.62]})
    assert v == "does not hold: 1 of 2 pairs hold" and len(table) == 2
    assert group_verdict({"a": hi, "b": [0.60, 0.70]}, {"c": [0.58, 0.69]})[0] == WITHIN_NOISE
    assert group_verdict({"a": [0.60, 0.70]}, {"c": [0.58, 0.69]})[0] == WITHIN_NOISE
    assert group_verdict({"a": lo}, {"c": hi}, higher_is_better=False)[0] == HOLDS
    assert group_verdict({}, {"c": hi})[0] == NOT_TESTED
