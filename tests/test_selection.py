"""dmlnb.selection: how each protocol is labelled, the optimism of test-set selection per run
(>= 0 by construction) and per group (the book's rule and interval), comparisons and claims under
both protocols side by side, and a setting chosen on the validation classes."""

from __future__ import annotations

import json
import math
import random

import pytest
from fabricated import selected_record

from dmlnb.records import RunRecord
from dmlnb.reporting import HOLDS, INCONCLUSIVE, Claim, compare, compare_to_threshold
from dmlnb.selection import (
    OPTIMISM_COLUMNS,
    both_ways_table,
    both_ways_verdicts,
    choose_on_validation,
    kept_selection,
    main_comparison,
    optimism_summary,
    optimism_text,
    protocol_column,
    selected_metrics,
    selected_on,
    selection_gain_text,
    selection_label,
    selection_optimism,
)

TEST_R1 = [0.5, 0.7, 0.6, 0.8, 0.75]  # the test classes peak at epoch 4
VAL_R1 = [0.6, 0.9, 0.7, 0.65, 0.9]  # the validation classes at epoch 2


def test_the_optimism_is_the_test_metric_at_the_test_selected_minus_the_validation_selected_epoch():
    peaked, _ = selected_record(TEST_R1, VAL_R1, "validation", name="peaked")
    agreed, _ = selected_record(
        [0.5, 0.9, 0.6], [0.6, 0.9, 0.7], "test", name="agreed"
    )  # both pick epoch 2
    untested, _ = selected_record(
        TEST_R1, None, name="no validation"
    )  # skipped: one selection only
    frame = selection_optimism([peaked, untested, agreed])
    assert list(frame.columns) == OPTIMISM_COLUMNS and list(frame["run"]) == ["peaked", "agreed"]
    first = frame.iloc[0]
    assert (first["test-selected epoch"], first["validation-selected epoch"]) == (4, 2)
    assert (first["at test-selected"], first["at validation-selected"]) == (0.8, 0.7)
    assert frame["evaluations"].tolist() == [5, 3]  # the epochs both protocols chose among
    assert first["optimism"] == 0.8 - 0.7 and first["metric"] == "R@1"
    assert frame.iloc[1]["optimism"] == 0.0
    assert (frame["optimism"] >= 0).all()
    assert selection_optimism([untested]).empty


@pytest.mark.parametrize("seed", range(20))
def test_the_optimism_is_never_negative(seed):
    rng = random.Random(seed)
    test = [rng.random() for _ in range(6)]
    val = [rng.random() for _ in range(6)]
    record, _ = selected_record(test, val, rng.choice(["test", "validation"]))
    optimism = selection_optimism([record])["optimism"].item()
    assert optimism >= 0
    assert (
        optimism == max(test) - test[max(range(6), key=lambda i: (val[i], -i))]
    )  # first epoch of the best val


def test_another_metric_than_the_selection_metric_and_a_damaged_record_are_refused():
    record, _ = selected_record(TEST_R1, VAL_R1, "validation", name="r")
    with pytest.raises(
        ValueError, match=r"run 'r' selected its epochs on 'R@1', not 'NMI'.*metric='R@1'"
    ):
        selection_optimism([record], metric="NMI")
    data = json.loads(json.dumps(record.data))
    data["selections"]["test"]["metrics"]["R@1"] = 0.1  # below the validation-selected epoch's 0.7
    with pytest.raises(ValueError, match="run 'r'.*damaged"):
        selection_optimism([RunRecord(data)])


def test_the_summary_applies_the_books_rule_per_group():
    frame = selection_optimism(
        [selected_record(TEST_R1, VAL_R1, name=f"a{i}")[0] for i in range(3)]
        + [selected_record([0.5, 0.9, 0.6], [0.6, 0.9, 0.7], name="b0")[0]]
    )
    frame["optimism"] = [0.1, 0.2, 0.15, 0.0]  # three runs of one method, one of another
    frame["method"] = ["a", "a", "a", "b"]
    summary = optimism_summary(frame, by="method", scale=100, unit=" pts")
    assert list(summary.columns) == [
        "runs",
        "evaluations per run",
        "mean",
        "low",
        "high",
        "verdict",
    ]
    assert list(summary.index) == ["a", "b"] and summary["evaluations per run"].tolist() == [
        "5",
        "3",
    ]
    expected = compare_to_threshold([0.1, 0.2, 0.15], 0.0)
    a = summary.loc["a"]
    assert a["runs"] == 3 and a["mean"] == pytest.approx(0.15)
    assert (a["low"], a["high"]) == (expected.low, expected.high) and a["low"] > 0
    assert a["verdict"] == HOLDS and a["verdict"].unit == " pts"
    b = summary.loc["b"]
    assert b["runs"] == 1 and math.isnan(b["low"]) and b["verdict"] == INCONCLUSIVE
    whole = optimism_summary(frame)
    assert list(whole.index) == ["all"] and whole.loc["all", "runs"] == 4
    assert whole.loc["all", "evaluations per run"] == "3-5"
    assert whole.loc["all", "mean"] == pytest.approx(0.1125)
    frame["chapter"] = ["01", "01", "02", "02"]
    assert optimism_summary(frame, by=["chapter", "method"]).index.names == ["chapter", "method"]


