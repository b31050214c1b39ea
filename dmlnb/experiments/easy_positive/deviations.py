"""The chapter's departures from the paper as :class:`~dmlnb.chapter.Deviation` rows, built by
:func:`deviation_rows` from the configuration of the profile (and of the ``paper`` profile where it
departs too), the loaded dataset and what the records or the one diagnostic rerun measure;
rendered by :func:`dmlnb.chapter.deviations_frame`. The rows are data (:data:`ROWS`); a row whose
effect this profile does not measure says why, with its typed reason (a rerun of this profile
could: ``"not-measured"``; the paper's data or a GPU: ``"needs-paper-data"``, ``"needs-gpu"``;
nothing could, the paper giving no number or setting: ``"structurally-untestable"``) and the scale
that would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd
import torch

from dmlnb.chapter import Deviation
from dmlnb.data.crops import crop_description, crop_options
from dmlnb.experiments.easy_positive.design import Study, make_study
from dmlnb.experiments.easy_positive.diagnostics import (
    collapsed_groups,
    drop_rule_effect,
    last_epoch_fall,
)
from dmlnb.experiments.easy_positive.judges import table1_baselines_effect
from dmlnb.experiments.easy_positive.reported import DATASET_NAMES
from dmlnb.experiments.easy_positive.setting_rows import implicit_rows, selection_gain_distinct
from dmlnb.experiments.easy_positive.spec import METHODS
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.reporting import COLLAPSE_BAND, provenance_frame, provenance_text
from dmlnb.training import precision_description

__all__ = [
    "ROWS",
    "deviation_rows",
    "record_provenance",
]

#: Why a row that states what the paper does not give cannot be measured by any run.
_UNSTATED = ("structurally-untestable", "none: the paper does not state it")
#: Why a row of the paper's data, backbones or GPU runs is not measured at a CPU profile.
_PAPER_GPU = ("needs-paper-data", "the paper profile, with a GPU and the paper's datasets")


@dataclass(frozen=True)
class _Context:
    """What the rows read: the study and its configuration, the paper profile's study, the
    dataset's sizes, the records and the diagnostics (see :func:`deviations`)."""

    study: Study
    cfg: TrainConfig
    holdout: Any
    paper: Study
    images_per_class: int
    smallest: int | None
    largest_n: int
    selection: str
    paper_holdout: Any
    paper_seeds: str
    t3: TrainConfig
    prov: dict[str, Any]
    nm: str
    n_coll: int
    groups: list
    key: int
    nca: Any
    curves: pd.DataFrame
    drop: pd.DataFrame
    records: list[RunRecord]
    table1: Mapping[str, Mapping[str, Sequence[float]]]
    calls: Mapping[str, MethodCall]


def _kept_classes(holdout: float | int) -> str:
    """The training classes a run keeps after holding out ``holdout`` (a fraction or a count) as
    validation classes, in words: ``"80%"``, ``"all but 20"``."""
    return f"{1 - holdout:.0%}" if isinstance(holdout, float) else f"all but {holdout}"


def record_provenance(records: Sequence[RunRecord]) -> dict[str, Any]:
    """Code versions and threads of ``records``: which commits and whether the package had
    uncommitted changes (:func:`~dmlnb.reporting.provenance_text`), the thread counts, and the
    range of training seconds."""
    import numpy as np

    frame = provenance_frame(records)
    secs = frame["train seconds"].to_numpy()
    return {
        "code": provenance_text(frame),
        "threads": dict(frame["threads"].value_counts().sort_index()),
        "train seconds": (float(np.nanmin(secs)), float(np.nanmax(secs))),
    }


def _selection(cfg: TrainConfig, splits: Any, holdout: Any) -> str:
    """Where every run of this profile chooses its epoch, in words."""
    val = splits.validation
    if val is None:
        return (
            f"every run is evaluated every {cfg.eval_every} of {cfg.epochs} epochs and keeps its "
            "best epoch by Recall@1 on the test classes it reports (the papers' protocol: "
            "optimistic)"
        )
    return (
        f"every run is evaluated every {cfg.eval_every} of {cfg.epochs} epochs and keeps its "
        f"best epoch by Recall@1 on {val.num_classes} validation classes ({len(val)} images) "
        f"held out of the {val.num_classes + splits.train.num_classes} training classes "
        f"(validation={holdout!r}), so training uses {splits.train.num_classes} classes "
        f"({len(splits.train)} images); the test classes are measured at that epoch, and the "
        "best epoch on the test classes (the book's name for it: the papers' protocol) is "
        "shown beside it"
    )


