"""The chapter's display plumbing: the figures, tables and sentences its notebook shows, each a
function of what the notebook computed (``fl_chapter.show.<name>``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from pandas.io.formats.style import Styler

from dmlnb.experiments.facility_location.diagnostics import (
    inside_loss_frame,
    inside_loss_summary,
    labels_one_move,
    nmi_of_one_move,
    pam_by_table,
)
from dmlnb.experiments.facility_location.lemma1 import lemma1_table
from dmlnb.experiments.facility_location.presets import Study, TableSpec, loss_description
from dmlnb.experiments.facility_location.runs import KeptRun
from dmlnb.experiments.facility_location.spec import METHODS, REPORTED, REPORTED_SETTING, ROW_NAMES
from dmlnb.experiments.facility_location.tables import reported_margins, variant_comparison
from dmlnb.experiments.facility_location.toy import MERGE_DEGREES, TOY_GAMMA
from dmlnb.plots import plot_embedding_2d, plot_step_curves, plot_thumbnails, set_style
from dmlnb.reporting import format_mean_std, reported_vs_reproduced, summarize_runs

__all__ = [
    "style",
    "toy_figure",
    "toy_table",
    "toy_lines",
    "data_table",
    "methods_table",
    "run_line",
    "tables_vs_reported",
    "margins_line",
    "gamma_tables",
    "gamma_line",
    "lemma1_shown",
    "main_runs",
    "inside_frame",
    "forms_tables",
    "paired_tables",
    "tsne_figure",
    "inside_figure",
    "inside_tables",
    "PAM_FORMAT",
]

#: How the tables of Algorithm 2's gains format their columns.
PAM_FORMAT = {
    "gamma": "{:g}",
    "PAM above greedy": "{:.0%}",
    "lowest run": "{:.0%}",
    "highest run": "{:.0%}",
}


def style() -> None:
    """The book's figure style and the chapter's table display options."""
    set_style()
    pd.set_option("display.precision", 3)
    pd.set_option("display.max_colwidth", None)


def toy_figure(toy: Mapping[str, Sequence[Mapping[str, Any]]], frame: pd.DataFrame) -> None:
    """The toy's first seed before and after every loss, on the unit circle."""
    seed0 = {name: results[0] for name, results in toy.items()}
    first = next(iter(seed0.values()))
    gap0 = frame.set_index(["loss", "seed"])["gap_degrees"]
    fig, axes = plt.subplots(1, len(seed0) + 1, figsize=(22, 4.0))
    before = gap0[("before", first["seed"])]
    plot_embedding_2d(
        first["before"].numpy(),
        first["labels"],
        ax=axes[0],
        size=30,
        title=f"before: class-0 groups {before:.0f}° apart",
    )
    for ax, (name, r) in zip(axes[1:], seed0.items()):
        plot_embedding_2d(
            r["after"].numpy(),
            r["labels"],
            ax=ax,
            size=30,
            title=f"after {name}: {gap0[(name, r['seed'])]:.0f}° apart",
        )
    circle = np.deg2rad(np.linspace(0, 360, 361))
    for ax in axes:
        ax.plot(np.cos(circle), np.sin(circle), color="0.85", lw=0.8, zorder=0)
        ax.set_xlim(-1.2, 1.2)
        ax.set_ylim(-1.2, 1.2)
        ax.set_aspect("equal")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.legend(
            fontsize="xx-small",
            loc="center",
            markerscale=1,
            title="class 0 = two groups",
            title_fontsize="xx-small",
        )
    fig.suptitle(
        "Figure 2 reproduced: class 0 starts as two groups with other classes between "
        f"them (unit circle, seed {first['seed']})"
    )
    fig.tight_layout()


