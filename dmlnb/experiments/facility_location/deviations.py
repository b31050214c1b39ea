"""The chapter's deviations from the paper as :class:`~dmlnb.chapter.Deviation` rows, built from
the study's configuration and the runs (:func:`deviations`), rendered by
:func:`dmlnb.chapter.deviations_frame`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dmlnb.chapter import Deviation
from dmlnb.data.base import DatasetSplits
from dmlnb.data.crops import crop_description, crop_options
from dmlnb.experiments.facility_location.diagnostics import (
    labels_one_move,
    nmi_of_one_move,
)
from dmlnb.experiments.facility_location.presets import (
    Study,
    TableSpec,
    composition,
    loss_description,
    make_study,
    pair_use,
    sop_test_text,
)
from dmlnb.experiments.facility_location.runs import (
    KeptRun,
)
from dmlnb.experiments.facility_location.spec import (
    FORMS,
)
from dmlnb.experiments.facility_location.tables import (
    comparison_text,
    variant_comparison,
)
from dmlnb.experiments.facility_location.toy import (
    MERGE_DEGREES,
    TOY_GAMMA,
    toy_points,
)
from dmlnb.reporting import (
    provenance_frame,
    provenance_text,
)
from dmlnb.selection import selection_gain_text
from dmlnb.training import precision_description

#: How the paper trains and which iteration it reports (Sec. 4.1 and the tables' captions): a
#: fixed iteration, no selection.
PAPER_TRAINING_LENGTH = (
    "a fixed iteration, no selection: 'The training procedure for all the methods converged at "
    "10k iterations for the CUB200-2011 and at 20k iterations for the Cars196 and the Stanford "
    "online products datasets' (Sec. 4.1); Tables 1-3 report each method '@10k' or '@20k "
    "iterations'"
)


@dataclass(frozen=True)
class Measured:
    """What the deviation rows read: the tables' runs ``{table: {method: [runs]}}``, the margin
    ablation's ``{gamma: [runs]}``, the other forms of Algorithm 2 ``{form: [runs]}``, the
    N-pairs runs on paired batches and the first table's data (``None``: not loaded)."""

    runs: Mapping[str, Mapping[str, Sequence[KeptRun]]]
    ablation: Mapping[float, Sequence[KeptRun]]
    refinements: Mapping[str, Sequence[KeptRun]]
    paired: Sequence[KeptRun]
    splits: DatasetSplits | None

    @property
    def every(self) -> list[KeptRun]:
        """Every run, the tables' first."""
        return (
            [r for per in self.runs.values() for rs in per.values() for r in rs]
            + [r for rs in self.ablation.values() for r in rs]
            + [r for rs in self.refinements.values() for r in rs]
            + list(self.paired)
        )


def _not_measured(profile: str, scale: str) -> dict[str, str]:
    return {"why": "not-measured", "scale": f"{scale} (not run at the {profile} profile)"}


def deviations(
    runs: Mapping[str, Mapping[str, Sequence[KeptRun]]],
    ablation: Mapping[float, Sequence[KeptRun]],
    study: Study,
    profile: str,
    *,
    refinements: Mapping[str, Sequence[KeptRun]] | None = None,
    paired: Sequence[KeptRun] = (),
    splits: DatasetSplits | None = None,
) -> list[Deviation]:
    """Every known deviation of this chapter from the paper at ``profile``: what the paper does,
    what dmlnb does (from ``study``'s configuration and the runs), and the measured effect where
    the profile's runs measure it (else why not and at which scale); the paper profile's own
    departures (backbone, learning rate, seeds, augmentation) at every profile.

    Args:
        runs, ablation: the tables' runs ``{table: {method: [runs]}}`` and the margin ablation's
            ``{gamma: [runs]}``.
        study, profile: the chapter's design and profile.
        refinements: the clustering runs with another form of Algorithm 2 ``{refinement: [runs]}``
            (:attr:`Study.refinements`), measured against the first table's clustering runs.
        paired: the N-pairs runs on paired batches (:attr:`Study.paired`), measured against the
            first table's N-pairs runs.
        splits: the first table's data, whose classes the rows count.
    """
    m = Measured(runs, ablation, dict(refinements or {}), list(paired), splits)
    rows = _scale_rows(m, study, profile) if profile != "paper" else []
    return [
        *rows,
        *_algorithm_rows(m, study, profile),
        *_baseline_rows(m, study, profile),
        _toy_row(study),
        *_paper_profile_rows(),
        _provenance_row(m),
    ]


