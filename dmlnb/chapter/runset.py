"""A chapter's runs declared as data and trained or reloaded by one function.

A chapter declares its runs once, as :class:`RunGroup` values (methods x seeds, with the
configuration changes the group makes), and :func:`train_runs` trains, resumes or reloads every
run through the run layer (:func:`dmlnb.runs.train_or_reload`, so shards and training disabled
work as for every chapter). Each run's specification is derived from its method call
(``{"factory": MethodCall.spec}``), never typed, so a changed argument trains the run again.
One result type, :class:`RunSet`, answers "the per-seed values of this method in this group".

Runs declared alike (the same method call, seed and configuration: one fingerprint), in one
group or several, are one run: it trains once (a shared baseline). Two declarations that would
share a folder but not a fingerprint are refused before anything trains. The folder is named by
the label, seed and changes, not by the base configuration: two calls with different base
configurations belong in different ``results_dir``.

Example::

    groups = {"table1": RunGroup({"triplet": call("triplet", mining="semihard"),
                                  "contrastive": call("contrastive")}, seeds=(0, 1, 2))}
    runs = train_runs(groups, config, results / "default")
    runs.values("table1", "triplet", "R@1")   # [R@1 of seed 0, 1, 2] at each run's best epoch
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from dmlnb.chapter.procedure import Procedure, RunContext
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord, run_fingerprint
from dmlnb.reporting import provenance_frame, provenance_groups
from dmlnb.runs import Run, train_or_reload

__all__ = ["RunSpec", "RunGroup", "RunSet", "train_runs", "run_spec"]


@dataclass(frozen=True)
class RunSpec:
    """One declared run: the ``label`` its chapter gives the method, the method ``call``, the
    ``seed`` and the configuration ``changes`` (e.g. ``{"m_per_class": 2}``)."""

    label: str
    call: MethodCall
    seed: int
    changes: tuple[tuple[str, Any], ...] = ()
    procedure: Procedure = Procedure()

    @property
    def name(self) -> str:
        """The run's folder (:meth:`Procedure.run_name`; by default
        ``"<label>[-<key><value>...]-seed<seed>"``)."""
        return self.procedure.run_name(self.label, self.seed, self.changes)

    def config(self, base: TrainConfig) -> TrainConfig:
        """``base`` with this run's changes and seed, then its procedure's
        (:meth:`Procedure.configure`)."""
        cfg = base.replace(**dict(self.changes), seed=int(self.seed))
        return self.procedure.configure(cfg, self.label, self.call)

    @property
    def spec(self) -> dict[str, Any]:
        """The run's method specification (:func:`run_spec`)."""
        return run_spec(self.call, self.procedure, self.label, self.seed)


def run_spec(
    call: MethodCall, procedure: Procedure | None = None, label: str = "", seed: int | None = None
) -> dict[str, Any]:
    """The method specification of a run of ``call`` (:mod:`dmlnb.runs`): the method's name,
    version and every argument, and every argument of its ``procedure``
    (:meth:`Procedure.spec_entries`, and with ``seed`` :meth:`Procedure.seed_entries`)."""
    extra = procedure.spec_entries(label, call) if procedure is not None else {}
    if procedure is not None and seed is not None:
        extra = {**extra, **procedure.seed_entries(label, call, int(seed))}
    if "factory" in extra:
        raise ValueError(f"{type(procedure).__name__}.spec_entries may not write 'factory'")
    return {**extra, "factory": call.spec}


@dataclass(frozen=True)
class RunGroup:
    """Methods x seeds: every method of ``methods`` (label -> call) with every seed of
    ``seeds``, under the configuration ``changes`` the group makes, trained by ``procedure``
    (:class:`~dmlnb.chapter.procedure.Procedure`: sampler, hooks, network; default: the loss
    alone on the configured network)."""

    methods: Mapping[str, MethodCall]
    seeds: Sequence[int]
    changes: Mapping[str, Any] = field(default_factory=dict)
    procedure: Procedure = Procedure()

    def __post_init__(self) -> None:
        if not self.methods:
            raise ValueError("a RunGroup needs at least one method: methods={'label': call(...)}")
        if len(set(self.seeds)) != len(self.seeds) or not self.seeds:
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")

    def runs(self) -> list[RunSpec]:
        """Every run of the group, method by method, seed by seed."""
        changes = tuple(sorted(self.changes.items()))
        return [
            RunSpec(label, c, int(seed), changes, self.procedure)
            for label, c in self.methods.items()
            for seed in self.seeds
        ]