def toy_table(frame: pd.DataFrame, seeds: Sequence[int]) -> Styler:
    """The toy before and after each loss: mean ± std over the seeds."""
    cols = {
        "gap_degrees": "angle between the class-0 groups (°)",
        "nn_accuracy": "nearest neighbour of the same class",
        "max_loss": "largest loss over the steps",
    }
    per_loss = {name: f.to_dict("records") for name, f in frame.groupby("loss", sort=False)}
    shown = format_mean_std(summarize_runs(per_loss, list(cols)), scale=1.0, digits=2)
    return (
        shown.replace("nan", "—")
        .rename(columns=cols)
        .style.set_caption(
            f"The toy before and after each loss: mean ± std over seeds {list(seeds)}"
        )
    )


def toy_lines(toy: Mapping[str, Sequence[Mapping[str, Any]]], frame: pd.DataFrame) -> str:
    """The merge threshold, the margin per misplaced point and what each loss merged."""
    labels = next(iter(toy.values()))[0]["labels"]
    toy_move, batch_move = labels_one_move(labels), nmi_of_one_move(32, 4)
    lines = [
        f"merged: the class-0 groups end less than {MERGE_DEGREES:g} degrees apart",
        f"margin per misplaced point, gamma x (1 - NMI): toy ({len(labels)} points) {TOY_GAMMA:g}"
        f" x {toy_move:.4f} = {TOY_GAMMA * toy_move:.3f}; a batch of 32 classes x 4 images 10 x "
        f"{batch_move:.4f} = {10 * batch_move:.3f}",
    ]
    for name, f in frame.groupby("loss", sort=False):
        if name != "before":
            zero = int((f["max_loss"] == 0).sum())
            lines.append(
                f"{name}: the split class is merged at {int(f['merged'].sum())} of {len(f)} seeds"
                + (
                    f"; its loss is 0 at every step at {zero} of {len(f)} seeds (no point moves)"
                    if zero
                    else ""
                )
            )
    return "\n".join(lines)


def data_table(tables: Sequence[TableSpec], splits: Mapping[str, Any]) -> pd.DataFrame | str:
    """Per table with its data loaded: images and classes of each split, the batch."""
    rows = []
    for t in tables:
        if t.table in splits:
            s = splits[t.table]
            val = s.validation
            rows.append(
                {
                    "table": t.table,
                    "dataset": t.config.dataset,
                    "train images": len(s.train),
                    "train classes": s.num_train_classes,
                    "validation images": len(val) if val is not None else 0,
                    "validation classes": val.num_classes if val is not None else 0,
                    "test images": len(s.test),
                    "test classes": s.test.num_classes,
                    "batch": f"{t.config.batch_size} = {t.classes_per_batch} classes "
                    f"(C/m = {t.class_ratio})",
                }
            )
    if not rows:
        return "paper profile: datasets are loaded per table below"
    return pd.DataFrame(rows).set_index("table")


def methods_table(study: Study) -> pd.DataFrame:
    """What dmlnb trains for each method of the paper, in words."""
    return pd.Series(
        {ROW_NAMES[m]: loss_description(m, study) for m in METHODS}, name="what dmlnb trains"
    ).to_frame()


def run_line(all_runs: Sequence[KeptRun], trained: int) -> str:
    """How many runs were trained now or reloaded, and when they were trained (no wall time: it
    varies with the machine's load at every render)."""
    if not all_runs:
        return "no runs"
    starts = sorted(r.record.data.get("started", "") for r in all_runs)
    return (
        f"{len(all_runs)} runs ({trained} trained now, {len(all_runs) - trained} reloaded); "
        f"trained between {starts[0][:16]} and {starts[-1][:16]} UTC under varying machine load, "
        "so their training times are not compared"
    )


def _metrics(runs: Sequence[KeptRun]) -> list[dict[str, float]]:
    return [r.metrics for r in runs]


