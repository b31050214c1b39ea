"""The SSDML chapter's runs declared as data: per profile, settings x methods x seeds (the main
comparison), the α grid and the baselines' search, each run a registered method call
(:func:`~dmlnb.experiments.ssdml.network.objective_method`) whose every argument enters the run's
fingerprint, trained by Algorithm 1
(:class:`~dmlnb.experiments.ssdml.procedure.SSDMLProcedure`).

:func:`groups` declares the main comparison and the α grid of a profile, :func:`search_groups`
the baselines' search, each as ``{setting key: {group: RunGroup}}``: a setting's groups share its
training configuration, so :func:`dmlnb.chapter.train_runs` trains or reloads them in one call
per setting (``config=setting.train_config(profile, setting.seeds[0], overrides)``; each run's
seed replaces the first). ``changes`` (``{label: {argument: value}}``) replace a method's
arguments in every group, and so its runs' fingerprints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dmlnb.chapter import RunGroup
from dmlnb.experiments.ssdml.network import objective_method
from dmlnb.experiments.ssdml.procedure import SSDMLProcedure
from dmlnb.experiments.ssdml.settings import BASELINE_SEARCH, Setting, with_hyper
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.runs import Run

__all__ = [
    "groups",
    "setting_configs",
    "setting_groups",
    "alpha_group_name",
    "single_seed_group_name",
    "search_groups",
    "search_group_name",
    "initial_of",
    "seed_of",
]


def _calls(
    setting: Setting,
    methods: Sequence[str],
    changes: Mapping[str, Mapping[str, Any]] | None,
    alpha: float | None = None,
) -> dict[str, MethodCall]:
    return {
        m: objective_method(m, setting, alpha).replace(**(changes or {}).get(m, {}))
        for m in methods
    }


def alpha_group_name(key: str, alpha: float) -> str:
    """The α grid's group of setting ``key`` at angle ``alpha``."""
    return f"{key}-alpha{alpha:g}"


def setting_configs(
    settings: Mapping[str, Setting], profile: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, TrainConfig]:
    """Each setting's training configuration (:meth:`Setting.train_config` at its first seed):
    the ``config`` of the ``train_runs`` call that trains its groups (each run's seed replaces
    the first)."""
    return {k: st.train_config(profile, st.seeds[0], overrides) for k, st in settings.items()}


def single_seed_group_name(key: str) -> str:
    """The group of setting ``key``'s methods run with its first seed only
    (``Setting.single_seed_methods``)."""
    return f"{key}-single-seed"


def setting_groups(
    st: Setting,
    key: str,
    seeds: Sequence[int],
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RunGroup]:
    """One setting's main comparison: every method with every seed of ``seeds`` (group ``key``),
    those of ``st.single_seed_methods`` with the first only (:func:`single_seed_group_name`)."""
    proc = SSDMLProcedure(st)
    calls = _calls(st, st.methods, changes)
    every = {m: c for m, c in calls.items() if m not in st.single_seed_methods}
    single = {m: c for m, c in calls.items() if m in st.single_seed_methods}
    out = {key: RunGroup(every, tuple(seeds), procedure=proc)}
    if single:
        out[single_seed_group_name(key)] = RunGroup(single, tuple(seeds)[:1], procedure=proc)
    return out


def groups(
    settings: Mapping[str, Setting],
    seeds: Sequence[int] | None = None,
    *,
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, RunGroup]]:
    """The chapter's runs, ``{setting key: {group: RunGroup}}``: per setting (group ``key``),
    every method with every seed (``seeds``, default the setting's), the baselines' values of
    ``hyper[key]`` (``{method: {keyword: value}}``, chosen on the validation classes); and the
    α grid of the settings that have one (:func:`alpha_group_name`: the proposed method at each
    angle and the setting's own, whose runs are the main comparison's; only the main
    comparison's runs store t-SNE coordinates)."""
    out: dict[str, dict[str, RunGroup]] = {}
    for key, st in settings.items():
        st = with_hyper(st, (hyper or {}).get(key, {}))
        use = tuple(st.seeds if seeds is None else seeds)
        out[key] = setting_groups(st, key, use, changes)
        for a in sorted({*st.alpha_grid, st.alpha}) if st.alpha_grid else ():
            own = a == st.alpha
            proc = SSDMLProcedure(st, tag="" if own else f"-alpha{a:g}", tsne=own)
            calls = _calls(st, ("ours",), changes, a)
            out[key][alpha_group_name(key, a)] = RunGroup(calls, use, procedure=proc)
    return out


def search_group_name(key: str, method: str, value: float) -> str:
    """The search's group of ``method`` at ``value`` on setting ``key``."""
    return f"{key}-search-{method}-{value:g}"


def search_groups(
    settings: Mapping[str, Setting],
    profile: str,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, RunGroup]]:
    """The baselines' search (:data:`BASELINE_SEARCH`) on every setting of ``settings`` that holds
    out validation classes, ``{setting key: {group: RunGroup}}``: each baseline at each value of
    its grid, the setting's first seed (:func:`search_group_name`; folders
    ``<setting>-<method>-<keyword><value>-seed<s>``)."""
    out: dict[str, dict[str, RunGroup]] = {}
    for key, st in settings.items():
        if st.validation is None:
            continue
        for method, (name, values) in BASELINE_SEARCH[profile].items():
            if method not in st.methods:
                continue
            for v in values:
                tried = with_hyper(st, {method: {name: v}})
                proc = SSDMLProcedure(tried, tag=f"-{name}{v:g}", tsne=False)
                calls = _calls(tried, (method,), changes)
                group = RunGroup(calls, (st.seeds[0],), procedure=proc)
                out.setdefault(key, {})[search_group_name(key, method, v)] = group
    return out


def initial_of(run: Run) -> dict[str, float] | None:
    """The run's evaluation at initialisation (its history's epoch 0), or ``None``."""
    first = run.record.data["history"][0]
    return first["metrics"] if first["epoch"] == 0 else None


def seed_of(run: Run) -> int:
    """The run's seed (its configuration's)."""
    return int(run.record.config["seed"])
