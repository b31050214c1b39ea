"""Every deviation of the chapter's runs from the paper, as :class:`~dmlnb.chapter.Deviation`
rows built from the configuration and the runs (:func:`deviation_rows`), rendered by
:func:`~dmlnb.chapter.deviations_frame` (:func:`deviations_table`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.chapter import WHY_NOT_WORDS, Deviation, deviations_frame
from dmlnb.data.crops import crop_description, crop_options
from dmlnb.experiments.discriminative.bound import affine_text
from dmlnb.experiments.discriminative.evidence import PAPER_TRAIN_SETS
from dmlnb.experiments.discriminative.groups import ClusteringSearch
from dmlnb.experiments.discriminative.measured import (
    kmeans_stats_text,
    table2_onehot_text,
    timing_text,
)
from dmlnb.experiments.discriminative.provenance import code_version_text
from dmlnb.experiments.discriminative.spec import (
    PAPER_DATASETS,
    experiment_config,
    variant_unfit,
)
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import compare, provenance_frame
from dmlnb.runs import Run
from dmlnb.selection import selection_gain_text
from dmlnb.training import precision_description

__all__ = [
    "deviations_table",
    "deviation_rows",
    "variant_effect",
]


def _readers_words(row: Deviation) -> str:
    """A row's effect, or why it was not measured in words (the layer's
    :data:`~dmlnb.chapter.WHY_NOT_WORDS`), then what is true of the runs."""
    return row.effect or f"not measured: {WHY_NOT_WORDS[row.why]}: {row.scale}"


def _affine_row(config: TrainConfig, num_classes: int | None) -> Deviation:
    """The last layer's size against the embedding's, and what it does to Lemma 3.1's bound
    (:func:`~dmlnb.experiments.discriminative.bound.affine_text`)."""
    paper = experiment_config("paper").embedding_dim
    classes = " and ".join(f"{c} ({d})" for d, (_, c) in PAPER_TRAIN_SETS.items())
    c, d = num_classes or 0, config.embedding_dim
    why = affine_text(c, d)
    return Deviation(
        "last layer against the embedding (Lemma 3.1's tightness)",
        f"FC({paper}) then FC(C), C = {classes} training classes: D above C (Sec. 4.2)",
        f"FC({d}) then FC({c or 'C'}), no nonlinearity between: the last layer is an affine map "
        f"of the penultimate; D = {d}" + (f", below C = {c}" if why else f", C = {c or 'C'}"),
        effect=(
            why[:1].upper() + why[1:] + "; Sec. 3.1's and Sec. 1's tightness claims are "
            "untestable at this profile"
            if why
            else "none on the bound: D is at least C - 1, so the outputs can reach every centroid"
        ),
    )


def _measured(text: str, why: str, scale: str) -> dict[str, str]:
    """A row's ``effect=text`` when the profile measured it, else ``why`` and ``scale``."""
    return {"effect": text} if text else {"why": why, "scale": scale}


def variant_effect(
    name: str,
    variants: Mapping[str, Sequence[Run]],
    base: Sequence[Run],
    config: TrainConfig,
    num_classes: int | None,
) -> dict[str, str]:
    """The measured effect of the deviation variant ``name`` on R@1 against the one-hot ``base``
    runs (:func:`~dmlnb.reporting.compare`), or why it was not measured: the variant does not fit
    the training classes (:func:`variant_unfit`), or the profile trains no variants."""
    runs = variants.get(name) or []
    if not runs:
        unfit = variant_unfit(name, config, num_classes) if num_classes else ""
        if unfit:
            return {"why": "not-measured", "scale": unfit.removeprefix("not measured: ")}
        return {
            "why": "not-measured",
            "scale": "this profile trains no variant runs (the default profile does)",
        }
    base_r1 = [r.metrics["R@1"] for r in base]
    v = compare([r.metrics["R@1"] for r in runs], base_r1, scale=100, unit=" pts")
    e = v.evidence()
    return {
        "effect": f"R@1 {100 * np.mean([r.metrics['R@1'] for r in runs]):.1f} vs "
        f"{100 * np.mean(base_r1):.1f}: {e['effect']} {e['90% interval']} "
        f"({e['runs per side']} runs; 'the variant is better': {v})"
    }


def _setup_rows(
    config: TrainConfig,
    profile: str,
    effect_of: Any,
    every_run: Sequence[Run],
) -> list[Deviation]:
    """The rows of the training setup: data, network, optimiser, batches, loss."""
    return [
        *_data_rows(config, profile, effect_of),
        *_training_rows(config, profile, effect_of, every_run),
    ]