def tables_vs_reported(
    runs: Mapping[str, Mapping[str, Sequence[KeptRun]]],
    study: Study,
    profile: str,
    shown: str,
) -> list[Styler]:
    """Per table: the reported values beside ours (mean ± std over seeds, in %); the reported
    tables without runs alone."""
    out = []
    for t in study.tables:
        if t.table not in runs:
            continue
        cols = ["NMI"] + [f"R@{k}" for k in t.config.eval_ks]
        per = {ROW_NAMES[m]: _metrics(rs) for m, rs in runs[t.table].items()}
        reported = REPORTED[t.table]
        shared = [c for c in cols if c in reported.columns]
        n = len(study.seeds_for(t))
        ours = (
            f"reproduced ({t.config.dataset}, C/m = {t.class_ratio:g}, {t.config.model}, "
            f"{t.config.embedding_dim}-d, profile {profile}, {n} seed{'s' if n > 1 else ''})"
        )
        side = reported_vs_reproduced(
            {f"reported ({REPORTED_SETTING[t.table]})": reported[shared].map(lambda v: f"{v:.2f}")},
            {ours: format_mean_std(summarize_runs(per, cols))[cols]},
        )
        analogue = "" if profile == "paper" else " (analogue)"
        out.append(
            side.style.set_caption(
                f"{t.table}{analogue}: NMI and Recall@K in %; reproduced: each run at its {shown}"
            )
        )
    for name, reported in REPORTED.items():
        if name not in runs:
            out.append(
                reported.style.format("{:.2f}").set_caption(
                    f"{name} as reported ({REPORTED_SETTING[name]}), in %; not reproduced at this "
                    "profile"
                )
            )
    return out


def margins_line() -> str:
    """Where the clustering loss stands in the transcribed Tables 1-3."""
    margins = reported_margins()
    top = margins[margins["margin"] > 0]
    low = margins.loc[margins["margin"].idxmin()]
    return (
        f"Reported: the clustering loss is highest on {len(top)} of {len(margins)} (table, metric) "
        f"cells of Tables 1-3; its margin over the best baseline ranges from "
        f"{margins['margin'].min():.2f} to {margins['margin'].max():.2f} points, the smallest on "
        f"{low['table']} {low['metric']} ({low['clustering']:.2f} vs {low['best baseline']} "
        f"{low['baseline value']:.2f}); per table: "
        + "; ".join(
            f"{t} {f['margin'].min():.2f}-{f['margin'].max():.2f}"
            for t, f in margins.groupby("table")
        )
        + "."
    )


def _beside(
    summary: Mapping[str, Sequence[KeptRun]],
    versus: tuple[Sequence[KeptRun], Mapping[str, Sequence[KeptRun]], str],
    title: tuple[str, Study, str, str],
    caption: str,
) -> list[Styler]:
    """Runs beside the tables against the main ones, at the first table's setting: the metrics
    of ``summary`` (label -> runs), captioned ``"<what>: <dataset>, profile <profile>, ..."``
    from ``title`` (what, study, profile, how the runs chose their epoch), then the rule's
    verdicts of ``versus`` (main runs, the others by label, the main's label)."""
    what, study, profile, shown = title
    t = study.tables[0]
    cols = ["NMI"] + [f"R@{k}" for k in t.config.eval_ks]
    per = {k: _metrics(rs) for k, rs in summary.items()}
    verdicts = variant_comparison(versus[0], versus[1], ["NMI", "R@1"], versus[2])
    what = (
        f"{what}: {t.config.dataset}, profile {profile}, test metrics in %, mean ± std over seeds "
        f"{list(study.seeds_for(t))}, each run at its {shown}"
    )
    return [
        format_mean_std(summarize_runs(per, cols)).style.set_caption(what),
        verdicts.style.set_caption(caption),
    ]


def gamma_tables(
    main: Sequence[KeptRun],
    ablation: Mapping[float, Sequence[KeptRun]],
    study: Study,
    profile: str,
    shown: str,
) -> list[Styler]:
    """The clustering loss at the initial margin multiplier and at the ablation's values."""
    summary = {f"gamma = {study.gamma:g}": main}
    summary.update({f"gamma = {g:g}": rs for g, rs in ablation.items()})
    versus = {f"gamma {g:g}": rs for g, rs in ablation.items()}
    return _beside(
        summary,
        (main, versus, f"gamma {study.gamma:g}"),
        ("Clustering loss, initial margin multiplier", study, profile, shown),
        f"gamma {study.gamma:g} against the ablation, by the verdict rule (effect in points)",
    )


