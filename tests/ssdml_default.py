"""The SSDML chapter's default-profile runs asked for as its notebook asks for them: one
:func:`dmlnb.chapter.train_runs` call per setting on its configuration, the baselines' search
first, then the main comparison and the α grid with the values the search chose (the search's
groups declared again first, so that a chosen value's run is the search's). With
``DMLNB_NO_TRAINING=1`` a run whose fingerprint moved raises instead of training."""

from __future__ import annotations

from pathlib import Path

from dmlnb.chapter import RunSet, train_runs
from dmlnb.experiments import ssdml

RESULTS = Path(__file__).resolve().parents[1] / "results" / "05_ssdml"


def default_runs() -> tuple[dict, RunSet, RunSet]:
    """``(settings, search, runs)``: the settings with validation classes, the search's runs and
    every run of the chapter (the search's included), trained or reloaded from ``results/``."""
    settings = ssdml.settings_for("default", True)
    configs = ssdml.setting_configs(settings, "default")

    def train(groups: dict) -> RunSet:
        return RunSet.merged(
            train_runs(gs, configs[k], RESULTS / "default", say=lambda _: None)
            for k, gs in groups.items()
        )

    search_groups = ssdml.search_groups(settings, "default")
    search = train(search_groups)
    chosen = ssdml.chosen(search, list(settings), "default")
    main = ssdml.groups(settings, hyper=chosen)
    runs = train({k: {**search_groups.get(k, {}), **gs} for k, gs in main.items()})
    return settings, search, runs
