"""The SSDML chapter's display tables built from its declarations (the notebook shows them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.experiments.ssdml.profile_settings import settings_for
from dmlnb.experiments.ssdml.reported import M5, REPORTED
from dmlnb.experiments.ssdml.settings import NAMES, Setting
from dmlnb.experiments.ssdml.spec import seed_of
from dmlnb.experiments.ssdml.training import results_frame
from dmlnb.reporting import format_mean_std, reported_vs_reproduced, summarize_runs
from dmlnb.runs import Run

__all__ = [
    "settings_table",
    "pct",
    "summary",
    "reproduced_label",
    "train_seconds",
    "table4",
    "near_zero",
    "table5",
    "mined_during_training",
    "alpha_table",
    "yes_no",
]


def settings_table(settings: Mapping[str, Setting], profile: str) -> pd.DataFrame:
    """The paper profile's settings and ``settings`` (at ``profile``), one row per (profile,
    setting): dataset, network, ``d``, ``l``, labelled examples per class, partition, epochs
    (per partition), units per batch, ``k``, ``γ``, ``α``, lr, seeds and methods, as the runs'
    configurations hold them."""
    paper = settings_for("paper")
    rows = []
    for key, st in {**paper, **settings}.items():
        prof = "paper" if key in paper else profile
        cfg = st.train_config(prof, st.seeds[0])
        rows.append(
            {
                "setting": st.name,
                "profile": prof,
                "dataset": cfg.dataset,
                "network": cfg.model,
                "d": cfg.embedding_dim,
                "l": st.metric_dim,
                "labelled/class": st.labelled_per_class,
                "partition": "all" if st.partition_size >= 10**9 else st.partition_size,
                "epochs (per partition)": f"{cfg.epochs} "
                f"({min(st.epochs_per_partition, cfg.epochs)})",
                "batch (units)": cfg.batch_size,
                "k": st.k,
                "γ": st.gamma,
                "α": st.alpha,
                "lr": cfg.lr,
                "seeds": len(st.seeds),
                "methods": len(st.methods),
            }
        )
    frame = pd.DataFrame(rows).drop_duplicates(subset=["setting", "profile"])
    return frame.set_index(["profile", "setting"])


def pct(frame: pd.DataFrame) -> pd.DataFrame:
    """A percent table as strings with one decimal (``—`` for a missing value)."""
    return frame.map(lambda v: f"{v:.1f}" if pd.notna(v) else "—")


def summary(
    runs: Mapping[str, Mapping[str, Sequence[Run]]],
    key: str,
    methods: Sequence[str] | None = None,
    initial: bool = True,
) -> pd.DataFrame:
    """Mean and std over seeds of every method of setting ``key`` (``methods``: those that ran),
    with the Initial row (:func:`~dmlnb.experiments.ssdml.training.results_frame`)."""
    by = runs[key] if methods is None else {m: runs[key][m] for m in methods if m in runs[key]}
    return summarize_runs(results_frame(by, initial=initial), M5)


def reproduced_label(
    runs: Mapping[str, Mapping[str, Sequence[Run]]],
    settings: Mapping[str, Setting],
    key: str,
    profile: str,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """The column label of a reproduced table: setting, network, labelled examples, profile,
    seeds and where each run's epoch was chosen."""
    st = settings[key]
    cfg = st.train_config(profile, st.seeds[0], overrides)
    n = len(runs[key][next(iter(runs[key]))])
    single = [NAMES[m] for m in st.single_seed_methods if m in runs[key]]
    seeds = f"{n} seed{'s' * (n > 1)}" + (
        f"; 1 seed for {', '.join(single)}" if single and n > 1 else ""
    )
    where = (
        "validation-selected"
        if runs[key]["ours"][0].record.selected_on == "validation"
        else "test-selected"
    )
    return (
        f"reproduced ({st.name}, {cfg.model}, {st.labelled_per_class}/class labelled, {profile}, "
        f"{seeds}, {where})"
    )


def train_seconds(
    runs: Mapping[str, Mapping[str, Sequence[Run]]], settings: Mapping[str, Setting]
) -> pd.DataFrame:
    """Mean training seconds per run (as recorded), methods x settings."""
    return pd.DataFrame(
        {
            settings[key].name: {
                NAMES[m]: np.mean([r.record.data["total_train_seconds"] for r in rs])
                for m, rs in by.items()
            }
            for key, by in runs.items()
        }
    )


