"""Declarations of the discriminative-loss chapter (Do et al., CVPR 2019): the methods of Tables 4
and 5, the profiles' presets and settings, the paper's tables, the deviation variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from dmlnb.experiments.baseline_losses import lifted_structure, npair, semihard_triplet
from dmlnb.experiments.settings import profile_settings, validation_holdout, with_validation
from dmlnb.losses.discriminative import (
    centroid_distance_stats,
    kmeans_sphere_centroids,
)
from dmlnb.methods import MethodCall, call
from dmlnb.profiles import TrainConfig, make_config
from dmlnb.reported import reported_table

__all__ = [
    "METHODS",
    "TRIPLET_FAMILY",
    "PAPER_TRIPLET_EXAMPLES",
    "TRIPLET_FAMILY_ADDED",
    "KMEANS_DRAW_SEEDS",
    "kmeans_draws",
    "CLUSTERING_GAMMAS",
    "CLUSTERING_GAMMA",
    "CLUSTERING_REFINEMENT",
    "clustering_implementation",
    "IMPLEMENTATION",
    "PRESETS",
    "SETTINGS",
    "REPORTED",
    "REPORTED_DATASET",
    "REPORTED_SETTING",
    "PAPER_DATASETS",
    "reported_blocks",
    "experiment_config",
    "runs_folder",
    "experiment_settings",
    "loss_method",
    "DEVIATION_VARIANTS",
    "variant_unfit",
]


# Methods of Tables 4 and 5 that are implemented, keyed by the paper's row names.
METHODS: dict[str, str] = {
    "SoftMax": "softmax",
    "Semi-hard": "semihard",
    "Lifted structure": "lifted",
    "N-pair": "npair",
    "Clustering": "clustering",
    "Triplet+proxy": "proxy",
    "Discriminative": "discriminative",
}
# Rows of Tables 4 and 5 that optimise a triplet loss or a generalisation of it: the chapter's
# reading of Sec. 4.4's "methods that are based on triplet ... or generalization of triplet".
TRIPLET_FAMILY = ("Semi-hard", "Lifted structure", "N-pair", "Clustering", "Triplet+proxy")
#: The implemented methods Sec. 4.4 names as examples of "based on triplet" or "generalization of
#: triplet" (its third example, Triplet+Global, is not implemented).
PAPER_TRIPLET_EXAMPLES = ("Semi-hard", "N-pair")
#: The members of :data:`TRIPLET_FAMILY` that the chapter counts as triplet-based by its own choice:
#: the paper's examples do not name them (Triplet+proxy is a triplet loss by name).
TRIPLET_FAMILY_ADDED = ("Lifted structure", "Clustering")
#: The draws of K-means centroids at C = D = 100 set beside the paper's Table 3
#: (:func:`kmeans_draws`): the first is shown in full, the others show how draws differ.
KMEANS_DRAW_SEEDS = (0, 1, 2, 3, 4)


def kmeans_draws(
    seeds: Sequence[int] = KMEANS_DRAW_SEEDS, size: int = 100
) -> dict[int, dict[str, float]]:
    """Per seed, the distance statistics
    (:func:`~dmlnb.losses.discriminative.centroid_distance_stats`) of one draw of
    :func:`~dmlnb.losses.discriminative.kmeans_sphere_centroids` with ``C = D = size`` (the paper's
    Table 3 setting; no data, about 0.7 s a draw on one CPU thread)."""
    return {
        seed: centroid_distance_stats(kmeans_sphere_centroids(size, size, seed=seed))
        for seed in seeds
    }


#: The clustering baseline (Song et al.'s facility-location loss) as this chapter trains it: its
#: form of Algorithm 2 (:class:`~dmlnb.losses.FacilityLocationLoss` ``refinement``: ``"paper"``,
#: the paper's listing) and its margin multiplier gamma, constant (no MarginDecayHook). The
#: discriminative-loss paper copies the clustering row of Tables 4 and 5 from Song et al. and
#: states neither. gamma is chosen on the validation classes (:func:`clustering_search`) from
#: :data:`CLUSTERING_GAMMAS`: 1 (this chapter's earlier choice) and 10 (the facility-location
#: chapter's initial value, which that chapter compares with 1), every value with the same
#: seeds, epochs and evaluations. :data:`CLUSTERING_GAMMA` is the value of a run set without a
#: validation split (the papers' protocol), where nothing may choose it: the facility-location
#: chapter's setting. The settings ``clustering_gammas``, ``clustering_gamma`` and
#: ``clustering_refinement`` of :data:`SETTINGS` carry them per profile; each run names its gamma
#: and refinement in its specification (:func:`clustering_implementation`).
CLUSTERING_GAMMAS = (1.0, 10.0)
CLUSTERING_GAMMA = 10.0
CLUSTERING_REFINEMENT = "paper"


def clustering_implementation(
    gamma: float = CLUSTERING_GAMMA, refinement: str = CLUSTERING_REFINEMENT
) -> str:
    """What a clustering run trains, as its run specification says it:
    ``"FacilityLocationLoss(margin multiplier 10, 5 PAM passes, refinement paper)"``."""
    return (
        f"FacilityLocationLoss(margin multiplier {float(gamma):g}, 5 PAM passes, refinement "
        f"{refinement})"
    )


# What each implemented row trains (shown in the notebook).
IMPLEMENTATION: dict[str, str] = {
    "SoftMax": "NormalizedSoftmaxLoss (cosine softmax, T = 0.05; the paper's is a plain softmax)",
    "Semi-hard": "TripletLoss(semihard, squared distance, margin 0.2, mean): FaceNet / TF rule",
    "Lifted structure": "LiftedStructureLoss(neg_margin 1)",
    "N-pair": "NPairLoss(l2_reg 0.02), unnormalised embeddings (Sohn's setting)",
    "Clustering": "FacilityLocationLoss(5 PAM passes, Algorithm 2 as listed), margin multiplier "
    "constant, chosen on the validation classes (clustering_search)",
    "Triplet+proxy": "ProxyNCALoss(scale 9, positive proxy excluded), one proxy per class",
    "Discriminative": "DiscriminativeLoss(one-hot centroids) at the last layer, FC(D) -> FC(C)",
}

# TrainConfig presets layered over dmlnb.profiles.PROFILES.
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(epochs=2, eval_metrics=("recall", "nmi")),
    # omniglot-small, 4-block convnet, 64-d embedding, Adam 1e-3 (the protocol notebook's setup);
    # 5 epochs (the protocol notebook trains 15) so that the chapter's 33 runs (with validation
    # classes held out), the lemma tracking and the timing study fit on two shared CPU cores.
    "default": dict(epochs=5, eval_metrics=("recall", "nmi")),
    # Sec. 4.2: ImageNet GoogLeNet + FC(256) + FC(C), 40 epochs, batch 128, weight decay 5e-4,
    # learning rate 0.1 for the two new layers halved every 5 epochs and ten times smaller for
    # the backbone (BackboneLR applies the factor and the weight decay; SGD momentum 0.9 is our
    # choice, the paper does not name the optimiser), random crops and flips (the cub200 loader).
    # (layered over dmlnb.profiles.PROFILES["paper"]: CUB-200-2011 at 224 pixels, pretrained,
    # batches of 128 with 4 images per class, 8 workers)
    "paper": dict(
        model="googlenet",
        embedding_dim=256,
        epochs=40,
        optimizer="sgd",
        lr=0.1,
        momentum=0.9,
        weight_decay=0.0,
        lr_milestones=(5, 10, 15, 20, 25, 30, 35),
        lr_gamma=0.5,
        eval_every=1,
        eval_metrics=("recall", "nmi"),
    ),
}

#: The clustering baseline's settings, alike at every profile.
_CLUSTERING: dict[str, Any] = dict(
    clustering_gammas=CLUSTERING_GAMMAS,
    clustering_gamma=CLUSTERING_GAMMA,
    clustering_refinement=CLUSTERING_REFINEMENT,
)
#: The CPU profiles' settings of the lemma tracking and the paper's options (none of them).
_CPU: dict[str, Any] = dict(lemma_every=1, backbone_lr=None, weight_decay=0.0, arch_variant=None)

# Experiment settings that are not training-run fields.
SETTINGS: dict[str, dict[str, Any]] = {
    "smoke": dict(
        seeds=(0,),
        kmeans_seeds=(0,),
        **_CPU,
        timing_seeds=(0,),
        **_CLUSTERING,
        step_timing=dict(steps=2, repeats=3),
        timing=dict(
            n_values=(32, 64, 128),
            c_fixed=8,
            n_fixed=128,
            c_values=(4, 8, 16),
            dim=16,
            repeats=1,
            largest={},
            naive_c=dict(n_fixed=64, c_values=(4, 8, 16)),
        ),
    ),
    "default": dict(
        seeds=(0, 1, 2),
        kmeans_seeds=(0, 1, 2),
        **_CPU,
        timing_seeds=(0, 1, 2),
        **_CLUSTERING,
        step_timing=dict(steps=5, repeats=5),
        # 768 and 1536 between the powers of two, and C up to 2048, so that the slopes of the losses
        # timed only to a smaller N (`largest`: the enumerated sum, clustering) and the linear
        # losses' slope in C rest on at least 3 sizes above the per-call floor (MIN_FIT_SIZES); a
        # pass of each of those at its largest N took 0.7-4.4 s on the 2-core CPUs of
        # benchmarks/results/book_retrain_cpu.txt
        timing=dict(
            n_values=(256, 512, 768, 1024, 1536, 2048, 4096, 8192, 16384, 32768),
            c_fixed=32,
            n_fixed=4096,
            c_values=(16, 32, 64, 128, 256, 512, 1024, 2048),
            dim=64,
            repeats=3,
            largest={
                "N-pair": 4096,
                "lifted structure": 4096,
                "triplet semi-hard": 2048,
                "triplet all (sorted)": 2048,
                "triplet all (enumerated)": 2048,
                "clustering": 1536,
            },
            naive_c=dict(n_fixed=1024, c_values=(8, 16, 32, 64, 128)),
        ),
    ),
    "paper": dict(
        seeds=(0, 1, 2),
        kmeans_seeds=(0, 1, 2),
        lemma_every=5,
        backbone_lr=0.1,
        weight_decay=5e-4,
        arch_variant="vgg16",
        timing_seeds=(0, 1, 2),
        **_CLUSTERING,
        step_timing=dict(steps=5, repeats=3),
        # `largest` from the losses' orders of growth, for one GPU; not yet measured on one. The
        # (N, N) losses stop where an (N, N) float32 matrix takes about 1 GiB. Clustering stops at
        # the third size, the fewest a slope may rest on (MIN_FIT_SIZES): its loss took 28 ms at B =
        # 512 on an H100 (benchmarks/results/training_h100.txt), and its O(C N (N + C)) inference
        # would make a pass at N = 4000, C = 100 about 40 times that
        timing=dict(
            n_values=(1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000),
            c_fixed=100,
            n_fixed=16000,
            c_values=(25, 50, 100, 200, 400, 800, 1600),
            dim=256,
            repeats=3,
            largest={
                "N-pair": 16000,
                "lifted structure": 16000,
                "triplet semi-hard": 16000,
                "triplet all (sorted)": 16000,
                "triplet all (enumerated)": 8000,
                "clustering": 4000,
            },
            naive_c=dict(n_fixed=2000, c_values=(25, 50, 100, 200, 400)),
        ),
    ),
}

# The paper's numbers (percent; Table 7 in minutes), for the "reported" columns only: the files
# dmlnb/experiments/reported/discriminative_<table>.csv.
REPORTED: dict[str, pd.DataFrame] = {
    key: reported_table(f"discriminative_{key}")
    for key in ("table2", "table3", "table4", "table5", "table6", "table7", "table8")
}
#: The dataset of each single-dataset reported table.
REPORTED_DATASET: dict[str, str] = {"table4": "CUB-200-2011", "table5": "CAR196"}
#: The network and setting each reported table was measured with (its label, after the dataset).
REPORTED_SETTING: dict[str, str] = {
    "table2": "GoogLeNet",
    "table3": "GoogLeNet",
    "table4": "GoogLeNet",
    "table5": "GoogLeNet",
    "table6": "each method's own network and techniques",
    "table7": "network not stated; semi-hard and smart mining in their default configurations",
    "table8": "VGG-16",
}
#: Our dataset names of the paper's datasets.
PAPER_DATASETS: dict[str, str] = {"cub200": "CUB-200-2011", "cars196": "CAR196"}


def reported_blocks(
    key: str, value: str = "value", row: str = "Discriminative"
) -> dict[str, pd.DataFrame]:
    """The paper's table ``key`` (:data:`REPORTED`) as one block per dataset, each labelled
    ``"reported (<dataset>, <setting>)"``, for :func:`dmlnb.reporting.reported_vs_reproduced`:

    * Tables 4 and 5 (one dataset each, :data:`REPORTED_DATASET`): the table;
    * Table 2 (a dataset level over the columns): each dataset's columns;
    * Table 3 (a ``dataset`` column): each dataset's rows, indexed by ``centroids``;
    * Tables 6 and 7 (a row per dataset, a column per method): each row as a column named
      ``value``, one row per method;
    * Table 8 (a row per dataset): each row, named ``row``.
    """
    table, setting = REPORTED[key], REPORTED_SETTING[key]
    if key in REPORTED_DATASET:
        parts = {REPORTED_DATASET[key]: table}
    elif table.columns.nlevels == 2:
        parts = {d: table[d] for d in table.columns.get_level_values(0).unique()}
    elif "dataset" in table.columns:
        parts = {
            d: f.set_index("centroids").drop(columns="dataset")
            for d, f in table.groupby("dataset", sort=False)
        }
    elif key == "table8":
        parts = {d: table.loc[[d]].rename(index={d: row}) for d in table.index}
    else:
        parts = {d: table.loc[d].to_frame(value) for d in table.index}
    return {f"reported ({d}, {setting})": part for d, part in parts.items()}


def experiment_config(
    profile: str,
    overrides: Mapping[str, Any] | None = None,
    validation: bool | float | int | None = None,
) -> TrainConfig:
    """The training configuration of this chapter at ``profile`` (+ a reader's ``overrides``);
    ``validation`` (:func:`~dmlnb.experiments.settings.validation_holdout`) holds out training
    classes and selects every run's best epoch on them (``None``: on the test classes, the papers'
    protocol).

    At the ``paper`` profile ``overrides={"dataset": "cars196"}`` trains CAR196 (Tables 2, 3, 5
    and 8) in the paper's setting, which Sec. 4.2 gives for both datasets; its runs are recorded
    apart (:func:`runs_folder`).

    Raises:
        ValueError: the paper profile with a dataset that is not one of :data:`PAPER_DATASETS`.
    """
    dataset = (overrides or {}).get("dataset")
    if profile == "paper" and dataset is not None and dataset not in PAPER_DATASETS:
        raise ValueError(
            f"the paper profile trains {list(PAPER_DATASETS)}, got dataset {dataset!r}; "
            "pass overrides={'dataset': 'cars196'} for CAR196"
        )
    return with_validation(
        make_config(profile, overrides, presets=PRESETS), validation_holdout(profile, validation)
    )


def runs_folder(results_dir: str | Path, profile: str, config: TrainConfig) -> Path:
    """Where the runs of ``config`` at ``profile`` are recorded: ``results_dir/<profile>`` for the
    profile's own dataset, ``results_dir/<profile>-<dataset>`` for another one (the paper
    profile's CAR196 runs), so that one dataset's records never replace the other's."""
    own = make_config(profile, presets=PRESETS).dataset
    return Path(results_dir) / (profile if config.dataset == own else f"{profile}-{config.dataset}")