def deviation_rows(
    study: Study,
    splits: Any,
    curves: pd.DataFrame,
    drop: pd.DataFrame,
    records: Sequence[RunRecord],
    table1: Mapping[str, Mapping[str, Sequence[float]]],
    calls: Mapping[str, MethodCall] = METHODS,
) -> list[Deviation]:
    """Every departure of ``study``'s profile from the paper (Sec. 5.1, 6.1-6.3), and of the
    ``paper`` profile where it departs too, with its measured effect where the records or one
    diagnostic run measure it. ``splits``: the study's dataset; ``curves``:
    :func:`~dmlnb.experiments.easy_positive.diagnostics.loss_curves`; ``drop``:
    :func:`~dmlnb.experiments.easy_positive.diagnostics.drop_rule_diagnosis`; ``records``: every
    run's record; ``table1``: Table 1's R@1 per cell, method and seed; ``calls``: the methods as
    run (:func:`~dmlnb.experiments.easy_positive.spec.methods`)."""
    cfg = study.config
    holdout = cfg.dataset_options.get("validation")
    paper = make_study("paper", validation=True if holdout is not None else None)
    labels = getattr(splits.train, "labels", None)  # 0..C_train - 1
    c = _Context(
        study=study,
        cfg=cfg,
        holdout=holdout,
        paper=paper,
        images_per_class=len(splits.train) // splits.train.num_classes,
        smallest=int(torch.bincount(torch.as_tensor(labels)).min()) if labels is not None else None,
        largest_n=max(study.group_sizes),
        selection=_selection(cfg, splits, holdout),
        paper_holdout=paper.config.dataset_options.get("validation"),
        paper_seeds=f"{len(paper.paper_seeds)} run{'s' if len(paper.paper_seeds) != 1 else ''}",
        t3=paper.table3[0],
        prov=record_provenance(records),
        nm=f"not measured at the {study.profile} profile",
        n_coll=int(curves["collapsed"].sum()),
        groups=sorted(collapsed_groups(curves), key=lambda k: (k[0], k[1])),
        key=study.key_group_size,
        nca=calls["N-pair"].build(num_classes=1, embedding_dim=cfg.embedding_dim),
        curves=curves,
        drop=drop,
        records=list(records),
        table1=table1,
        calls=calls,
    )
    rows = [_deviation(c, *row) for row in ROWS]
    return rows + implicit_rows(study, paper, splits, records)


def _deviation(c: _Context, setting: str, paper: str, ours: Any, measured: Any) -> Deviation:
    """One row of :data:`ROWS` on ``c``: its text computed, its effect or why not."""
    ours = ours(c) if callable(ours) else ours
    measured = measured(c) if callable(measured) else measured
    if isinstance(measured, str):
        return Deviation(setting, paper, ours, effect=measured)
    why, scale = measured
    return Deviation(setting, paper, ours, why=why, scale=scale)


def _augmentation(c: _Context) -> str:
    if c.cfg.dataset in DATASET_NAMES:
        return crop_description(*crop_options(c.cfg.dataset_options))
    return f"none ({c.cfg.dataset})"


def _grid(c: _Context) -> str:
    st = c.study
    seeds = (
        f"{len(st.seeds)} seeds at every n"
        if st.seeds == st.grid_seeds
        else f"{len(st.seeds)} seeds at n = {st.key_group_size} and for N-pair, "
        f"{len(st.grid_seeds)} at the other n"
    )
    size = f" (a training class has {c.images_per_class} images)" if c.images_per_class else ""
    return f"{list(st.group_sizes)}, {seeds}{size}"


def _grid_effect(c: _Context) -> tuple[str, str]:
    if c.largest_n <= 16:
        return ("needs-paper-data", "the paper profile's grid to n = 64 (Cars196's classes)")
    return ("structurally-untestable", "none: the paper states no seeds")


def _padding(c: _Context) -> str | tuple[str, str]:
    if c.smallest is not None and c.smallest >= c.largest_n:
        return (
            f"never applied at the {c.study.profile} profile: its smallest training class has "
            f"{c.smallest} images, its largest n is {c.largest_n}"
        )
    return ("not-measured", "this profile with a sampler that fills a batch with further classes")


