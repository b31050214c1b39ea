"""The Easy Positive chapter's runs declared as data (:mod:`dmlnb.chapter`).

* :data:`METHODS`: every method the chapter trains, a registered call (:mod:`dmlnb.methods`)
  with every argument; :func:`methods` applies a reader's changes to them (they enter the
  fingerprints of those runs);
* :func:`declare`: the runs of a :class:`~dmlnb.experiments.easy_positive.design.Study`, as
  :class:`Batch` values (a base configuration and its :class:`~dmlnb.chapter.RunGroup` values):
  Figure 4's grid (one group per group size ``"n<n>"``, N-pair's own ``"N-pair"``), Table 1's
  cells, EPSHN's two semi-hard rules (``"semihard"``: labels ``"strict"``, ``"inclusive"``) and,
  at the paper profile, Tables 2 and 3 (:func:`paper_batches`);
* :class:`AsRecorded`: the procedure of every run (the default training), naming its folder and
  writing its specification as the committed records hold them, so they reload.

Names of methods: ``"EP"``, ``"EPHN"``, ``"EPSHN"``, ``"HP"``, ``"HPHN"``, ``"BA"`` (the
variants of :func:`dmlnb.losses.easy_positive_loss`), ``"N-pair"`` (the NCA loss with one positive
per anchor: the paper notes that EP, HP and BA all reduce to it at group size 2, so it is run as
EP with ``n = 2``), ``"triplet"`` (FaceNet semi-hard triplet loss) and ``"Proxy-NCA"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from dmlnb.chapter import Procedure, RunGroup, RunSpec
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.losses.easy_positive import SEMIHARD_RULES, VARIANTS
from dmlnb.methods import MethodCall, call
from dmlnb.profiles import TrainConfig

__all__ = [
    "MINING_METHODS",
    "FIGURE_METHODS",
    "TSNE_METHODS",
    "TABLE1_METHODS",
    "ALL_METHODS",
    "EASY",
    "HARD",
    "TIGHT",
    "METHODS",
    "methods",
    "canonical_method",
    "AsRecorded",
    "Batch",
    "declare",
    "paper_batches",
    "figure4_side",
    "table1_side",
    "table1_groups",
    "describe",
]

#: The six mining strategies of Figure 4 (Sec. 3-4).
MINING_METHODS: tuple[str, ...] = ("EP", "EPHN", "EPSHN", "HP", "HPHN", "BA")
#: The six embeddings of Figures 2, 3 and 5 (BA, HP and N-pair on the paper's left side).
FIGURE_METHODS: tuple[str, ...] = ("BA", "HP", "N-pair", "EP", "EPHN", "EPSHN")
#: The two embeddings of Figure 6 (t-SNE maps).
TSNE_METHODS: tuple[str, ...] = ("N-pair", "EPSHN")
#: The rows of Table 1.
TABLE1_METHODS: tuple[str, ...] = ("triplet", "N-pair", "Proxy-NCA", "EPSHN")
ALL_METHODS: tuple[str, ...] = (*MINING_METHODS, "N-pair", "triplet", "Proxy-NCA")
#: The easy-positive variants, the hard ones of the key comparison, and the embeddings that pull
#: whole classes together (Figures 2, 3 and 5).
EASY: tuple[str, ...] = ("EP", "EPHN", "EPSHN")
HARD: tuple[str, ...] = ("HP", "HPHN", "BA")
TIGHT: tuple[str, ...] = ("BA", "HP", "N-pair")

#: Every method the chapter trains, with every argument (the registered defaults where none is
#: given): the mining variants (NCA, temperature 0.1; EPSHN with the paper's strict semi-hard
#: rule, Sec. 3.1), N-pair (the EP loss, run at n = 2: one positive per anchor, every other image
#: of the batch a negative, the N-pair loss in the paper's NCA form), the semi-hard triplet loss
#: (margin 0.2, Euclidean distance on the unit sphere) and Proxy-NCA (scale 9: embeddings and
#: proxies of norm 3).
METHODS: dict[str, MethodCall] = {
    **{
        v: call("easy-positive", name=v, **({"semihard": "strict"} if v == "EPSHN" else {}))
        for v in MINING_METHODS
    },
    "N-pair": call("easy-positive", name="EP"),
    "triplet": call("triplet", margin=0.2, mining="semihard"),
    "Proxy-NCA": call("proxy-nca", scale=9.0),
}


def methods(changes: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, MethodCall]:
    """:data:`METHODS` with a reader's ``changes`` to their arguments (``{"EPSHN":
    {"temperature": 0.05}}``), which enter those runs' fingerprints."""
    unknown = sorted(set(changes or {}) - set(METHODS))
    if unknown:
        raise KeyError(f"unknown method(s) {unknown}; the chapter's methods are {list(METHODS)}")
    return {k: c.replace(**dict((changes or {}).get(k, {}))) for k, c in METHODS.items()}


