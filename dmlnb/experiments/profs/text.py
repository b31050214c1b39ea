"""The PROFS chapter's display plumbing: the lines and tables the notebook prints, computed from
the configuration, the settings and the runs (so that the notebook's cells only wire calls)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.experiments.profs.analyses import MIN_PROJECTIONS, epochs_for_projections
from dmlnb.experiments.profs.losses import LOSSES, VARIANTS
from dmlnb.experiments.profs.profiles import PAPER_EPOCHS, REPORTED_RHO, table2_config, table_rows
from dmlnb.experiments.profs.reported import (
    PAPER_PROFS_LOSSES,
    REPORTED_ROWS,
    REPORTED_TABLE1,
    reported_gains,
)
from dmlnb.experiments.profs.tables import COMPARISONS
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import NOT_TESTED, count_line, reported_vs_reproduced

__all__ = [
    "setup_text",
    "data_text",
    "glued_numbers",
    "gains_table",
    "reading_lines",
]


def setup_text(profile: str, config: TrainConfig, settings: Mapping[str, Any]) -> str:
    """The profile's configuration and design in two lines."""
    rows1, rows2 = table_rows(settings, 1), table_rows(settings, 2)
    return (
        f"profile={profile}  dataset={config.dataset}  backbone={config.model} (width "
        f"{config.width})  D={config.embedding_dim}  batch={config.batch_size} "
        f"(I={config.m_per_class} per class)  {config.optimizer} lr={config.lr:g}  "
        f"epochs={config.epochs} (evaluated every {config.eval_every}; best epoch on the "
        f"{config.select_on} classes)  seeds={list(settings['seeds'])}  rho={settings['rho']:g}  "
        f"lambda={settings['lam']:g}\nTable 1 rows trained: {', '.join(rows1)}; Table 2: "
        f"{', '.join(rows2) or 'none'}"
    )


def data_text(
    config: TrainConfig,
    settings: Mapping[str, Any],
    splits: Any,
    period: int,
    steps: int,
    scale_reason: str | None,
) -> str:
    """The data, this profile's ``M`` and its projections per run, in three lines."""
    L = splits.num_train_classes
    held_out = (
        f", {len(splits.validation)} validation images of {splits.validation.num_classes} "
        "held-out training classes (no run trains on them)"
        if splits.validation is not None
        else ""
    )
    need = epochs_for_projections(config, len(splits.train), L, settings["rho"])
    tested = (
        "as many as the paper's fewest, so Table 1's gains are within the range of its evidence "
        "(their verdicts, and SoftTriple's, are in the claims below)."
        if scale_reason is None
        else "fewer than the paper's fewest; " + scale_reason + "."
    )
    return (
        f"{config.dataset}: {len(splits.train)} training images of {L} classes{held_out}, "
        f"{len(splits.test)} test images of {splits.test.num_classes} unseen classes. A batch "
        f"holds {config.batch_size // config.m_per_class} classes, p(y) = "
        f"{config.batch_size / (config.m_per_class * L):.3f}, so rho = {settings['rho']:g} gives "
        f"M = {period} steps per projection: {steps} steps of training make "
        f"{steps / period:.1f} projections.\n{MIN_PROJECTIONS} projections need at least {need} "
        f"epochs of this profile; it trains {config.epochs}.\nProjections per Table 1 run: "
        + tested
    )


def glued_numbers(
    profile: str,
    config: TrainConfig,
    settings: Mapping[str, Any],
    n_train: int,
    paper: pd.DataFrame,
) -> dict[str, str]:
    """The numbers the chapter's Markdown states, for myst-nb ``glue``: the projections a run
    should make (:data:`MIN_PROJECTIONS`), this profile's epochs, evaluations and network width,
    SoftTriple's own schedule (:func:`table2_config`: epochs, evaluations, seeds, and its
    projections, one per step over ``n_train`` training images), and the paper's rho, epochs and the
    steps of its CUB-200-2011 run (``paper``: :func:`~.analyses.paper_projections`), each a
    projection for SoftTriple."""
    soft = table2_config(config, "SoftTriple", settings)
    steps = soft.steps_per_epoch or n_train // soft.batch_size
    return {
        "profile": profile,
        "min_projections": str(MIN_PROJECTIONS),
        "epochs": str(config.epochs),
        "eval_every": str(config.eval_every),
        "width": str(config.width),
        "st_epochs": str(soft.epochs),
        "st_eval_every": str(soft.eval_every),
        "st_projections": str(soft.epochs * steps),
        "st_seeds": str(len(settings["table2_seeds"])),
        "paper_rho": f"{REPORTED_RHO:g}",
        "paper_epochs": str(PAPER_EPOCHS),
        "paper_cub_steps": str(int(paper.loc["CUB-200-2011", "steps"])),
    }


