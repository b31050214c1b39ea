"""The numbers the SSDML chapter's Markdown quotes, each computed (none typed): the notebook glues
them (``myst_nb.glue(name, Markdown(value), display=False)``, then ``{glue:md}`name``` in the
text).

:func:`mining_numbers` reads the mining diagnosis
(:func:`~dmlnb.experiments.ssdml.mining.stored_mining`), :func:`setting_numbers` the settings, the
baselines' search, the training-time mining and the papers' constants; :func:`chapter_numbers`
gathers them with the claims' and runs' numbers
(:func:`~dmlnb.experiments.ssdml.text.conclusion_numbers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from dmlnb.chapter import JudgedClaim, RunSet
from dmlnb.data import DatasetSplits
from dmlnb.experiments.ssdml.mining import (
    FEATURE_SOURCES,
    MINING_QUESTIONS,
    MINING_VARIANTS,
    SOFTMAX_EPOCHS,
    mining_question_verdicts,
)
from dmlnb.experiments.ssdml.network import build_objective
from dmlnb.experiments.ssdml.profile_settings import PROFILE_SETTINGS
from dmlnb.experiments.ssdml.reported import REPORTED_VALIDATION_SHARE
from dmlnb.experiments.ssdml.search import search_table, searched
from dmlnb.experiments.ssdml.settings import BASELINE_SEARCH, Setting, with_hyper
from dmlnb.experiments.ssdml.text import conclusion_numbers
from dmlnb.profiles import make_config
from dmlnb.reporting import CONFIDENCE, FAILS, HOLDS, INCONCLUSIVE, MIN_RUNS

__all__ = ["mining_numbers", "setting_numbers", "chapter_numbers"]

#: The feature sources a method can have (every source but the oracle's hidden labels).
_REACHABLE = FEATURE_SOURCES[:-1]
#: The mining variants that read the paper (its W at each k and the two-sided propagation): not
#: chance, not negatives from outside the neighbourhood.
_READINGS = ("W (paper), k = 10", "W, k = 20", "W, k = 50", "two-sided W, k = 10")
_PAPER = "W (paper), k = 10"
_OUTSIDE = "W, negatives outside the neighbourhood, k = 10"
#: The columns of :func:`~dmlnb.experiments.ssdml.analyses.diagnosis` with ours' training-time
#: mining.
_TRAIN_POS = "mined positives of the anchor's class (%)"
_TRAIN_NEG = "mined negatives of the anchor's class (%)"
_SHORT = dict(zip(FEATURE_SOURCES, ("raw", "untrained", "labelled", "oracle")))


def _questions(start: str) -> list[str]:
    return [q for q, *_ in MINING_QUESTIONS if q.startswith(start)]


def _span(values: Sequence[float]) -> str:
    """``"74-91"`` (rounded to whole points; one number when both ends round alike)."""
    lo, hi = round(min(values)), round(max(values))
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def _effect(v: Any) -> str:
    return v.evidence()["effect"]


def _one_setting(key: str, measured: pd.DataFrame) -> dict[str, str]:
    mean = measured.groupby(["features", "variant"], sort=False)[
        ["knn_same", "pos_same", "neg_other", "triplet_correct"]
    ].mean()
    verdicts = mining_question_verdicts(measured)
    sources = [s for s in FEATURE_SOURCES if (s, _PAPER) in mean.index]
    chance = _questions("W sorts the neighbourhood better than chance")
    k50 = _questions("k = 50 mines more")[0]
    # the gain over chance on the features a method can have (the oracle's excluded)
    gains = [verdicts[q, s].effect for q in chance for s in sources if s in _REACHABLE]
    out = {
        f"{key}_w_over_chance_max": f"{100 * max(gains):.1f}",
        f"{key}_k50_holds": str(sum(str(verdicts[k50, s]) == HOLDS for s in sources)),
        f"{key}_k50_fails": str(sum(str(verdicts[k50, s]) == FAILS for s in sources)),
    }
    best = max(sources, key=lambda s: verdicts[k50, s].effect)
    out[f"{key}_k50_best"] = f"{_effect(verdicts[k50, best])} on {best}"
    beats = [s for s in sources if str(verdicts[chance[-1], s]) == HOLDS]
    out[f"{key}_chance_k50_holds"] = (
        ", ".join(f"{s} ({_effect(verdicts[chance[-1], s])})" for s in beats) or "no source"
    )
    for s in sources:
        v = verdicts[chance[0], s]
        out[f"{key}_chance_{_SHORT[s]}"] = f"{v}, {_effect(v)}"
        for m in ("knn_same", "neg_other"):
            out[f"{key}_{m}_{_SHORT[s]}"] = f"{100 * mean.at[(s, _PAPER), m]:.1f}"
    reach = [s for s in _REACHABLE if s in sources]
    for m in ("pos_same", "neg_other", "triplet_correct"):
        out[f"{key}_{m}_span"] = _span([100 * mean.at[(s, _PAPER), m] for s in reach])
    out[f"{key}_outside_neg_span"] = _span(
        [100 * mean.at[(s, _OUTSIDE), "neg_other"] for s in reach]
    )
    out[f"{key}_readings_best"] = (
        f"{max(100 * mean.at[(s, v), 'triplet_correct'] for s in reach for v in _READINGS):.1f}"
    )
    return out


def mining_numbers(mining: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """The numbers the conclusions quote from the mining diagnosis (``{setting key: measured}``,
    :func:`~dmlnb.experiments.ssdml.mining.stored_mining`), per setting ``key``:
    ``<key>_w_over_chance_max`` (the largest gain of W over chance, points), ``<key>_chance_<src>``
    (W against chance at k = 10: verdict, effect), ``<key>_knn_same_<src>`` and
    ``<key>_neg_other_<src>`` (the paper's mining, %), the spans over the sources a method can have
    (``<key>_pos_same_span``, ``_neg_other_span``, ``_triplet_correct_span``,
    ``_outside_neg_span``), ``<key>_readings_best`` (the most right triplets of a reading of the
    paper, %), k = 50 against k = 10 (``<key>_k50_holds``, ``_k50_fails``, ``_k50_best``) and where
    W beats chance at k = 50 (``<key>_chance_k50_holds``); over every setting, how the two-sided
    propagation fares (``two_sided_fails``, ``two_sided_inconclusive``, ``two_sided_holds``,
    ``two_sided_cases``), ``n_sources`` and the smallest and largest k compared (``k_small``,
    ``k_large``)."""
    ks = sorted({int(v["k"]) for v in MINING_VARIANTS.values()})
    out: dict[str, str] = {
        "n_sources": str(len(FEATURE_SOURCES)),
        "k_small": str(ks[0]),
        "k_large": str(ks[-1]),
    }
    two_sided = _questions("the two-sided propagation")[0]
    calls = []
    for key, measured in mining.items():
        out.update(_one_setting(key, measured))
        calls += [
            str(v) for (q, _), v in mining_question_verdicts(measured).items() if q == two_sided
        ]
    for name, verdict in (("fails", FAILS), ("inconclusive", INCONCLUSIVE), ("holds", HOLDS)):
        out[f"two_sided_{name}"] = str(calls.count(verdict))
    out["two_sided_cases"] = str(len(calls))
    return out


def _split_numbers(key: str, splits: DatasetSplits) -> dict[str, str]:
    """A setting's classes (training, of them held out for validation, trained on), images per
    training class (labelled and unlabelled) and test images, from its first seed's splits."""
    held = 0 if splits.validation is None else len(torch.unique(splits.validation.labels))
    per_class = torch.bincount(
        torch.cat([splits.train.labels.cpu(), splits.unlabelled_targets.cpu()])
    )
    per_class = per_class[per_class > 0]
    lo, hi = int(per_class.min()), int(per_class.max())
    return {
        f"{key}_classes": str(splits.num_train_classes + held),
        f"{key}_validation_classes": str(held),
        f"{key}_train_classes": str(splits.num_train_classes),
        f"{key}_images_per_class": str(lo) if lo == hi else f"{lo}-{hi}",
        f"{key}_test_images": str(len(splits.test)),
    }


def _evaluation_numbers(key: str, runs: Sequence[Any]) -> dict[str, str]:
    """The epochs a setting's runs were evaluated after (its first run's history, the evaluation
    at initialisation left out) and how many."""
    epochs = [
        int(h["epoch"])
        for h in runs[0].record.data["history"]
        if h.get("metrics") and int(h["epoch"]) > 0
    ]
    listed = ", ".join(map(str, epochs[:-1])) + f" and {epochs[-1]}" if len(epochs) > 1 else ""
    return {
        f"{key}_evaluations": str(len(epochs)),
        f"{key}_evaluation_epochs": listed or "".join(map(str, epochs)),
    }


def setting_numbers(
    settings: Mapping[str, Setting],
    search_runs: RunSet,
    chosen: Mapping[str, Mapping[str, Mapping[str, Any]]],
    profile: str,
    diagnosed: pd.DataFrame,
    splits: Mapping[str, DatasetSplits] | None = None,
    runs: RunSet | None = None,
) -> dict[str, str]:
    """The numbers the prose quotes from the settings and the papers: the rule's interval
    (``confidence``), the paper's validation share (``paper_validation_share``) and its partitions
    of unlabelled images (``paper_partition``), per setting the triplet margin as run
    (``<key>_triplet_margin``), the searched margins' validation R@1 (``<key>_triplet_search``,
    where the setting ran a search) and ours' mined positives and negatives of the anchor's class
    during training (``<key>_train_pos``, ``<key>_train_neg``, %, from
    :func:`~dmlnb.experiments.ssdml.analyses.diagnosis`), its network's ``<key>_width`` beside the
    protocol chapter's (``protocol_width``), the values each searched hyper-parameter takes
    (``search_values``), the mining diagnosis's softmax epochs (``softmax_epochs``), the rule's
    ``min_runs`` and the seeds of the settings (``n_seeds``); with ``splits`` (the first seed's
    :class:`~dmlnb.data.DatasetSplits` per setting) its classes and images (:func:`_split_numbers`)
    and with ``runs`` the epochs its runs were evaluated after (:func:`_evaluation_numbers`)."""
    sizes = sorted({len(v) for _, v in BASELINE_SEARCH[profile].values()})
    seeds = sorted({len(st.seeds) for st in settings.values()})
    out = {
        "confidence": f"{1 - 2 * (1 - CONFIDENCE):.0%}",
        "min_runs": str(MIN_RUNS),
        "protocol_width": str(make_config(profile).width),
        "search_values": "-".join(map(str, sizes)),
        "softmax_epochs": str(SOFTMAX_EPOCHS),
        "n_seeds": "-".join(map(str, seeds)),
        "paper_validation_share": f"{REPORTED_VALIDATION_SHARE:.0%}",
        "paper_partition": f"{PROFILE_SETTINGS['paper']['mnist'].partition_size:,}",
    }
    for key, st in settings.items():
        out[f"{key}_width"] = str(st.train_config(profile, st.seeds[0]).width)
        if splits is not None and key in splits:
            out.update(_split_numbers(key, splits[key]))
        if runs is not None and key in runs.runs:
            out.update(_evaluation_numbers(key, list(runs.runs[key].values())))
        run = with_hyper(st, chosen.get(key, {}))
        if "triplet" in st.methods:
            margin = build_objective("triplet", run, st.metric_dim).margin
            out[f"{key}_triplet_margin"] = f"{float(margin):g}"
        search = {m: v for m, v in searched(search_runs, key, profile).items() if m == "triplet"}
        if search:
            table = search_table(search, profile)
            r1 = [f"{x:.1f}" for x in table["validation R@1 (%)"]]
            out[f"{key}_triplet_search"] = ", ".join(r1[:-1]) + f" and {r1[-1]}"
        if st.name in diagnosed.index:
            for half, column in (("pos", _TRAIN_POS), ("neg", _TRAIN_NEG)):
                out[f"{key}_train_{half}"] = f"{diagnosed.at[st.name, column]:.1f}"
    return out


def chapter_numbers(
    judged: Sequence[JudgedClaim],
    runs: RunSet,
    settings: Mapping[str, Setting],
    alpha_runs: Mapping[float, Sequence[Any]],
    search: tuple[RunSet, Mapping[str, Mapping[str, Mapping[str, Any]]]],
    mining: Mapping[str, pd.DataFrame],
    diagnosed: pd.DataFrame,
    profile: str,
    splits: Mapping[str, DatasetSplits] | None = None,
) -> dict[str, str]:
    """Every number the chapter's Markdown glues: :func:`conclusion_numbers` (``alpha_runs``: the
    α grid's runs by angle), :func:`setting_numbers` (``search``: the search's runs and the
    values it chose; ``splits``: each setting's first seed's) and :func:`mining_numbers`."""
    return {
        **conclusion_numbers(judged, runs, settings, alpha_runs),
        **setting_numbers(settings, search[0], search[1], profile, diagnosed, splits, runs),
        **mining_numbers(mining),
    }
