import numpy as np
import pandas as pd
import pytest

from dmlnb.records import RunRecord
from dmlnb.reporting import (
    COLLAPSE_BAND,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    QUALIFIED_HOLDS,
    Claim,
    all_of,
    best_minus_last,
    biased_toward_claim,
    claims_table,
    collapsed,
    compare,
    compare_to_band,
    compare_to_threshold,
    count_line,
    equivalent,
    every_pair_equivalent,
    format_mean_std,
    group_verdict,
    holds_for_every,
    implementation_claims,
    interior_optimum,
    margin_tests,
    most_of,
    no_difference,
    not_tested,
    order_band,
    paired_differences,
    provenance_frame,
    provenance_groups,
    provenance_text,
    qualify,
    reported_vs_reproduced,
    source_dataset,
    summarize_runs,
    unless_degenerate,
    verdict_category,
    verdict_counts,
)


def test_summarize_runs_matches_numpy():
    runs = {
        "A": [{"R@1": 0.5, "NMI": 0.2}, {"R@1": 0.7, "NMI": 0.4}, {"R@1": 0.6, "NMI": 0.3}],
        "B": [{"R@1": 0.9, "NMI": 0.8}],
    }
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
    t = reported_vs_reproduced(
        {"reported (CUB)": reported}, {"reproduced (omniglot-small)": reproduced}
    )
    assert t.columns.names == ["source", "metric"]
    assert list(t.columns) == [
        ("reported (CUB)", "R@1"),
        ("reproduced (omniglot-small)", "R@1"),
        ("reproduced (omniglot-small)", "MAP@R"),
    ]
    assert t.loc["EPSHN", ("reported (CUB)", "R@1")] == 60.0
    assert t.loc["EPSHN", ("reproduced (omniglot-small)", "R@1")] == "40.1 ± 1.0"
    assert t.loc["triplet", ("reproduced (omniglot-small)", "R@1")] == "—"
    assert list(reported_vs_reproduced({"reported (CUB)": reported}, rows=["EPSHN"]).index) == [
        "EPSHN"
    ]


def test_reported_vs_reproduced_never_mixes_datasets_in_a_column():
    """Every column of the table holds the numbers of one block (one source, one dataset) and its
    label names that dataset; a frame that would put two datasets or two sources under one label
    is refused."""
    cub = pd.DataFrame({"R@1": [42.6, 51.7], "R@2": [55.0, 64.1]}, index=["triplet", "EPSHN"])
    car = pd.DataFrame({"R@1": [51.5, 66.4]}, index=["triplet", "EPSHN"])
    ours = pd.DataFrame({"R@1": ["63.8 ± 0.9", "60.5 ± 0.7"]}, index=["triplet", "EPSHN"])
    blocks = {"reported (CUB, GoogLeNet, 64-d)": cub, "reported (CAR, GoogLeNet, 64-d)": car}
    t = reported_vs_reproduced(blocks, {"reproduced (omniglot-small, convnet, 3 seeds)": ours})
    frames = {**blocks, "reproduced (omniglot-small, convnet, 3 seeds)": ours}
    for source, metric in t.columns:
        assert source_dataset(source) in {"CUB", "CAR", "omniglot-small"}
        assert (
            t[(source, metric)].tolist() == frames[source][metric].tolist()
        )  # this block's numbers only
    # one column per (block, metric): no two blocks share a column
    assert len(t.columns) == sum(f.shape[1] for f in frames.values())

    two_datasets = pd.concat({"CUB": cub, "CAR": car}, axis=1)  # a (dataset, metric) header
    with pytest.raises(ValueError, match="column levels"):
        reported_vs_reproduced({"reported (CUB and CAR)": two_datasets})
    rows_by_dataset = pd.DataFrame({"R@1": [57.7, 78.2]}, index=["CUB", "CAR"])
    with pytest.raises(ValueError, match="names a dataset"):
        reported_vs_reproduced(
            {"reported (CUB, VGG-16)": rows_by_dataset, "reported (CAR, VGG-16)": car}
        )
    stacked = pd.concat([cub[["R@1"]].rename(index=lambda r: f"{r} (reported)"), ours])
    with pytest.raises(ValueError, match="names a source"):
        reported_vs_reproduced({}, {"reproduced (omniglot-small)": stacked})
    for bad in (
        "reported",
        "reported (VGG-16",
        "CUB (reported)",
        "reported ()",
        "reported R@1 at initialisation",
    ):
        with pytest.raises(ValueError, match="does not name its source and dataset"):
            reported_vs_reproduced({bad: cub})
    with pytest.raises(ValueError, match="given as reported"):
        reported_vs_reproduced({"reproduced (omniglot-small)": ours})


