"""Deviations of the chapter's protocol the paper's text leaves implicit (rows of the deviations
table beside :data:`~dmlnb.experiments.easy_positive.deviations.ROWS`): the loss's reduction with
the paper's learning rate, the number of optimisation steps, how much of a class one group holds
and where the validation classes come from. Each row is computed from the configurations, the
loaded dataset and the records; the numbers of the paper's setting are its stated ones (Sec. 5.1,
5.2: Cars196's training split, :data:`CARS196_TRAIN`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dmlnb.chapter import Deviation
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.diagnostics import is_collapsed
from dmlnb.experiments.easy_positive.judges import distinct_outcomes
from dmlnb.records import RunRecord
from dmlnb.reporting import compare_to_threshold
from dmlnb.selection import selection_gain_text

__all__ = ["CARS196_TRAIN", "implicit_rows", "selection_gain_distinct"]

#: Cars196's training split as the paper uses it (Sec. 5.2: the first 98 classes): images, classes.
CARS196_TRAIN = (8054, 98)


def _reduction(study: Study, paper: Study) -> Deviation:
    p, c = paper.config, study.config
    return Deviation(
        "loss reduction with the paper's learning rate",
        f"not stated; the learning rate (SGD, {p.lr:g} on Cars, Sec. 5.1) was set with the "
        "authors' code, whose first version (Sep 2019) sums the terms of a batch (Mar 2020: the "
        "sum divided by 4; the mean over the kept terms only from Jun 2020)",
        f"the mean over the kept terms (the Jun 2020 code), {c.optimizer} lr {c.lr:g} at this "
        f"profile; the paper profile pairs the mean with the paper's SGD lr {p.lr:g}: had the "
        f"paper's runs summed the terms of a batch of {p.batch_size} anchors, their steps were "
        f"up to {p.batch_size} times larger",
        why="not-measured",
        scale="the paper profile with summed terms at the paper's learning rate",
    )


def _steps(study: Study, paper: Study, train_images: int) -> Deviation:
    c, p = study.config, paper.config
    per_epoch, paper_per_epoch = train_images // c.batch_size, CARS196_TRAIN[0] // p.batch_size
    return Deviation(
        "optimisation steps",
        f"{p.epochs} epochs (Sec. 5.1) of Cars196's {CARS196_TRAIN[0]} training images in "
        f"batches of {p.batch_size}: about {paper_per_epoch} steps per epoch, "
        f"{p.epochs * paper_per_epoch} in all (reported setting, Figure 4)",
        f"{per_epoch} batches of {c.batch_size} per epoch ({train_images} training images) x "
        f"{c.epochs} epochs = {per_epoch * c.epochs} steps, "
        f"{per_epoch * c.epochs / (p.epochs * paper_per_epoch):.0%} of the paper's",
        why="not-measured",
        scale="this profile trained for the paper's number of steps",
    )


def _group_share(study: Study, paper: Study, images_per_class: int) -> Deviation:
    key, per_class = study.key_group_size, CARS196_TRAIN[0] / CARS196_TRAIN[1]
    theirs = paper.key_group_size
    return Deviation(
        "share of a class in one group",
        f"n = {theirs} of a Cars196 training class of {per_class:.0f} images on average: about "
        f"{theirs / per_class:.0%} of the class (Sec. 5.2, Figure 4)",
        f"n = {key} of an {study.config.dataset} class of {images_per_class} images: "
        f"{key / images_per_class:.0%} of the class, so the easiest of an anchor's "
        f"{key - 1} classmates in the batch is nearly its nearest in the whole class, and the "
        "hardest nearly its farthest",
        why="needs-paper-data",
        scale=f"the paper profile on Cars196 (classes of about {per_class:.0f} images)",
    )


def _validation_gap(records: Sequence[RunRecord]) -> str:
    """Validation minus test R@1 at the validation-selected epoch, over the distinct runs that
    did not collapse, by the book's rule."""
    gaps = [
        r.selections["validation"]["val_metrics"]["R@1"]
        - r.selections["validation"]["metrics"]["R@1"]
        for r in distinct_outcomes(records)
        if "validation" in r.selections
        and not is_collapsed(r.data.get("spec", {}).get("method", ""), r.training_losses())
    ]
    if len(gaps) < 2:
        return ""
    e = compare_to_threshold(gaps, 0.0, scale=100, unit=" pts").evidence()
    return (
        f"validation minus test R@1 at the validation-selected epoch, {len(gaps)} distinct "
        f"runs that did not collapse: {e['effect']} {e['90% interval']} (mean "
        f"{100 * float(np.mean(gaps)):.1f} pts; the smaller validation gallery adds to it)"
    )


def _validation(study: Study, splits: Any, records: Sequence[RunRecord]) -> Deviation | None:
    val, test = splits.validation, splits.test
    if val is None:
        return None
    ours = (
        f"the {val.num_classes} validation classes are characters held out of the training "
        f"alphabets; the {test.num_classes} test classes are characters of alphabets never seen "
        f"in training; the validation gallery has {len(val)} images, the test's {len(test)}"
    )
    gap = _validation_gap(records)
    return Deviation(
        "validation classes",
        "no validation split (the best epoch is not said to be chosen on held-out data); "
        "Cars196's test classes are other car models of the training classes' domain",
        ours,
        effect=gap,
        why="" if gap else "not-measured",
        scale="" if gap else "this profile's runs evaluated on validation classes",
    )


def implicit_rows(
    study: Study, paper: Study, splits: Any, records: Sequence[RunRecord]
) -> list[Deviation]:
    """The rows of this module for ``study`` (``paper``: the paper profile's study; ``splits``:
    the loaded dataset; ``records``: every run's record)."""
    per_class = len(splits.train) // splits.train.num_classes
    rows = [
        _reduction(study, paper),
        _steps(study, paper, len(splits.train)),
        _group_share(study, paper, per_class),
        _validation(study, splits, records),
    ]
    return [r for r in rows if r is not None]


def selection_gain_distinct(records: Sequence[RunRecord]) -> str:
    """:func:`dmlnb.selection.selection_gain_text` over the distinct runs (bit-identical
    duplicates once, :func:`~dmlnb.experiments.easy_positive.judges.distinct_outcomes`)."""
    distinct = distinct_outcomes(records)
    text = selection_gain_text(distinct)
    dupes = len(records) - len(distinct)
    return text and (
        f"{text} (over distinct outcomes: {dupes} runs bit-identical to another counted once)"
        if dupes
        else text
    )
