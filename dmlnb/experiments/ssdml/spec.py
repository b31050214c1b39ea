"""The SSDML chapter's runs declared as data: per profile, settings x methods x seeds (the main
comparison), the α grid and the baselines' search, each run a registered method call
(:func:`~dmlnb.experiments.ssdml.network.objective_method`) whose every argument enters the run's
fingerprint.

A run of Algorithm 1 is a :class:`SSDMLRun`; a :class:`SSDMLGroup` is one setting's methods
(label -> method call) x seeds. :func:`groups` declares the main comparison and the α grid of a
profile, :func:`search_groups` the baselines' search; ``changes`` (``{label: {argument: value}}``)
replace a method's arguments in every group, and so its runs' fingerprints.
:func:`dmlnb.experiments.ssdml.training.train_groups` trains or reloads them into one
:class:`dmlnb.chapter.RunSet`.

The run's specification keeps the keys and folder names of the records made before the chapter
layer (``schedule``, ``method``, ``tsne``, ``retrieval_queries``, ``factory``), so they reload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dmlnb.experiments.ssdml.network import objective_method
from dmlnb.experiments.ssdml.settings import BASELINE_SEARCH, SEMI_SUPERVISED, Setting, with_hyper
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.runs import Run
from dmlnb.ssdml.algorithm import run_spec

__all__ = [
    "SSDMLRun",
    "SSDMLGroup",
    "TSNE_METHODS",
    "PAPER_MINING",
    "method_entries",
    "groups",
    "alpha_group_name",
    "search_groups",
    "search_group_name",
    "initial_of",
    "seed_of",
]

#: The methods whose first seed, at the setting's own α, stores its t-SNE coordinates (Figure 2).
TSNE_METHODS = ("ours", "ours-noorth")
#: The proposed method's mining as the paper states it (Setting.propagation, Setting.negatives).
PAPER_MINING = {"propagation": "one-sided", "negatives": "neighbourhood"}
_ANGULAR = ("ours", "ours-noorth", "ours-outside")


def method_entries(method: str, setting: Setting, call: MethodCall) -> dict[str, Any]:
    """The ``"method"`` entry of a run's specification: the method key, the setting's name,
    labelled examples, ``l`` and pre-training; α where the method reads it, ``k`` and ``γ`` for
    the proposed method (and its mining options where not the paper's), the baseline's explicit
    hyper-parameters (``setting.baseline_hyper``)."""
    spec: dict[str, Any] = {
        "method": method,
        "setting": setting.name,
        "labelled_per_class": setting.labelled_per_class,
        "metric_dim": setting.metric_dim,
        "pretrain_epochs": setting.pretrain_epochs,
    }
    if method in (*_ANGULAR, "angular"):
        spec["alpha"] = call.args["alpha_degrees"]
    if method in _ANGULAR:
        spec.update(k=call.args["k"], gamma=call.args["gamma"])
        # named only when not the paper's, so the records made before the options still reload
        spec.update(
            {
                key: getattr(setting, key)
                for key, v in PAPER_MINING.items()
                if getattr(setting, key) != v
            }
        )
    if method in SEMI_SUPERVISED or setting.baseline_hyper.get(method):
        spec["hyper"] = setting.baseline_hyper.get(method, {})
    return spec


@dataclass(frozen=True)
class SSDMLRun:
    """One declared run of Algorithm 1: ``method`` (its key) of ``setting`` trained as ``call``
    with ``seed``; ``tag`` is added to its folder name (an angle or a searched value), ``tsne``
    stores its test embedding's t-SNE coordinates."""

    setting: Setting
    method: str
    call: MethodCall
    seed: int
    tag: str = ""
    tsne: bool = False
    retrieval_queries: int = 6

    @property
    def name(self) -> str:
        """The run's folder: ``"<setting>-<method><tag>-seed<seed>"``."""
        return f"{self.setting.name}-{self.method}{self.tag}-seed{self.seed}"

    def config(self, profile: str, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
        """The run's configuration (:meth:`Setting.train_config` with its seed)."""
        return self.setting.train_config(profile, self.seed, overrides)

    @property
    def spec(self) -> dict[str, Any]:
        """The run's specification: the schedule, :func:`method_entries`, what is stored after
        training and the method's call (``"factory"``: every argument)."""
        return {
            **run_spec(self.setting.schedule, method_entries(self.method, self.setting, self.call)),
            "tsne": self.tsne,
            "retrieval_queries": self.retrieval_queries,
            "factory": self.call.spec,
        }


@dataclass(frozen=True)
class SSDMLGroup:
    """One setting's ``methods`` (label = method key -> call) x ``seeds``; ``tag`` names the
    group's folders (``"-alpha35"``, ``"-margin0.1"``); ``tsne``: the first seed of
    :data:`TSNE_METHODS` at the setting's own α stores its t-SNE coordinates."""

    setting: Setting
    methods: Mapping[str, MethodCall]
    seeds: Sequence[int]
    tag: str = ""
    tsne: bool = True
    single_seed: Sequence[str] = field(default=())

    def runs(self) -> list[SSDMLRun]:
        """Every run, seed by seed, method by method (a method of ``single_seed``: the first
        seed only)."""
        first = self.setting.seeds[0]
        return [
            SSDMLRun(
                self.setting,
                m,
                c,
                int(seed),
                self.tag,
                tsne=self.tsne
                and m in TSNE_METHODS
                and seed == first
                and c.args.get("alpha_degrees") == self.setting.alpha,
            )
            for seed in self.seeds
            for m, c in self.methods.items()
            if not (m in self.single_seed and seed != self.seeds[0])
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


def groups(
    settings: Mapping[str, Setting],
    seeds: Sequence[int] | None = None,
    *,
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, SSDMLGroup]:
    """The chapter's runs: per setting (group ``key``), every method with every seed (``seeds``,
    default the setting's), the baselines' values of ``hyper[key]`` (``{method: {keyword:
    value}}``, chosen on the validation classes); and the α grid of the settings that have one
    (:func:`alpha_group_name`: the proposed method at each angle and the setting's own, whose
    runs are the main comparison's)."""
    out: dict[str, SSDMLGroup] = {}
    for key, st in settings.items():
        st = with_hyper(st, (hyper or {}).get(key, {}))
        use = tuple(st.seeds if seeds is None else seeds)
        out[key] = SSDMLGroup(
            st, _calls(st, st.methods, changes), use, single_seed=st.single_seed_methods
        )
    for key, st in settings.items():
        for a in sorted({*st.alpha_grid, st.alpha}) if st.alpha_grid else ():
            tag = f"-alpha{a:g}" if a != st.alpha else ""
            calls = _calls(st, ("ours",), changes, a)
            use = tuple(st.seeds if seeds is None else seeds)
            out[alpha_group_name(key, a)] = SSDMLGroup(st, calls, use, tag)
    return out


def search_group_name(key: str, method: str, value: float) -> str:
    """The search's group of ``method`` at ``value`` on setting ``key``."""
    return f"{key}-search-{method}-{value:g}"


def search_groups(
    settings: Mapping[str, Setting],
    profile: str,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, SSDMLGroup]:
    """The baselines' search (:data:`BASELINE_SEARCH`) on every setting of ``settings`` that holds
    out validation classes: each baseline at each value of its grid, the setting's first seed
    (:func:`search_group_name`; folders ``<setting>-<method>-<keyword><value>-seed<s>``)."""
    out: dict[str, SSDMLGroup] = {}
    for key, st in settings.items():
        if st.validation is None:
            continue
        for method, (name, values) in BASELINE_SEARCH[profile].items():
            if method not in st.methods:
                continue
            for v in values:
                tried = with_hyper(st, {method: {name: v}})
                out[search_group_name(key, method, v)] = SSDMLGroup(
                    tried,
                    _calls(tried, (method,), changes),
                    (st.seeds[0],),
                    f"-{name}{v:g}",
                    tsne=False,
                )
    return out


def initial_of(run: Run) -> dict[str, float] | None:
    """The run's evaluation at initialisation (its history's epoch 0), or ``None``."""
    first = run.record.data["history"][0]
    return first["metrics"] if first["epoch"] == 0 else None


def seed_of(run: Run) -> int:
    """The run's seed (its configuration's)."""
    return int(run.record.config["seed"])