def gains_table(gains: pd.DataFrame, label: str) -> Any:
    """The gains of each variant beside the paper's (three datasets), with each loss's best
    variant; ``label``: the reproduced columns' source label."""
    rep = {
        f"reported ({ds}, GoogLeNet V1)": reported_gains(ds)[["PROFS gain", "PROFS-HNCM gain"]].map(
            lambda v: f"{v:.1f}" if np.isfinite(v) else "—"
        )
        for ds in ("CUB-200-2011", "CARS196", "SOP")
    }
    r1 = lambda row, v: (  # noqa: E731
        REPORTED_TABLE1.loc[REPORTED_ROWS[row, v], ("CUB-200-2011", "R@1")]
        if (row, v) in REPORTED_ROWS
        else -1
    )
    best = {row: max(VARIANTS, key=lambda v: r1(row, v)) for row in LOSSES}
    rep["reported (CUB-200-2011, GoogLeNet V1)"]["best variant"] = pd.Series(best).where(
        pd.Series({row: row in PAPER_PROFS_LOSSES for row in LOSSES}), "— (no PROFS row)"
    )
    ours = gains.drop(columns=[f"{a} > {b}" for a, b in COMPARISONS]).astype(object)
    ours = ours.map(lambda v: f"{v:.2f}" if isinstance(v, float) else v)
    return reported_vs_reproduced(rep, {label: ours}, rows=list(gains.index)).style.set_caption(
        "Recall@1 of each variant (%), its gain over the plain loss and of HNCM over PROFS "
        "(points), and the best variant"
    )


def reading_lines(
    head: str, gains: pd.DataFrame, paper: Sequence[Any], ours: Sequence[Any]
) -> list[str]:
    """The chapter's numbers in words: each comparison's verdicts over the losses of Tables 1-2
    (``gains``: :func:`~dmlnb.experiments.profs.tables.gain_frame`'s rows) with the mean gain
    over the losses tested, and the claims' verdicts counted."""
    seeds = ", ".join(str(int(s)) for s in sorted(set(gains["seeds"])))
    lines = [f"{head}; seeds per loss in Tables 1-2: {seeds}):"]
    for (a, b), column in COMPARISONS.items():
        verdicts = [str(v) for v in gains[f"{a} > {b}"]]
        counts = pd.Series(verdicts).value_counts().to_dict()
        tested = [v != NOT_TESTED for v in verdicts]  # a collapsed side is no test
        gain = gains.loc[tested, column]
        lines.append(
            f"- {a} > {b}, R@1 per loss of Tables 1-2: "
            + ", ".join(f"{k}: {n}" for k, n in counts.items())
            + f"; mean gain over the {len(gain)} losses tested {gain.mean():+.2f} points."
        )
    for name, judged in (("the paper's claims", paper), ("our measurements", ours)):
        lines.append(f"- {name}: {count_line(j.verdict for j in judged)}.")
    on_gains = [j for j in paper if j.spec.id in _GAIN_CLAIMS]
    lines.append(
        "- the paper's claims on PROFS's gains: "
        + "; ".join(f"{j.spec.text.split(' (')[0]}: {j.verdict}" for j in on_gains)
        + "."
    )
    return lines


#: The paper's claims on PROFS's gains (the ids of :func:`~.claims.chapter_claims`).
_GAIN_CLAIMS = ("profs-improves-every-loss", "hncm-boosts-profs", "softtriple-regularisation")