def test_source_dataset_reads_the_first_item_in_brackets():
    assert source_dataset("reported (CUB-200-2011, GoogLeNet)") == "CUB-200-2011"
    assert source_dataset("reported (CUB-200-2011; Margin: ResNet-50)") == "CUB-200-2011"
    assert source_dataset("reproduced (Stanford Online Products)") == "Stanford Online Products"


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
    t = claims_table(
        [Claim("A beats B", "Table 1", "R@1", compare([0.8, 0.82, 0.81], [0.5, 0.52, 0.49]))]
    )
    assert list(t.columns) == [
        "claim",
        "paper's evidence",
        "our evidence",
        "verdict",
        "effect",
        "90% interval",
        "runs per side",
        "note",
    ]
    assert t.iloc[0]["verdict"] == "holds" and t.iloc[0]["runs per side"] == "3 vs 3"
    assert (
        claims_table([Claim("x", "y", "z", not_tested("60 steps, not 450"))]).iloc[0]["note"]
        == "60 steps, not 450"
    )


def test_group_verdict():
    hi, lo = [0.8, 0.81, 0.79], [0.5, 0.52, 0.51]
    assert group_verdict({"a": hi, "b": hi}, {"c": lo})[0] == HOLDS
    assert group_verdict({"a": lo}, {"c": hi, "d": hi})[0] == FAILS
    v, table = group_verdict({"a": hi, "b": lo}, {"c": [0.6, 0.61, 0.62]})
    assert v == "does not hold: 1 of 2 pairs hold" and len(table) == 2 and v.high < 0
    assert group_verdict({"a": hi, "b": [0.60, 0.70]}, {"c": [0.58, 0.69]})[0] == INCONCLUSIVE
    assert group_verdict({"a": lo}, {"c": hi}, higher_is_better=False)[0] == HOLDS
    assert group_verdict({}, {"c": hi})[0] == NOT_TESTED
    # the note names the pair whose effect the verdict carries
    v, _ = group_verdict({"a": hi, "b": lo}, {"c": [0.6, 0.61, 0.62]})
    assert (
        v.note == "effect: b vs c; 1 of 2 pairs do not hold"
        and v.effect == compare(lo, [0.6, 0.61, 0.62]).effect
    )


UP, DOWN = [0.60, 0.61, 0.62], [0.50, 0.51, 0.52]
FLAT = [0.50, 0.60, 0.70]


def test_all_of_holds_only_when_every_part_holds():
    yes, no, maybe = compare(UP, DOWN), compare(DOWN, UP), compare(FLAT, DOWN)
    assert (
        all_of({"a": yes, "b": yes}) == HOLDS
        and all_of({"a": yes, "b": no}) == "does not hold: 1 of 2 parts hold"
    )
    assert all_of({"a": no, "b": no}) == FAILS and all_of({"a": yes, "b": maybe}) == INCONCLUSIVE
    assert (
        all_of({"a": yes, "b": not_tested("not run")}) == INCONCLUSIVE
    )  # an untested part is not a held one
    assert all_of({}, "losses") == NOT_TESTED and all_of({}, "losses").note == "no losses"
    v = all_of({"a": yes, "b": maybe}, "metrics")
    assert v.note == "effect: b (the interval contains 0); 1 of 2 metrics hold, none fails"
    assert all_of({"only": maybe}).note == maybe.note  # one part: its own note