def experiment_settings(profile: str, **changes: Any) -> dict[str, Any]:
    """A copy of :data:`SETTINGS` ``[profile]`` with the non-``None`` ``changes`` applied (unknown
    keys raise; :func:`~dmlnb.experiments.settings.profile_settings`)."""
    return profile_settings(SETTINGS, profile, **changes)


def loss_method(
    method: str,
    clustering_gamma: float = CLUSTERING_GAMMA,
    clustering_refinement: str = CLUSTERING_REFINEMENT,
) -> MethodCall:
    """The registered method (:mod:`dmlnb.methods`) of ``method`` (see :data:`IMPLEMENTATION`),
    part of its runs' fingerprints; the baselines as every chapter builds them
    (:mod:`dmlnb.experiments.baseline_losses`). ``clustering_gamma`` and
    ``clustering_refinement``: the clustering baseline's margin multiplier and form of
    Algorithm 2 (see :data:`CLUSTERING_GAMMA`)."""
    calls = {
        "softmax": lambda: call("normalized-softmax", temperature=0.05),
        "semihard": semihard_triplet,
        "lifted": lifted_structure,
        "npair": npair,
        "clustering": lambda: call(
            "facility-location",
            margin_multiplier=clustering_gamma,
            refinement=clustering_refinement,
        ),
        "proxy": lambda: call("proxy-nca", scale=9.0),
        "discriminative": lambda: call("discriminative"),
    }
    if method not in calls:
        raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS.values())}")
    return calls[method]()