def test_the_optimism_in_words():
    records = [selected_record(TEST_R1, VAL_R1, name=f"a{i}")[0] for i in range(3)]  # 0.1 each
    e = (
        optimism_summary(selection_optimism(records), scale=100, unit=" pts")
        .loc["all", "verdict"]
        .evidence()
    )
    assert optimism_text(records) == (
        f"; choosing on the test classes instead would add {e['effect']} "
        f"{e['90% interval']} R@1 (3 runs)"
    )
    assert e["effect"] == "+10 pts"
    assert (
        optimism_text([selected_record(TEST_R1, None)[0]]) == ""
    )  # no validation split: nothing to say


def test_the_gain_of_keeping_the_selected_epoch_in_words_names_the_selection():
    # test-selected runs (no validation split): test-selected minus last, the rule's
    # interval, no optimism clause
    records = [
        selected_record([0.5, 0.8, 0.7], None, name=f"a{i}")[0] for i in range(3)
    ]  # best 0.8, last 0.7
    e = compare_to_threshold([0.1] * 3, 0.0, scale=100, unit=" pts").evidence()
    assert (
        selection_gain_text(records)
        == f"test-selected minus last epoch R@1, 3 runs: {e['effect']} {e['90% interval']}"
    )
    assert e["effect"] == "+10 pts"
    # validation-selected runs: the epoch the validation classes chose (epoch 2: test 0.7) minus the
    # last (0.75), never called "best", and the optimism of test-set selection follows
    both = [selected_record(TEST_R1, VAL_R1, "validation", name=f"b{i}")[0] for i in range(3)]
    e = compare_to_threshold([0.7 - 0.75] * 3, 0.0, scale=100, unit=" pts").evidence()
    text = selection_gain_text(both)
    assert text.startswith(
        f"validation-selected minus last epoch R@1, 3 runs: {e['effect']} {e['90% interval']}"
    )
    assert e["effect"] == "-5 pts" and "best" not in text
    assert text.endswith(optimism_text(both)) and optimism_text(both)
    # runs selected in both places: each count named
    mixed = selection_gain_text(both + records[:1])
    assert mixed.startswith(
        "selected minus last epoch R@1 (validation-selected in 3 runs, test-selected in 1 run), 4 "
        "runs: "
    )
    assert selection_gain_text([]) == ""


def test_each_protocol_is_labelled_and_the_papers_says_so():
    assert "papers' protocol" in selection_label(selected_record(TEST_R1, VAL_R1, "test")[0])
    assert "optimistic" in selection_label(selected_record(TEST_R1, VAL_R1, "test")[0])
    assert "validation" in selection_label(selected_record(TEST_R1, VAL_R1, "validation")[0])
    old = RunRecord(json.loads(json.dumps(selected_record(TEST_R1, None)[0].data)))
    del old.data["config"]["select_on"]  # made before the choice existed
    assert selection_label(old) == selection_label(selected_record(TEST_R1, None, "test")[0])


# ----------------------------------------------------------------------------------------------
# Both protocols side by side
# ----------------------------------------------------------------------------------------------

VAL_COL, TEST_COL = protocol_column("R@1", "validation"), protocol_column("R@1", "test")


def _runs(test_curves, val_curves, name):
    """One record per (test, validation) curve pair, selected on validation, named
    ``name0``, ``name1``..."""
    pairs = enumerate(zip(test_curves, val_curves))
    return [selected_record(t, v, "validation", name=f"{name}{i}")[0] for i, (t, v) in pairs]


def test_selected_metrics_and_a_block_showing_the_other_protocol():
    record, _ = selected_record(TEST_R1, VAL_R1, "validation")
    assert (
        selected_metrics(record, "validation")["R@1"] == 0.7
        and selected_metrics(record, "test")["R@1"] == 0.8
    )
    untested, _ = selected_record(TEST_R1, None, "test", name="papers")
    assert selected_metrics(untested, "test")["R@1"] == 0.8
    with pytest.raises(
        ValueError,
        match=r"run 'papers' has no epoch selected on the validation classes.*validation=",
    ):
        selected_metrics(untested, "validation")
    with pytest.raises(ValueError, match="basis 'train'"):
        selected_metrics(record, "train")
    kept = record.best
    with selected_on([record, record, untested], "test"):
        assert record.best["epoch"] == 4 and untested.best["epoch"] == 4
        assert kept_selection(record)["epoch"] == 2 and record.selected_on == "validation"
    assert record.best is kept
    with pytest.raises(
        ValueError, match="'papers'"
    ):  # nothing is changed when one record cannot be shown
        with selected_on([record, untested], "validation"):
            pass
    assert record.best is kept
    with selected_on(
        [record, untested], "validation", strict=False
    ):  # the papers' run keeps its selection
        assert record.best["epoch"] == 2 and untested.best["epoch"] == 4
    with pytest.raises(RuntimeError):
        with selected_on([record], "test"):
            raise RuntimeError
    assert record.best is kept  # restored on an error too