def test_all_of_shows_the_weakest_or_the_first_deciding_part():
    strong, weak = compare([0.9, 0.91, 0.92], DOWN), compare(UP, DOWN)
    assert all_of({"strong": strong, "weak": weak}).effect == weak.effect  # lowest lower bound
    assert all_of({"strong": strong, "weak": weak}, shown="first").effect == strong.effect
    far, near = compare([0.2, 0.21, 0.22], DOWN), compare(DOWN, UP)
    v = all_of({"near": near, "far": far})  # both fail: the one with the lowest upper bound
    assert v.effect == far.effect and v.note == "effect: far; 2 of 2 parts do not hold: near, far"
    assert all_of({"near": near, "far": far}, shown="first").effect == near.effect
    maybe_a, maybe_b = compare(FLAT, DOWN), compare([0.45, 0.55, 0.65], DOWN)
    assert all_of({"x": weak, "a": maybe_a, "b": maybe_b}, shown="first").effect == maybe_a.effect


def test_most_of():
    yes, no, maybe = compare(UP, DOWN), compare(DOWN, UP), compare(FLAT, DOWN)
    assert most_of({"a": yes, "b": yes, "c": no}) == HOLDS
    assert most_of({"a": yes, "b": no, "c": no}) == FAILS
    assert most_of({"a": yes, "b": maybe, "c": no}) == INCONCLUSIVE
    v = most_of({"a": yes, "b": yes, "c": no, "d": not_tested("x")}, "methods")
    assert v.note == "2 of 3 methods hold (a, b), 1 fails"
    # a share of methods is not a statistic: no effect, no interval
    assert v.evidence()["effect"] == "—" and v.evidence()["90% interval"] == "—"
    assert (
        most_of({"a": yes, "b": maybe, "c": no, "e": maybe}, "methods").note
        == "1 of 4 methods hold (a), 1 fails, 2 inconclusive"
    )
    assert most_of({"d": not_tested("x")}) == NOT_TESTED


def test_no_difference_can_be_refuted_never_shown():
    flat, flat2 = compare(FLAT, DOWN), compare([0.50, 0.55, 0.45], DOWN)
    v = no_difference({"a": flat, "b": flat2}, "losses")
    assert (
        v == INCONCLUSIVE
        and v.note.startswith("none of 2 losses differs")
        and "refuted, not shown" in v.note
    )
    v = no_difference(
        {"a": flat, "up": compare(UP, DOWN), "down": compare([0.3, 0.31, 0.32], DOWN)}, "losses"
    )
    assert v == FAILS and v.effect == pytest.approx(
        -0.2
    )  # the case farthest from 0 (either direction)
    assert v.note == "2 of 3 losses differ beyond the interval: up, down"
    one = no_difference({"C/m": compare(UP, DOWN)})
    assert one == FAILS and one.note == "the interval of the difference excludes 0"
    assert no_difference({}) == NOT_TESTED
    # an untested case (a collapsed side) is left out and named; the others decide
    gone = unless_degenerate(compare(UP, DOWN), ["T-PROFS (seed 2)"])
    v = no_difference({"a": flat, "t": gone}, "losses")
    assert v == INCONCLUSIVE and v.note.endswith("; 1 not tested: t")
    v = no_difference({"up": compare(UP, DOWN), "t": gone}, "losses")
    assert v == FAILS and v.note == "the interval of the difference excludes 0; 1 not tested: t"
    assert no_difference({"t": gone}, "losses") == NOT_TESTED


def test_paired_differences():
    assert paired_differences(UP, DOWN) == HOLDS and paired_differences(DOWN, UP) == FAILS
    assert paired_differences([0.5, 0.6, 0.7], [0.49, 0.61, 0.69]) == INCONCLUSIVE