def _first(m: Measured, study: Study) -> TableSpec | None:
    return next((t for t in study.tables if t.table in m.runs), None)


def _scale_rows(m: Measured, study: Study, profile: str) -> list[Deviation]:
    """The profile's scale and data, training length and selection, the tables it has no
    analogue of (below the paper profile)."""
    t1 = _first(m, study)
    size = t1.config.dataset_options.get("image_size") if t1 else None
    test = m.splits.test if m.splits is not None else None
    rows = [
        Deviation(
            "scale and data",
            "ImageNet-pretrained Inception-BN fine-tuned on CUB-200-2011, Cars196, SOP; random "
            "227 x 227 crops with horizontal mirroring for training, one centre crop for testing "
            "(Sec. 3.5)",
            f"{t1.config.model if t1 else '—'} from scratch on {t1.config.dataset if t1 else '—'} "
            + (f"({size} x {size}), " if size else "")
            + "one CPU thread; no augmentation (the images are used as stored, in training and "
            "testing)",
            why="needs-paper-data",
            scale="the paper profile (a GPU, the paper's datasets and backbone)",
        )
    ]
    if t1 is not None:
        rows.append(_training_row(m, t1))
    rows.append(
        Deviation(
            "Table 2 (Cars196)",
            "Cars196, C/m = 0.25, 20k iterations",
            f"no analogue at the {profile} profile (Table 1's analogue already has Table 2's "
            "batch composition, C/m = 0.25); only the paper profile runs Cars196",
            why="needs-paper-data",
            scale="the paper profile on Cars196",
        )
    )
    per_class = f"{len(test) // test.num_classes} drawings per class, " if test else ""
    effect = _saturation_text(m.runs)
    rows.append(
        Deviation(
            "Table 3 analogue",
            f"SOP: {sop_test_text()}, C/m = 0.75",
            f"the same {t1.config.dataset if t1 else ''} test set as Table 1 ({per_class}"
            f"{test.num_classes if test else '?'} classes), trained with C/m = 0.75: only SOP's "
            "batch composition is copied",
            **({"effect": effect} if effect else _not_measured(profile, "the Table 3 analogue")),
        )
    )
    return rows


