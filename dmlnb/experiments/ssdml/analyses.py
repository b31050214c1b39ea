"""The SSDML chapter: analyses."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from dmlnb.experiments.ssdml.judges import per_seed, selection_moved
from dmlnb.experiments.ssdml.profile_settings import PROFILE_SETTINGS
from dmlnb.experiments.ssdml.reported import REPORTED
from dmlnb.experiments.ssdml.settings import NAMES, REPORTED_COLUMN, SEMI_SUPERVISED, Setting
from dmlnb.experiments.ssdml.spec import initial_of, seed_of
from dmlnb.reporting import (
    best_minus_last,
    biased_toward_claim,
    paired_differences,
    provenance_frame,
    provenance_text,
)
from dmlnb.runs import Run as MethodRun
from dmlnb.ssdml.algorithm import (
    unlabelled_reached,
)

__all__ = [
    "diagnosis",
    "metric_steps",
    "over_initial",
    "partitions_run",
    "provenance",
    "purity_chance",
    "selection_gain",
    "unit_counts",
]


def selection_gain(
    runs: Mapping[str, Mapping[str, Sequence[MethodRun]]],
    settings: Mapping[str, Setting],
    metric: str = "R@1",
) -> pd.DataFrame:
    """What keeping each run's selected evaluation (``best``: chosen on the validation classes where
    the run has them, else on the test set) adds (points, mean over seeds): ``metric`` of the
    selected evaluation minus that of the last evaluation and minus the mean of the run's
    evaluations after initialisation; beside them, the selected minus the network at
    initialisation. Rows: (setting, method)."""
    rows = {}
    for key, by_method in runs.items():
        for method, rs in by_method.items():
            evaluated = [r for r in rs if r.record.evaluations()]
            if not evaluated:
                continue
            evals = [[h["metrics"][metric] for h in r.record.evaluations()] for r in evaluated]
            best = [r.metrics[metric] for r in evaluated]
            # the same runs on both sides of "selected - initial"
            over_init = [
                r.metrics[metric] - i[metric] for r in evaluated if (i := initial_of(r)) is not None
            ]
            counts = [len(e) for e in evals]
            rows[(settings[key].name, NAMES[method])] = {
                "evaluations per run": min(counts)
                if min(counts) == max(counts)
                else f"{min(counts)}-{max(counts)}",
                f"selected − last {metric}": 100
                * np.mean(best_minus_last([r.record for r in evaluated], metric)),
                f"selected − mean of evaluations {metric}": 100
                * (np.mean(best) - np.mean([np.mean(e) for e in evals])),
                f"selected − initial {metric}": 100 * np.mean(over_init) if over_init else np.nan,
            }
    return pd.DataFrame.from_dict(rows, orient="index")


def over_initial(
    runs: Mapping[str, Sequence[MethodRun]], metric: str = "R@1", biased: str | None = None
) -> dict[str, Any]:
    """``{name: Verdict}``: for each entry of ``runs`` (``{name: [runs per seed]}``), the rule's
    verdict on "the selected evaluation beats the same runs' evaluation at initialisation" in
    ``metric``, paired by run (each run's network at initialisation is its own seed's:
    :func:`~dmlnb.reporting.paired_differences`, points), as the initialisation claims judge ours.
    ``biased`` (:func:`initial_selection_bias`): why the selected evaluations favour the claim, so a
    "holds" becomes inconclusive (:func:`~dmlnb.reporting.biased_toward_claim`), applied only to
    the entries whose selection moved ``metric`` (:func:`selection_moved`)."""
    out = {}
    for name, rs in runs.items():
        rs = [r for r in rs if initial_of(r) is not None]
        v = paired_differences(
            [float(r.metrics[metric]) for r in rs],
            [float(initial_of(r)[metric]) for r in rs],
            scale=100.0,
            unit=" pts",
        )
        out[name] = biased_toward_claim(v, biased) if biased and selection_moved(rs, metric) else v
    return out


def metric_steps(
    runs: Mapping[str, Mapping[str, Sequence[MethodRun]]],
    settings: Mapping[str, Setting],
    methods: Sequence[str] = ("ours", "ours-noorth"),
) -> pd.DataFrame:
    """Per (setting, method): the Adam steps on ``L`` with ``θ`` fixed (the metric step of Algorithm
    1; ``L`` is frozen while the network learns), ``metric_epochs`` passes of ``⌈units used /
    batch_size⌉`` mini-batches per partition, from the records' ``units_used`` (min-max over
    partitions and seeds), and their total over a run (min-max over seeds), with the metric's
    learning rate."""
    rows = {}
    for key, by_method in runs.items():
        st = settings[key]
        for method in methods:
            rs = by_method.get(method, [])
            if not rs:
                continue
            batch = int(rs[0].record.config["batch_size"])
            per = [
                [
                    st.metric_epochs * -(-h["units_used"] // batch)
                    for h in r.record.data["history"]
                    if "units_used" in h
                ]
                for r in rs
            ]
            flat, totals = [x for p in per for x in p], [sum(p) for p in per]
            span = lambda v: str(min(v)) if min(v) == max(v) else f"{min(v)}-{max(v)}"  # noqa: E731
            cfg = rs[0].record.config
            rows[(st.name, NAMES[method])] = {
                "steps on L per partition": span(flat),
                "partitions": span([len(p) for p in per]),
                "steps on L per run": span(totals),
                "lr of L": f"{cfg.get('loss_lr') or cfg['lr']:g}",
            }
    return pd.DataFrame.from_dict(rows, orient="index")


def provenance(runs: Sequence[MethodRun]) -> str:
    """Which code made the distinct records among ``runs`` (by fingerprint: the α grid shares its
    runs at the setting's own α with the main comparison):
    :func:`~dmlnb.reporting.provenance_text`."""
    records = {r.record.data["fingerprint"]: r.record for r in runs}
    return provenance_text(provenance_frame(records.values()))


def unit_counts(
    runs: Mapping[str, Mapping[str, Sequence[MethodRun]]],
    settings: Mapping[str, Setting],
    pools: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """Per (setting, method), from the run records: the units (triplets or pairs) each partition
    offered and the units trained on (min-max over partitions and seeds); with ``pools``
    (``{setting key: unlabelled pool size}``), the unlabelled images never seen (min-max over
    seeds), from the partitions each record ran, replayed by
    :func:`~dmlnb.ssdml.algorithm.unlabelled_reached` with the run's seed (no training)."""
    rows = {}
    span = lambda v: (f"{min(v):,}" if min(v) == max(v) else f"{min(v):,}-{max(v):,}") if v else "—"  # noqa: E731
    for key, by_method in runs.items():
        st = settings[key]
        parts = -(-st.config["epochs"] // st.epochs_per_partition)
        for method, rs in by_method.items():
            offered = [h["units"] for r in rs for h in r.record.data["history"] if "units" in h]
            used = [
                h["units_used"] for r in rs for h in r.record.data["history"] if "units_used" in h
            ]
            row = {
                "partitions": parts,
                "units offered per partition": span(offered),
                "units trained on per partition": span(used),
            }
            if pools and key in pools and method not in ("triplet", "angular"):
                pool = pools[key]
                never = [
                    pool - len(unlabelled_reached(pool, st.schedule, seed_of(r), partitions_run(r)))
                    for r in rs
                ]
                row["unlabelled pool"] = f"{pools[key]:,}"
                row["unlabelled never seen"] = span(never)
            rows[(st.name, NAMES[method])] = row
    return pd.DataFrame.from_dict(rows, orient="index").fillna("—")


def partitions_run(run: MethodRun) -> list[int]:
    """The partitions a run's record went through (its history rows' ``partition``)."""
    return sorted({h["partition"] for h in run.record.data["history"] if "partition" in h})


def purity_chance(targets: Tensor) -> float:
    """The chance level of the mined-triplet purity: the share of triplets whose positive (or
    negative) has the anchor's class when both are drawn at random from a pool with class
    labels ``targets`` ``(N,)``, ``Σ_c p_c²`` over the pool's class frequencies."""
    counts = torch.bincount(targets[targets >= 0].long()).double()
    p = counts / counts.sum()
    return float((p * p).sum())


def _paper_pair(key: str, metric: str) -> tuple[str, float, Setting]:
    """The paper's dataset a setting stands in for, its reported ``metric`` at initialisation
    (Tables 1-2, percent) and its paper-profile setting."""
    dataset = REPORTED_COLUMN[key]
    table = next(
        REPORTED[t]
        for t in ("table1", "table2")
        if dataset in REPORTED[t].columns.get_level_values(0)
    )
    paper = next(st for st in PROFILE_SETTINGS["paper"].values() if st.name == dataset)
    return dataset, float(table.at["Initial", (dataset, metric)]), paper


def _partition(st: Setting) -> str:
    return "all" if st.partition_size >= 10**9 else f"{st.partition_size:,}"


def diagnosis(
    runs: Mapping[str, Mapping[str, Sequence[MethodRun]]],
    settings: Mapping[str, Setting],
    metric: str = "R@1",
    chance: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Per setting (seed means, percent): the share of the proposed method's mined triplets
    (mean over partitions) whose positive / negative has the anchor's hidden class, and
    ``metric`` of the network at initialisation, of ours, and of the best deep baseline and the
    best supervised baseline that ran; beside them, the paper's dataset the setting stands in
    for, its reported ``metric`` at initialisation, and the epochs and unlabelled images per
    partition here and in the paper. With ``chance`` (``{setting key: share}``, e.g.
    :func:`purity_chance`), the share a random positive or negative would have (%)."""
    rows = {}
    for key, by_method in runs.items():
        ours = by_method.get("ours", [])
        mined = (
            pd.concat(
                [r.record.history_frame()[["pos_same", "neg_same"]].dropna().mean() for r in ours],
                axis=1,
            ).mean(1)
            if ours
            else pd.Series({"pos_same": np.nan, "neg_same": np.nan})
        )
        row = {
            "mined positives of the anchor's class (%)": 100 * mined["pos_same"],
            "mined negatives of the anchor's class (%)": 100 * mined["neg_same"],
            "chance level (%)": 100 * chance[key] if chance and key in chance else np.nan,
            f"{metric} at initialisation": 100
            * np.mean([initial_of(r)[metric] for r in ours if initial_of(r)])
            if ours
            else np.nan,
            f"{metric} ours": 100 * np.mean(per_seed(ours, metric)) if ours else np.nan,
        }
        for label, group in (
            ("best deep baseline", SEMI_SUPERVISED),
            ("best supervised-only", ("triplet", "angular")),
        ):
            means = {
                NAMES[m]: 100 * np.mean(per_seed(by_method[m], metric))
                for m in group
                if by_method.get(m)
            }
            best = max(means, key=means.get) if means else "—"
            row[f"{metric} {label}"] = f"{means[best]:.1f} ({best})" if means else "—"
        dataset, initial, paper = _paper_pair(key, metric)
        st = settings[key]
        row[f"reported {metric} at initialisation"] = f"{initial:.1f} ({dataset})"
        row["epochs (here / paper)"] = (
            f"{st.config['epochs']} / {paper.config['epochs']} ({dataset})"
        )
        row["unlabelled per partition (here / paper)"] = (
            f"{_partition(st)} / {_partition(paper)} ({dataset})"
        )
        rows[st.name] = row
    return pd.DataFrame.from_dict(rows, orient="index")