def test_equivalence_is_two_one_sided_tests():
    a, b = [0.550, 0.552, 0.548], [0.551, 0.549, 0.550]
    assert equivalent(a, b, 0.01) == HOLDS and equivalent(b, a, 0.01) == HOLDS
    assert [str(t) for t in margin_tests(a, b, 0.01)] == [HOLDS, HOLDS]
    far = [0.60, 0.602, 0.598]
    v = equivalent(far, b, 0.01, scale=100, unit=" pts")
    # the effect is the difference itself, beyond the margin
    assert (
        v == FAILS
        and v.low > 0.01
        and v.effect == pytest.approx(0.05)
        and "margin ±1 pts" in v.note
    )
    assert [str(t) for t in margin_tests(far, b, 0.01)] == [HOLDS, FAILS]
    assert equivalent(a[:1], b[:1], 0.01) == INCONCLUSIVE  # one run per side never decides
    assert equivalent([0.50, 0.56, 0.60], b, 0.01) == INCONCLUSIVE
    assert equivalent([], b, 0.01) == NOT_TESTED


def test_every_pair_equivalent():
    margin = 0.007
    ref = [0.610, 0.612, 0.608]
    near = {40.0: ref, 35.0: [0.611, 0.613, 0.609], 55.0: [0.609, 0.611, 0.607]}
    v, table = every_pair_equivalent(near, margin, value_unit="°")
    assert v == HOLDS and len(table) == 3 and set(table["equivalent"]) == {HOLDS}
    # one value far below the others: two pairs differ, and the effect is that
    # pair's plain difference
    far = {**near, 55.0: [0.55, 0.552, 0.548]}
    v, table = every_pair_equivalent(far, margin, scale=100, unit=" pts", value_unit="°")
    assert v == FAILS and "2 of 3 pairs differ" in v.note and v.note.startswith("effect: 55° − 35°")
    assert v.effect == pytest.approx(0.55 - 0.611) and v.high < 0
    row = table.set_index("pair").loc["55° − 35°"]
    assert (
        row["difference"] == v.evidence()["effect"]
        and row["90% interval"] == v.evidence()["90% interval"]
    )
    assert row["above −0.7 pts"] == FAILS and row["below +0.7 pts"] == HOLDS
    # two values beyond the margin of each other but not of a middle one: the extreme pair decides
    drift = {35.0: [0.700, 0.702, 0.698], 45.0: [0.650, 0.652, 0.648], 55.0: [0.600, 0.602, 0.598]}
    assert every_pair_equivalent(drift, margin)[0] == FAILS
    # noisy runs: every half-width exceeds the margin, so "holds" is unreachable
    # and the note says so
    v = every_pair_equivalent({40.0: [0.58, 0.61, 0.64], 35.0: [0.57, 0.62, 0.63]}, margin)[0]
    assert v == INCONCLUSIVE and "unreachable" in v.note
    # a mean difference inside the margin is not enough on one run per value
    assert every_pair_equivalent({40.0: [0.61], 35.0: [0.611]}, margin)[0] == INCONCLUSIVE
    assert every_pair_equivalent({40.0: ref}, margin)[0] == NOT_TESTED


def _record(name: str, r1: list[float], git: dict | None, threads: int | None = 1) -> RunRecord:
    env = {"device": "cpu", "threads": threads, **({"git": git} if git is not None else {})}
    rec = RunRecord.new(name, config={}, components={}, environment=env)
    for epoch, value in enumerate(r1, start=1):
        rec.add_epoch({"epoch": epoch, "train_seconds": 2.0, "metrics": {"R@1": value}}, "R@1")
    rec.finish("2024-05-01T10:00:00+00:00")
    return rec


