"""dmlnb.selection: how each protocol is labelled, and the optimism of test-set selection per run
(>= 0 by construction) and per group (the book's rule and interval)."""

from __future__ import annotations

import json
import math
import random

import pytest
from fabricated import selected_record

from dmlnb.records import RunRecord
from dmlnb.reporting import HOLDS, INCONCLUSIVE, compare_to_threshold
from dmlnb.selection import OPTIMISM_COLUMNS, optimism_summary, selection_label, selection_optimism

TEST_R1 = [0.5, 0.7, 0.6, 0.8, 0.75]  # the test classes peak at epoch 4
VAL_R1 = [0.6, 0.9, 0.7, 0.65, 0.9]  # the validation classes at epoch 2


def test_the_optimism_is_the_test_metric_at_the_test_selected_minus_the_validation_selected_epoch():
    peaked, _ = selected_record(TEST_R1, VAL_R1, "validation", name="peaked")
    agreed, _ = selected_record([0.5, 0.9, 0.6], [0.6, 0.9, 0.7], "test", name="agreed")  # both pick epoch 2
    untested, _ = selected_record(TEST_R1, None, name="no validation")  # skipped: one selection only
    frame = selection_optimism([peaked, untested, agreed])
    assert list(frame.columns) == OPTIMISM_COLUMNS and list(frame["run"]) == ["peaked", "agreed"]
    first = frame.iloc[0]
    assert (first["test-selected epoch"], first["validation-selected epoch"]) == (4, 2)
    assert (first["at test-selected"], first["at validation-selected"]) == (0.8, 0.7)
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
    assert optimism == max(test) - test[max(range(6), key=lambda i: (val[i], -i))]  # first epoch of the best val


def test_another_metric_than_the_selection_metric_and_a_damaged_record_are_refused():
    record, _ = selected_record(TEST_R1, VAL_R1, "validation", name="r")
    with pytest.raises(ValueError, match=r"run 'r' selected its epochs on 'R@1', not 'NMI'.*metric='R@1'"):
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
    assert list(summary.columns) == ["runs", "mean", "low", "high", "verdict"] and list(summary.index) == ["a", "b"]
    expected = compare_to_threshold([0.1, 0.2, 0.15], 0.0)
    a = summary.loc["a"]
    assert a["runs"] == 3 and a["mean"] == pytest.approx(0.15)
    assert (a["low"], a["high"]) == (expected.low, expected.high) and a["low"] > 0
    assert a["verdict"] == HOLDS and a["verdict"].unit == " pts"
    b = summary.loc["b"]
    assert b["runs"] == 1 and math.isnan(b["low"]) and b["verdict"] == INCONCLUSIVE
    whole = optimism_summary(frame)
    assert list(whole.index) == ["all"] and whole.loc["all", "runs"] == 4
    assert whole.loc["all", "mean"] == pytest.approx(0.1125)
    frame["chapter"] = ["01", "01", "02", "02"]
    assert optimism_summary(frame, by=["chapter", "method"]).index.names == ["chapter", "method"]


def test_each_protocol_is_labelled_and_the_papers_says_so():
    assert "papers' protocol" in selection_label(selected_record(TEST_R1, VAL_R1, "test")[0])
    assert "optimistic" in selection_label(selected_record(TEST_R1, VAL_R1, "test")[0])
    assert "validation" in selection_label(selected_record(TEST_R1, VAL_R1, "validation")[0])
    old = RunRecord(json.loads(json.dumps(selected_record(TEST_R1, None)[0].data)))
    del old.data["config"]["select_on"]  # made before the choice existed
    assert selection_label(old) == selection_label(selected_record(TEST_R1, None, "test")[0])
