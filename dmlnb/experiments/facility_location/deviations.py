"""The chapter's deviations from the paper."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.data.base import DatasetSplits
from dmlnb.data.crops import crop_description, crop_options
from dmlnb.experiments.facility_location.diagnostics import (
    labels_one_move,
    nmi_of_one_move,
)
from dmlnb.experiments.facility_location.presets import (
    Study,
    TableSpec,
    loss_description,
    make_study,
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


def deviations(
    runs: Mapping[str, Mapping[str, Sequence[KeptRun]]],
    ablation: Mapping[float, Sequence[KeptRun]],
    study: Study,
    profile: str,
    *,
    refinements: Mapping[str, Sequence[KeptRun]] | None = None,
    paired: Sequence[KeptRun] = (),
    splits: DatasetSplits | None = None,
) -> pd.DataFrame:
    """Every known deviation of this chapter from the paper at ``profile``: what the paper does,
    what dmlnb does, and its measured effect where the profile's runs measure it cheaply (else
    "not measured at the <profile> profile"); the paper profile's own departures (backbone, learning
    rate, seeds, augmentation) at every profile.

    Args:
        runs, ablation: the tables' runs ``{table: {method: [runs]}}`` and the margin ablation's
            ``{gamma: [runs]}``.
        study, profile: the chapter's design and profile.
        refinements: the clustering runs with another form of Algorithm 2 ``{refinement: [runs]}``
            (:attr:`Study.refinements`), measured against the first table's clustering runs.
        paired: the N-pairs runs on paired batches (:attr:`Study.paired`), measured against the
            first table's N-pairs runs.
        splits: the first table's data, whose validation classes the model-selection row counts.
    """
    nm = f"not measured at the {profile} profile"
    refinements = dict(refinements or {})
    all_runs = (
        [r for per in runs.values() for rs in per.values() for r in rs]
        + [r for rs in ablation.values() for r in rs]
        + [r for rs in refinements.values() for r in rs]
        + list(paired)
    )
    t1 = next((t for t in study.tables if t.table in runs), None)
    main = runs[t1.table] if t1 is not None else {}
    rows = []

    def add(what: str, paper: str, here: str, effect: str = nm) -> None:
        rows.append({"deviation": what, "paper": paper, "here": here, "measured effect": effect})

    if profile != "paper":
        add(
            "scale and data",
            "ImageNet-pretrained Inception-BN fine-tuned on CUB-200-2011, Cars196, SOP; random "
            "227 x 227 crops with horizontal mirroring for training, one centre crop for testing "
            "(Sec. 3.5)",
            f"{t1.config.model if t1 else '—'} from scratch on {t1.config.dataset if t1 else '—'} "
            "(28 x 28), one CPU thread; no augmentation (the images are used as stored, in "
            "training and testing)",
        )
        if t1 is not None:
            c = t1.config
            records = [r.record for r in all_runs]
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
            add(
                "training length and model selection",
                PAPER_TRAINING_LENGTH,
                (
                    f"{c.epochs} epochs of {c.steps_per_epoch} steps"
                    if c.steps_per_epoch
                    else f"{c.epochs} epochs of one pass "
                    f"({len(all_runs[0].extras.get('inside', {}).get('step', [])) // c.epochs} "
                    "steps each)"
                    if all_runs
                    else f"{c.epochs} epochs"
                )
                + f", evaluated every {c.eval_every} epochs ({evaluations} evaluations per run, "
                f"the epochs a protocol chooses from) on the test classes{held}; "
                + (
                    "the best evaluated epoch by Recall@1 on the same test classes that are "
                    "reported (optimistic: a selection on the test set, which the paper does not "
                    "make)"
                    if split == "test"
                    else "the best evaluated epoch by Recall@1 on validation classes held out of "
                    "training, the test classes measured at it; the papers' protocol (the best "
                    "epoch on the test classes) is shown beside it"
                ),
                f"the best epoch is the last evaluated one in {sum(last)} of {len(last)} runs"
                + (
                    f": in most runs {split} Recall@1 was still rising when training stopped"
                    if 2 * sum(last) > len(last)
                    else ""
                )
                + (f"; {gain}" if gain else ""),
            )
        add(
            "Table 2 (Cars196)",
            "Cars196, C/m = 0.25, 20k iterations",
            f"no analogue at the {profile} profile (Table 1's analogue already has Table 2's "
            "batch composition, C/m = 0.25); only the paper profile runs Cars196",
        )
        add(
            "Table 3 analogue",
            "SOP: about 5 images per class, 11,316 test classes, C/m = 0.75",
            "the same Omniglot test set as Table 1 (20 drawings per class, 106 classes), trained "
            "with C/m = 0.75: only SOP's batch composition is copied",
            _saturation_text(runs, nm),
        )
    main_label = f"refinement {study.refinement!r}"
    add(
        "PAM refinement (Algorithm 2)",
        "line 4 scores each candidate medoid by its cluster's F(X_cluster, {j}) + gamma Delta; "
        "clusters are reassigned once per pass; T = 5 passes",
        f"every clustering run of the tables: {FORMS['refinement'][study.refinement]} "
        f"({main_label})"
        + "".join(
            f"; {FORMS['refinement'][a]} (refinement {a!r}) trained beside it at "
            f"{study.tables[0].table}'s setting and seeds"
            for a in study.refinements
        )
        + (
            "; the listing's line 4 does not maximise A, so an update can lower it, against Lemma "
            "1's proof (see the claims)"
            if study.refinement == "paper"
            else ""
        ),
        comparison_text(
            variant_comparison(
                main["clustering"],
                {f"refinement {a!r}": rs for a, rs in refinements.items()},
                ("NMI", "R@1"),
                main_label,
            )
        )
        if refinements and "clustering" in main
        else nm,
    )
    logged = [
        r.extras.get("inside", {})
        for r in all_runs
        if r.method == "clustering"
        and r.spec.get("gamma") == study.gamma
        and r.extras.get("inside", {}).get("gamma")
    ]
    steps = None
    if (
        logged and t1
    ):  # the configured epoch, else the logged step indices (every diag_every-th step)
        last = math.ceil((max(logged[0]["step"]) + 1) / study.diag_every) * study.diag_every
        steps = t1.config.steps_per_epoch or last // t1.config.epochs
    span = (
        f": logged gamma {max(logged[0]['gamma']):.2f} to {min(logged[0]['gamma']):.2f} over a run"
        if logged
        else ""
    )
    add(
        "margin multiplier gamma",
        "initial value and decay steps not stated; decay rate 0.94",
        f"gamma_0 = {study.gamma:g} (our choice, compared with 1 by an ablation measured on the "
        f"test classes), decayed by {study.decay_rate} every epoch ({steps if steps else '?'} "
        f"steps){span}",
        f"{t1.table}: "
        + comparison_text(
            variant_comparison(
                main["clustering"],
                {f"gamma {g:g}": rs for g, rs in ablation.items()},
                ("NMI", "R@1"),
                f"gamma {study.gamma:g}",
            )
        )
        if ablation and "clustering" in main
        else nm,
    )
    add(
        "baseline tuning",
        "not stated",
        "untuned: lr 1e-3 for all methods, triplet margin 0.2, lifted margin 1, N-pairs lambda "
        "0.02; only the clustering loss's gamma was compared on the test classes",
    )
    add(
        "N-pairs loss (Eq. 3)",
        "a softmax for every positive pair (i, j) of the batch, S_ij against S_ik for every k of "
        "another class, plus lambda / m times the sum of the unsquared norms ||f(X_i)||; lambda "
        "not stated",
        loss_description("npair", study)
        + "; lambda = 0.02 (our choice, Sohn's common value)"
        + (
            "".join(
                f"; at C/m = {t.class_ratio:g} {_pair_use(t)[1]} of {t.config.batch_size} images "
                "enter only the penalty"
                for t in study.tables
            )
            if study.npair_pairs == "first"
            else ""
        ),
    )
    add(
        "baselines' batches",
        "C/m stated only for the clustering loss",
        "every method trains on the clustering loss's C/m sampler: "
        + "; ".join(
            f"at C/m = {t.class_ratio:g}, {t.classes_per_batch} classes per batch, "
            f"{_pair_use(t)[2]} of them with one image, leaving the pair losses {_pair_use(t)[0]} "
            "positive pairs"
            for t in study.tables
        )
        + (
            "; N-pairs also on paired batches as Sohn's loss was made for "
            f"({_composition(study.paired)}, C/m = {study.paired.class_ratio:g}) at "
            f"{study.paired.table}'s setting and seeds"
            if study.paired
            else ""
        ),
        comparison_text(
            variant_comparison(
                main["npair"],
                {"paired batches": paired},
                ("NMI", "R@1"),
                f"N-pairs at C/m = {t1.class_ratio:g}",
            )
        )
        if paired and "npair" in main
        else nm,
    )
    add(
        "batch sampling",
        "'we simply sample m (batch size) examples and labels at random', guarding against "
        "pathological batches by keeping the number of distinct classes C 'within a reasonable "
        "range' (Sec. 3.5)",
        "ClassRatioSampler: exactly C = round(C/m x m) classes in every batch, each with m // C "
        "or m // C + 1 images: "
        + "; ".join(
            f"at C/m = {t.class_ratio:g}, {t.classes_per_batch} classes, " + _composition(t)
            for t in study.tables
        ),
    )
    add(
        "evaluation of unnormalised baselines",
        "not stated",
        "cosine neighbours and k-means on L2-normalised embeddings for every method, although "
        "lifted structure and N-pairs train unnormalised",
    )
    toy_labels = toy_points()[1]
    t1_move = (
        nmi_of_one_move(t1.classes_per_batch, t1.config.batch_size // t1.classes_per_batch)
        if t1
        else math.nan
    )
    add(
        "Figure 2 / 3 toy",
        "an illustration (2-D embedding, no training details)",
        "free points on the unit circle, every loss on L2-normalised points (lifted structure "
        "and N-pairs too), N-pairs and Algorithm 2 in the paper's forms (Eq. 3: every positive "
        "pair, the penalty on the norms; Algorithm 2 as listed), 300 full-batch Adam steps; "
        f"clustering loss with gamma = {TOY_GAMMA:g} and no decay: one misplaced point of the "
        f"toy's {len(toy_labels)} costs 1 - NMI = {labels_one_move(toy_labels):.4f}, so gamma = "
        f"{TOY_GAMMA:g} asks a margin of {TOY_GAMMA * labels_one_move(toy_labels):.3f} per point"
        + (
            f", about what gamma_0 = {study.gamma:g} asks in a batch of {t1.config.batch_size} "
            f"({study.gamma:g} x {t1_move:.4f} = {study.gamma * t1_move:.3f})"
            if t1
            else ""
        )
        + f"; 'merged' = groups closer than {MERGE_DEGREES:g} degrees (our threshold)",
    )
    paper = make_study("paper")
    p1 = paper.tables[0].config
    add(
        "backbone (paper profile)",
        "Inception with batch normalisation (Inception-BN, Ioffe & Szegedy 2015), "
        "ImageNet-pretrained",
        f"torchvision's {p1.model} (Inception v1, the closest backbone dmlnb has) with a batch "
        "normalisation after every convolution, ImageNet-pretrained. It differs from "
        "Inception-BN in each module's '5 x 5' branch (one 3 x 3 convolution, a known "
        "torchvision quirk, where Inception-BN stacks two 3 x 3), in having two 28 x 28 modules "
        "(3a, 3b) where Inception-BN has three (3a-3c), in max-pooling between stages where "
        "Inception-BN reduces the resolution inside modules 3c and 4e, and in its ImageNet "
        "weights",
    )
    add(
        "learning rate (paper profile)",
        "not stated (RMSprop)",
        f"{p1.optimizer} lr {p1.lr:g}: our choice, not tuned",
    )
    add(
        "seeds (paper profile)",
        "not stated",
        f"{len(paper.seeds)} seed{'s' if len(paper.seeds) > 1 else ''} "
        f"({', '.join(map(str, paper.seeds))}) per table"
        + (
            ": with one run per side no comparison holds or fails by the book's rule"
            if len(paper.seeds) < 3
            else ", the fewest with which the book's rule decides a comparison"
        ),
    )
    add(
        "augmentation (paper profile)",
        "images resized to 256 x 256, random 227 x 227 crops and horizontal mirroring; one centre "
        "crop for testing",
        crop_description(*crop_options(p1.dataset_options)),
    )
    add("numeric precision (paper profile)", "not stated", precision_description(p1))
    add(
        "timings",
        "TensorFlow (the paper names no device)",
        "PyTorch on one CPU thread of a shared 2-core machine; the runs' step times were logged "
        "at different machine loads, so no timing is compared across runs",
    )
    add(
        "provenance of the runs",
        "—",
        provenance_text(provenance_frame(r.record for r in all_runs))
        + "; a record is reloaded when its configuration "
        "and method settings match, whatever the code version",
        nm,
    )
    return pd.DataFrame(rows)


def _pair_use(table: TableSpec) -> tuple[int, int, int]:
    """For the pair losses on ``table``'s batches (:class:`~dmlnb.samplers.ClassRatioSampler`:
    ``B mod C`` classes with ``B // C + 1`` images, the others ``B // C``): the positive pairs of a
    batch, the images outside the one pair per class the N-pairs loss takes, and the
    classes of one image."""
    b, c = table.config.batch_size, table.classes_per_batch
    per, extra = divmod(b, c)
    pairs = extra * math.comb(per + 1, 2) + (c - extra) * math.comb(per, 2)
    singles = c - extra if per == 1 else 0
    return pairs, b - 2 * (c - singles), singles


def _composition(table: TableSpec) -> str:
    """How many classes of a :class:`~dmlnb.samplers.ClassRatioSampler` batch have how many images:
    ``"32 x 4 images"`` or ``"32 x 2 and 64 x 1 images"``."""
    b, c = table.config.batch_size, table.classes_per_batch
    per, extra = divmod(b, c)
    parts = ([f"{extra} x {per + 1}"] if extra else []) + (
        [f"{c - extra} x {per}"] if c - extra else []
    )
    return " and ".join(parts) + " images"


def _saturation_text(runs: Mapping[str, Mapping[str, Sequence[KeptRun]]], nm: str) -> str:
    per = runs.get("Table 3")
    if not per:
        return nm
    k = [m for m in next(iter(per.values()))[0].metrics if m.startswith("R@")]
    top = max(k, key=lambda m: int(m[2:]))
    means = [100 * float(np.mean([r.metrics[top] for r in rs])) for rs in per.values()]
    return f"{top} of every method lies in {min(means):.1f}-{max(means):.1f}%: at its ceiling"