def test_provenance_frame_one_row_per_record():
    records = [
        _record("a-seed0", [0.5, 0.6], {"commit": "abc123", "dirty": True}),
        _record("a-seed1", [0.5], {"commit": None}),
        _record("b-seed0", [0.4], None, threads=None),
        _record("b-seed1", [0.4], {"commit": "abc123", "dirty": True, "scope": "dmlnb"}),
        _record("b-seed2", [0.4], {"commit": "abc123", "dirty": False}),
    ]
    frame = provenance_frame(records)
    assert list(frame["run"]) == ["a-seed0", "a-seed1", "b-seed0", "b-seed1", "b-seed2"]
    assert list(frame["commit"]) == ["abc123", "", "", "abc123", "abc123"]
    # a flag made before records scoped it to the package also counted the tree's records: unknown
    assert list(frame["dirty"]) == [None, None, None, True, False]
    assert frame.loc[0, "train seconds"] == 4.0 and frame.loc[0, "finished"].startswith(
        "2024-05-01"
    )
    assert frame["threads"].isna().tolist() == [False, False, True, False, False]
    assert provenance_frame([]).columns.tolist() == [
        "run",
        "commit",
        "dirty",
        "threads",
        "started",
        "finished",
        "train seconds",
    ]
    assert provenance_text(frame) == (
        "5 run records from 1 commit (abc123): 1 with uncommitted changes to dmlnb/, 1 without, 3 "
        "unknown (made before records scoped their git 'dirty' flag to dmlnb/; theirs also "
        "counted the run records and notebooks the book's runs rewrite)"
    )
    assert provenance_text(frame.iloc[4:]) == (
        "1 run record from 1 commit (abc123): 1 without uncommitted changes to dmlnb/"
    )
    assert provenance_text(frame.iloc[:0]) == "no run records"
    groups = provenance_groups(frame, sets=[r.rsplit("-seed", 1)[0] for r in frame["run"]])
    assert groups[["commit", "package changed", "threads", "runs"]].values.tolist() == [
        ["abc123", "unknown", 1, 1],
        ["?", "unknown", 1, 1],
        ["?", "unknown", "?", 1],
        ["abc123", True, 1, 1],
        ["abc123", False, 1, 1],
    ]
    assert groups["run sets"].tolist() == ["a x1", "a x1", "b x1", "b x1", "b x1"]
    assert groups.loc[0, "first"] == groups.loc[0, "last"] == "2024-05-01 10:00"
    assert "run sets" not in provenance_groups(frame).columns


def test_best_minus_last():
    peaked, rising = _record("p", [0.5, 0.7, 0.6], {}), _record("r", [0.5, 0.6, 0.7], {})
    assert best_minus_last([peaked, rising]) == [pytest.approx(0.1), 0.0]
    empty = RunRecord.new("e", config={}, components={}, environment={"device": "cpu"})
    assert best_minus_last([empty]) == []  # no evaluation: no gain to report


def test_all_of_counts_untested_parts_and_never_shows_their_missing_effect():
    yes, no, maybe = compare(UP, DOWN), compare(DOWN, UP), compare(FLAT, DOWN)
    v = all_of({"a": yes, "b": maybe, "c": not_tested("collapsed runs: c")}, "pairs")
    assert (
        v == INCONCLUSIVE
        and v.note
        == "effect: b (the interval contains 0); 1 of 3 pairs hold, none fails, 1 not tested"
    )
    v = all_of({"a": no, "b": not_tested("x")}, "pairs")
    assert (
        v == FAILS
        and v.effect == no.effect
        and v.note.endswith("1 of 2 pairs do not hold, 1 not tested")
    )
    v = all_of({"a": not_tested("x"), "b": not_tested("y")}, "pairs")
    assert v == NOT_TESTED and v.note == "none of the 2 pairs tested: x; y"
    # the breakdown names every category
    v = all_of({"a": no, "b": maybe, "c": maybe}, "pairs", breakdown=True)
    assert v == FAILS and v.note.endswith(
        "fails on 1 of 3 pairs (a); of the other 2: 2 inconclusive"
    )
    assert all_of({"a": yes, "b": maybe}, "pairs", breakdown=True).note.endswith(
        "of 2 pairs: 1 holds, 1 inconclusive"
    )
    assert all_of({"a": no, "b": yes}, "pairs", breakdown=True).note.endswith(
        "fails on 1 of 2 pairs (a); the other holds"
    )