# --------------------------------------------------------------------------- deviations

# Discriminative-loss variants the default profile trains to measure a deviation from the paper
# (a TrainConfig change each; 3 seeds, no lemma tracking): name -> (overrides, what it measures).
DEVIATION_VARIANTS: dict[str, tuple[dict[str, Any], str]] = {
    "D=256": (dict(embedding_dim=256), "the paper's embedding size D = 256 instead of 64"),
    "weight decay 5e-4": (dict(weight_decay=5e-4), "the paper's weight decay 5e-4 instead of 0"),
    "1 image per class": (
        dict(m_per_class=1),
        "batches of distinct classes, one image each (close to "
        "the random batches of the paper) instead of 8 per class",
    ),
}


def variant_unfit(name: str, config: TrainConfig, num_classes: int) -> str:
    """Why the :data:`DEVIATION_VARIANTS` run ``name`` cannot train on ``num_classes`` training
    classes with ``config``, in words, or ``""`` when it can: a batch of
    ``batch_size / m_per_class`` distinct classes needs at least that many (the variant with one
    image per class needs 128, and a default-profile run set with validation classes held out
    keeps 109 of Omniglot-small's 136)."""
    cfg = config.replace(**DEVIATION_VARIANTS[name][0])
    per_batch = cfg.batch_size // cfg.m_per_class
    if per_batch <= num_classes:
        return ""
    return (
        f"not measured: a batch of {cfg.batch_size} images, {cfg.m_per_class} per class, needs "
        f"{per_batch} training classes and {num_classes} remain"
        + (" after the validation classes are held out" if config.select_on == "validation" else "")
    )