def _collapse(c: _Context) -> str:
    return (
        f"{c.n_coll} of {len(c.curves)} Figure 4 runs stay within {COLLAPSE_BAND:.1%} of ln 2 "
        "(S_ap = S_an) over the last two epochs, the book's collapse criterion "
        "(dmlnb.reporting.collapsed): " + ", ".join(f"{m} n = {n}" for m, n in c.groups)
    )


def _table1_cells(c: _Context) -> str:
    return (
        f"{len(c.study.table1)} cell(s): "
        + ", ".join(f"{t.dataset} / {t.model}, {t.embedding_dim}-d" for t in c.study.table1)
        + "; a cell the paper did not run is shown beside the paper's two cells with all four "
        "methods (CUB / GoogLeNet, CAR / GoogLeNet), each in its own columns: other data, so "
        "only the ranking of the methods compares"
    )


def _table2(c: _Context) -> str:
    return (
        f"the paper profile only, {c.paper_seeds} of EPSHN per dataset (n = "
        + ", ".join(f"{t.m_per_class} on {t.dataset}" for t in c.paper.table2)
        + "), when a GPU and the data are present, judged against the best other reported R@1"
        + ("" if c.study.table2 else f"; not run at the {c.study.profile} profile")
    )


def _table3(c: _Context) -> str:
    t3 = c.t3
    return (
        f"the paper profile only, {c.paper_seeds} of EPSHN ({t3.model}, {t3.embedding_dim}-d, "
        f"batch {t3.batch_size}, n = {t3.m_per_class}, lr {t3.lr:g}: the paper's rate for "
        "Cars, SOP and In-Shop) when a GPU and the data are present, test images queried "
        "against the training images (Sec. 5.2); batch all's numbers are the Hotels-50K "
        "authors', not rerun"
        + ("" if c.study.table3 else f"; not run at the {c.study.profile} profile")
    )


def _baselines(c: _Context) -> str:
    return (
        f"N-pair: the EP loss at n = 2 (NCA, temperature {c.nca.temperature:g}, L2-normalised "
        "embeddings), the paper's Sec. 6.1 reading, not Sohn's (2016) loss with an L2 "
        "penalty on unnormalised embeddings; triplet: semi-hard, margin "
        f"{c.calls['triplet'].args['margin']:g}; Proxy-NCA: scale "
        f"{c.calls['Proxy-NCA'].args['scale']:g}, proxies at "
        f"{c.study.proxy_lr_factor:g}x the lr; neither triplet nor Proxy-NCA tuned"
    )


def _paper_selection(c: _Context) -> str:
    pc = c.paper.config
    held = (
        f", which it holds out of the training classes (validation={c.paper_holdout!r}): "
        "Figure 4's, Table 1's and Table 2's runs train on "
        f"{_kept_classes(c.paper_holdout)} of the paper's training classes (the paper on all of "
        "them)"
        if c.paper_holdout is not None
        else ""
    )
    return (
        f"evaluated every {pc.eval_every} of {pc.epochs} epochs, each run keeping its best epoch "
        f"by Recall@1 on the {pc.select_on} classes"
        + (" (optimistic)" if pc.select_on == "test" else "")
        + held
        + f"; Table 3's Hotels-50K runs on the {c.t3.select_on} images (optimistic): their test "
        "hotels are training hotels, so no class-disjoint validation split exists"
    )


def _records(c: _Context) -> str:
    threads = ", ".join(f"{k}: {v}" for k, v in c.prov["threads"].items())
    return f"{c.prov['code']}; threads {threads}; reuse matches the configuration, not the code"