def test_the_book_collapse_criterion_is_the_last_two_epochs_within_the_band_of_the_level():
    ln2 = float(np.log(2.0))
    assert COLLAPSE_BAND == 0.025
    # pinned at the level over the last two epochs, whatever came before
    assert collapsed([1.3, 0.9, ln2 * 1.02, ln2 * 0.99], ln2)
    # one of the last two outside the band: not collapsed (a run passing through the level)
    assert not collapsed([1.3, ln2, ln2 * 0.97], ln2) and not collapsed([ln2, ln2 * 0.97, ln2], ln2)
    # the band is relative: 0.0049 off a margin of 0.2 is inside, 0.0051 is not
    assert collapsed([0.3, 0.1951, 0.2049], 0.2) and not collapsed([0.3, 0.2, 0.1949], 0.2)
    # too few epochs to judge, and a band or a window that means nothing
    assert not collapsed([ln2], ln2) and collapsed([ln2], ln2, last=1)
    with pytest.raises(ValueError, match="band"):
        collapsed([ln2, ln2], ln2, band=-0.1)
    with pytest.raises(ValueError, match="last"):
        collapsed([ln2, ln2], ln2, last=0)


def test_a_collapsed_side_is_not_tested_whatever_the_numbers():
    hi, lo = [0.8, 0.81, 0.79], [0.5, 0.52, 0.51]
    assert compare(hi, lo) == HOLDS
    v = unless_degenerate(compare(hi, lo), ["HPHN n = 2"])
    assert v == NOT_TESTED and v.note == "collapsed runs: HPHN n = 2"
    assert np.isnan(v.effect)
    assert unless_degenerate(compare(hi, lo), []) == HOLDS
    # keep_effect: still no test, but the measured effect and interval stay for the table
    kept = unless_degenerate(compare(hi, lo), ["HPHN n = 2"], keep_effect=True)
    assert kept == NOT_TESTED and kept.note == "collapsed runs: HPHN n = 2"
    assert kept.effect == pytest.approx(compare(hi, lo).effect) and kept.low == compare(hi, lo).low
    assert (
        all_of({"a": kept, "b": compare(hi, lo)}, "pairs") == INCONCLUSIVE
    )  # untested parts never hold
    # in a group: the pairs with a collapsed side are untested parts; the others decide
    v, table = group_verdict({"a": hi, "b": hi}, {"c": lo}, degenerate=["b"])
    assert v == INCONCLUSIVE and v.note.endswith("1 of 2 pairs hold, none fails, 1 not tested")
    row = table.set_index("better").loc["b"]
    assert (
        row["verdict"] == NOT_TESTED and row["note"] == "collapsed runs: b" and row["effect"] != "—"
    )
    assert group_verdict({"a": hi}, {"c": lo}, degenerate=["a"])[0] == NOT_TESTED
    # a sweep with a collapsed value: its interior optimum is not tested, even when it would hold
    pts = {2: [0.50, 0.51, 0.49], 8: [0.70, 0.71, 0.69], 16: [0.60, 0.61, 0.59]}
    assert interior_optimum(pts)[0] == HOLDS
    v, _ = interior_optimum(pts, degenerate=[2])
    assert v == NOT_TESTED and v.note == "collapsed runs: 2"