def _data_rows(config: TrainConfig, profile: str, effect_of: Any) -> list[Deviation]:
    """Data, backbone, distance, datasets, embedding size, optimiser, heads."""
    image_size = config.dataset_options.get("image_size")
    size_text = f" at {image_size}x{image_size} pixels" if image_size else ""
    trains = (
        f"this execution trains {config.dataset}; the paper profile trains "
        f"{PAPER_DATASETS[experiment_config('paper').dataset]} and, with overrides={{'dataset': "
        f"'cars196'}}, CAR196 in a run set of its own (Tables 2, 3, 5 and 8, 3 seeds)"
    )
    paper_profile = PAPER_PROFILE
    return [
        Deviation(
            "data and backbone",
            "ImageNet GoogLeNet fine-tuned on CUB-200-2011 / CAR196 (image size not stated)",
            f"{config.dataset}{size_text}, {config.model} "
            + ("ImageNet-pretrained" if config.pretrained else "trained from scratch"),
            why="needs-paper-data",
            scale=paper_profile,
        ),
        Deviation(
            "retrieval distance",
            "l2 distance (Sec. 3: 'We use l2 distance in this work')",
            "cosine similarity at both layers (each embedding L2-normalised, then ranked): the "
            "order of the l2 distance between normalised embeddings, not between the layers' raw "
            "outputs; NMI's k-means clusters the same L2-normalised embeddings "
            "(dmlnb.evaluation.evaluate, metric='cosine')",
            why="not-measured",
            scale=f"every run at the {profile} profile is scored by cosine similarity; no run "
            "is scored on the layers' raw outputs",
        ),
        Deviation(
            "CAR196",
            "Tables 2, 3, 5, 7 and 8 on CUB-200-2011 and CAR196",
            f"{trains}; Table 7's training times are not measured on either",
            why="needs-paper-data",
            scale="the paper profile with overrides={'dataset': 'cars196'}",
        ),
        Deviation(
            "embedding size D",
            "256 for the discriminative loss; the Semi-hard, Lifted structure, N-pair and "
            "Clustering rows of Tables 4-5 are Song et al. 2017's (Tables 1-2 there, the same "
            "numbers), trained at d = 64",
            f"{config.embedding_dim} for every method",
            **effect_of("D=256"),
        ),
        Deviation(
            "optimiser and schedule",
            "optimiser not named; 'an initial learning rate of 0.1' for the two new layers, "
            "decreased 'by a factor of 2 every 5 epochs', the GoogLeNet layers at a ten times "
            "smaller rate (Sec. 4.2)",
            (
                f"{config.optimizer} with momentum {config.momentum:g} (our choice), the paper's "
                "learning rates and schedule"
                if profile == "paper"
                else f"{config.optimizer}, lr {config.lr:g}, constant, the same lr everywhere; "
                "the paper profile uses SGD with momentum 0.9, our choice"
            ),
            why="not-measured",
            scale=f"every run at the {profile} profile trains with {config.optimizer} at lr "
            f"{config.lr:g}"
            + (" with the paper's schedule" if profile == "paper" else ", constant")
            + "; no run with another optimiser or schedule",
        ),
        Deviation(
            "network heads",
            "backbone, then FC(256) and FC(C); the loss on the last layer, the embedding the "
            "second-to-last (Sec. 4.2); the baselines' rows are results reported elsewhere (Sec. "
            "4.4): the Semi-hard, Lifted structure, N-pair and Clustering rows are Song et al. "
            "2017's, with their networks (d = 64)",
            f"the discriminative network has two new layers, FC({config.embedding_dim}) then "
            f"FC(C), the baselines one, FC({config.embedding_dim}) after the same backbone: every "
            f"method embeds at a {config.embedding_dim}-d layer, but the discriminative loss "
            "trains one more layer",
            why="not-measured",
            scale=f"every baseline at the {profile} profile has one new layer, "
            f"FC({config.embedding_dim}); no baseline with two",
        ),
    ]


