"""The PROFS chapter's runs, declared once as data (:class:`dmlnb.chapter.RunGroup`) and trained
or reloaded by :func:`dmlnb.chapter.train_runs`.

:func:`groups` declares every run of the chapter at a profile: Table 1 and Table 2 (a group per
variant, and per Table 2 row, whose setup differs), the M and lambda sweeps, the HNCM regime, the
proximal term on the backbone only and the component ablation, each a :class:`RunGroup` of
methods (the rows' registered losses, :data:`~dmlnb.experiments.profs.losses.LOSS_METHODS`) x
seeds trained by a :class:`~dmlnb.experiments.profs.procedure.ProfsProcedure`. Runs that several
sections share (Table 1's PROFS run is the component ablation's last step) have one fingerprint
and train once. The functions below read the :class:`~dmlnb.chapter.RunSet` back by section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dmlnb.chapter import RunGroup, RunSet, SetAside, Side
from dmlnb.experiments.profs.losses import LOSS_METHODS, TABLE2_LOSSES, VARIANTS, collapse_level
from dmlnb.experiments.profs.procedure import ProfsProcedure, loss_key
from dmlnb.experiments.profs.profiles import period_for, table2_config, table_rows
from dmlnb.methods import MethodCall
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.reporting import collapsed
from dmlnb.runs import Run

__all__ = [
    "COMPONENT_STEPS",
    "STEP_WORDS",
    "groups",
    "methods",
    "is_collapsed",
    "is_degenerate",
    "first_evaluation",
    "DEGENERATE_RULE",
    "COLLAPSED",
    "COLLAPSE",
    "COLLAPSE_DROPPED",
    "table_side",
    "component_side",
    "runset_of",
    "side_of",
    "table_sides",
    "component_sides",
    "sweep_points",
    "section_runs",
]

#: The component ablation's steps (issue #17): PROFS's ingredients added one at a time, each a
#: ``PROFS`` procedure's ``pairs`` and ``lam`` (``lam=None``: the profile's ``lambda``).
#:
#: * ``"representatives"``: PROFS's batches (one representative per class kept ``M`` steps, as the
#:   first of its group) with every pair of the loss and no proximal term;
#: * ``"+ pair restriction"``: the pairs restricted to those anchored at a
#:   representative (Sec. 5.3);
#: * ``"+ proximal term"``: ``lambda/2 ||theta - theta_k||^2`` added: Table 1's PROFS run.
COMPONENT_STEPS: dict[str, dict[str, Any]] = {
    "representatives": {"pairs": "all", "lam": 0.0},
    "+ pair restriction": {"pairs": None, "lam": 0.0},
    "+ proximal term": {"pairs": None, "lam": None},
}


#: How the chapter names each step of the component ablation to a reader.
STEP_WORDS = {
    "representatives": "PROFS's batches only",
    "+ pair restriction": "PROFS's batches and pair restriction (lambda = 0)",
    "+ proximal term": "PROFS's batches, pair restriction and proximal term",
}


def methods(
    rows: tuple[str, ...], changes: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, MethodCall]:
    """Each row's registered loss (:data:`LOSS_METHODS`), with a reader's ``changes`` to its
    arguments (``{"Contrastive-Hard": {"neg_margin": 0.5}}``: they enter those runs'
    fingerprints)."""
    changes = changes or {}
    unknown = set(changes) - set(rows)
    if unknown:
        raise ValueError(f"changes name {sorted(unknown)}, not rows trained here ({list(rows)})")
    return {row: LOSS_METHODS[loss_key(row)].replace(**dict(changes.get(row, {}))) for row in rows}


def _variant(variant: str, period: int, lam: float, mode: str, **kw: Any) -> ProfsProcedure:
    if variant == "plain":
        return ProfsProcedure("plain", period=None, lam=None)
    hncm = mode if variant == "PROFS-HNCM" else "greedy"
    return ProfsProcedure(variant, period=period, lam=lam, hncm_mode=hncm, **kw)


def groups(
    config: TrainConfig,
    settings: Mapping[str, Any],
    num_classes: int,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RunGroup]:
    """Every run of the chapter at ``config`` and ``settings``
    (:func:`~dmlnb.experiments.profs.profiles.experiment_settings`) on ``num_classes`` training
    classes (``M = ceil(rho I L / B)`` depends on them), with a reader's ``changes`` to the
    losses' arguments. Group names: ``table1/<variant>``, ``table2/<row>/<variant>``,
    ``M/<M>``, ``lambda/<lambda>``, ``regime/<variant>``, ``backbone``,
    ``components/<step>``; a section a profile does not run has no group."""
    rho, lam, mode = settings["rho"], settings["lam"], settings.get("hncm_mode", "greedy")
    batch = {"batch_size": config.batch_size}  # every group names it: the folder holds it
    M = period_for(config, num_classes, rho)
    calls = methods(tuple(dict.fromkeys([*table_rows(settings, 1), *table_rows(settings, 2),
                                         *settings["ablation_losses"], settings["lambda_loss"],
                                         settings["regime_loss"]])), changes)  # fmt: skip
    pick = lambda rows: {r: calls[r] for r in rows}  # noqa: E731
    out: dict[str, RunGroup] = {}

    def add(name: str, rows: Any, seeds: Any, procedure: ProfsProcedure, **change: Any) -> None:
        if rows and seeds:
            out[name] = RunGroup(pick(rows), tuple(seeds), {**batch, **change}, procedure)

    for v in VARIANTS:
        add(f"table1/{v}", table_rows(settings, 1), settings["seeds"], _variant(v, M, lam, mode))
    for row in table_rows(settings, 2):
        setup = dict(settings.get("table2_setups", {}).get(row, {}))
        m2 = period_for(table2_config(config, row, settings), num_classes, rho)
        for v in VARIANTS:
            proc = _variant(v, m2, lam, mode)
            add(f"table2/{row}/{v}", (row,), settings["table2_seeds"], proc, **setup)
    for m in sorted(set(settings["m_grid"]) | {M}) if settings["ablation_losses"] else ():
        proc = _variant("PROFS", m, lam, mode)
        add(f"M/{m}", settings["ablation_losses"], settings["sweep_seeds"], proc)
    for value in settings["lambda_grid"]:
        proc = _variant("PROFS", M, value, mode)
        add(f"lambda/{value:g}", (settings["lambda_loss"],), settings["sweep_seeds"], proc)
    if settings["regime_batch"]:
        small = config.replace(batch_size=settings["regime_batch"])
        m_small = period_for(small, num_classes, rho)
        for v in ("PROFS", "PROFS-HNCM"):
            proc = _variant(v, m_small, lam, mode)
            add(f"regime/{v}", (settings["regime_loss"],), settings["regime_seeds"], proc,
                batch_size=small.batch_size)  # fmt: skip
    proc = _variant("PROFS", M, lam, mode, proximal_params="backbone")
    add("backbone", ("Contrastive-Hard",), settings["backbone_seeds"], proc)
    for step, kw in COMPONENT_STEPS.items() if settings.get("component_ablation") else ():
        proc = _variant(
            "PROFS", M, lam if kw["lam"] is None else kw["lam"], mode, pairs=kw["pairs"]
        )
        add(f"components/{step}", settings["component_losses"], settings["component_seeds"], proc)
    return out


def is_collapsed(run: Run) -> bool:
    """Whether ``run``'s training loss is pinned at a collapsed embedding's value by the book's
    criterion (:func:`dmlnb.reporting.collapsed`): within 2.5% of its loss's value on a collapsed
    embedding (:func:`~dmlnb.experiments.profs.losses.collapse_level`) over its last two epochs;
    never for a loss without such a value. A pinned loss alone is no collapse: a batch-hard
    triplet loss sits at its margin whenever each anchor's hardest positive and hardest negative
    are equally far, while the embedding still separates classes (:func:`is_degenerate`)."""
    data = run.record.data
    level = collapse_level(data["spec"]["loss"], int(data["config"]["embedding_dim"]))
    return level is not None and collapsed(run.record.training_losses(), level)


def first_evaluation(record: RunRecord) -> dict[str, Any]:
    """The first history row of ``record`` after training began that holds test metrics."""
    return next(h for h in record.data["history"] if h.get("epoch", 0) > 0 and h.get("metrics"))


#: The chapter's criterion for a run that cannot exercise a claim (:func:`is_degenerate`), in
#: one sentence, as the chapter states it.
DEGENERATE_RULE = (
    "a run is set aside only when its embedding is degenerate: its training loss is pinned at a "
    "collapsed embedding's value over its last two epochs *and* its test R@1 at the kept epoch "
    "is no higher than at its first evaluation (a pinned loss with a rising R@1 is a network "
    "that learns, and is judged)"
)


def is_degenerate(run: Run) -> bool:
    """Whether ``run`` is degenerate by the chapter's criterion (:data:`DEGENERATE_RULE`): its
    loss is pinned (:func:`is_collapsed`) and its test R@1 at the kept epoch did not rise above
    the one at its first evaluation."""
    if not is_collapsed(run):
        return False
    first = float(first_evaluation(run.record)["metrics"]["R@1"])
    return float(run.metrics["R@1"]) <= first


#: Why a comparison with a degenerate side (:func:`is_degenerate`) is not tested at this scale.
COLLAPSED = (
    "degenerate runs (training loss pinned at a collapsed embedding's value over the last two "
    "epochs, and test R@1 no higher than at the first evaluation)"
)
#: The chapter's guard (:class:`dmlnb.chapter.SetAside`): a side holding a degenerate run is not
#: tested, its measured effect kept beside the verdict (the tables, the per-loss comparisons).
COLLAPSE = SetAside(degenerate=is_degenerate, what=COLLAPSED)
#: The same guard without the measured effect (a claim on one comparison, a step of the
#: component ablation).
COLLAPSE_DROPPED = SetAside(degenerate=is_degenerate, what=COLLAPSED, keep_effect=False)


def table_side(row: str, variant: str) -> Side:
    """The side of ``row``'s ``variant`` in Table 1 (group ``table1/<variant>``) or, for a row of
    Table 2 (:data:`TABLE2_LOSSES`), in its own group (``table2/<row>/<variant>``)."""
    group = f"table2/{row}/{variant}" if row in TABLE2_LOSSES else f"table1/{variant}"
    return Side(group, row, name=f"{row} {variant}")


def component_side(row: str, step: str) -> Side:
    """The side of ``row`` at ``step`` of the component ablation (``"plain"``: Table 1's)."""
    if step == "plain":
        return table_side(row, "plain")
    return Side(f"components/{step}", row, name=f"{row} with {STEP_WORDS[step]}")


def side_of(key: Any) -> Side:
    """The :class:`Side` :func:`runset_of` files the runs of ``key`` under: ``(row, variant)``
    -> group ``variant``, label ``row``; any other key is its own group and label."""
    return Side(key[1], key[0]) if isinstance(key, tuple) else Side(str(key), str(key))


def runset_of(sides: Mapping[Any, Sequence[Run]]) -> RunSet:
    """Runs by side (``(row, variant)`` -> the runs over seeds, or ``step`` -> runs) as a
    :class:`~dmlnb.chapter.RunSet` (:func:`side_of`; each run under the seed of its
    configuration), so that the chapter layer's tests judge them."""
    out: dict[str, dict[tuple[str, int], Run]] = {}
    for key, rs in sides.items():
        side = side_of(key)
        for r in rs:
            out.setdefault(side.group, {})[side.label, int(r.record.data["config"]["seed"])] = r
    return RunSet(out)


def _side(runs: RunSet, group: str, label: str) -> list[Run]:
    return [runs.run(group, label, s) for s in runs.seeds(group, label)]


def table_sides(runs: RunSet, table: int = 1) -> dict[tuple[str, str], list[Run]]:
    """Table ``table``'s runs: ``(row, variant)`` -> the runs over seeds, row by row, each row's
    variants in the order of :data:`VARIANTS` (empty: not run)."""
    out: dict[tuple[str, str], list[Run]] = {}
    for name, group in runs.runs.items():
        parts = name.split("/")
        if parts[0] == f"table{table}":
            for row in dict.fromkeys(label for label, _ in group):
                out[row, parts[-1]] = _side(runs, name, row)
    rows = dict.fromkeys(row for row, _ in out)
    return {(r, v): out[r, v] for r in rows for v in VARIANTS if (r, v) in out}


def component_sides(runs: RunSet) -> dict[tuple[str, str], list[Run]]:
    """The component ablation: ``(row, step)`` -> the runs over seeds (empty: not run)."""
    out = {}
    for step in COMPONENT_STEPS:
        name = f"components/{step}"
        for row in dict.fromkeys(label for label, _ in runs.runs.get(name, {})):
            out[row, step] = _side(runs, name, row)
    return out


def sweep_points(runs: RunSet, swept: str) -> dict[str, dict[float, list[float]]]:
    """A sweep (``swept``: ``"M"`` or ``"lambda"``): loss -> swept value -> per-seed R@1."""
    out: dict[str, dict[float, list[float]]] = {}
    for name, group in runs.runs.items():
        kind, _, value = name.partition("/")
        if kind == swept:
            for row in dict.fromkeys(label for label, _ in group):
                x = int(value) if swept == "M" else float(value)
                out.setdefault(row, {})[x] = runs.values(name, row, "R@1")
    return {row: dict(sorted(pts.items())) for row, pts in out.items()}


def section_runs(runs: RunSet, prefix: str) -> dict[str, list[Run]]:
    """The runs of the groups named ``prefix`` or ``prefix/<x>``: ``x`` (or ``prefix``) -> the
    runs over seeds of its one loss (``"regime"``: variant -> runs; ``"backbone"``)."""
    out = {}
    for name, group in runs.runs.items():
        if name == prefix or name.startswith(prefix + "/"):
            for row in dict.fromkeys(label for label, _ in group):
                out[name.rpartition("/")[2]] = _side(runs, name, row)
    return out
