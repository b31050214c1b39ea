import numpy as np
import pandas as pd

from dmlnb.reporting import format_mean_std, reported_vs_reproduced, summarize_runs


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