def _training_rows(
    config: TrainConfig, profile: str, effect_of: Any, every_run: Sequence[Run]
) -> list[Deviation]:
    """The N-pair baseline, weight decay, epochs, augmentation, batches, loss scale."""
    opt = f"{config.optimizer} at lr {config.lr:g}" + (
        ", whose weight decay is an L2 term added to the gradient before Adam's per-parameter "
        "scaling (coupled, not AdamW's decoupled decay)"
        if config.optimizer == "adam"
        else ""
    )
    pairs_per_batch = config.batch_size // config.m_per_class
    paper_profile = PAPER_PROFILE
    return [
        Deviation(
            "N-pair baseline",
            "Sohn's N-pair loss; the row's numbers are Song et al. 2017's (d = 64), though it "
            "cites Sohn",
            f"NPairLoss on the first pair of each class in the batch: with {config.m_per_class} "
            f"images per class, {2 * pairs_per_batch} of the {config.batch_size} images of a "
            f"batch ({pairs_per_batch} classes x 2) enter the loss, the others only its L2 penalty",
            why="not-measured",
            scale=f"every N-pair run at the {profile} profile uses the first pair of each class "
            "in the batch; no run uses every pair",
        ),
        Deviation(
            "weight decay",
            "5e-4, with the learning rate 0.1 of the new layers (Sec. 4.2)",
            f"0; the variant that measures the paper's 5e-4 trains with {opt}, not at the paper's "
            "learning rate",
            **effect_of("weight decay 5e-4"),
        ),
        Deviation(
            "epochs",
            "up to 40",
            f"{config.epochs} ({100 * np.mean([r.record.best_is_last for r in every_run]):.0f}% "
            "of the runs peak at the last)",
            why="not-measured",
            scale=f"every run at the {profile} profile trains {config.epochs} epochs; no run "
            "trains longer",
        ),
        Deviation(
            "augmentation",
            "random crops and horizontal flips (crop size not stated)",
            crop_description(*crop_options(config.dataset_options))
            if config.dataset in PAPER_DATASETS
            else "none",
            why="needs-paper-data",
            scale=paper_profile,
        ),
        Deviation(
            "batches",
            "128 images, composition not stated",
            f"{config.batch_size} images, {config.m_per_class} per class "
            f"({config.batch_size // config.m_per_class} classes)",
            **effect_of("1 image per class"),
        ),
        Deviation(
            "loss scale",
            "L_d with the constant G (Eq. 8)",
            "mean over the batch, without G",
            why="not-measured",
            scale=f"every run at the {profile} profile averages the loss without G; no run "
            f"multiplies it by G (a constant factor; {config.optimizer}"
            + (
                "'s step is nearly invariant to it)"
                if config.optimizer == "adam"
                else "'s step scales with it)"
            ),
        ),
    ]


#: The scale that measures what needs the paper's data or a GPU.
PAPER_PROFILE = "the paper profile (GoogLeNet on CUB-200-2011, a GPU)"


def _comparison_rows(
    config: TrainConfig,
    profile: str,
    selection: str,
    gain: str,
    clustering: ClusteringSearch | None,
    table2_runs: str,
    timing_here: str,
    stats: str,
    code_row: str,
) -> list[Deviation]:
    """The rows of what the runs are compared with and how: baselines, selection, Table 2,
    Table 1's timing, the centroids, the precision, the code."""
    here = f"the {profile} profile"
    return [
        Deviation(
            "baselines",
            "results reported elsewhere (Sec. 4.4: methods 'that have reported results' on the "
            "two datasets), each in its own configuration; each row cites its method's paper, but "
            "the Semi-hard, Lifted structure, N-pair and Clustering rows of Tables 4-5 are Song "
            "et al. 2017's numbers (their Tables 1-2, the same values; embedding d = 64, against "
            "the discriminative loss's D = 256)",
            "retrained here with dmlnb's losses under one protocol; softmax is a cosine softmax "
            "(T = 0.05), not a plain one",
            why="needs-paper-data",
            scale="the paper profile against the cited papers' numbers",
        ),
        Deviation(
            "clustering baseline's margin multiplier",
            "Song et al.'s own numbers (their margin multiplier decays by 0.94 "
            "from an initial value they do not state)",
            f"FacilityLocationLoss with {clustering.text()}, constant (no decay)"
            if clustering is not None
            else "FacilityLocationLoss, constant margin multiplier (no decay)",
            **_measured(
                clustering.effect_text() if clustering is not None else "",
                "not-measured",
                "these runs hold no validation classes to search on",
            ),
        ),
        Deviation(
            "Table 6 (state of the art)",
            "five triplet-based methods with added techniques (cascades, boosting, an "
            "angular loss, generated samples)",
            "reported only: none of the five is implemented in dmlnb",
            why="not-measured",
            scale="none of the five is implemented in dmlnb, so no run measures them",
        ),
        Deviation(
            "model selection",
            "not stated (trains up to 40 epochs)",
            selection,
            **_measured(gain, "not-measured", "these runs hold no validation classes to select on"),
        ),
        *_analysis_rows(here, table2_runs, timing_here, stats, code_row),
    ]


