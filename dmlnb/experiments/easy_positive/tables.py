"""The chapter's tables and lines of text, from its runs (the notebook's display plumbing): the
methods as declared, the data, Figure 4's table, the training losses, the key comparison, the
semi-hard rules, the embedding statistics, Table 1 beside the paper and the verdicts in words.
Each returns a styled table (:class:`pandas.io.formats.style.Styler`) or text."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from dmlnb.chapter import JudgedClaim, RunSet, claims_frame
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.diagnostics import COLLAPSED, LN2, collapsed_groups, near_ln2
from dmlnb.experiments.easy_positive.judges import identical_histories
from dmlnb.experiments.easy_positive.reported import (
    DATASET_NAMES,
    REPORTED_TABLE1,
    reported_table1,
    reported_table1_winners,
)
from dmlnb.experiments.easy_positive.runs import (
    figure4_names,
    group_size_points,
    key_runs,
    recall_table,
)
from dmlnb.experiments.easy_positive.spec import ALL_METHODS, MINING_METHODS, canonical_method
from dmlnb.methods import MethodCall
from dmlnb.reporting import (
    count_line,
    format_mean_std,
    interior_optimum,
    reported_vs_reproduced,
    summarize_runs,
)
from dmlnb.runs import Run
from dmlnb.selection import main_comparison

__all__ = [
    "methods_frame",
    "data_table",
    "trained_line",
    "figure4_table",
    "loss_tables",
    "metric_columns",
    "key_table",
    "key_lines",
    "group_size_optima",
    "optima_table",
    "SEMIHARD_LABELS",
    "semihard_tables",
    "embedding_summary",
    "embedding_lines",
    "reported_table1_display",
    "table1_display",
    "paper_status_frame",
    "verdict_lines",
]


def _in_effect(label: str, c: MethodCall) -> str:
    """What an easy-positive call trains, in the paper's terms: its positive and negatives, the
    semi-hard rule where the variant has semi-hard negatives, and the authors' rules as they
    apply to it (``drop_nonpositive=None`` resolved to the variant's own); the baselines' settings
    in words."""
    if c.name == "triplet":
        return f"{c.args['mining']} negatives, margin {c.args['margin']:g} (not given in the paper)"
    if c.name == "proxy-nca":
        return f"one learned proxy per class, scale {c.args['scale']:g} (not given in the paper)"
    if c.name != "easy-positive":
        return ""
    loss = c.build(num_classes=1, embedding_dim=2)
    negatives = {"all": "all of the batch", "hard": "the hardest", "semihard": "semi-hard"}
    parts = [
        f"{loss.positive} positive" if loss.positive != "all" else "every positive",
        f"negatives: {negatives[loss.negative]}"
        + (f" ({loss.semihard} rule)" if loss.negative == "semihard" else ""),
        f"NCA, temperature {loss.temperature:g}",
        "drops terms with S <= 0" if loss.drop_nonpositive else "no drop rule",
    ]
    if loss.duplicate_threshold is not None:
        parts.append(f"skips positives with S > {loss.duplicate_threshold:g}")
    if label == "N-pair":
        parts.append("run at n = 2: one positive per anchor")
    return "; ".join(parts)


def methods_frame(calls: Mapping[str, MethodCall]) -> pd.DataFrame:
    """Every method as declared, legibly: the loss dmlnb trains, one column per argument (every
    argument of the fingerprint, "—" where the loss has no such argument; an argument every
    method shares with one value is said once, in the index's name) and what it means in the
    paper's terms (:func:`_in_effect`)."""
    args = {label: dict(c.args) for label, c in calls.items()}
    names = list(dict.fromkeys(k for a in args.values() for k in a))
    shared = {
        k: args[next(iter(args))][k]
        for k in names
        if all(k in a and a[k] == args[next(iter(args))][k] for a in args.values())
    }
    columns: dict[str, dict[str, str]] = {"loss": {label: c.name for label, c in calls.items()}}
    for k in (k for k in names if k not in shared):
        columns[k] = {label: repr(a[k]) if k in a else "—" for label, a in args.items()}
    columns["in the paper's terms"] = {label: _in_effect(label, c) for label, c in calls.items()}
    frame = pd.DataFrame(columns)
    frame.index.name = "method" + (
        f" ({', '.join(f'{k}={v!r}' for k, v in shared.items())} for all)" if shared else ""
    )
    return frame


def data_table(study: Study, splits: Any) -> tuple[str, pd.DataFrame]:
    """The design in one line and the dataset's parts (images, classes, images per class)."""
    cfg = study.config
    parts = {"train": splits.train, "validation": splits.validation, "test": splits.test}
    parts = {k: v for k, v in parts.items() if v is not None}
    sizes = pd.DataFrame(
        {
            "images": [len(v) for v in parts.values()],
            "classes": [v.num_classes for v in parts.values()],
            "images per class": [len(v) / v.num_classes for v in parts.values()],
        },
        index=list(parts),
    )
    sizes.index.name = cfg.dataset
    batches = ", ".join(f"n={n}: {cfg.batch_size // n} classes" for n in study.group_sizes)
    line = (
        f"group sizes {list(study.group_sizes)}, batch {cfg.batch_size} ({batches}); "
        f"{cfg.epochs} epochs, evaluated every {cfg.eval_every}; best epoch chosen on the "
        f"{cfg.select_on} classes"
    )
    return line, sizes


def trained_line(runs: RunSet, study: Study, seconds: float) -> str:
    """How many of Figure 4's runs were trained now and how many reloaded, and how many distinct
    runs the chapter holds in all (Figure 4's, Table 1's and the semi-hard rule's)."""
    names = set(figure4_names(runs, study))
    every = {r.name: r.trained for g in runs.runs.values() for r in g.values()}
    done = {k: v for k, v in every.items() if k in names}
    trained = sum(done.values())
    return (
        f"Figure 4: {len(done)} distinct runs ({trained} trained now, {len(done) - trained} "
        f"reloaded) in {seconds:.0f} s; the chapter's {len(every)} declared runs in all, with "
        f"Table 1's and the semi-hard rule's ({sum(every.values())} trained now)"
    )


def figure4_table(fig4: pd.DataFrame, caption: str) -> Styler:
    """Figure 4 as a table: Recall@1 in % per method and group size, mean ± std over seeds."""
    value = [
        f"{100 * m:.1f} ± {100 * s:.1f}" if np.isfinite(s) else f"{100 * m:.1f}"
        for m, s in zip(fig4["mean"], fig4["std"])
    ]
    table = fig4.assign(value=value).pivot(index="method", columns="n", values="value")
    table = table.loc[list(MINING_METHODS)]
    table.columns = [f"n = {n}" for n in table.columns]
    seeds = "-".join(map(str, sorted(set(fig4["seeds"]))))
    return table.style.set_caption(
        f"{caption}: mean ± std over {seeds} seeds per point (n = 2: EP = HP = BA = N-pair)"
    )


def loss_tables(
    curves: pd.DataFrame, drop: pd.DataFrame, runs: RunSet, study: Study
) -> tuple[Styler, Styler, str]:
    """The training loss per epoch (mean over seeds, collapsed seeds), the drop rule's rerun and,
    in words, the runs near ln 2 and whether EPHN and HPHN at n = 2 trained alike."""
    cols = [c for c in curves.columns if c.startswith("epoch ")]
    agg = {**{c: "mean" for c in cols}, "collapsed": "sum"}
    mean = curves.groupby(["run", "n"])[cols + ["collapsed"]].agg(agg)
    losses = (
        mean.rename(columns={"collapsed": "collapsed seeds"})
        .style.format("{:.3f}", subset=cols)
        .set_caption(
            f"training loss per epoch, mean over seeds (ln 2 = {LN2:.3f}); collapsed seeds of "
            "each (run, n)"
        )
    )
    seed = drop.attrs.get("seed", 0)
    rerun = drop.style.format(precision=3).set_caption(
        f"EPHN at n = 2, seed {seed}, retrained with a counter: terms the drop rule removes, "
        "lowest chosen similarities"
    )
    of = lambda run: curves.query(f"run == '{run}' and n == 2").sort_values("seed")  # noqa: E731
    same = [c for c in cols if (of("EPHN")[c].values == of("HPHN")[c].values).all()]
    points = group_size_points(runs, study)
    text = "\n".join(near_ln2(curves)) + (
        f"\nEPHN and HPHN at n = 2: equal training loss in {len(same)} of {len(cols)} epochs for "
        f"every seed; R@1 equal for every seed: {points['EPHN'][2] == points['HPHN'][2]}"
    )
    return losses, rerun, text


def metric_columns(study: Study) -> list[str]:
    """The test metrics the tables show: Recall@K, and MAP@R when measured."""
    cfg = study.config
    return [f"R@{k}" for k in cfg.eval_ks] + (["MAP@R"] if "map_at_r" in cfg.eval_metrics else [])


def key_table(runs: RunSet, study: Study, caption: str) -> Styler:
    """The key comparison: every metric in %, mean ± std over seeds, per method."""
    summary = summarize_runs(
        {m: [r.metrics for r in rs] for m, rs in key_runs(runs, study).items()},
        metric_columns(study),
    )
    return format_mean_std(summary).style.set_caption(caption)


def key_lines(runs: RunSet, study: Study, fig4: pd.DataFrame) -> str:
    """Recall@1 at the key group size, best first, and each method's from n = 2 to it."""
    key = study.key_group_size
    means = {
        m: 100 * np.mean([r.metrics["R@1"] for r in rs]) for m, rs in key_runs(runs, study).items()
    }
    order = sorted(means, key=means.get, reverse=True)
    lines = [
        f"Recall@1 at n = {key}, best first: " + ", ".join(f"{m} {means[m]:.1f}" for m in order)
    ]
    by_n = fig4.pivot(index="method", columns="n", values="mean")
    lines += [
        f"{m:6s} R@1 from n = 2 to n = {key}: {100 * by_n.loc[m, 2]:.1f} -> "
        f"{100 * by_n.loc[m, key]:.1f}"
        for m in MINING_METHODS
    ]
    return "\n".join(lines)


def group_size_optima(
    points: Mapping[str, Mapping[int, Sequence[float]]],
    collapsed: frozenset = frozenset(),
    scale: float = 100.0,
    unit: str = " pts",
) -> pd.DataFrame:
    """Per method of a group-size sweep (:func:`group_size_points`), the verdict of
    :func:`dmlnb.reporting.interior_optimum` ("some interior n beats both ends") with its effect,
    90% interval, runs per side and note; the only way this chapter names a best group size. A
    sweep with a collapsed group size (``collapsed``: (canonical method, n),
    :func:`collapsed_groups`) is judged, the note naming the collapsed n (the collapse is an
    outcome of the mining rule); a sweep whose every n collapsed is not tested
    (:data:`COLLAPSED`: collapsed embeddings say nothing about n), its row keeping the measured
    effect."""
    rows = []
    for method, by_n in points.items():
        name = (
            (lambda n: canonical_method(method, n)) if method in ALL_METHODS else (lambda n: method)
        )
        bad = [n for n in by_n if (name(n), n) in collapsed]
        raw, _ = interior_optimum(by_n, scale=scale, unit=unit)
        verdict = raw
        if bad and len(bad) == len(by_n):
            verdict, _ = interior_optimum(
                by_n, scale=scale, unit=unit, degenerate=bad, degenerate_what=COLLAPSED
            )
        ev = raw.evidence()
        if verdict != raw:
            ev["note"] = f"{verdict.note} (measured: {raw}, {raw.note})"
        elif bad:
            listed = ", ".join(f"n = {n}" for n in bad)
            ev["note"] = "; ".join(x for x in (raw.note, f"judged with collapsed {listed}") if x)
        rows.append({"method": method, "interior optimum": str(verdict), **ev})
    return pd.DataFrame(rows).set_index("method")


def optima_table(runs: RunSet, study: Study, curves: pd.DataFrame) -> Styler:
    """Per method, whether an interior group size beats both ends (the rule's verdict)."""
    points = group_size_points(runs, study, "R@1")
    return group_size_optima(points, collapsed_groups(curves)).style.set_caption(
        f"Does an interior group size beat both ends (n = {min(study.group_sizes)} and n = "
        f"{max(study.group_sizes)})? Recall@1, dmlnb.reporting.interior_optimum; effect and 90% "
        "interval: the weaker of the best interior n's two comparisons with the ends ('does not "
        "hold': the winning end's smallest margin, negated); a sweep with a collapsed n is "
        "judged, the collapsed n named; one whose every n collapsed is not tested (the effect is "
        "the one measured)"
    )


#: The two semi-hard rules, in words.
SEMIHARD_LABELS: dict[str, str] = {
    "strict": "strict, S_an < S_ap (the paper, Sec. 3.1)",
    "inclusive": "inclusive, S_an <= S_ap (the authors' code)",
}


def semihard_tables(
    semihard: Mapping[str, Sequence[Run]],
    study: Study,
    caption: str,
    selected: str,
    judged: Sequence[JudgedClaim],
) -> tuple[Styler, str, Styler]:
    """EPSHN under each semi-hard rule: its metrics, the seeds whose two runs trained alike, and
    the verdicts of 'strict beats inclusive' (``judged``: those claims, judged)."""
    summary = summarize_runs(
        {SEMIHARD_LABELS[rule]: [r.metrics for r in rs] for rule, rs in semihard.items()},
        metric_columns(study),
    )
    n = next(iter(semihard.values()))[0].record.config["m_per_class"]
    table = format_mean_std(summary).rename_axis(f"EPSHN, n = {n}").style.set_caption(caption)
    same = [
        a.record.config["seed"]
        for a, b in zip(semihard["strict"], semihard["inclusive"])
        if identical_histories(a.record, b.record)
    ]
    line = (
        "seeds whose two runs have identical training histories (per-epoch loss, test and "
        f"validation metrics): {len(same)} of {len(study.seeds)}"
        + (f" ({', '.join(map(str, same))})" if same else "")
    )
    return (
        table,
        line,
        claims_frame(judged).style.set_caption(
            "Does the paper's strict rule beat the authors' inclusive one? (paired by seed; not "
            f"tested when the two rules trained alike in every seed; {selected})"
        ),
    )


#: The statistics of Figures 2, 3 and 5 the chapter tabulates, and their names in the table.
EMBEDDING_COLUMNS = {
    "train_same_class_median": "median same-class train similarity",
    "train_same_class_frac>0.9": "fraction of same-class train pairs > 0.9",
    "test_to_train_mean": "mean test-to-nearest-train similarity",
    "train_nn_correct": "train: NN of same class",
    "test_nn_correct": "test: NN of same class",
}


def embedding_summary(
    fig_runs: Mapping[str, Sequence[Run]], labels: Mapping[str, str], caption: str
) -> tuple[pd.DataFrame, Styler]:
    """The statistics of Figures 2, 3 and 5 per method (mean and std over seeds), and the table."""
    analysis = summarize_runs(
        {labels[m]: [r.record.data["analysis"] for r in rs] for m, rs in fig_runs.items()},
        list(EMBEDDING_COLUMNS),
    )
    fmt = format_mean_std(analysis, scale=1.0, digits=3)
    fmt.columns = list(EMBEDDING_COLUMNS.values())
    return analysis, fmt.style.set_caption(caption)


def embedding_lines(analysis: pd.DataFrame) -> str:
    """The three statistics the claims of Figures 2, 3 and 5 judge, per method, in words."""
    fa = analysis.xs("mean", axis=1, level="stat")
    gap = fa["train_nn_correct"] - fa["test_nn_correct"]
    line = lambda what, s, f: what + ", ".join(f"{k} {f(v)}" for k, v in s.items())  # noqa: E731
    return "\n".join(
        [
            line(
                "median same-class training similarity: ",
                fa["train_same_class_median"],
                "{:.3f}".format,
            ),
            line(
                "mean test-to-nearest-training similarity: ",
                fa["test_to_train_mean"],
                "{:.3f}".format,
            ),
            line(
                "nearest-neighbour accuracy, train minus test: ",
                gap,
                lambda v: f"{100 * v:.1f} points",
            ),
        ]
    )


def reported_table1_display() -> tuple[list[Styler], str]:
    """The paper's Table 1 per dataset, and the best reported Recall@1 per cell in words."""
    tables = []
    for ds in ("CUB", "CAR"):
        cells = {f"{b}": t for (d, b), t in REPORTED_TABLE1.items() if d == ds}
        tables.append(
            pd.concat(cells, axis=1)
            .style.format("{:.1f}", na_rep="—")
            .set_caption(f"Table 1 as reported: {ds}, 64-d, Recall@K in %")
        )
    best = "; ".join(
        f"{d} / {b}: {w} ({REPORTED_TABLE1[(d, b)].loc[w, 'R@1']:.1f})"
        for (d, b), w in reported_table1_winners().items()
    )
    return tables, "best reported Recall@1 per (dataset, backbone): " + best


def table1_display(
    cell: tuple[str, str],
    res: Mapping[str, Sequence[Run]],
    study: Study,
    selected: str,
) -> tuple[Styler, Styler, str]:
    """One cell of Table 1: ours beside the paper's cells, the methods under both protocols with
    the verdict of 'EPSHN beats it', and the ranking by Recall@1."""
    (dataset, model), first = cell, res["EPSHN"][0].record.config
    ks = first["eval_ks"]
    ours = format_mean_std(summarize_runs(recall_table(res, ks), [f"R@{k}" for k in ks]))
    reported = {k: t.map(lambda v: f"{v:.1f}") for k, t in reported_table1(dataset, model).items()}
    label = (
        f"reproduced ({dataset}, {model}, {first['embedding_dim']}-d, profile {study.profile}, "
        f"{len(study.table1_seeds)} seeds)"
    )
    side = reported_vs_reproduced(reported, {label: ours}).style.set_caption(
        f"Table 1, Recall@K in %: the paper's cells with all four methods beside our {dataset} / "
        f"{model} (mean ± std over seeds, each run at its {selected}); different datasets, so "
        "compare rankings, not values"
    )
    both = main_comparison({m: [r.record for r in rs] for m, rs in res.items()}, "EPSHN")
    both = both.style.set_caption(
        f"Table 1's methods on {dataset} / {model}, n = {study.key_group_size} (N-pair: n = 2), "
        "Recall@1 in % under both protocols and the verdict of 'EPSHN beats it' under each, "
        "unpaired (the runs as independent samples; the claim below pairs them by seed, so its "
        "intervals differ); effect and interval: validation-selected"
    )
    means = {m: 100 * np.mean([r.metrics["R@1"] for r in rs]) for m, rs in res.items()}
    ranked = sorted(means, key=means.get, reverse=True)
    line = f"{dataset} / {model}: Recall@1 ranking " + " > ".join(
        f"{m} ({means[m]:.1f})" for m in ranked
    )
    return side, both, line


def paper_status_frame(status: pd.DataFrame) -> pd.DataFrame:
    """Whether each paper-profile dataset of Tables 2 and 3 could train here, in words: its files
    found under the data root, a CUDA GPU present, and so trainable (from
    :func:`dmlnb.reporting.paper_run_status`, without the machine's paths)."""
    yes, names = {True: "yes", False: "no"}, {**DATASET_NAMES, "hotels50k": "Hotels-50K"}
    frame = pd.DataFrame(
        {
            "dataset": status["dataset"].map(lambda d: names.get(d, d)),
            "its files here": (status["data"] == "found").map(yes),
            "a CUDA GPU here": status["gpu"].astype(bool).map(yes),
            "trained here": status["runnable"].astype(bool).map(yes),
        }
    )
    return frame.set_index("dataset")


def verdict_lines(judged: Sequence[JudgedClaim], where: str) -> str:
    """Every verdict in words, with its effect, interval, runs per side and note, and the count
    of verdicts by kind on ``where`` (e.g. ``"omniglot-small at profile default"``)."""
    out = []
    for j in judged:
        e = j.verdict.evidence()
        out.append(
            f"- {j.spec.text}: {j.verdict}"
            + (
                f" (effect {e['effect']}, 90% interval {e['90% interval']}, runs "
                f"{e['runs per side']})"
                if e["effect"] != "—"
                else ""
            )
            + (f"; {e['note']}" if e["note"] else "")
            + "."
        )
    paper = sum(j.spec.origin == "paper" for j in judged)
    out.append(
        f"\n{paper} paper claims and {len(judged) - paper} of our measurements on {where}: "
        + count_line(j.verdict for j in judged)
    )
    return "\n".join(out)