def canonical_method(method: str, n: int) -> str:
    """``"N-pair"`` for EP, HP and BA at group size 2 (one positive per anchor: the three losses
    are the same function, Sec. 6.1), else ``method``."""
    if method not in ALL_METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {list(ALL_METHODS)}")
    return "N-pair" if n == 2 and method in ("EP", "HP", "BA") else method


def _method_of(label: str) -> str:
    """The method a run label names: a semi-hard rule's label (``"strict"``, ``"inclusive"``)
    is EPSHN's."""
    return "EPSHN" if label in SEMIHARD_RULES else label


@dataclass(frozen=True)
class AsRecorded(Procedure):
    """The default training (the configured network, the loss alone), with the folder names and
    specification entries of the chapter's records: ``<dataset>-<model>-d<dim>-<method>-n<n>-
    seed<seed>`` (``-semihard-inclusive`` for EPSHN under the authors' rule), and besides the
    method's ``"factory"`` the method's name and the arguments the chapter named before the
    registry (EPSHN's ``semihard``, the triplet's ``triplet_margin``, Proxy-NCA's
    ``proxy_scale``), each read from the call. It has no field: nothing of it is a setting."""

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        out: dict[str, Any] = {"method": _method_of(label)}
        args = call.args
        if call.name == "easy-positive" and VARIANTS[args["name"]][1] == "semihard":
            out["semihard"] = args["semihard"]
        if call.name == "triplet":
            out["triplet_margin"] = args["margin"]
        if call.name == "proxy-nca":
            out["proxy_scale"] = args["scale"]
        return out

    def run_name(self, label: str, seed: int, changes: tuple[tuple[str, Any], ...]) -> str:
        c = dict(changes)
        rule = f"-semihard-{label}" if label in SEMIHARD_RULES and label != "strict" else ""
        return (
            f"{c['dataset']}-{c['model']}-d{c['embedding_dim']}-{_method_of(label)}"
            f"-n{c['m_per_class']}-seed{seed}{rule}"
        )


@dataclass(frozen=True)
class Batch:
    """Groups of runs on one base configuration (:func:`dmlnb.chapter.train_runs` loads its
    dataset once)."""

    config: TrainConfig
    groups: dict[str, RunGroup]

    def run_config(self, group: str, label: str, seed: int) -> TrainConfig:
        """The resolved configuration of one declared run."""
        g = self.groups[group]
        spec = RunSpec(label, g.methods[label], seed, tuple(g.changes.items()), g.procedure)
        return spec.config(self.config)


def _group(
    config: TrainConfig, calls: Mapping[str, MethodCall], seeds: Sequence[int], n: int, **more: Any
) -> RunGroup:
    changes = {
        "dataset": config.dataset,
        "model": config.model,
        "embedding_dim": config.embedding_dim,
        "m_per_class": int(n),
        **more,
    }
    return RunGroup(dict(calls), tuple(seeds), changes, AsRecorded())


def figure4_side(label: str, n: int) -> tuple[str, str]:
    """(group, label) of Figure 4's runs of ``label`` at group size ``n`` (at n = 2, EP, HP and
    BA are the N-pair runs)."""
    m = canonical_method(label, n)
    return ("N-pair", "N-pair") if m == "N-pair" else (f"n{n}", m)


def table1_side(label: str, cell: int = 0, cells: int = 1) -> tuple[str, str]:
    """(group, label) of Table 1's runs of ``label`` in cell ``cell`` of ``cells``."""
    prefix = "table1" if cells == 1 else f"table1 cell {cell}"
    return (f"{prefix} {label}" if label in ("N-pair", "Proxy-NCA") else prefix), label


def table1_groups(
    study: Study, cell: TrainConfig, index: int, calls: Mapping[str, MethodCall]
) -> dict[str, RunGroup]:
    """Table 1's groups of one (dataset, backbone) cell: triplet and EPSHN at the key group size,
    N-pair at n = 2, Proxy-NCA at the key group size with its proxies at ``proxy_lr_factor``
    times the learning rate."""
    key, seeds, cells = study.key_group_size, study.table1_seeds, len(study.table1)
    pick = lambda *ms: {m: calls[m] for m in ms}  # noqa: E731
    lr = {"loss_lr": cell.lr * study.proxy_lr_factor}
    return {
        table1_side("EPSHN", index, cells)[0]: _group(cell, pick("triplet", "EPSHN"), seeds, key),
        table1_side("N-pair", index, cells)[0]: _group(cell, pick("N-pair"), seeds, 2),
        table1_side("Proxy-NCA", index, cells)[0]: _group(
            cell, pick("Proxy-NCA"), seeds, key, **lr
        ),
    }