def _analysis_rows(
    here: str, table2_runs: str, timing_here: str, stats: str, code_row: str
) -> list[Deviation]:
    """Table 2's protocol and runs, Table 1's timing, the centroids, the precision, the code."""
    return [
        Deviation(
            "Table 2 protocol",
            "not stated",
            "the last layer is scored at the epoch picked by the second-to-last layer's R@1",
            why="not-measured",
            scale="the records hold the last layer's scores at each run's kept epoch only; no run "
            "stores them at every epoch (where the kept epoch is not the last, the claim cannot "
            "hold on them: biased toward it)",
        ),
        Deviation(
            "Table 2 runs",
            "one-hot centroids ('These results are based on the one-hot centroid generation "
            "strategy', Sec. 4.3)",
            "the claim is judged on the one-hot runs, the paper's setting; the one-hot and the "
            "K-means runs pooled are among our measurements",
            **_measured(
                table2_runs, "not-measured", "no one-hot run here stores its last layer's scores"
            ),
        ),
        Deviation(
            "Table 1 timing",
            "the cost of one epoch of each loss over a training set of N samples and C classes, "
            "as an order of growth (Table 1; not timed)",
            timing_here,
            why="not-measured",
            scale="the study times one pass of each loss over a set and the step timing a few "
            "training steps; no epoch of training is timed per loss",
        ),
        Deviation(
            "K-means centroids",
            "K-means on points uniform on the sphere (number of points not stated)",
            "K-means on 100 C points",
            **_measured(
                stats, "not-measured", "no K-means run here stores its centroids' statistics"
            ),
        ),
        Deviation(
            "numeric precision (paper profile)",
            "not stated",
            precision_description(experiment_config("paper")),
            why="needs-gpu",
            scale="the paper profile on a GPU (every run here trains on the CPU, in float32)",
        ),
        Deviation(
            "code version",
            "—",
            code_row,
            why="structurally-untestable",
            scale="the row is the records' provenance, not a setting a run could change",
        ),
    ]


def deviation_rows(
    base: Sequence[Run],
    variants: Mapping[str, Sequence[Run]],
    every_run: Sequence[Run],
    kmeans: Mapping[int, Mapping[str, float]] | None = None,
    *,
    config: TrainConfig,
    profile: str,
    num_classes: int | None = None,
    validation_classes: int = 0,
    clustering: ClusteringSearch | None = None,
    timing: Mapping[str, Any] | None = None,
    timing_device: str = "cpu",
    timing_repeats: int | None = None,
) -> list[Deviation]:
    """Every deviation of this chapter's runs (``config``, at ``profile``) from the paper's
    protocol, with its measured effect where the profile measures it (``variants`` against the
    one-hot discriminative ``base`` runs, :func:`variant_effect`; the best-epoch selection gain
    over ``every_run``; the clustering baseline's gamma from ``clustering``), else why not and at
    which scale. ``kmeans``: per seed, the distance statistics of a draw of K-means centroids at
    C = D = 100 (:func:`kmeans_stats_text`); ``num_classes``: the training classes C;
    ``validation_classes``: those held out; ``timing``: the profile's ``settings["timing"]``
    (:func:`timing_text`). The code-version row reads the records' commits
    (:func:`~dmlnb.experiments.discriminative.provenance.code_version_text`)."""
    records = [r.record for r in every_run]
    if any(r.selected_on == "validation" for r in records):
        selection = (
            f"{validation_classes} of the {(num_classes or 0) + validation_classes} training "
            f"classes held out as validation classes (training on the other {num_classes}); each "
            "run keeps its best epoch by Recall@1 on the validation classes and the test classes "
            "are measured at that epoch"
        )
    else:
        selection = (
            "each run keeps its best epoch by Recall@1 on the test classes (the papers' protocol)"
        )
    searched = [
        r.record for rs in (clustering.runs.values() if clustering is not None else []) for r in rs
    ]
    listed = {
        id(r): r for r in [*records, *(r.record for rs in variants.values() for r in rs), *searched]
    }
    return [
        _affine_row(config, num_classes),
        *_setup_rows(
            config,
            profile,
            lambda name: variant_effect(name, variants, base, config, num_classes),
            every_run,
        ),
        *_comparison_rows(
            config,
            profile,
            selection,
            selection_gain_text(listed.values()),
            clustering,
            table2_onehot_text(base),
            timing_text(timing, timing_device, timing_repeats),
            kmeans_stats_text(kmeans, every_run, num_classes),
            code_version_text(provenance_frame(listed.values())),
        ),
    ]


def deviations_table(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """:func:`deviation_rows` (same arguments) rendered by
    :func:`~dmlnb.chapter.deviations_frame`, the effect of a row not measured said in a reader's
    words (:data:`WHY_WORDS`) rather than its typed reason."""
    rows = deviation_rows(*args, **kwargs)
    frame = deviations_frame(rows)
    frame["effect"] = [_readers_words(r) for r in rows]
    return frame