#: Every departure from the paper, as data: ``(setting, the paper's choice, ours (text or a
#: function of the :class:`_Context`), the measured effect (text, or a function giving it) or
#: why it is not measured and the scale that would (a pair, or a function giving one))``.
ROWS: tuple[tuple[str, str, Any, Any], ...] = (
    (
        "training length",
        "40 epochs (Sec. 5.1)",
        lambda c: f"{c.cfg.epochs} epochs",
        lambda c: last_epoch_fall(c.curves) + "; the effect on R@1 is " + c.nm,
    ),
    (
        "optimiser",
        "SGD, lr 5e-4 (Cars), divided by 10 after epochs 20 and 30 (Sec. 5.1)",
        lambda c: f"{c.cfg.optimizer}, constant lr {c.cfg.lr:g}",
        ("not-measured", "this profile with SGD at the paper's rate and steps"),
    ),
    (
        "optimiser (paper profile)",
        "SGD (Sec. 5.1); momentum and weight decay not stated",
        lambda c: (
            f"{c.paper.config.optimizer}, momentum {c.paper.config.momentum:g}, weight "
            f"decay {c.paper.config.weight_decay:g}: the authors' code's settings; lr as the "
            "paper's, divided by 10 after epochs "
            + " and ".join(f"{m:g}" for m in c.paper.config.lr_milestones)
        ),
        _UNSTATED,
    ),
    (
        "numeric precision (paper profile)",
        "not stated",
        lambda c: precision_description(c.paper.config),
        _UNSTATED,
    ),
    (
        "data augmentation",
        "training images resized to 256 x 256, random crops padded by 10 px on each side and "
        "random horizontal flips (Sec. 5.1); test preprocessing not stated",
        _augmentation,
        ("needs-paper-data", "the paper profile's photographs"),
    ),
    (
        "data augmentation (paper profile)",
        "as above",
        lambda c: crop_description(*crop_options(c.paper.config.dataset_options)),
        _PAPER_GPU,
    ),
    (
        "data and network",
        "Cars196 photographs at 256 px, ImageNet-pretrained ResNet-18 (Sec. 6.1)",
        lambda c: (
            f"{c.cfg.dataset}: 28x28 greyscale characters, {c.cfg.model} (width "
            f"{c.cfg.width}) trained from scratch, {c.cfg.embedding_dim}-d"
        ),
        _PAPER_GPU,
    ),
    ("group-size grid", "2 to 64 (Figure 4; no seeds stated)", _grid, _grid_effect),
    (
        "classes smaller than n",
        "a class with fewer than n images gives all of them and the batch is filled with "
        "further classes; the last class gets only the room left (Sec. 5.1)",
        lambda c: (
            "dmlnb.samplers.MPerClassSampler: such a class gives all its images plus "
            "duplicates drawn from them with replacement up to n (as the authors' sampler pads "
            f"every class), so every batch holds {c.cfg.batch_size} / n classes of n images; at "
            "the paper profile this applies wherever a training class has fewer than n images: "
            "SOP, In-Shop and Hotels-50K at n = 4 (the paper's smallest training classes: 2, 1 "
            "and 2 images, Sec. 5.2) and any Cars196 class smaller than Figure 4's n = 32 or 64"
        ),
        _padding,
    ),
    (
        "collapse of single-negative runs",
        "not reported",
        _collapse,
        "the collapse is what the hard positive did to training (the paper's point about hard "
        "positives), so every comparison with a collapsed side is judged, the collapsed runs "
        "named in its note (and, for HPHN against EPHN or EPSHN, the drop rule, which only the "
        "latter apply); only a trend within a method whose every run collapsed (HPHN from n = 2 "
        "to the largest n) is not tested: two collapsed embeddings say nothing about n",
    ),
    (
        "drop rule (authors' code)",
        "not in the paper (Sec. 6.1: EPHN = HPHN at n = 2; an anchor without a semi-hard "
        "negative: not stated); the authors' code of Sep 2019 drops a term only when the anchor "
        "has no candidate positive or negative; the rule that drops a term whose chosen S_ap or "
        "S_an is <= 0 appears in its Mar 2020 revision",
        "the rule of the 2020 revisions, in the Jun 2020 version of the authors' code "
        "(littleredxh/EasyPositiveHardNegative: the <= 0 rule, temperature 0.1, the mean over "
        "the kept terms): EPHN and EPSHN drop terms whose chosen S_ap or S_an is <= 0; HPHN, "
        "which the authors' code does not have, does not; an EPSHN anchor with no semi-hard "
        "negative (none less similar than its easy positive) gets no term",
        lambda c: drop_rule_effect(c.curves, c.drop, c.nm),
    ),
    (
        "duplicate positives",
        "not in the paper",
        lambda c: (
            f"a positive with S_ap > {c.nca.duplicate_threshold:g} is never used, in all "
            "six variants"
        ),
        ("not-measured", "this profile with duplicate_threshold=None (a method argument)"),
    ),
    (
        "model selection",
        "not stated (40 epochs, LR steps at 20 and 30; which epoch is reported is not said)",
        lambda c: c.selection,
        lambda c: (
            selection_gain_distinct(c.records)
            or ("not-measured", "this profile's runs evaluated on validation classes")
        ),
    ),
    (
        "Table 1 cells",
        "CUB and Cars196, each with GoogLeNet, ResNet-18 and ResNet-50, 64-d (Table 1)",
        _table1_cells,
        _PAPER_GPU,
    ),
    (
        "Table 2 (state of the art)",
        "EPSHN, ResNet-50, 512-d on CUB, Cars196, SOP and In-Shop (Sec. 6.3)",
        _table2,
        _PAPER_GPU,
    ),
    (
        "Table 3 (Hotels-50K)",
        "EPSHN256 against batch all, ResNet-50, batch 128, n = 4 (Table 3, Sec. 5.1, 6.3); "
        "learning rate not stated",
        _table3,
        ("needs-paper-data", "the paper profile, with a GPU and Hotels-50K"),
    ),
    (
        "Table 1 baselines",
        "settings not given in the paper; N-pair: Sec. 2.2 writes Sohn's (2016) loss as NCA "
        "on the unit sphere, Sec. 5.1 sets the NCA temperature to 0.1 in all cases, and Sec. "
        "6.1 equates N-pair with EP, HP and BA at n = 2; which N-pair form gave Table 1's row "
        "is not stated",
        _baselines,
        lambda c: table1_baselines_effect(c.table1) or _UNSTATED,
    ),
    (
        "Table 1 group size",
        "not stated (Sec. 6.2, Table 1)",
        lambda c: (
            f"EPSHN, triplet and Proxy-NCA at n = {c.key} (the key comparison's batches, "
            f"{c.cfg.batch_size // c.key} classes of {c.key}), N-pair at n = 2"
        ),
        _UNSTATED,
    ),
    (
        "Batch All loss",
        "Figure 1(b) and Sec. 6.1 describe batch all (every positive and every negative) but "
        "give no formula",
        "ours: one NCA term per (anchor, positive) pair with all the anchor's negatives, "
        "averaged over the pairs",
        ("structurally-untestable", "none: the paper gives no formula"),
    ),
    (
        "Figure 5 measure",
        "Figure 5: the nearest same-class against the nearest other-class similarity of every "
        "training and every test image, compared by eye (no number)",
        "the same scatter, drawn; the claim is judged on a stand-in of ours: nearest-neighbour "
        "accuracy on the training set minus on the test set (a smaller drop: generalises "
        "better)",
        ("structurally-untestable", "none: the paper gives no number to compare with"),
    ),
    (
        "embedding size (paper profile)",
        "Figure 4 (Cars196, ResNet-18): not stated",
        lambda c: f"{c.paper.config.embedding_dim}-d (Table 2's size)",
        _UNSTATED,
    ),
    (
        "model selection (paper profile)",
        "not stated (40 epochs)",
        _paper_selection,
        _UNSTATED,
    ),
    (
        "Figure 6",
        "one joint t-SNE of training and test points",
        "t-SNE of training points, test points placed by openTSNE transform",
        ("structurally-untestable", "none: a t-SNE map is not a measured quantity"),
    ),
    (
        "statistics",
        "no seeds or tests reported",
        "the book's rule with at least three seeds per side; every comparison pairs its two "
        "sides' runs seed by seed, fixed before any run: a seed fixes the network's "
        "initialisation for every method and n, and the batches at one n (the sampler draws "
        "other batches at another n, so runs at different n share only the initialisation; at "
        "n = 2 EP, HP and BA are one N-pair run): a one-sided t-test of the per-seed differences",
        ("structurally-untestable", "none: the paper reports no seeds or tests"),
    ),
    ("run records", "—", _records, ("not-measured", "a retrain of every run")),
    (
        "timings",
        "not reported",
        lambda c: (
            f"per-run training time {c.prov['train seconds'][0]:.0f} s to "
            f"{c.prov['train seconds'][1]:.0f} s on a shared CPU"
        ),
        ("structurally-untestable", "none: the paper reports no timings"),
    ),
)
