"""The chapter's runs declared in the chapter layer (:mod:`dmlnb.chapter`) and how they train.

Every run trains on the batches of :class:`dmlnb.samplers.ClassRatioSampler` (the table's
``C / m``), logs inside the loss (:class:`~dmlnb.losses.facility_location.InsideLossHook`), the
clustering loss's margin multiplier decays (:class:`dmlnb.losses.MarginDecayHook`), and after
training the kept weights are evaluated with the paper's geometric NMI (Eq. 9) and, for the first
seed's clustering run of a table, mapped by t-SNE: :class:`ClassRatioRuns`, a
:class:`~dmlnb.chapter.Procedure` whose every field enters the runs' specifications, under the
keys and in the folders of the records made before the chapter layer.

:func:`groups` declares every run of a :class:`~dmlnb.experiments.facility_location.presets.Study`
(the tables, the margin ablation, the variant of Algorithm 2, N-pairs on paired batches) as
:class:`~dmlnb.chapter.RunGroup` values; :func:`train` trains or reloads them with
:func:`dmlnb.chapter.train_runs`, one call per dataset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dmlnb.chapter import Components, Procedure, RunContext, RunGroup, RunSet, RunSpec, train_runs
from dmlnb.checkpoints import load_checkpoint
from dmlnb.evaluation import compute_embeddings, evaluate
from dmlnb.experiments.facility_location.presets import (
    Study,
    TableSpec,
    loss_method,
)
from dmlnb.experiments.facility_location.spec import (
    METHODS,
    PAPER_FORMS,
    forms_of,
    method_config,
)
from dmlnb.losses import MarginDecayHook
from dmlnb.losses.facility_location import InsideLossHook
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.runs import Run
from dmlnb.samplers import ClassRatioSampler
from dmlnb.selection import kept_selection

__all__ = [
    "ClassRatioRuns",
    "TableGroup",
    "KeptRun",
    "groups",
    "train",
    "by_role",
    "kept_metrics",
    "kept_weights",
    "recorded",
    "tsne_map",
]


@dataclass(frozen=True)
class ClassRatioRuns(Procedure):
    """How the chapter's runs train beyond their loss (every field enters their specification):
    batches of ``classes_per_batch`` classes (``C / m = class_ratio``, seeded by the run's seed),
    the clustering loss's margin multiplier (``gamma``, initially) decayed by ``decay_rate`` every
    ``decay_steps`` steps (``None``: one epoch of steps), the inside-the-loss log every
    ``diag_every``-th step, and after training the geometric NMI of the kept weights and, with
    ``tsne``, a t-SNE map of at most ``tsne_points`` test points. ``table`` names the table whose
    setting the run trains at."""

    table: str = "Table 1"
    class_ratio: float = 0.25
    classes_per_batch: int = 32
    gamma: float = 10.0
    decay_rate: float = 0.94
    decay_steps: int | None = None
    diag_every: int = 1
    tsne_points: int = 2500
    tsne: bool = False

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        """Every field under its own key (the keys of the records made before the chapter layer),
        the method's key (``label``) and the forms of the paper's algorithms it trains."""
        return {**dataclasses.asdict(self), "method": label, **forms_of(call)}

    def configure(self, config: TrainConfig, label: str, call: MethodCall) -> TrainConfig:
        """L2-normalised embeddings for the triplet and clustering losses (Sec. 4)."""
        return method_config(label, config)

    def components(self, run: RunContext) -> Components:
        """The class-ratio sampler, the margin decay (clustering loss) and the inside log."""
        cfg = run.config
        sampler = ClassRatioSampler(
            torch.as_tensor(run.splits.train.labels),
            cfg.batch_size,
            classes_per_batch=self.classes_per_batch,
            seed=cfg.seed,
            num_batches=cfg.steps_per_epoch,
        )
        inside = InsideLossHook(self.diag_every)
        run.state["inside"] = inside
        hooks: list[Any] = [inside]
        if run.call.name == "facility-location":
            steps = self.decay_steps or (cfg.steps_per_epoch or len(sampler))
            hooks.insert(0, MarginDecayHook(run.loss, rate=self.decay_rate, decay_steps=steps))
        return Components(run.loss, sampler, hooks)

    def finish(self, run: RunContext, record: RunRecord) -> dict[str, Any]:
        """The inside log, the kept weights' test metrics with the paper's geometric NMI
        (``metrics_geometric``) and, with ``tsne``, the t-SNE map (:func:`tsne_map`)."""
        cfg, model = run.config, run.model
        best = run.run_dir / "best.pt" if run.run_dir is not None else None
        if best is not None and best.exists():
            model.load_state_dict(load_checkpoint(best)["model"])
        model = model.cpu().eval()
        emb, lab = compute_embeddings(model, run.splits.test, batch_size=cfg.eval_batch_size)
        geometric = evaluate(
            emb, lab, ks=cfg.eval_ks, metrics=cfg.eval_metrics, seed=cfg.seed,
            nmi_average="geometric",
        )  # fmt: skip
        extras: dict[str, Any] = {"inside": run.state["inside"].log, "metrics_geometric": geometric}
        if self.tsne:
            extras["tsne"] = tsne_map(
                model, run.splits.test, self.tsne_points, cfg.seed, cfg.eval_batch_size
            )
        return extras


def tsne_map(model: Any, test: Any, points: int, seed: int, batch_size: int) -> dict[str, Any]:
    """t-SNE (:func:`dmlnb.plots.tsne`) of at most ``points`` test embeddings (a seeded random
    subset when the test set is larger): ``{"indices": [...], "xy": [[x, y], ...]}``."""
    from dmlnb.plots import tsne

    n = len(test)
    gen = torch.Generator().manual_seed(seed)
    idx = (
        torch.arange(n)
        if n <= points
        else torch.sort(torch.randperm(n, generator=gen)[:points]).values
    )
    emb, _ = compute_embeddings(model, test.subset(idx), batch_size=batch_size)
    xy = tsne(emb, seed=seed)
    return {"indices": idx.tolist(), "xy": np.round(xy, 4).tolist()}


@dataclass(frozen=True)
class TableRun(RunSpec):
    """A run in the folder of the records made before the chapter layer:
    ``<prefix>-cm<C/m>-<method>[-g<gamma>][-<form>...]-seed<seed>`` (``prefix``: dataset,
    backbone and embedding size; a form only when it is not the paper's)."""

    prefix: str = ""

    @property
    def name(self) -> str:
        proc = self.procedure
        assert isinstance(proc, ClassRatioRuns)
        tag = f"{self.label}-g{proc.gamma:g}" if self.label == "clustering" else self.label
        tag += "".join(
            f"-{form}" for key, form in forms_of(self.call).items() if form != PAPER_FORMS[key]
        )
        return f"{self.prefix}-cm{proc.class_ratio:g}-{tag}-seed{self.seed}"


@dataclass(frozen=True)
class TableGroup(RunGroup):
    """A :class:`~dmlnb.chapter.RunGroup` of the chapter: its runs in the folders named by
    :class:`TableRun` (``prefix``), and a t-SNE map stored by the first seed's run of each
    method of ``tsne_labels``."""

    prefix: str = ""
    tsne_labels: tuple[str, ...] = ()

    def runs(self) -> list[RunSpec]:
        first = int(self.seeds[0])
        out: list[RunSpec] = []
        for r in super().runs():
            proc = dataclasses.replace(
                r.procedure, tsne=r.label in self.tsne_labels and r.seed == first
            )
            out.append(TableRun(r.label, r.call, r.seed, r.changes, proc, prefix=self.prefix))
        return out


def _group(
    study: Study,
    table: TableSpec,
    methods: Mapping[str, MethodCall],
    gamma: float,
    tsne: bool,
) -> TableGroup:
    """``methods`` at ``table``'s setting and seeds (its configuration as changes of the first
    table's)."""
    c, b = table.config.to_dict(), study.tables[0].config.to_dict()
    changes = {k: getattr(table.config, k) for k in c if c[k] != b.get(k)}
    proc = ClassRatioRuns(
        table.table,
        table.class_ratio,
        table.classes_per_batch,
        gamma,
        study.decay_rate,
        study.decay_steps,
        study.diag_every,
        study.tsne_points,
    )
    return TableGroup(
        dict(methods),
        study.seeds_for(table),
        changes,
        proc,
        prefix=f"{c['dataset']}-{c['model']}-d{c['embedding_dim']}",
        tsne_labels=tuple(study.tsne_methods) if tsne else (),
    )


def groups(
    study: Study,
    methods: Mapping[str, Mapping[str, Any]] | None = None,
    tables: Sequence[str] | None = None,
) -> dict[str, RunGroup]:
    """Every run of ``study``: the four methods on each table (group ``"Table k"``), and at the
    first table's setting and seeds the clustering loss with each ablation value of the margin
    multiplier (``"gamma <g>"``) and each other form of Algorithm 2 (``"refinement <form>"``),
    and N-pairs on paired batches (``"paired"``). ``methods``: a reader's changes to the methods'
    arguments (``{"clustering": {"pam_passes": 3}}``): they enter those runs' fingerprints.
    ``tables``: the tables to run (default: every table of ``study``)."""
    changes = dict(methods or {})
    unknown = sorted(set(changes) - set(METHODS))
    if unknown:
        raise KeyError(f"unknown method(s) {unknown}; choose from {list(METHODS)}")

    def calls(s: Study, *labels: str) -> dict[str, MethodCall]:
        return {m: loss_method(m, s).replace(**changes.get(m, {})) for m in labels}

    run = [t for t in study.tables if tables is None or t.table in tables]
    out: dict[str, RunGroup] = {}
    for t in run:
        out[t.table] = _group(study, t, calls(study, *METHODS), study.gamma, True)
    first = study.tables[0]
    if first not in run:
        return out
    for g in study.gamma_ablation:
        ablated = dataclasses.replace(study, gamma=g)
        out[f"gamma {g:g}"] = _group(study, first, calls(ablated, "clustering"), g, False)
    for a in study.refinements:
        variant = dataclasses.replace(study, refinement=a)
        out[f"refinement {a}"] = _group(
            study, first, calls(variant, "clustering"), study.gamma, False
        )
    if study.paired is not None:
        out["paired"] = _group(study, study.paired, calls(study, "npair"), study.gamma, False)
    return out


def train(
    declared: Mapping[str, RunGroup],
    study: Study,
    folder: str | Path | None,
    *,
    data_root: str | Path | None = None,
    retrain: bool = False,
    splits: Mapping[str, Any] | None = None,
    seed_offset: int = 0,
) -> RunSet:
    """Train or reload every declared run with :func:`dmlnb.chapter.train_runs` in ``folder``
    (``results_dir / profile``), one call per dataset (the tables of the paper profile train on
    three), each on its first table's configuration; ``splits`` passes datasets already loaded
    (``{dataset: splits}``); ``seed_offset`` is added to every declared seed (``python -m dmlnb
    replicate``: the chapter again on other seeds)."""
    ref = study.tables[0].config
    by_data: dict[str, dict[str, RunGroup]] = {}
    configs: dict[str, TrainConfig] = {}
    for name, group in declared.items():
        full = ref.replace(**dict(group.changes))
        cfg = configs.setdefault(full.dataset, full)
        by_data.setdefault(cfg.dataset, {})[name] = _rebased(group, ref, cfg)
    out: dict[str, Any] = {}
    for dataset, gs in by_data.items():
        done = train_runs(
            gs,
            configs[dataset],
            folder,
            splits=(splits or {}).get(dataset),
            data_root=data_root,
            retrain=retrain,
            seed_offset=seed_offset,
        )
        out.update(done.runs)
    return kept_weights(RunSet({name: out[name] for name in declared}))


def _rebased(group: RunGroup, own: TrainConfig, base: TrainConfig) -> RunGroup:
    """``group`` (its changes relative to ``own``) with its changes relative to ``base``."""
    cfg = own.replace(**dict(group.changes))
    c, b = cfg.to_dict(), base.to_dict()
    changes = {k: getattr(cfg, k) for k in c if c[k] != b.get(k)}
    return dataclasses.replace(group, changes=changes)


def kept_metrics(run: Run) -> dict[str, float]:
    """``run``'s test metrics of its kept weights with the paper's geometric NMI (Eq. 9,
    ``metrics_geometric``, computed after training); at another epoch than the kept one (inside
    :func:`dmlnb.selection.selected_on`) the record's metrics there (the loop's arithmetic NMI)."""
    best, kept = run.record.best, kept_selection(run.record)
    if best is not None and kept is not None and best["epoch"] != kept["epoch"]:
        return best["metrics"]
    return run.extras["metrics_geometric"]


@dataclass
class KeptRun(Run):
    """A run as the chapter shows it: :attr:`metrics` of its kept weights with the paper's
    geometric NMI (:func:`kept_metrics`), :attr:`recorded_metrics` as the loop recorded them at
    the epoch the record shows; its ``method``, ``table`` and ``seed`` from its record."""

    @property
    def metrics(self) -> dict[str, float]:
        return kept_metrics(self)

    @property
    def recorded_metrics(self) -> dict[str, float]:
        return self.record.best["metrics"]  # type: ignore[index]

    @property
    def spec(self) -> dict[str, Any]:
        return self.record.data["spec"]

    @property
    def method(self) -> str:
        return str(self.spec["method"])

    @property
    def table(self) -> str:
        return str(self.spec["table"])

    @property
    def seed(self) -> int:
        return int(self.record.config["seed"])


def _recast(runs: RunSet, kind: type[Run]) -> RunSet:
    """``runs`` with every run made again as ``kind`` (a run shared by two groups stays one)."""
    made: dict[int, Run] = {}

    def recast(r: Run) -> Run:
        if id(r) not in made:
            made[id(r)] = kind(r.name, r.record, r.model, r.trained)
        return made[id(r)]

    return RunSet({g: {k: recast(r) for k, r in rs.items()} for g, rs in runs.runs.items()})


def kept_weights(runs: RunSet) -> RunSet:
    """``runs`` with every run a :class:`KeptRun` (a run shared by two groups stays one)."""
    return _recast(runs, KeptRun)


def recorded(runs: RunSet) -> RunSet:
    """``runs`` with every run a plain :class:`dmlnb.runs.Run`: its metrics as the loop recorded
    them at the epoch its record shows (what :func:`dmlnb.chapter.evaluate_both_ways` moves), the
    NMI with the arithmetic normalisation."""
    return _recast(runs, Run)


def by_role(
    runs: RunSet, study: Study
) -> tuple[
    dict[str, dict[str, list[Run]]], dict[float, list[Run]], dict[str, list[Run]], list[Run]
]:
    """The runs as the chapter's tables read them: ``{table: {method: [runs by seed]}}``, the
    margin ablation ``{gamma: [runs]}``, the other forms of Algorithm 2 ``{form: [runs]}`` and
    the N-pairs runs on paired batches."""

    def seeds(group: str, label: str) -> list[Run]:
        return [runs.run(group, label, s) for s in runs.seeds(group, label)]

    tables = {
        t.table: {m: seeds(t.table, m) for m in METHODS}
        for t in study.tables
        if t.table in runs.runs
    }
    ablation = {
        g: seeds(f"gamma {g:g}", "clustering")
        for g in study.gamma_ablation
        if f"gamma {g:g}" in runs.runs
    }
    variants = {
        a: seeds(f"refinement {a}", "clustering")
        for a in study.refinements
        if f"refinement {a}" in runs.runs
    }
    paired = seeds("paired", "npair") if "paired" in runs.runs else []
    return tables, ablation, variants, paired