def test_both_ways_table_and_main_comparison_agree_with_the_records():
    # ours: the test classes peak late, the validation classes early; theirs: both
    # agree on the last epoch
    ours = _runs([[0.5, 0.6, 0.9]] * 3, [[0.8, 0.5, 0.4]] * 3, "ours")
    theirs = _runs([[0.5, 0.6, 0.7 + 0.01 * i] for i in range(3)], [[0.5, 0.6, 0.7]] * 3, "theirs")
    papers = [selected_record([0.5, 0.6], None, "test", name=f"p{i}")[0] for i in range(3)]
    table = both_ways_table({"ours": ours, "theirs": theirs, "papers": papers})
    assert list(table.columns) == [VAL_COL, TEST_COL, "runs", "evaluations"]
    assert TEST_COL == "R@1, best epoch on test (papers' protocol, optimistic)"
    assert (
        table.loc["ours", VAL_COL] == "50.0 ± 0.0" and table.loc["ours", TEST_COL] == "90.0 ± 0.0"
    )
    assert table.loc["theirs", VAL_COL] == table.loc["theirs", TEST_COL] == "71.0 ± 1.0"
    assert table.loc["papers", VAL_COL] == "— (no validation split)"
    assert table.loc["papers", TEST_COL] == "60.0 ± 0.0"
    assert table.loc["ours", "evaluations"] == 3 and table.loc["papers", "runs"] == 3
    frame = main_comparison({"ours": ours, "theirs": theirs, "papers": papers}, "ours")
    beats = {b: protocol_column("ours beats it", b) for b in ("validation", "test")}
    assert frame.loc["ours", beats["validation"]] == "—"
    # on the validation-selected epochs ours loses; the papers' protocol says it
    # wins: the flag says so
    theirs_row = frame.loc["theirs"]
    assert (
        theirs_row[beats["validation"]] == "does not hold" and theirs_row[beats["test"]] == "holds"
    )
    assert theirs_row["verdict changes"] is True
    expected = compare([0.5] * 3, [0.7, 0.71, 0.72], scale=100, unit=" pts").evidence()
    assert (theirs_row["effect"], theirs_row["90% interval"]) == (
        expected["effect"],
        expected["90% interval"],
    )
    papers_row = frame.loc["papers"]
    assert (
        papers_row[beats["validation"]] == "not tested at this scale"
        and papers_row["verdict changes"] == "—"
    )


def test_both_ways_verdicts_recompute_a_chapters_claims_under_each_protocol():
    ours = _runs([[0.5, 0.6, 0.9]] * 3, [[0.8, 0.5, 0.4]] * 3, "ours")
    theirs = _runs([[0.5, 0.6, 0.7 + 0.01 * i] for i in range(3)], [[0.5, 0.6, 0.7]] * 3, "theirs")

    def judge():  # a chapter's claim, reading record.best as the chapters do
        r1 = lambda rs: [r.best["metrics"]["R@1"] for r in rs]  # noqa: E731
        return [
            Claim("ours beats theirs", "paper", "ours", compare(r1(ours), r1(theirs))),
            Claim("theirs above 0.6", "paper", "ours", compare_to_threshold(r1(theirs), 0.6)),
        ]

    table = both_ways_verdicts(ours + theirs, judge)
    assert list(table["claim"]) == ["ours beats theirs", "theirs above 0.6"]
    assert list(table[protocol_column("verdict", "validation")]) == ["does not hold", "holds"]
    assert list(table[protocol_column("verdict", "test")]) == ["holds", "holds"]
    assert list(table["verdict changes"]) == [True, False]
    assert all(r.best == r.selections["validation"] for r in ours + theirs)
    flip = iter([["a"], ["b"]])
    with pytest.raises(ValueError, match="other claims"):
        both_ways_verdicts(ours, lambda: {k: compare_to_threshold([0.5], 0.0) for k in next(flip)})


def test_a_setting_is_chosen_on_the_validation_classes_never_the_test_classes():
    high_test = _runs([[0.9, 0.9]] * 2, [[0.5, 0.5]] * 2, "a")  # best on test, worse on validation
    high_val = _runs([[0.6, 0.6]] * 2, [[0.7, 0.6]] * 2, "b")
    assert choose_on_validation({"a": high_test, "b": high_val}) == "b"
    assert choose_on_validation({1.0: high_val, 2.0: high_val}) == 1.0  # ties keep the first
    with pytest.raises(ValueError, match=r"candidate 'p': run 'p0' has no validation selection"):
        choose_on_validation({"p": [selected_record([0.5], None, "test", name="p0")[0]]})
    with pytest.raises(ValueError, match="no candidate"):
        choose_on_validation({})
