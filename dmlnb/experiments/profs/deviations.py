"""Where the PROFS chapter's runs depart from the paper."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dmlnb.chapter import Deviation
from dmlnb.experiments.profs.analyses import (
    paper_projections,
)
from dmlnb.experiments.profs.losses import (
    LOSSES,
    TABLE2_LOSSES,
    implementation,
)
from dmlnb.experiments.profs.procedure import (
    loss_config,
)
from dmlnb.experiments.profs.profiles import (
    PAPER_EPOCHS,
    PAPER_I,
    TABLE2_SETUPS,
    table2_config,
    table_rows,
)
from dmlnb.experiments.profs.tables import beats
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import Verdict
from dmlnb.runs import Run
from dmlnb.training import precision_description

__all__ = ["deviation_rows", "measured_effects", "NOT_MEASURED", "is_augmented"]


_PAPER_AUGMENTATION = "resize to 256 x 256, random 224 crops and horizontal flips"


#: Why a departure's effect is not measured at this profile, and the scale that would measure it
#: (:class:`dmlnb.chapter.Deviation`); the departures this profile measures take their effect from
#: the chapter (``measured``).
NOT_MEASURED: dict[str, tuple[str, str]] = {
    "scale": ("needs-gpu", "the paper profile on a GPU"),
    "losses and ablations run": ("needs-gpu", "the paper profile on a GPU"),
    "optimiser": ("not-measured", "this profile with the paper's moments"),
    "learning rate": ("not-measured", "this profile at the paper's rate"),
    "embedding size": ("not-measured", "this profile at the paper's size"),
    "Margin-Hard": ("needs-gpu", "the paper profile with Wu et al.'s learnable beta"),
    "SoftTriple's proximal anchor": ("not-measured", "this profile with the literal anchor"),
    "HNCM picking": ("not-measured", "this profile with the scan"),
    "HNCM rule at this profile": (
        "not-measured",
        "this profile's PROFS-HNCM runs retrained with hncm_mode='scan' (CPU runs like Table 1's)",
    ),
    "batch construction": (
        "not-measured",
        "this profile with E drawn from the whole training set (CPU runs like Table 1's)",
    ),
    "SoftTriple's PROFS batches": (
        "not-measured",
        "this profile's SoftTriple with the proximal term on class-balanced batches (CPU runs)",
    ),
    "Contrastive-Hard's settings": (
        "not-measured",
        "this profile with other settings through the notebook's `changes` (CPU runs)",
    ),
    "SoftTriple's evaluations": (
        "not-measured",
        "SoftTriple's runs retrained with an evaluation every epoch (CPU runs)",
    ),
    "pair restriction": ("not-measured", "the component ablation"),
    "Margin and SoftTriple setups": ("needs-gpu", "the paper profile on a GPU"),
    "N-pair": ("not-measured", "this profile with Euclidean distances"),
    "hard mining": ("not-measured", "this profile with the paper's mining"),
    "images per class": ("not-measured", "this profile with each baseline's images per class"),
    "augmentation": ("needs-paper-data", "the paper profile's images"),
    "training classes": ("not-measured", "this profile with validation=False"),
    "SoftTriple's HNCM representatives": ("not-measured", "this profile with the centres"),
    "numeric precision": ("structurally-untestable", "none: the paper does not state it"),
    "code versions": ("not-measured", "a retrain of every run"),
}

#: Rows about one loss: shown only where that loss trains.
_ABOUT = {
    "Margin-Hard": "Margin-Hard",
    "N-pair": "N-pair",
    "SoftTriple's proximal anchor": "SoftTriple",
    "SoftTriple's HNCM representatives": "SoftTriple",
    "SoftTriple's PROFS batches": "SoftTriple",
    "SoftTriple's evaluations": "SoftTriple",
    "Contrastive-Hard's settings": "Contrastive-Hard",
}


def is_augmented(config: TrainConfig) -> bool:
    """Whether ``config``'s images are augmented as the paper's are (resized to at least 224 px,
    random crops and flips); the book's small datasets are used as they are."""
    return "resize" in config.dataset_options or config.dataset_options.get("image_size", 0) >= 224