@dataclass
class RunSet:
    """The chapter's runs by group: ``runs[group][(label, seed)]`` is a :class:`dmlnb.runs.Run`."""

    runs: dict[str, dict[tuple[str, int], Run]]

    @classmethod
    def merged(cls, sets: Iterable[RunSet]) -> RunSet:
        """The groups of several run sets as one (e.g. one :func:`train_runs` call per training
        configuration).

        Raises:
            ValueError: two sets hold a group of one name.
        """
        out: dict[str, dict[tuple[str, int], Run]] = {}
        for one in sets:
            twice = set(out) & set(one.runs)
            if twice:
                raise ValueError(f"groups {sorted(twice)} are in two run sets; name them apart")
            out.update(one.runs)
        return cls(out)

    def _group(self, group: str) -> dict[tuple[str, int], Run]:
        if group not in self.runs:
            raise KeyError(f"no group {group!r}; the groups are {sorted(self.runs)}")
        return self.runs[group]

    def seeds(self, group: str, label: str) -> list[int]:
        """The seeds of ``label`` in ``group``, in order."""
        found = sorted(s for (lab, s) in self._group(group) if lab == label)
        if not found:
            labels = sorted({lab for lab, _ in self._group(group)})
            raise KeyError(f"group {group!r} has no method {label!r}; its methods are {labels}")
        return found

    def values(
        self, group: str, label: str, metric: str, seeds: Sequence[int] | None = None
    ) -> list[float]:
        """``metric`` of each run of ``label`` in ``group`` at its best epoch (its
        configuration's selection), in the order of ``seeds`` (default: every seed, sorted)."""
        runs = self._group(group)
        return [
            float(runs[(label, s)].metrics[metric])
            for s in (seeds if seeds is not None else self.seeds(group, label))
        ]

    def run(self, group: str, label: str, seed: int) -> Run:
        """The run of ``label`` with ``seed`` in ``group``."""
        runs = self._group(group)
        if (label, seed) not in runs:
            raise KeyError(f"group {group!r} has no run {label!r} with seed {seed}")
        return runs[(label, seed)]

    def records(self) -> list[RunRecord]:
        """Every distinct run's record once (runs shared between groups count once)."""
        seen: dict[int, RunRecord] = {}
        for g in self.runs.values():
            for r in g.values():
                seen.setdefault(id(r), r.record)
        return list(seen.values())

    def provenance(self) -> pd.DataFrame:
        """Which code made the runs, each distinct run once
        (:func:`dmlnb.reporting.provenance_groups`): per commit, whether the package had
        uncommitted changes and threads, the runs and when they finished."""
        return provenance_groups(provenance_frame(self.records()))

    @property
    def trained(self) -> int:
        """How many distinct runs were trained now (the others were reloaded)."""
        return len({id(r) for g in self.runs.values() for r in g.values() if r.trained})

    def frame(self, metric: str) -> pd.DataFrame:
        """One row per (group, method, seed): ``group, method, seed, <metric>``."""
        rows = [
            {"group": g, "method": lab, "seed": s, metric: float(run.metrics[metric])}
            for g, runs in self.runs.items()
            for (lab, s), run in sorted(runs.items())
        ]
        return pd.DataFrame(rows, columns=["group", "method", "seed", metric])