def test_an_order_of_growth_is_judged_in_a_two_sided_band():
    assert order_band(3) == (2.5, 3.5) and order_band(-1) == (-1.5, -0.5)
    steep = [4.01, 4.44, 4.28]  # "cubic" by a one-sided threshold (> 2.5), but far above cubic
    assert compare_to_threshold(steep, 2.5) == HOLDS
    v = compare_to_band(steep, *order_band(3))
    assert v == FAILS and v.note == "above 3.5: outside the band (2.5, 3.5)"
    assert v.effect == pytest.approx(np.mean(steep)) and v.low < np.mean(steep) < v.high
    assert compare_to_band([0.96, 0.93, 0.93], *order_band(1)) == HOLDS
    assert compare_to_band([-0.9, -1.0, -1.1], *order_band(-1)) == HOLDS
    assert compare_to_band([-1.48, -1.47, -1.53], *order_band(-1)) == INCONCLUSIVE  # at the edge
    assert compare_to_band([0.2, 0.25, 0.22], *order_band(1)) == FAILS  # too flat fails as well
    assert compare_to_band([1.0, 2.0, 3.0], *order_band(1)) == INCONCLUSIVE
    assert compare_to_band([1.0, 1.1], *order_band(1)) == INCONCLUSIVE
    with pytest.raises(ValueError, match="low < high"):
        compare_to_band([1.0], 2.0, 1.0)


def test_another_algorithm_timed_leaves_the_papers_claim_untested():
    paper, ours = implementation_claims(
        "Algorithm 1 is linear in |V|",
        "Sec. 3.4",
        "our greedy inference is linear",
        "slopes 1.65, 1.61, 1.57",
        [1.65, 1.61, 1.57],
        1,
        "it scores every candidate",
    )
    assert paper.verdict == NOT_TESTED and "it scores every candidate" in paper.verdict.note
    assert ours.verdict == FAILS and ours.our_evidence == "slopes 1.65, 1.61, 1.57"
    # the same slopes, one repeat's fitted through two sizes: a shape unchecked decides neither way
    _, short = implementation_claims(
        "p", "e", "ours", "o", [1.65, 1.61, 1.57], 1, "why", sizes=[3, 2, 3]
    )
    assert short.verdict == INCONCLUSIVE and short.verdict.note.startswith(
        "1 of 3 repeat slope through two sizes"
    )
    assert (
        implementation_claims("p", "e", "ours", "o", [1.65, 1.61, 1.57], 1, "why", sizes=[3, 3, 3])[
            1
        ].verdict
        == FAILS
    )


def test_selection_biased_toward_the_claim_cannot_hold():
    held = compare(UP, DOWN)
    v = biased_toward_claim(held, "the epoch was picked by A's R@1")
    assert (
        v == INCONCLUSIVE
        and v.effect == held.effect
        and v.note.startswith("selection biased toward the claim")
    )
    assert biased_toward_claim(compare(DOWN, UP), "x") == FAILS  # a failure despite the bias stands
    assert biased_toward_claim(compare(FLAT, DOWN), "x") == INCONCLUSIVE


def test_a_qualified_verdict_keeps_its_category_and_evidence():
    v = qualify(compare(UP, DOWN), "the bound falls, but stays vacuous")
    assert v == "holds: the bound falls, but stays vacuous" and v.effect == compare(UP, DOWN).effect
    assert verdict_counts([v, compare(DOWN, UP), not_tested("x"), compare(UP, DOWN)]) == {
        HOLDS: 1,
        QUALIFIED_HOLDS: 1,
        FAILS: 1,
        NOT_TESTED: 1,
    }  # a count keeps the qualified hold apart
    assert list(verdict_counts([not_tested("x"), v, compare(UP, DOWN)])) == [
        HOLDS,
        QUALIFIED_HOLDS,
        NOT_TESTED,
    ]
    assert (
        count_line([not_tested("x"), v, compare(UP, DOWN), compare(UP, DOWN)])
        == f"2 {HOLDS}, 1 {QUALIFIED_HOLDS}, 1 {NOT_TESTED}"
    )  # the chapters' one line, in the categories' order
    assert count_line([]) == "no verdicts"


def test_verdict_category_of_each_kind():
    assert verdict_category(compare(UP, DOWN)) == HOLDS
    assert verdict_category(qualify(compare(UP, DOWN), "narrower")) == QUALIFIED_HOLDS
    assert (
        verdict_category(qualify(compare(DOWN, UP), "1 of 3 pairs hold")) == FAILS
    )  # only a hold is set apart
    assert verdict_category(not_tested("why")) == NOT_TESTED
    assert verdict_category("holds") == HOLDS