def gamma_line(study: Study) -> str:
    """The NMI cost of one misplaced point of the first table's batch, and the margin it asks."""
    t = study.tables[0]
    one = nmi_of_one_move(t.classes_per_batch, t.config.batch_size // t.classes_per_batch)
    return (
        f"1 - NMI after moving one of {t.config.batch_size} points ({t.classes_per_batch} classes)"
        f" to another cluster: {one:.4f}; the margin per misplaced point is {study.gamma:g} x "
        f"that = {study.gamma * one:.3f}"
    )


def forms_tables(
    main: Sequence[KeptRun],
    variants: Mapping[str, Sequence[KeptRun]],
    study: Study,
    profile: str,
    shown: str,
) -> list[Styler]:
    """Algorithm 2 as listed against the variant: metrics, verdicts and the logged steps."""
    label = f"refinement '{study.refinement}'"
    others = {f"refinement '{a}'": rs for a, rs in variants.items()}
    out = _beside(
        {label: main, **others},
        (main, others, label),
        ("Clustering loss, forms of Algorithm 2", study, profile, shown),
        "Algorithm 2 as listed against the variant, by the verdict rule (effect in points)",
    )
    pam = pam_by_table([*main, *[r for rs in variants.values() for r in rs]])
    out.append(
        pam.style.format(PAM_FORMAT)
        .hide(axis="index")
        .set_caption(
            "Each form at every logged training step (once per step, after all passes): the share "
            "of steps where the refinement ends strictly above its greedy start, and the steps "
            "where it ends below it (for metric distances no pass of either form can; not a test "
            "of Lemma 1)"
        )
    )
    return out


def lemma1_shown(traced: pd.DataFrame) -> Styler:
    """Lemma 1's trace by kind of batch."""
    return (
        lemma1_table(traced)
        .style.format({"largest fall of A": "{:.3g}"})
        .hide(axis="index")
        .set_caption(
            "Lemma 1 on every update of Algorithm 2 as listed, from the greedy set, T = 5 passes "
            "(stopped after a pass without change): updates that lower A, the largest fall, passes "
            "that end below their start, and whether the loop ends at the medoids of the runs' code"
        )
    )


def paired_tables(
    main: Sequence[KeptRun], paired: Sequence[KeptRun], study: Study, profile: str, shown: str
) -> list[Styler]:
    """N-pairs on the tables' batches against paired batches."""
    t, p = study.tables[0], study.paired
    assert p is not None
    summary = {
        f"C/m = {t.class_ratio:g} ({t.classes_per_batch} classes)": main,
        f"paired, C/m = {p.class_ratio:g} ({p.classes_per_batch} classes x 2)": paired,
    }
    return _beside(
        summary,
        (main, {"paired batches": paired}, f"C/m = {t.class_ratio:g}"),
        ("N-pairs (Eq. 3) on the tables' and on paired batches", study, profile, shown),
        f"N-pairs on the C/m = {t.class_ratio:g} batches against paired batches, by the verdict "
        "rule (effect in points)",
    )


def tsne_figure(run: KeptRun, test: Any, profile: str) -> None:
    """The stored t-SNE map of ``run``'s test embedding: by class, and drawn with the images."""
    xy = np.asarray(run.extras["tsne"]["xy"])
    idx = torch.tensor(run.extras["tsne"]["indices"])
    imgs, labs = zip(*(test[int(i)] for i in idx))
    imgs, labs = torch.stack(imgs), torch.tensor(labs)
    cfg = run.record.config
    fig, axes = plt.subplots(1, 2, figsize=(15, 7.2), gridspec_kw={"width_ratios": [1, 1.15]})
    plot_embedding_2d(
        xy,
        labs,
        ax=axes[0],
        size=4,
        max_legend=8,
        title=f"{len(xy)} test points, {int(labs.unique().numel())} unseen classes",
    )
    plot_thumbnails(
        xy, imgs, labs, ax=axes[1], title="the same map drawn with the images", thumb_fraction=0.03
    )
    fig.suptitle(
        "Figures 4-6 reproduced: t-SNE of the clustering loss's test embedding, "
        f"{cfg['dataset']}, {cfg['model']}, profile {profile}, seed {run.seed}"
    )
    fig.tight_layout()


def inside_figure(inside: pd.DataFrame, title: str) -> None:
    """What the inside-the-loss hook logged over the clustering runs' steps."""
    clu = inside[inside["method"] == "clustering"]
    panels = [
        (
            [
                ("oracle", "oracle score F~"),
                ("augmented", "F(S_PAM) + gamma (1 - NMI)"),
                ("predicted", "F(S_PAM)"),
            ],
            "score (sum over the batch)",
            "oracle vs loss-augmented score",
            False,
        ),
        (
            [("nmi", "NMI of g(S_PAM)")],
            "NMI against the batch's labels",
            "inferred clustering",
            False,
        ),
        ([("pam_gain", "refined - greedy A")], "objective gain", "what PAM adds to greedy", False),
        (
            [("inference_share", "inference / step time")],
            "share of the step",
            "cost of the inference",
            False,
        ),
    ]
    if len(clu):
        plot_step_curves(clu, panels, smooth=5, title=title)


#: The per-run summary's columns (:func:`inside_loss_summary`) as the table heads them.
_INSIDE_HEADINGS = {
    "steps": "logged steps",
    "step_s": "step (s, median)",
    "loss_first": "loss, first tenth",
    "loss_last": "loss, last tenth",
    "inference_s": "inference (s, median)",
    "inference_share": "inference share of the step time",
    "pam_improved": "steps Algorithm 2 improved",
    "pam_gain_mean": "gain over greedy, mean",
    "pam_gain_min": "gain over greedy, lowest",
    "below_greedy": "steps below greedy",
    "nmi_first": "NMI of g(S_PAM), first tenth",
    "nmi_last": "NMI of g(S_PAM), last tenth",
}


def inside_tables(inside: pd.DataFrame, all_runs: Sequence[KeptRun]) -> list[Styler]:
    """Per run, the logged timings and PAM's gains; per table and form, PAM's share of steps."""
    show = inside_loss_summary(inside).rename(columns=_INSIDE_HEADINGS)
    show["method"] = show["method"].map(ROW_NAMES)
    return [
        show.set_index(["method", "seed"])
        .style.format(precision=4, na_rep="—")
        .set_caption(
            "Per run: median step and inference seconds (first logged step left out), inference "
            "share of the step time, PAM: fraction of steps it improved on greedy, mean and min "
            "gain, steps it ended below greedy; NMI of the inferred clustering and loss over the "
            "first / last tenth of the steps; Table 1 analogue"
        ),
        pam_by_table(all_runs)
        .style.format(PAM_FORMAT)
        .hide(axis="index")
        .set_caption(
            "Share of the logged steps where Algorithm 2 ends strictly above the greedy set, and "
            "steps where it ends below it ('ended below greedy'), per table, initial gamma and "
            "form of Algorithm 2"
        ),
    ]


def main_runs(runs: Mapping[str, Mapping[str, Sequence[KeptRun]]]) -> list[KeptRun]:
    """The runs of the first table that ran (the diagnostics' runs)."""
    first = next(iter(runs), None)
    return [r for rs in runs[first].values() for r in rs] if first else []


def inside_frame(runs: Mapping[str, Mapping[str, Sequence[KeptRun]]]) -> pd.DataFrame:
    """The inside-the-loss log of the first table's runs (:func:`inside_loss_frame`)."""
    return inside_loss_frame(main_runs(runs))
