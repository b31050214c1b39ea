"""Every deviation from the paper, and when and under which code the runs were trained."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.data.crops import crop_description, crop_options
from dmlnb.experiments.discriminative.evidence import layer_pairs, layer_verdict
from dmlnb.experiments.discriminative.groups import ClusteringSearch
from dmlnb.experiments.discriminative.spec import (
    PAPER_DATASETS,
    PRESETS,
    REPORTED,
    experiment_config,
    variant_unfit,
)
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import (
    compare,
    paired_differences,
    provenance_frame,
    provenance_groups,
    provenance_text,
)
from dmlnb.runs import TIMING_THREADS, Run
from dmlnb.selection import (
    selection_gain_text,
)
from dmlnb.training import precision_description

__all__ = [
    "deviations_table",
    "CHAPTER_CODE",
    "code_changes",
    "code_version_text",
    "run_label",
    "run_provenance",
]


def deviations_table(
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
) -> pd.DataFrame:
    """Every deviation of this chapter's runs (``config``, at ``profile``) from the paper's
    protocol, with its measured effect at this profile where the profile measures it
    (``variants``: :func:`deviation_runs` against the one-hot discriminative ``base`` runs, or why
    a variant could not train, :func:`variant_unfit`; the best-epoch selection gain over
    ``every_run``; the clustering baseline's gamma from ``clustering``,
    :func:`clustering_search`), else "not measured at the <profile> profile". ``kmeans``: per seed,
    the distance statistics of a draw of K-means centroids at C = D = 100 (:func:`kmeans_draws`):
    the first shown beside the paper's Table 3, the spreads of all of them after it.
    ``num_classes``: the training classes C of the runs (named beside their K-means centroids'
    distance statistics); ``validation_classes``: the training classes held out as validation
    classes; ``timing``: the profile's ``settings["timing"]`` of the Table 1 timing study, run on
    ``timing_device`` with ``timing_repeats`` repeats. The code-version row reads the commits of the
    records (``every_run`` and ``variants``) and, where git can, what changed between them
    (:func:`code_changes`)."""
    base_r1 = [r.metrics["R@1"] for r in base]
    not_measured = f"not measured at the {profile} profile"

    def effect(name: str) -> str:
        runs = variants.get(name) or []
        if not runs:
            return (variant_unfit(name, config, num_classes) if num_classes else "") or not_measured
        v = compare([r.metrics["R@1"] for r in runs], base_r1, scale=100, unit=" pts")
        e = v.evidence()
        return (
            f"R@1 {100 * np.mean([r.metrics['R@1'] for r in runs]):.1f} vs "
            f"{100 * np.mean(base_r1):.1f}: {e['effect']} {e['90% interval']} "
            f"({e['runs per side']} runs; 'the variant is better': {v})"
        )

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
    stats = ""
    if kmeans:
        rep = (
            REPORTED["table3"].set_index(["dataset", "centroids"]).loc[("CUB-200-2011", "K-means")]
        )
        paper_spread = float(rep["max"] - rep["min"])
        spreads = {seed: float(st["max"] - st["min"]) for seed, st in kmeans.items()}
        more_even = [seed for seed, v in spreads.items() if v < paper_spread]
        first, shown = next(iter(kmeans.items()))
        stats = (
            f"at C = D = 100, one draw (seed {first}): min {shown['min']:.3f} / max "
            f"{shown['max']:.3f} / std {shown['std']:.3f} vs the paper's {rep['min']:.2f} / "
            f"{rep['max']:.2f} / {rep['std']:.3f}: kappa_max - kappa_min "
            f"{spreads[first]:.3f} vs {paper_spread:.2f}; the generator's draws "
            f"differ (seeds {min(spreads)}-{max(spreads)}: "
            + ", ".join(f"{v:.3f}" for v in spreads.values())
            + (
                f", seed{'s' if len(more_even) > 1 else ''} {', '.join(map(str, more_even))} more "
                "evenly spread than the paper's"
                if more_even
                else ""
            )
            + "), so one draw does not settle how the generator compares with the paper's"
        )
    trained = [
        r.extras["centroid_stats"]
        for r in every_run
        if r.record.data.get("spec", {}).get("centroids") == "kmeans"
        and r.extras.get("centroid_stats")
    ]
    if trained:
        t = pd.DataFrame(trained).mean()
        stats += (
            ("; " if stats else "")
            + "in the trained runs ("
            + (f"C = {num_classes}, " if num_classes else "")
            + f"{len(trained)} runs): min {t['min']:.3f} / max {t['max']:.3f} / std "
            f"{t['std']:.3f}: kappa_max - kappa_min {t['max'] - t['min']:.3f}"
        )
    # Table 2 on the paper's one-hot runs only, judged as the claim is (layer_verdict:
    # every K, paired, biased)
    onehot_pairs = layer_pairs([r for r in base if r.extras.get("last_layer")])
    onehot_v = layer_verdict(onehot_pairs) if onehot_pairs else None
    table2_runs = not_measured
    if onehot_v is not None:
        e, r1 = (
            onehot_v.evidence(),
            paired_differences(*onehot_pairs["R@1"], scale=100, unit=" pts").evidence(),
        )
        # all_of names the K it shows in its note: "effect: R@4 (the interval contains 0); ..."
        shown = next(
            (
                part.split(": ", 1)[1]
                for part in onehot_v.note.split("; ")
                if part.startswith("effect: ")
            ),
            "",
        )
        k_name, _, why = shown.partition(" (")
        table2_runs = (
            "one-hot runs only, second-to-last minus last layer (paired, "
            f"{len(onehot_pairs['R@1'][0])} runs): R@1 {r1['effect']} {r1['90% interval']}; at "
            f"every K (the claim), weakest {k_name + ' ' if k_name else ''}{e['effect']} "
            f"{e['90% interval']}{' (' + why if why else ''}: {onehot_v} (each run's epoch was "
            "chosen by the second-to-last layer: the rule for a selection biased toward the "
            "claim)"
        )
    opt = f"{config.optimizer} at lr {config.lr:g}" + (
        ", whose weight decay is an L2 term added to the gradient before Adam's per-parameter "
        "scaling (coupled, not AdamW's decoupled decay)"
        if config.optimizer == "adam"
        else ""
    )
    image_size = config.dataset_options.get("image_size")
    size_text = f" at {image_size}x{image_size} pixels" if image_size else ""
    if timing:
        timing_here = (
            f"one pass of each loss over a whole set of N random {timing['dim']}-d embeddings as "
            "a single batch per size (forward + backward; forward only for the enumerated "
            f"all-triplet sum), no network, on {timing_device}: N up to {max(timing['n_values'])} "
            f"(C = {timing['c_fixed']}), C up to {max(timing['c_values'])} (N = "
            f"{timing['n_fixed']}), "
            + "".join(f"{name} to N = {size}, " for name, size in timing["largest"].items())
            + (
                f"the enumerated sum's own C sweep at N = {timing['naive_c']['n_fixed']}, C = "
                + ", ".join(map(str, timing["naive_c"]["c_values"]))
                + ", "
                if timing.get("naive_c")
                else ""
            )
            + f"the same sizes on every machine; each timing the fastest of {timing['repeats']} "
            f"passes after a warm-up, with {TIMING_THREADS} torch thread(s)"
            + (f", the study repeated {timing_repeats} times" if timing_repeats else "")
            + f"; the discriminative loss's C sweep at a fixed D = {timing['dim']} with random "
            "unit centroids (C may exceed D; the paper's one-hot centroids have D = C); the "
            "enumerated all-triplet sum is the hinged triplet loss with margin 0.2, where Eq. "
            "1-2's simplified L_t has neither hinge nor margin (the order of its cost is the "
            "same)"
        )
    else:
        timing_here = "not timed at this profile"
    searched = [
        r.record for rs in (clustering.runs.values() if clustering is not None else []) for r in rs
    ]
    listed = {
        id(r): r for r in [*records, *(r.record for rs in variants.values() for r in rs), *searched]
    }
    code_row = code_version_text(provenance_frame(listed.values()))
    pairs_per_batch = config.batch_size // config.m_per_class
    trains = (
        f"this execution trains {config.dataset}; the paper profile trains "
        f"{PAPER_DATASETS[PRESETS['paper']['dataset']]} and, with overrides={{'dataset': "
        f"'cars196'}}, CAR196 in a run set of its own (Tables 2, 3, 5 and 8, 3 seeds)"
    )
    rows = [
        (
            "data and backbone",
            "ImageNet GoogLeNet fine-tuned on CUB-200-2011 / CAR196 (image size not stated)",
            f"{config.dataset}{size_text}, {config.model} "
            + ("ImageNet-pretrained" if config.pretrained else "trained from scratch"),
            not_measured,
        ),
        (
            "retrieval distance",
            "l2 distance (Sec. 3: 'We use l2 distance in this work')",
            "cosine similarity at both layers (each embedding L2-normalised, then ranked): the "
            "order of the l2 distance between normalised embeddings, not between the layers' raw "
            "outputs; NMI's k-means clusters the same L2-normalised embeddings "
            "(dmlnb.evaluation.evaluate, metric='cosine')",
            not_measured,
        ),
        (
            "CAR196",
            "Tables 2, 3, 5, 7 and 8 on CUB-200-2011 and CAR196",
            f"{trains}; Table 7's training times are not measured on either",
            not_measured,
        ),
        (
            "embedding size D",
            "256 for the discriminative loss; the Semi-hard, Lifted structure, N-pair and "
            "Clustering rows of Tables 4-5 are Song et al. 2017's (Tables 1-2 there, the same "
            "numbers), trained at d = 64",
            f"{config.embedding_dim} for every method",
            effect("D=256"),
        ),
        (
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
            not_measured,
        ),
        (
            "network heads",
            "backbone, then FC(256) and FC(C); the loss on the last layer, the embedding the "
            "second-to-last (Sec. 4.2); the baselines' rows are results reported elsewhere (Sec. "
            "4.4): the Semi-hard, Lifted structure, N-pair and Clustering rows are Song et al. "
            "2017's, with their networks (d = 64)",
            f"the discriminative network has two new layers, FC({config.embedding_dim}) then "
            f"FC(C), the baselines one, FC({config.embedding_dim}) after the same backbone: every "
            f"method embeds at a {config.embedding_dim}-d layer, but the discriminative loss "
            "trains one more layer",
            not_measured,
        ),
        (
            "N-pair baseline",
            "Sohn's N-pair loss; the row's numbers are Song et al. 2017's (d = 64), though it "
            "cites Sohn",
            f"NPairLoss on the first pair of each class in the batch: with {config.m_per_class} "
            f"images per class, {2 * pairs_per_batch} of the {config.batch_size} images of a "
            f"batch ({pairs_per_batch} classes x 2) enter the loss, the others only its L2 penalty",
            not_measured,
        ),
        (
            "weight decay",
            "5e-4, with the learning rate 0.1 of the new layers (Sec. 4.2)",
            f"0; the variant that measures the paper's 5e-4 trains with {opt}, not at the paper's "
            "learning rate",
            effect("weight decay 5e-4"),
        ),
        (
            "epochs",
            "up to 40",
            f"{config.epochs} ({100 * np.mean([r.record.best_is_last for r in every_run]):.0f}% "
            "of the runs peak at the last)",
            not_measured,
        ),
        (
            "augmentation",
            "random crops and horizontal flips (crop size not stated)",
            crop_description(*crop_options(config.dataset_options))
            if config.dataset in PAPER_DATASETS
            else "none",
            not_measured,
        ),
        (
            "batches",
            "128 images, composition not stated",
            f"{config.batch_size} images, {config.m_per_class} per class "
            f"({config.batch_size // config.m_per_class} classes)",
            effect("1 image per class"),
        ),
        (
            "loss scale",
            "L_d with the constant G (Eq. 8)",
            "mean over the batch, without G",
            f"{not_measured} (a constant factor; Adam's step is nearly invariant to it)",
        ),
        (
            "baselines",
            "results reported elsewhere (Sec. 4.4: methods 'that have reported results' on the "
            "two datasets), each in its own configuration; each row cites its method's paper, but "
            "the Semi-hard, Lifted structure, N-pair and Clustering rows of Tables 4-5 are Song "
            "et al. 2017's numbers (their Tables 1-2, the same values; embedding d = 64, against "
            "the discriminative loss's D = 256)",
            "retrained here with dmlnb's losses under one protocol; softmax is a cosine softmax "
            "(T = 0.05), not a plain one",
            not_measured,
        ),
        (
            "clustering baseline's margin multiplier",
            "Song et al.'s own numbers (their margin multiplier decays by 0.94 "
            "from an initial value they do not state)",
            f"FacilityLocationLoss with {clustering.text()}, constant (no decay)"
            if clustering is not None
            else "FacilityLocationLoss, constant margin multiplier (no decay)",
            (clustering.effect_text() if clustering is not None else "") or not_measured,
        ),
        (
            "Table 6 (state of the art)",
            "five triplet-based methods with added techniques (cascades, boosting, an "
            "angular loss, generated samples)",
            "reported only: none of the five is implemented in dmlnb",
            not_measured,
        ),
        (
            "model selection",
            "not stated (trains up to 40 epochs)",
            selection,
            selection_gain_text(listed.values()) or not_measured,
        ),
        (
            "Table 2 protocol",
            "not stated",
            "the last layer is scored at the epoch picked by the second-to-last layer's R@1",
            not_measured
            + " (no per-epoch last-layer scores): the claim cannot hold on these runs (biased "
            "toward it)",
        ),
        (
            "Table 2 runs",
            "one-hot centroids ('These results are based on the one-hot centroid generation "
            "strategy', Sec. 4.3)",
            "the claim pools the one-hot and the K-means runs",
            table2_runs,
        ),
        (
            "Table 1 timing",
            "the cost of one epoch of each loss over a training set of N samples and C classes, "
            "as an order of growth (Table 1; not timed)",
            timing_here,
            not_measured
            + " (the study times a loss's pass over a set, not an epoch of training; the "
            "same-cell step timing times training steps)",
        ),
        (
            "K-means centroids",
            "K-means on points uniform on the sphere (number of points not stated)",
            "K-means on 100 C points",
            stats or not_measured,
        ),
        (
            "numeric precision (paper profile)",
            "not stated",
            precision_description(experiment_config("paper")),
            not_measured + " (every run here trains on the CPU, in float32)",
        ),
        ("code version", "—", code_row, not_measured),
    ]
    columns = ["deviation", "paper", "here", f"measured effect ({profile} profile)"]
    return pd.DataFrame(rows, columns=columns).set_index("deviation")


#: The code a run of this chapter executes to train and be evaluated (relative to the repository
#: root): the losses, the chapter's networks and baselines, the training loop, the evaluation, the
#: sampler and the Omniglot loader with its validation split (:func:`code_changes`).
CHAPTER_CODE = (
    "dmlnb/losses",
    "dmlnb/experiments/discriminative",
    "dmlnb/experiments/baseline_losses.py",
    "dmlnb/training.py",
    "dmlnb/evaluation.py",
    "dmlnb/models.py",
    "dmlnb/samplers.py",
    "dmlnb/pairs.py",
    "dmlnb/data/omniglot.py",
    "dmlnb/data/validation.py",
    "dmlnb/data/base.py",
)


def code_changes(commits: Sequence[str], paths: Sequence[str] = CHAPTER_CODE) -> list[str] | None:
    """The files under ``paths`` (relative to the repository root) that differ between the first of
    ``commits`` and any other (``git diff --name-only``), sorted; ``[]`` when none does (or fewer
    than two commits), ``None`` when git, the repository or one of the commits is not available."""
    import subprocess

    commits = list(dict.fromkeys(c for c in commits if c))
    root = Path(__file__).resolve().parents[3]
    changed: set[str] = set()
    try:
        for other in commits[1:]:
            out = subprocess.run(
                ["git", "diff", "--name-only", commits[0], other, "--", *paths],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=20,
            )
            if out.returncode != 0:
                return None
            changed.update(out.stdout.split())
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted(changed)


def code_version_text(provenance: pd.DataFrame) -> str:
    """The deviations table's code-version row from :func:`~dmlnb.reporting.provenance_frame` rows:
    the commits the records name and whether the package had uncommitted changes
    (:func:`~dmlnb.reporting.provenance_text`), the days they finished, and what git finds changed
    between those commits in :data:`CHAPTER_CODE` (``dmlnb/losses`` named apart) and elsewhere in
    ``dmlnb``."""
    commits = [c for c in dict.fromkeys(provenance["commit"]) if c]
    if not commits:
        return "the records name no commit"
    finished = sorted(str(f)[:16].replace("T", " ") for f in provenance.get("finished", []) if f)
    when = f"; they finished between {finished[0]} and {finished[-1]} UTC" if finished else ""
    text = provenance_text(provenance) + when
    if len(commits) > 1:
        own, losses, anywhere = (
            code_changes(commits),
            code_changes(commits, ("dmlnb/losses",)),
            code_changes(commits, ("dmlnb",)),
        )
        if own is None or losses is None or anywhere is None:
            text += (
                "; what changed between the commits is not checked here (no git history of them)"
            )
        else:
            rest = [f for f in own if f not in losses]
            others = [f for f in anywhere if f not in own]
            text += (
                "; between these commits (git diff): "
                + (
                    f"dmlnb/losses changed ({', '.join(losses)})"
                    if losses
                    else "dmlnb/losses is unchanged"
                )
                + (
                    f"; of the chapter's other training and evaluation code, {', '.join(rest)} "
                    "changed"
                    if rest
                    else ", and so is the chapter's other training and evaluation code ("
                    + ", ".join(p for p in CHAPTER_CODE if p != "dmlnb/losses")
                    + ")"
                )
                + (
                    f"; elsewhere in dmlnb {len(others)} file{'s' if len(others) > 1 else ''} "
                    f"changed ({', '.join(others)})"
                    if others
                    else "; nothing else in dmlnb changed"
                )
            )
    return (
        text
        + "; a record is reloaded when its configuration and method specification match, whatever "
        "its commit"
    )


def run_label(run: Run) -> str:
    """The name a run is listed under: its record's folder (``discriminative-D256-seed0``), so that
    every run set (a variant, a gamma) is told apart whatever name the record stores (records
    trained before runs were named by their folder store ``discriminative-onehot-seed0`` for the
    one-hot runs and their variants alike); the stored name when the record has no file."""
    path = run.record.path
    return Path(path).parent.name if path is not None else str(run.record.data["name"])


def run_provenance(runs: Sequence[Run]) -> pd.DataFrame:
    """When and under which code every reloaded run was trained (its record's environment):
    :func:`~dmlnb.reporting.provenance_groups` with the run sets (the run's folder,
    :func:`run_label`, without its seed)."""
    return provenance_groups(
        provenance_frame(r.record for r in runs),
        sets=[run_label(r).rsplit("-seed", 1)[0] for r in runs],
    )