def declare(study: Study, changes: Mapping[str, Mapping[str, Any]] | None = None) -> list[Batch]:
    """Every run of ``study`` (but Tables 2 and 3, :func:`paper_batches`), with a reader's
    ``changes`` to the methods' arguments: Figure 4's grid, EPSHN under each semi-hard rule at the
    key group size, and Table 1's cells (in the first batch when a cell is the study's
    configuration, so their shared runs are one run)."""
    calls, cfg, key = methods(changes), study.config, study.key_group_size
    groups: dict[str, RunGroup] = {}
    for n in study.group_sizes:
        labels = {canonical_method(m, n) for m in MINING_METHODS} - {"N-pair"}
        picked = {m: calls[m] for m in MINING_METHODS if m in labels}
        groups[f"n{n}"] = _group(cfg, picked, study.seeds_for("", n), n)
    groups["N-pair"] = _group(cfg, {"N-pair": calls["N-pair"]}, study.seeds, 2)
    rules = {rule: calls["EPSHN"].replace(semihard=rule) for rule in SEMIHARD_RULES}
    groups["semihard"] = _group(cfg, rules, study.seeds, key)
    batches = [Batch(cfg, groups)]
    for i, cell in enumerate(study.table1):
        t1 = table1_groups(study, cell, i, calls)
        if cell == cfg:
            groups.update(t1)
        else:
            batches.append(Batch(cell, t1))
    return batches


def paper_batches(
    study: Study, runnable: Sequence[bool], changes: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Batch]:
    """Tables 2 and 3 at the paper profile: EPSHN on each row of ``study.table2 + study.table3``
    that ``runnable`` marks (a GPU and the data), with every seed of ``study.paper_seeds``; one
    batch per row, its group named ``"table2 <column>"`` or ``"table3"``. None at another
    profile."""
    if study.profile != "paper":
        return []
    from dmlnb.experiments.easy_positive.reported import table2_name

    rows = [*study.table2, *study.table3]
    if len(runnable) != len(rows):
        raise ValueError(f"{len(runnable)} flags for the {len(rows)} runs of Tables 2 and 3")
    epshn = {"EPSHN": methods(changes)["EPSHN"]}
    out = []
    for i, row in enumerate(rows):
        if runnable[i]:
            name = f"table2 {table2_name(row.dataset)}" if i < len(study.table2) else "table3"
            out.append(Batch(row, {name: _group(row, epshn, study.paper_seeds, row.m_per_class)}))
    return out


def describe(study: Study, batches: Sequence[Batch]) -> str:
    """One paragraph stating the design (printed by the notebook)."""
    c = study.config
    names = {s.name for b in batches for g in b.groups.values() for s in g.runs()}
    holdout = c.dataset_options.get("validation")
    seeds = (
        f"seeds {list(study.seeds)} at every group size"
        if study.grid_seeds == study.seeds
        else f"seeds {list(study.seeds)} at n = {study.key_group_size} (and N-pair, n = 2), "
        f"seed(s) {list(study.grid_seeds)} elsewhere"
    )
    where = (
        "every run keeps its best epoch on validation classes held out of the training "
        f"classes (validation={holdout!r})"
        if holdout is not None
        else "every run keeps its best epoch on the test classes (the papers' protocol)"
    )
    return (
        f"profile {study.profile}: {c.dataset} ({c.dataset_options or 'default options'}), "
        f"{c.model} (width {c.width}) -> {c.embedding_dim}-d, batch {c.batch_size}, "
        f"{c.optimizer} lr {c.lr:g}, {c.epochs} epochs"
        + (f" of {c.steps_per_epoch} steps" if c.steps_per_epoch else "")
        + f"; group sizes n = {list(study.group_sizes)}; {seeds}; Table 1 on {len(study.table1)} "
        f"(dataset, backbone) cell(s) with seeds {list(study.table1_seeds)}; EPSHN with the "
        f"strict semi-hard rule, the inclusive one beside it at n = {study.key_group_size} with "
        f"seeds {list(study.seeds)}; {where}; {len(names)} distinct training runs."
    )
