"""The chapter's runs declared as data (:class:`~dmlnb.chapter.RunGroup` values of
:class:`~dmlnb.experiments.discriminative.procedure.CentroidRuns`), and what is read from them
once trained: the clustering baseline's margin multiplier, the main comparison's runs by the
paper's row names, the Lemma 3.1 rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dmlnb.chapter import RunGroup, RunSet
from dmlnb.experiments.discriminative.procedure import CentroidRuns, method_key
from dmlnb.experiments.discriminative.spec import (
    CLUSTERING_REFINEMENT,
    DEVIATION_VARIANTS,
    METHODS,
    loss_method,
    variant_unfit,
)
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import compare, format_mean_std, summarize_runs
from dmlnb.runs import Run
from dmlnb.selection import choose_on_validation, kept_selection

__all__ = [
    "clustering_gammas",
    "run_groups",
    "ClusteringSearch",
    "clustering_search",
    "comparison",
    "run_seed",
    "lemma_frame",
]

#: The group of the clustering baseline's runs, one label per margin multiplier gamma.
CLUSTERING = "clustering"


def clustering_gammas(config: TrainConfig, settings: Mapping[str, Any]) -> list[float]:
    """The clustering baseline's margin multipliers trained: every one of
    ``settings["clustering_gammas"]`` with a validation split to choose on, else only
    ``settings["clustering_gamma"]`` (nothing may choose it on the test classes).

    Raises:
        ValueError: ``settings["clustering_gammas"]`` is empty or repeats a value.
    """
    if config.select_on != "validation":
        return [float(settings["clustering_gamma"])]
    gammas = [float(g) for g in settings["clustering_gammas"]]
    if not gammas or len(set(gammas)) != len(gammas):
        raise ValueError(
            f"clustering_gammas={settings['clustering_gammas']!r} must list distinct values, e.g. "
            "(1.0, 10.0)"
        )
    return gammas


def run_groups(
    config: TrainConfig,
    settings: Mapping[str, Any],
    num_classes: int,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RunGroup]:
    """Every run of the chapter as :class:`~dmlnb.chapter.RunGroup` values, each labelled by the
    chapter's method key (:data:`~dmlnb.experiments.discriminative.spec.METHODS` values):

    * ``methods``: Tables 4-5's methods but clustering, ``settings["seeds"]``, the Lemma 3.1
      tracker on the discriminative runs;
    * ``clustering``: the clustering baseline at each margin multiplier
      (:func:`clustering_gammas`), labelled ``clustering-g<gamma>``;
    * ``kmeans``: the discriminative loss with K-means centroids, ``settings["kmeans_seeds"]``;
    * one group per deviation variant that fits the ``num_classes`` training classes
      (:data:`~dmlnb.experiments.discriminative.spec.DEVIATION_VARIANTS`, its name);
    * ``arch``: the paper's VGG-16 variant, when ``settings["arch_variant"]``.

    ``changes`` are a reader's changes to the methods' arguments (``{"semihard": {"margin": 0.1}}``;
    ``"clustering"`` for every gamma): they enter those runs' fingerprints.
    """
    changes = changes or {}

    def calls(labels: list[str], **args: Any) -> dict[str, MethodCall]:
        return {
            label: loss_method(method_key(label), **args).replace(
                **dict(changes.get(method_key(label), {}))
            )
            for label in labels
        }

    common = dict(
        lemma_every=int(settings.get("lemma_every", 1)),
        backbone_lr=settings.get("backbone_lr"),
        weight_decay=settings.get("weight_decay", 0.0),
    )
    seeds, refinement = (
        tuple(settings["seeds"]),
        settings.get("clustering_refinement", CLUSTERING_REFINEMENT),
    )
    disc = calls(["discriminative"])
    out = {
        "methods": RunGroup(
            calls([m for m in METHODS.values() if m != "clustering"]),
            seeds,
            procedure=CentroidRuns(track_lemma=True, **common),
        ),
        CLUSTERING: RunGroup(
            {
                f"clustering-g{g:g}": calls(
                    ["clustering"], clustering_gamma=g, clustering_refinement=refinement
                )["clustering"]
                for g in clustering_gammas(config, settings)
            },
            seeds,
            procedure=CentroidRuns(**common),
        ),
        "kmeans": RunGroup(
            disc,
            tuple(settings["kmeans_seeds"]),
            procedure=CentroidRuns(centroids="kmeans", track_lemma=True, **common),
        ),
    }
    for name, (change, _) in DEVIATION_VARIANTS.items():
        if not variant_unfit(name, config, num_classes):
            out[name] = RunGroup(disc, seeds, change, CentroidRuns(**common))
    if settings.get("arch_variant"):
        out["arch"] = RunGroup(
            disc, seeds, procedure=CentroidRuns(arch=settings["arch_variant"], **common)
        )
    return out


def run_seed(run: Run) -> int:
    """The seed a run trained with (its record's configuration)."""
    return int(run.record.config["seed"])


@dataclass
class ClusteringSearch:
    """The clustering baseline's margin multiplier gamma as the chapter chose it
    (:func:`clustering_search`).

    Attributes:
        runs: gamma -> its runs, one per seed in seed order; every value has the same seeds,
            epochs and evaluations.
        chosen: the gamma of the runs the comparison uses.
        searched: whether ``chosen`` was chosen on the validation classes (else it is the
            profile's ``clustering_gamma``: a run set without a validation split chooses nothing).
    """

    runs: dict[float, list[Run]]
    chosen: float
    searched: bool

    def run(self, seed: int) -> Run:
        """The chosen gamma's run of ``seed``."""
        found = [r for r in self.runs[self.chosen] if run_seed(r) == seed]
        if not found:
            raise KeyError(
                f"no clustering run of seed {seed} at gamma {self.chosen:g}; the search ran seeds "
                f"{[run_seed(r) for r in self.runs[self.chosen]]}"
            )
        return found[0]

    def frame(self) -> pd.DataFrame:
        """One row per gamma: ``runs``, the validation R@1 the choice reads and the test R@1, both
        at each run's validation-selected epoch (``"mean ± std"`` in %), and ``chosen``. Without a
        validation split only the test R@1 at each run's kept epoch."""
        rows = {}
        for gamma, runs in self.runs.items():
            kept = [
                kept_selection(r.record) for r in runs
            ]  # the validation selection where there is one
            values = {"test R@1": [k["metrics"]["R@1"] for k in kept]}  # type: ignore[index]
            if self.searched:
                values = {"validation R@1": [k["val_metrics"]["R@1"] for k in kept], **values}  # type: ignore[index]
            cells = {
                name: format_mean_std(
                    summarize_runs({name: [{"R@1": v} for v in vs]}, ["R@1"])
                ).iloc[0, 0]
                for name, vs in values.items()
            }
            rows[f"{gamma:g}"] = {"runs": len(runs), **cells, "chosen": gamma == self.chosen}
        return pd.DataFrame.from_dict(rows, orient="index").rename_axis("margin multiplier gamma")

    def text(self) -> str:
        """How gamma was chosen, in words."""
        if not self.searched:
            return (
                f"gamma = {self.chosen:g}, the profile's clustering_gamma: not searched, the runs "
                "have no validation split to choose it on"
            )
        seeds = len(next(iter(self.runs.values())))
        return (
            f"gamma = {self.chosen:g}, chosen on the validation classes from "
            f"{{{', '.join(f'{g:g}' for g in self.runs)}}}: the highest mean validation R@1 over "
            f"{seeds} seed{'s' if seeds > 1 else ''} per value, every value with the same epochs "
            "and evaluations"
        )

    def effect_text(self) -> str:
        """The test R@1 of the chosen gamma minus each other one, at the kept epochs, by the book's
        rule (:func:`dmlnb.reporting.compare`); ``""`` when nothing was searched."""
        if not self.searched:
            return ""
        chosen = [r.metrics["R@1"] for r in self.runs[self.chosen]]
        parts = []
        for gamma, runs in self.runs.items():
            if gamma != self.chosen:
                v = compare(chosen, [r.metrics["R@1"] for r in runs], scale=100, unit=" pts")
                e = v.evidence()
                parts.append(
                    f"test R@1 of gamma {self.chosen:g} minus {gamma:g}: {e['effect']} "
                    f"{e['90% interval']} ({e['runs per side']} runs; 'the chosen value is "
                    f"better': {v})"
                )
        return "; ".join(parts)


def clustering_search(runs: RunSet, config: TrainConfig) -> ClusteringSearch:
    """The clustering baseline's margin multiplier, from the ``clustering`` group's runs: with a
    validation split (``config.select_on == "validation"``) the gamma with the highest mean
    validation R@1 at the runs' validation-selected epochs
    (:func:`dmlnb.selection.choose_on_validation`; no test number is read); without one, the only
    gamma trained."""
    by_gamma: dict[float, list[Run]] = {}
    for run in runs.runs[CLUSTERING].values():  # label by label, seed by seed, as declared
        gamma = float(run.record.data["spec"]["factory"]["args"]["margin_multiplier"])
        by_gamma.setdefault(gamma, []).append(run)
    gammas = list(by_gamma)
    if config.select_on != "validation":
        return ClusteringSearch(by_gamma, gammas[0], searched=False)
    chosen = choose_on_validation({g: [r.record for r in rs] for g, rs in by_gamma.items()})
    return ClusteringSearch(by_gamma, chosen, searched=True)


def comparison(runs: RunSet, search: ClusteringSearch) -> dict[tuple[str, int], Run]:
    """Tables 4-5's runs by the paper's row names (:data:`~dmlnb.experiments.discriminative.spec.
    METHODS`) and seed: the ``methods`` group's, and the clustering baseline at the chosen
    gamma."""
    out: dict[tuple[str, int], Run] = {}
    for seed in runs.seeds("methods", "discriminative"):
        for row, key in METHODS.items():
            out[row, seed] = (
                search.run(seed) if key == "clustering" else runs.run("methods", key, seed)
            )
    return out


def lemma_frame(runs: list[Run]) -> pd.DataFrame:
    """The :class:`~dmlnb.losses.discriminative.LemmaTracker` rows of ``runs`` as one frame
    (columns ``seed``, ``epoch``, ..., plus per-triplet values ``L_t/H``, ``L_d/H``, ``gap/H``,
    ``bound/H``)."""
    rows = []
    for run in runs:
        for r in run.extras.get("lemma", []):
            row = {"seed": run_seed(run), **r}
            for key in ("L_t", "L_d", "gap", "bound"):
                row[f"{key}/H"] = r[key] / r["H"]
            rows.append(row)
    return pd.DataFrame(rows)