def _training_row(m: Measured, t1: TableSpec) -> Deviation:
    """Training length, evaluations and the protocol that selects the kept epoch."""
    c, every, splits = t1.config, m.every, m.splits
    records = [r.record for r in every]
    last = [r.best_is_last for r in records]
    split = "validation" if any(r.selected_on == "validation" for r in records) else "test"
    gain = selection_gain_text(records)
    evaluations = -(-c.epochs // c.eval_every)  # the last epoch is always evaluated
    held = (
        f" and on {splits.validation.num_classes} validation classes held out of the "
        f"{splits.validation.num_classes + splits.train.num_classes} training classes "
        f"(training on {splits.train.num_classes})"
        if splits is not None and splits.validation is not None
        else ""
    )
    if c.steps_per_epoch:
        length = f"{c.epochs} epochs of {c.steps_per_epoch} steps"
    elif every:
        steps = len(every[0].extras.get("inside", {}).get("step", [])) // c.epochs
        length = f"{c.epochs} epochs of one pass ({steps} steps each)"
    else:
        length = f"{c.epochs} epochs"
    return Deviation(
        "training length and model selection",
        PAPER_TRAINING_LENGTH,
        length + f", evaluated every {c.eval_every} epochs ({evaluations} evaluations per run, "
        f"the epochs a protocol chooses from) on the test classes{held}; "
        + (
            "the best evaluated epoch by Recall@1 on the same test classes that are reported "
            "(optimistic: a selection on the test set, which the paper does not make)"
            if split == "test"
            else "the best evaluated epoch by Recall@1 on validation classes held out of "
            "training, the test classes measured at it; the claims are judged at the last epoch "
            "too (this paper's protocol) and the best test-class epoch (other papers')"
        ),
        effect=f"the best epoch is the last evaluated one in {sum(last)} of {len(last)} runs"
        + (
            f": in most runs {split} Recall@1 was still rising when training stopped"
            if 2 * sum(last) > len(last)
            else ""
        )
        + (f"; {gain}" if gain else ""),
    )


def _versus(main: Sequence[KeptRun], others: Mapping[str, Sequence[KeptRun]], label: str) -> str:
    return comparison_text(variant_comparison(main, others, ("NMI", "R@1"), label))


def _algorithm_rows(m: Measured, study: Study, profile: str) -> list[Deviation]:
    """Algorithm 2's form and the margin multiplier, with their comparisons where run."""
    t1 = _first(m, study)
    main = m.runs[t1.table] if t1 is not None else {}
    label = f"refinement {study.refinement!r}"
    pam = (
        {
            "effect": _versus(
                main["clustering"],
                {f"refinement {a!r}": rs for a, rs in m.refinements.items()},
                label,
            )
        }
        if m.refinements and "clustering" in main
        else _not_measured(profile, "the variant of Algorithm 2 beside the listing")
    )
    gamma = (
        {
            "effect": f"{t1.table}: "
            + _versus(
                main["clustering"],
                {f"gamma {g:g}": rs for g, rs in m.ablation.items()},
                f"gamma {study.gamma:g}",
            )
        }  # type: ignore[union-attr]
        if m.ablation and "clustering" in main
        else _not_measured(profile, "the margin ablation")
    )
    return [
        Deviation(
            "PAM refinement (Algorithm 2)",
            "line 4 scores each candidate medoid by its cluster's F(X_cluster, {j}) + gamma "
            "Delta; clusters are reassigned once per pass; T = 5 passes",
            f"every clustering run of the tables: {FORMS['refinement'][study.refinement]} "
            f"({label})"
            + "".join(
                f"; {FORMS['refinement'][a]} (refinement {a!r}) trained beside it at "
                f"{study.tables[0].table}'s setting and seeds"
                for a in study.refinements
            )
            + (
                "; the listing's line 4 does not maximise A, so an update can lower it, against "
                "Lemma 1's proof (see the claims)"
                if study.refinement == "paper"
                else ""
            ),
            **pam,
        ),
        Deviation(
            "margin multiplier gamma",
            "initial value and decay steps not stated; decay rate 0.94",
            f"gamma_0 = {study.gamma:g} (our choice, compared with 1 by an ablation measured on "
            f"the test classes), decayed by {study.decay_rate} every epoch{_gamma_span(m, study)}",
            **gamma,
        ),
    ]


def _gamma_span(m: Measured, study: Study) -> str:
    """The decay's steps and the logged span of gamma over a main clustering run."""
    t1 = _first(m, study)
    logged = [
        r.extras.get("inside", {})
        for r in m.every
        if r.method == "clustering"
        and r.spec.get("gamma") == study.gamma
        and r.extras.get("inside", {}).get("gamma")
    ]
    steps = None
    if logged and t1:  # the configured epoch, else the logged step indices (every diag_every-th)
        last = math.ceil((max(logged[0]["step"]) + 1) / study.diag_every) * study.diag_every
        steps = t1.config.steps_per_epoch or last // t1.config.epochs
    span = (
        f": logged gamma {max(logged[0]['gamma']):.2f} to {min(logged[0]['gamma']):.2f} over a run"
        if logged
        else ""
    )
    return f" ({steps if steps else '?'} steps){span}"


def _baseline_rows(m: Measured, study: Study, profile: str) -> list[Deviation]:
    """How the baselines train and are evaluated: tuning, N-pairs' form, their batches."""
    t1 = _first(m, study)
    main = m.runs[t1.table] if t1 is not None else {}
    paired = (
        {
            "effect": _versus(
                main["npair"], {"paired batches": m.paired}, f"N-pairs at C/m = {t1.class_ratio:g}"
            )
        }  # type: ignore[union-attr]
        if m.paired and "npair" in main
        else _not_measured(profile, "N-pairs on paired batches")
    )
    first_pair = "".join(
        f"; at C/m = {t.class_ratio:g} {pair_use(t)[1]} of {t.config.batch_size} images enter "
        "only the penalty"
        for t in study.tables
    )
    return [
        Deviation(
            "baseline tuning",
            "not stated",
            "untuned: lr 1e-3 for all methods, triplet margin 0.2, lifted margin 1, N-pairs lambda "
            "0.02; only the clustering loss's gamma was compared on the test classes",
            **_not_measured(profile, "a search of the baselines' settings on validation classes"),
        ),
        Deviation(
            "N-pairs loss (Eq. 3)",
            "a softmax for every positive pair (i, j) of the batch, S_ij against S_ik for every k "
            "of another class, plus lambda / m times the sum of the unsquared norms ||f(X_i)||; "
            "lambda not stated",
            loss_description("npair", study)
            + "; lambda = 0.02 (our choice, Sohn's common value)"
            + (first_pair if study.npair_pairs == "first" else ""),
            **_not_measured(profile, "N-pairs with Sohn's pairs and penalty"),
        ),
        Deviation(
            "baselines' batches",
            "C/m stated only for the clustering loss",
            "every method trains on the clustering loss's C/m sampler: "
            + "; ".join(
                f"at C/m = {t.class_ratio:g}, {t.classes_per_batch} classes per batch, "
                f"{pair_use(t)[2]} of them with one image, leaving the pair losses "
                f"{pair_use(t)[0]} positive pairs"
                for t in study.tables
            )
            + (
                "; N-pairs also on paired batches as Sohn's loss was made for "
                f"({composition(study.paired)}, C/m = {study.paired.class_ratio:g}) at "
                f"{study.paired.table}'s setting and seeds"
                if study.paired
                else ""
            ),
            **paired,
        ),
        Deviation(
            "batch sampling",
            "'we simply sample m (batch size) examples and labels at random', guarding against "
            "pathological batches by keeping the number of distinct classes C 'within a "
            "reasonable range' (Sec. 3.5)",
            "ClassRatioSampler: exactly C = round(C/m x m) classes in every batch, each with "
            "m // C or m // C + 1 images: "
            + "; ".join(
                f"at C/m = {t.class_ratio:g}, {t.classes_per_batch} classes, " + composition(t)
                for t in study.tables
            ),
            **_not_measured(profile, "random batches with C in a range"),
        ),
        Deviation(
            "evaluation of unnormalised baselines",
            "not stated",
            "cosine neighbours and k-means on L2-normalised embeddings for every method, although "
            "lifted structure and N-pairs train unnormalised",
            **_not_measured(profile, "the same runs evaluated on unnormalised embeddings"),
        ),
    ]


def _toy_row(study: Study) -> Deviation:
    """The Figure 2 / 3 toy: free points, the paper's forms, the margin per misplaced point."""
    t1 = study.tables[0]
    labels = toy_points()[1]
    move = labels_one_move(labels)
    t1_move = nmi_of_one_move(t1.classes_per_batch, t1.config.batch_size // t1.classes_per_batch)
    return Deviation(
        "Figure 2 / 3 toy",
        "an illustration (2-D embedding, no training details)",
        "free points on the unit circle, every loss on L2-normalised points (lifted structure "
        "and N-pairs too), N-pairs and Algorithm 2 in the paper's forms (Eq. 3: every positive "
        "pair, the penalty on the norms; Algorithm 2 as listed), 300 full-batch Adam steps; "
        f"clustering loss with gamma = {TOY_GAMMA:g} and no decay: one misplaced point of the "
        f"toy's {len(labels)} costs 1 - NMI = {move:.4f}, so gamma = {TOY_GAMMA:g} asks a margin "
        f"of {TOY_GAMMA * move:.3f} per point, about what gamma_0 = {study.gamma:g} asks in a "
        f"batch of {t1.config.batch_size} ({study.gamma:g} x {t1_move:.4f} = "
        f"{study.gamma * t1_move:.3f}); 'merged' = groups closer than {MERGE_DEGREES:g} degrees "
        "(our threshold)",
        why="structurally-untestable",
        scale="none: the paper's figure is an illustration, without a training set-up to compare",
    )


PAPER_CROPS = (227, 256, 0)  # Sec. 3.5's 256 x 256 resize, 227 crops (crop_options' order)


def _paper_profile_rows() -> list[Deviation]:
    """Where the paper profile departs from the paper too, each with why its effect is not measured
    and the runs that would measure it (the paper profile alone holds one side), and timings."""
    paper = make_study("paper")
    p1 = paper.tables[0].config
    n, cub = len(paper.seeds), "CUB-200-2011 on a GPU"
    same_crops = crop_options(p1.dataset_options) == PAPER_CROPS
    return [
        Deviation(
            "backbone (paper profile)",
            "Inception with batch normalisation (Inception-BN, Ioffe & Szegedy 2015), "
            "ImageNet-pretrained",
            f"torchvision's {p1.model} (Inception v1, the closest backbone dmlnb has) with a batch "
            "normalisation after every convolution, ImageNet-pretrained. It differs from "
            "Inception-BN in each module's '5 x 5' branch (one 3 x 3 convolution, a known "
            "torchvision quirk, where Inception-BN stacks two 3 x 3), in having two 28 x 28 "
            "modules (3a, 3b) where Inception-BN has three (3a-3c), in max-pooling between "
            "stages where Inception-BN reduces the resolution inside modules 3c and 4e, and in "
            "its ImageNet weights",
            why="needs-paper-data",
            scale=f"the paper profile with an ImageNet-pretrained Inception-BN (not in dmlnb) "
            f"beside {p1.model}, on {cub}",
        ),
        Deviation(
            "learning rate (paper profile)",
            "not stated (RMSprop)",
            f"{p1.optimizer} lr {p1.lr:g}: our choice, not tuned",
            why="needs-gpu",
            scale=f"the paper profile on {cub}, a sweep of the rate chosen on validation classes",
        ),
        Deviation(
            "seeds (paper profile)",
            "not stated",
            f"{n} seed{'s' if n > 1 else ''} ({', '.join(map(str, paper.seeds))}) per table"
            + (
                ": with one run per side no comparison holds or fails by the book's rule"
                if n < 3
                else ", the fewest with which the book's rule decides a comparison"
            ),
            why="structurally-untestable",
            scale="none: the paper does not say how many runs its numbers are (no run can tell)",
        ),
        Deviation(
            "augmentation (paper profile)",
            "images resized to 256 x 256, random 227 x 227 crops and horizontal mirroring; one "
            "centre crop for testing",
            crop_description(*crop_options(p1.dataset_options)),
            why="structurally-untestable" if same_crops else "needs-gpu",
            scale="none: the paper profile crops as the paper does"
            if same_crops
            else f"the paper profile on {cub}, with the paper's crops beside these",
        ),
        Deviation(
            "numeric precision (paper profile)",
            "not stated",
            precision_description(p1),
            why="needs-gpu",
            scale=f"the paper profile on {cub}, amp on and off (float32: TensorFlow's default)",
        ),
        Deviation(
            "timings",
            "TensorFlow (the paper names no device)",
            "PyTorch on one CPU thread of a shared 2-core machine; the runs' step times were "
            "logged at different machine loads, so no timing is compared across runs",
            why="not-measured",
            scale="every method timed on one idle machine",
        ),
    ]


def _provenance_row(m: Measured) -> Deviation:
    """How the runs were made and when a record is reloaded."""
    return Deviation(
        "provenance of the runs",
        "—",
        provenance_text(provenance_frame(r.record for r in m.every))
        + "; a record is reloaded when its configuration and method settings match, whatever the "
        "code version",
        why="structurally-untestable",
        scale="none: how the runs were made, not a setting whose effect a run measures",
    )


def _saturation_text(runs: Mapping[str, Mapping[str, Sequence[KeptRun]]]) -> str:
    """Where Table 3's analogue's largest Recall@K lies for every method ("" without runs)."""
    per = runs.get("Table 3")
    if not per:
        return ""
    k = [m for m in next(iter(per.values()))[0].metrics if m.startswith("R@")]
    top = max(k, key=lambda m: int(m[2:]))
    means = [100 * float(np.mean([r.metrics[top] for r in rs])) for rs in per.values()]
    return f"{top} of every method lies in {min(means):.1f}-{max(means):.1f}%: at its ceiling"