def table4(
    runs: Mapping[str, Mapping[str, Sequence[Run]]], settings: Mapping[str, Setting]
) -> pd.DataFrame:
    """Table 4 reproduced: with and without orthogonality per setting, the metrics (mean ± std,
    %) and the effective rank (unscaled)."""
    rows = {}
    for key in settings:
        for m in ("ours-noorth", "ours"):
            if m in runs[key]:
                rows[(settings[key].name, "w/ orth" if m == "ours" else "w/o orth")] = [
                    {
                        **{k: r.metrics[k] for k in M5},
                        "eff. rank": r.extras["spectrum"]["effective_rank"] / 100,
                    }
                    for r in runs[key][m]
                ]
    frame = format_mean_std(summarize_runs(rows, [*M5, "eff. rank"]))
    frame.index = pd.MultiIndex.from_tuples(frame.index)
    return frame


def near_zero(
    runs: Mapping[str, Mapping[str, Sequence[Run]]],
    settings: Mapping[str, Setting],
    tiny: float = 1e-4,
    methods: Sequence[str] = ("ours", "ours-noorth", "triplet", "lrml"),
) -> pd.DataFrame:
    """Per (setting, method): the singular values of the test embedding below ``tiny`` of their
    sum, per seed, and the smallest of the first seed."""
    return pd.DataFrame(
        {
            (settings[key].name, NAMES[m]): {
                **{
                    f"seed {seed_of(r)}": sum(
                        v < tiny for v in r.extras["spectrum"]["singular_values"]
                    )
                    for r in runs[key][m]
                },
                "smallest (seed 0)": min(runs[key][m][0].extras["spectrum"]["singular_values"]),
            }
            for key in settings
            for m in methods
            if m in runs[key]
        }
    ).T


def table5(
    runs: Mapping[str, Mapping[str, Sequence[Run]]], settings: Mapping[str, Setting]
) -> pd.DataFrame:
    """Table 5 reproduced: triplet, angular and ours per setting (Recall@K, mean ± std, %)."""
    frames = {
        settings[k].name: format_mean_std(
            summary(runs, k, ["triplet", "angular", "ours"], initial=False)
        )[["R@1", "R@2", "R@4", "R@8"]]
        for k in settings
    }
    return pd.concat(frames, axis=1).replace("nan", "—").fillna("—")


def mined_during_training(
    runs: Mapping[str, Mapping[str, Sequence[Run]]],
    settings: Mapping[str, Setting],
    chance: Mapping[str, float],
) -> pd.DataFrame:
    """Ours' mined triplets against the hidden labels (%, mean over partitions, then over seeds:
    the convention of the diagnosis tables), beside the chance level of each setting."""
    cols = {
        "pos_same": "positives of the anchor's class (%)",
        "neg_same": "negatives of the anchor's class (%)",
        "triplet_correct": "both right: positive of the class, negative of another (%)",
    }
    frame = pd.DataFrame(
        {
            settings[k].name: 100
            * pd.concat(
                [r.record.history_frame()[list(cols)].dropna().mean() for r in runs[k]["ours"]],
                axis=1,
            ).mean(axis=1)
            for k in settings
        }
    ).T.rename(columns=cols)
    frame.insert(2, "negatives of another class (%)", 100 - frame[cols["neg_same"]])
    frame["chance: a random pool member of the anchor's class (%)"] = [
        100 * chance[k] for k in settings
    ]
    return frame


def alpha_table(
    alpha_runs: Mapping[float, Sequence[Run]], name: str, profile: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Figure 2 (middle): the reproduced sweep's mean and std per angle, and the table of it
    beside the reported one (Cars-196)."""
    summ = summarize_runs({f"{a:g}°": [r.metrics for r in rs] for a, rs in alpha_runs.items()}, M5)
    n = min(len(rs) for rs in alpha_runs.values())
    reported = REPORTED["alpha"].rename(index=lambda a: f"{a:g}°")
    label = f"reproduced ({name}, {profile}, {n} seed{'s' * (n > 1)} per angle)"
    return summ, reported_vs_reproduced(
        {"reported (Cars-196)": pct(reported)}, {label: format_mean_std(summ)}
    )


def yes_no(value: Any) -> Any:
    """A table's boolean as a reader reads it (``"yes"`` / ``"no"``), anything else as it is: the
    formatter of the "verdict changes" columns."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    return value