def train_runs(
    groups: Mapping[str, RunGroup],
    config: TrainConfig,
    results_dir: str | Path | None,
    *,
    splits: Any = None,
    data_root: str | Path | None = None,
    retrain: bool = False,
    seed_offset: int = 0,
    say: Callable[[str], None] = print,
) -> RunSet:
    """Train, resume or reload every run of ``groups`` on ``config`` (each run's changes and seed
    applied), each in ``results_dir / RunSpec.name`` (``None``: in memory, nothing stored).

    ``seed_offset`` is added to every declared seed (the runs, their folders and the run set's
    keys): the chapter again on an independent set of seeds (``python -m dmlnb replicate``).

    Each run's data is loaded once per :meth:`Procedure.data_key` (default: once per dataset),
    by :meth:`Procedure.load_data`, and only when a run trains (``splits`` passes one already
    loaded, which every run then trains on). Runs with one fingerprint (the same method call,
    seed and configuration), in one group or several, under one label or two, are one run: it
    trains once, in the folder of its first declaration. Every declaration is checked before
    anything trains.

    Raises:
        ValueError: two declared runs would share a folder but not a fingerprint (give one a
            label of its own), or a method needs from the run more than ``num_classes`` and
            ``embedding_dim`` (e.g. ``centroids``: its chapter builds them and trains it).
    """
    declared: list[tuple[str, RunSpec, TrainConfig, dict[str, Any], str]] = []
    folders: dict[str, str] = {}  # folder name -> fingerprint
    for group, runs in groups.items():
        for spec in runs.runs():
            spec = replace(spec, seed=spec.seed + int(seed_offset))
            extra = set(spec.call.method.context) - set(_CONTEXT)
            if extra and type(spec.procedure).build is Procedure.build:
                raise ValueError(
                    f"method {spec.call.name!r} of group {group!r} needs {sorted(extra)} from the "
                    "run, which the default procedure does not make: give its group a "
                    "Procedure whose build makes them"
                )
            cfg, method_spec = spec.config(config), spec.spec
            fingerprint = run_fingerprint(cfg, method_spec)
            if folders.setdefault(spec.name, fingerprint) != fingerprint:
                raise ValueError(
                    f"run {spec.name!r} of group {group!r} is declared twice with different "
                    "methods or configurations; give one a label of its own"
                )
            declared.append((group, spec, cfg, method_spec, fingerprint))
    loaded: dict[Hashable, Any] = {}

    def data_for(spec: RunSpec, cfg: TrainConfig) -> Callable[[], Any]:
        def data() -> Any:
            if splits is not None:
                return splits
            key = (type(spec.procedure), spec.procedure.data_key(cfg))
            if key not in loaded:
                loaded[key] = spec.procedure.load_data(cfg, data_root)
            return loaded[key]

        return data

    made: dict[str, Run] = {}  # fingerprint -> run
    out: dict[str, dict[tuple[str, int], Run]] = {group: {} for group in groups}
    for group, spec, cfg, method_spec, fingerprint in declared:
        if fingerprint not in made:
            folder = Path(results_dir) / spec.name if results_dir is not None else None
            data = data_for(spec, cfg)
            made[fingerprint] = _train_one(spec, cfg, method_spec, folder, data, retrain, say)
        out[group][(spec.label, spec.seed)] = made[fingerprint]
    return RunSet(out)


#: What :func:`train_runs` gives a method's factory from the run.
_CONTEXT = ("num_classes", "embedding_dim")


def _train_one(
    spec: RunSpec,
    config: TrainConfig,
    method_spec: dict[str, Any],
    folder: Path | None,
    data: Callable[[], Any],
    retrain: bool,
    say: Callable[[str], None],
) -> Run:
    """One run through :func:`dmlnb.runs.train_or_reload`, built and trained as its procedure
    says (network, loss, sampler, hooks, what it stores after training)."""
    proc = spec.procedure
    contexts: list[RunContext] = []

    def train_run(resume: bool) -> tuple[RunRecord, nn.Module]:
        splits = data()
        model, loss = proc.build(spec.call, config, splits)
        ctx = RunContext(spec.label, spec.call, spec.seed, config, splits, model, loss, folder)
        contexts.append(ctx)
        parts = proc.components(ctx)
        record = proc.train(ctx, parts, resume=resume, name=spec.name, spec=method_spec)
        return record, model

    def finish(record: RunRecord, model: nn.Module | None) -> dict[str, Any]:
        return proc.finish(contexts[-1], record)

    stores = type(proc).finish is not Procedure.finish
    return train_or_reload(
        spec.name,
        folder,
        config,
        method_spec,
        train_run,
        finish=finish if stores else None,
        retrain=retrain,
        say=say,
    )