def _facts(config: TrainConfig, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the rows read of ``config`` and ``settings``."""
    rows1 = table_rows(settings, 1) if settings else tuple(LOSSES)
    rows2 = table_rows(settings, 2) if settings else tuple(TABLE2_LOSSES)
    trained = set(rows1) | set(rows2)
    swept = [
        name
        for name, grid in (("M", "m_grid"), ("lambda", "lambda_grid"))
        if not settings or settings[grid]
    ]
    paper_runs = paper_projections()["projections"]
    holdout = config.dataset_options.get("validation")
    augmented = is_augmented(config)
    betas = tuple(config.betas) if config.betas else (0.9, 0.999)
    size = config.dataset_options.get("image_size", "?")
    # SoftTriple's centres learn at their own rate (loss_config); settings=None: the
    # paper profile's setups
    soft = (
        loss_config(
            "softtriple",
            table2_config(config, "SoftTriple", settings or {"table2_setups": TABLE2_SETUPS}),
        )
        if "SoftTriple" in trained
        else None
    )
    return dict(
        rows1=rows1,
        rows2=rows2,
        trained=trained,
        swept=swept,
        paper_runs=paper_runs,
        holdout=holdout,
        augmented=augmented,
        betas=betas,
        size=size,
        soft=soft,
    )


def _setup_rows(
    config: TrainConfig, projections: float, f: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """The scale, the runs, the optimiser and the embedding: ``(setting, paper, ours)``."""
    rows1 = f["rows1"]
    rows2 = f["rows2"]
    trained = f["trained"]
    swept = f["swept"]
    paper_runs = f["paper_runs"]
    betas = f["betas"]
    size = f["size"]
    soft = f["soft"]
    return [
        (
            "scale",
            f"GoogLeNet V1 (ImageNet), 224 px, {PAPER_EPOCHS} epochs, best epoch; "
            f"{paper_runs.min():.0f}-{paper_runs.max():.0f} projections per run (our estimate, "
            f"taking Sec. 5.4.1's I = {PAPER_I} for every run)",
            f"{config.model} (width {config.width}, "
            f"{'pretrained' if config.pretrained else 'from scratch'}), {size} px "
            f"{config.dataset}, {config.epochs} epochs evaluated every {config.eval_every}, the "
            f"kept epoch chosen on the {config.select_on} classes; {projections:.0f} projections "
            "per run",
        ),
        (
            "losses and ablations run",
            f"Table 1: {len(LOSSES)} losses; Table 2: {' and '.join(TABLE2_LOSSES)}; Figs. 2-3: "
            "M and lambda sweeps",
            f"Table 1: {len(LOSSES)} losses; Table 2: {' and '.join(TABLE2_LOSSES)}; Figs. 2-3: M "
            "and lambda sweeps"
            if trained == set(LOSSES) | set(TABLE2_LOSSES) and len(swept) == 2
            else f"Table 1 for {', '.join(rows1)}; Table 2 for {', '.join(rows2) or 'no loss'}; "
            + (
                f"the {' and '.join(swept)} sweep"
                if swept
                else "no sweep (each needs long runs of its own)"
            )
            + "; the paper profile runs every row and both sweeps",
        ),
        ("optimiser", "Adam, beta = (0.9, 0.99)", f"Adam, beta = {betas}"),
        (
            "learning rate",
            "1e-5 (CUB, Cars), 1e-4 (SOP); FC layer at 10x"
            + (
                "; SoftTriple's centres not stated (SoftTriple's code: 1e-2, 100x its network's "
                "1e-4)"
                if soft
                else ""
            ),
            f"{config.lr:g}"
            + (
                f", FC layer at {config.head_lr_scale:g}x"
                if config.head_lr_scale not in (None, 1.0)
                else " for every network parameter"
            )
            + (
                f"; SoftTriple's centres at {soft.loss_lr:g} ({soft.loss_lr / soft.lr:g}x)"
                if soft
                else ""
            ),
        ),
        ("embedding size", "512", f"{config.embedding_dim}"),
        (
            "Margin-Hard",
            "margin loss with learnable beta on hard pairs",
            "beta fixed at 1.2 (ContrastiveLoss 1.0 / 1.4 on hard pairs)",
        ),
        (
            "SoftTriple's proximal anchor",
            "'entangle the updates of the iterations'",
            "anchor = the previous iterate (lags one step)",
        ),
    ]


def _data_rows(config: TrainConfig, f: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The images, the classes, SoftTriple's representatives, the precision and the code:
    ``(setting, paper, ours)``."""
    holdout, augmented = f["holdout"], f["augmented"]
    return [
        (
            "images per class",
            "I = 2 in the M ablation (Sec. 5.4.1); Table 1 follows each baseline's 'number of "
            "positive samples'",
            f"I = {config.m_per_class} for every loss",
        ),
        (
            "augmentation",
            _PAPER_AUGMENTATION,
            _PAPER_AUGMENTATION
            if augmented
            else f"none: {config.dataset}'s images are used as they are",
        ),
        (
            "training classes",
            "every training class of the dataset",
            "every training class of the dataset"
            if not holdout
            else "the training classes less a class-disjoint validation hold-out "
            f"({f'{holdout:.0%}' if holdout < 1 else holdout} of them), which selects each run's "
            "kept epoch and the best variant",
        ),
        (
            "SoftTriple's HNCM representatives",
            "its 'cluster centers'",
            "each class's normalised mean direction of its K normalised centres",
        ),
        ("numeric precision", "not stated", precision_description(config)),
        (
            "code versions",
            "—",
            "records reload when the configuration matches; the code version is not checked "
            "(see the provenance table)",
        ),
    ]


def _batch_rows(
    config: TrainConfig, settings: Mapping[str, Any] | None
) -> list[tuple[str, str, str]]:
    """HNCM's rule, the batches, SoftTriple's batches and evaluations and the contrastive loss's
    settings: ``(setting, paper, ours)``."""
    st = table2_config(config, "SoftTriple", settings or {"table2_setups": TABLE2_SETUPS})
    return [
        (
            "HNCM rule at this profile",
            "the O(L) scan (Sec. 4.2)",
            "the paper's scan"
            if settings is None or settings.get("hncm_mode") == "scan"
            else "the greedy chain: this profile's runs were declared with it, and when the "
            "scan was added the profile kept it so that its committed records kept their "
            "fingerprints; it has stayed since (switching retrains the PROFS-HNCM runs); the "
            "paper profile uses the scan, and both are timed below",
        ),
        (
            "batch construction",
            "Algorithm 1: a subset R' of the representatives and a batch E of examples drawn "
            "from the training set, the batch built from both",
            f"each of the batch's {config.batch_size // config.m_per_class} classes brings its "
            f"representative and {config.m_per_class - 1} other image"
            f"{'s' * (config.m_per_class > 2)} of its class: E is each chosen class's partner"
            f"{'s' * (config.m_per_class > 2)}, never an image of another class",
        ),
        (
            "SoftTriple's PROFS batches",
            "'only the proximal term remains' (Sec. 5.3: SoftTriple has no pairs to constrain)",
            "the PROFS runs also switch to the representative sampler (a representative per "
            "class renewed every step), so their gain over plain is the sampler and the "
            "proximal term together",
        ),
        (
            "Contrastive-Hard's settings",
            "Eq. 3.2 with 'the default hyper-parameters used in the original works' (Sec. 5.3)",
            f"book choices: {implementation()['contrastive-hard'].split(':')[0]}",
        ),
        (
            "SoftTriple's evaluations",
            "the best epoch of 100 (Sec. 5.2)",
            f"evaluated every {st.eval_every} of {st.epochs} epochs, the kept epoch among those "
            "evaluations",
        ),
    ]


def _method_rows(
    config: TrainConfig, settings: Mapping[str, Any] | None, f: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """PROFS's components, the losses' settings, the data and the code:
    ``(setting, paper, ours)``."""
    rows2 = f["rows2"]
    return [
        (
            "HNCM picking",
            "a scan of the L class representatives, O(L) per batch (Sec. 1, 5.4)",
            "greedy chain: each of the C - 1 next classes is the nearest to the set so far, C - 1 "
            "scans of the (L, D) memory: O(C L D) per batch (the default profile's runs; the "
            "paper profile uses a single scan instead, the classes nearest to a random one, O(L "
            "D); benchmarks/hncm.py times both)",
        ),
        (
            "pair restriction",
            "contrastive, triplet and Margin: 'each class representative should have the same "
            "number of its corresponding positive pairs and hard negative pairs'",
            "only the pairs anchored at a representative, so with two images per class a batch "
            "has half the anchors of a plain one (the component ablation separates it from "
            "PROFS's batches and its proximal term)",
        ),
        (
            "Margin and SoftTriple setups",
            "Margin (distance-weighted sampling) in ResNet50, SoftTriple in BN-Inception, each "
            "with its own work's hyper-parameters; SoftTriple's plain row cited, not retrained",
            f"this profile: {', '.join(rows2) or 'no Table 2 loss'}"
            + (
                " in the chapter's backbone, "
                f"{table2_config(config, 'SoftTriple', settings).epochs} epochs, its plain row "
                "retrained"
                if settings
                and not settings["table2_setups"].get("SoftTriple", {}).get("model")
                and "SoftTriple" in rows2
                else ""
            )
            + ". Paper profile: Margin in ResNet50 with 5 images per class (batch 125), its beta "
            "learning with Adam at the network's rate and no schedule (Wu et al.'s code: SGD at "
            "0.1 for beta, the rate halved four times in 20 epochs, CUB cropped to its bounding "
            "boxes); SoftTriple in GoogLeNet V1 (no BN-Inception here), its centres at 1e-2; both "
            "with the PROFS paper's batch, embedding size, Adam and 100 epochs; SoftTriple is "
            "retrained",
        ),
        (
            "N-pair",
            "Euclidean distances (Eq. 2.1)",
            "trains unnormalised embeddings, evaluated by cosine",
        ),
        (
            "hard mining",
            "contrastive, triplet and Margin: a hard mining 'inspired from [53]', one negative "
            "pair per positive pair (Sec. 5.3)",
            "Contrastive-Hard, Triplet-Hard and Margin-Hard: each anchor's hardest positive "
            "and hardest negative in the batch",
        ),
    ]


def deviation_rows(
    config: TrainConfig,
    projections: float,
    measured: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> list[Deviation]:
    """Every known departure from the paper of the runs of ``config`` (the chapter's
    configuration; ``projections``: a Table 1 PROFS run's), as :class:`dmlnb.chapter.Deviation`
    rows, with its effect where this profile measured it (``measured``: setting -> text), else
    why not and the scale that would (:data:`NOT_MEASURED`). A setting of ``config`` that is the
    paper's (e.g. Adam's moments) is no departure and has no row; a row about one loss only
    appears when ``settings`` (the chapter's :func:`experiment_settings`; ``None``: every row
    and sweep, as the paper profile) train that loss."""
    measured = dict(measured or {})
    f = _facts(config, settings)
    rows = [
        *_setup_rows(config, projections, f),
        *_method_rows(config, settings, f),
        *_batch_rows(config, settings),
        *_data_rows(config, f),
    ]
    out = []
    for setting, paper, ours in rows:
        if ours == paper or (setting in _ABOUT and _ABOUT[setting] not in f["trained"]):
            continue  # the paper's: no row
        if setting in measured:
            out.append(Deviation(setting, paper, ours, effect=measured[setting]))
        else:
            why, scale = NOT_MEASURED[setting]
            out.append(Deviation(setting, paper, ours, why=why, scale=scale))
    return out


def _verdict_text(v: Verdict) -> str:
    e = v.evidence()
    return f"{e['effect']} {e['90% interval']} ({v}, {e['runs per side']} seeds)"


def measured_effects(
    pick_cost: pd.DataFrame,
    components: Mapping[str, Mapping[str, Sequence[Run]]],
    table2: Mapping[tuple[str, str], Sequence[Run]],
    code_groups: int,
) -> dict[str, str]:
    """The departures this profile measures, in words: HNCM's pick against a uniform draw
    (``pick_cost``, :func:`~dmlnb.experiments.profs.analyses.cached_pick_cost`), the pair
    restriction (the component ablation's ``components``), SoftTriple's lagged anchor against
    the literal reading (plain SoftTriple, ``table2``) and the ``code_groups`` of the provenance
    table."""
    n = int(pick_cost["classes per batch"].iloc[0])
    out = {
        "HNCM picking": f"one batch of {n} classes, HNCM vs uniform: "
        + ", ".join(
            f"{r['HNCM ms']:.1f} vs {r['uniform ms']:.2f} ms at L = {int(r['L'])}"
            for _, r in pick_cost.iterrows()
        )
    }
    for row, st in components.items():  # paired by seed, as the claims judge them
        v = beats(st, "+ pair restriction", "representatives")
        out["pair restriction"] = (
            f"{row}, R@1 with the pairs restricted minus every pair (both with PROFS's batches, "
            f"lambda = 0), paired: {_verdict_text(v)}"
        )
    if ("SoftTriple", "PROFS") in table2:
        v = beats(table2, ("SoftTriple", "PROFS"), ("SoftTriple", "plain"))
        out["SoftTriple's proximal anchor"] = (
            "lagged anchor and representative sampler minus plain SoftTriple (the literal "
            f"reading's zero gradient, on class-balanced batches), R@1, paired: {_verdict_text(v)}"
        )
    out["code versions"] = (
        f"{code_groups} (commit, package changed, threads) groups, see below; not retrained"
    )
    return out
