"""Algorithm 1 of Dutta, Harandi and Sekhar (2021): stochastic SSDML over random partitions.

::

    initialise θ_z, L
    for each partition p (a random chunk X_U^(p) of the unlabelled data, reshuffled every sweep):
        z = f_θ(X_L ∪ X_U^(p))                      (detached, eval mode)
        units = objective.prepare(z, labels)        (graph, propagation, mining, ... once)
        fix θ_z, learn L:   ``metric_epochs`` passes of mini-batches of units on the fixed z
        fix L, learn θ_z:   ``epochs_per_partition`` epochs of mini-batches of units (SGD/Adam,
                            images re-embedded with gradients)

It works with any :class:`~dmlnb.ssdml.base.PartitionObjective` (the proposed method and the five
deep baselines). One *epoch* is one pass over the partition's units (``config.batch_size`` units
per mini-batch; the paper uses 100 triplets, 10 epochs per partition, 50 epochs in total and keeps
the best model). The network is trained with ``config.optimizer`` / ``config.lr``; the metric with
Adam at ``config.loss_lr`` (default ``config.lr``).

The outer loop is not a second training loop: :class:`PartitionUnits` is the batch sampler and
hook of :func:`dmlnb.training.train`, which does the steps, evaluation, records, checkpoints and
resumption as for every other run of the book. Per partition it builds the units and learns
``L`` (at the partition's first epoch); per epoch it yields mini-batches of units as the pool
indices of their distinct images, and :class:`UnitLoss` scores them.

Records: one history row per epoch (``loss``, ``partition``, timings, ``metrics`` every
``config.eval_every`` epochs, of the learned embedding ``Lᵀ z`` with Euclidean distances, the
metric the method learns); a partition's first row also holds its ``units``, ``metric_loss``,
``prepare_seconds`` and the ``diagnose`` entries. A run interrupted anywhere resumes where it
stopped and ends exactly where an uninterrupted run would on the same device (every random draw
depends only on ``(seed, partition)`` or ``(seed, epoch)``; the checkpoint keeps the partition's
embedding to rebuild the same units).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import torch
from torch import Tensor, nn
from torch.utils.data import ConcatDataset, Dataset, Subset

from dmlnb.data.base import InMemoryDataset
from dmlnb.evaluation import compute_embeddings
from dmlnb.hooks import Hook, TrainState
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.samplers import stream_generator
from dmlnb.ssdml.base import PartitionObjective
from dmlnb.training import check_dataset_labels, train

__all__ = [
    "PartitionSchedule",
    "run_spec",
    "TrainingPool",
    "partition_chunk",
    "partition_indices",
    "unlabelled_reached",
    "embed",
    "UnitLoss",
    "PartitionUnits",
    "train_ssdml",
]


@dataclass(frozen=True)
class PartitionSchedule:
    """How Algorithm 1 walks over the unlabelled data.

    Attributes:
        partition_size: ``N_p`` unlabelled examples per partition (paper: 9,000); the whole pool
            when it is larger than the pool (the paper's CUB / Cars runs use no partitions).
        epochs_per_partition: network epochs on one partition's units (paper: 10).
        metric_epochs: passes of metric-only updates (θ fixed) per partition; the paper runs 10
            iterations of Manopt's conjugate gradient on ``L`` here.
        max_units: if set, each partition trains on at most this many of its units, drawn
            uniformly without replacement (seeded by partition); ``None`` (the paper): all of them.
            Lets methods with very many units (all labelled pairs) run with the same number of
            units per epoch as the others.
    """

    partition_size: int = 9000
    epochs_per_partition: int = 10
    metric_epochs: int = 1
    max_units: int | None = None

    def __post_init__(self) -> None:
        for name in ("partition_size", "epochs_per_partition"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.metric_epochs < 0:
            raise ValueError(f"metric_epochs must be >= 0, got {self.metric_epochs}")
        if self.max_units is not None and self.max_units < 1:
            raise ValueError(f"max_units must be >= 1 or None, got {self.max_units}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_spec(schedule: PartitionSchedule, method: dict[str, Any]) -> dict[str, Any]:
    """The specification stored in an SSDML run record (:mod:`dmlnb.runs`): the partition
    ``schedule`` and the ``method``'s settings."""
    return {"schedule": schedule.to_dict(), "method": dict(method)}


class TrainingPool:
    """Labelled examples (indices ``0..N_L-1``) followed by the unlabelled ones, one index space:
    :attr:`dataset` as training reads it (a file-backed set's augmentation), :meth:`for_mining`
    with the sets' evaluation preprocessing (``for_evaluation``), which the partitions' embeddings
    (the graph and the mining) read."""

    def __init__(self, labelled: Dataset, unlabelled: Dataset | None) -> None:
        y_l = torch.as_tensor(labelled.labels).long().cpu()  # type: ignore[attr-defined]
        if (y_l < 0).any():
            raise ValueError(
                "the labelled set holds labels < 0; unlabelled data goes in `unlabelled`"
            )
        n_u = 0 if unlabelled is None else len(unlabelled)  # type: ignore[arg-type]
        self.num_labelled, self.num_unlabelled = len(y_l), n_u
        self.labels = torch.cat([y_l, torch.full((n_u,), -1, dtype=torch.long)])  # (N_L + N_U,)
        parts = [labelled] if unlabelled is None else [labelled, unlabelled]
        if all(isinstance(d, InMemoryDataset) for d in parts):
            images = torch.cat([d.images.cpu() for d in parts])  # type: ignore[attr-defined]
            self.dataset: Dataset = InMemoryDataset(
                images, self.labels
            )  # no augmentation: also for mining
            self.mining: Dataset = self.dataset
        else:
            self.dataset = ConcatDataset(parts)
            self.dataset.labels = self.labels  # type: ignore[attr-defined]  # -1: unlabelled
            self.mining = ConcatDataset([d.for_evaluation() for d in parts])  # type: ignore[attr-defined]

    def for_mining(self, idx: Tensor) -> Dataset:
        """The items ``idx`` ``(N,)`` with the evaluation preprocessing (no random crop or flip)."""
        if isinstance(self.mining, InMemoryDataset):
            return self.mining.subset(idx)
        return Subset(self.mining, idx.tolist())


def embed(
    network: nn.Module,
    metric: nn.Module | None,
    dataset: Dataset,
    batch_size: int,
    device: torch.device | None = None,
) -> tuple[Tensor, Tensor]:
    """``(embeddings (N, l), labels (N,))``: ``Lᵀ f_θ(x)`` (``metric=None``: ``f_θ(x)``) on CPU."""
    model = network if metric is None else nn.Sequential(network, metric)
    return compute_embeddings(model, dataset, batch_size=batch_size, device=device)


def partition_chunk(num_unlabelled: int, schedule: PartitionSchedule, seed: int, p: int) -> Tensor:
    """Unlabelled indices ``(N_p,)`` (``0..N_U-1``, sorted) of partition ``p``: chunk ``p mod n`` of
    sweep ``p // n`` of the shuffled unlabelled pool, ``n = max(1, ⌊N_U / N_p⌋)`` chunks per sweep.
    Each sweep reshuffles, so the last ``N_U mod N_p`` of a sweep's order are not drawn in it.
    It depends only on ``(N_U, N_p, seed, p)``: the draws of a run can be replayed without training
    (:func:`unlabelled_reached`)."""
    size = min(schedule.partition_size, num_unlabelled)
    if size == 0:
        return torch.zeros(0, dtype=torch.long)
    chunks = max(1, num_unlabelled // size)
    order = torch.randperm(
        num_unlabelled, generator=stream_generator(seed, "ssdml-sweep", p // chunks)
    )  # (N_U,)
    return order[(p % chunks) * size : (p % chunks + 1) * size].sort().values  # (N_p,)


def partition_indices(pool: TrainingPool, schedule: PartitionSchedule, seed: int, p: int) -> Tensor:
    """Pool indices ``(N_L + N_p,)`` of partition ``p``: all labelled examples, then the
    unlabelled ones of :func:`partition_chunk` (offset by ``N_L``)."""
    labelled = torch.arange(pool.num_labelled)
    return torch.cat(
        [labelled, pool.num_labelled + partition_chunk(pool.num_unlabelled, schedule, seed, p)]
    )


def unlabelled_reached(
    num_unlabelled: int, schedule: PartitionSchedule, seed: int, partitions: Iterable[int]
) -> Tensor:
    """The distinct unlabelled indices ``(M,)`` (sorted) that the ``partitions`` of a run with
    ``seed`` draw (:func:`partition_chunk`, replayed: no training)."""
    chunks = [partition_chunk(num_unlabelled, schedule, seed, p) for p in partitions]
    return torch.unique(torch.cat(chunks)) if chunks else torch.zeros(0, dtype=torch.long)


class UnitLoss(nn.Module):
    """The loss :func:`dmlnb.training.train` sees: ``objective.unit_loss`` of the current
    mini-batch of units. :class:`PartitionUnits` sets ``rows`` ``(b,)`` (the unit rows) and
    ``inverse`` ``(b, s)`` (each unit member's position among the batch's distinct images)
    right before the loop embeds that batch; the batch labels are not read."""

    def __init__(self, objective: PartitionObjective) -> None:
        super().__init__()
        self.objective = objective
        self.rows: Tensor | None = None
        self.inverse: Tensor | None = None

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """``embeddings (M, d)`` of the batch's distinct images -> scalar."""
        # index_select, not embeddings[inverse]: its backward (index_add) sums in a fixed order,
        # where advanced indexing scatters with a parallel accumulate that varied
        # between runs on 2 threads
        z = embeddings.index_select(0, self.inverse.flatten()).view(
            *self.inverse.shape, -1
        )  # (b, s, d)
        return self.objective.unit_loss(z, self.rows)


class PartitionUnits(Hook):
    """Algorithm 1's outer loop as the batch sampler and hook of :func:`dmlnb.training.train`.

    At the first epoch of partition ``p`` (:meth:`set_epoch`) it embeds the labelled examples
    and the partition (eval mode, no gradients), lets the objective build its units, runs the
    ``metric_epochs`` passes that learn ``L`` with ``θ`` fixed (Adam), then freezes the
    objective. Each epoch it yields, for every mini-batch of ``config.batch_size`` unit rows (a
    seeded shuffle), the pool indices of the batch's distinct images, and points the
    :class:`UnitLoss` at those rows. Its state (the partition's embedding and the metric as it
    was when the units were built, the metric optimiser) lets a run resumed mid-partition
    rebuild exactly the same units.
    """

    def __init__(
        self,
        pool: TrainingPool,
        loss: UnitLoss,
        schedule: PartitionSchedule,
        config: TrainConfig,
        diagnose: Callable[[Tensor, Tensor], dict[str, float]] | None = None,
    ) -> None:
        self.pool, self.loss, self.schedule, self.config, self.diagnose = (
            pool,
            loss,
            schedule,
            config,
            diagnose,
        )
        self.objective = loss.objective
        self.metric_opt = torch.optim.Adam(
            [p for p in self.objective.parameters() if p.requires_grad],
            lr=config.loss_lr or config.lr,
        )
        self.network: nn.Module | None = None
        self.device = torch.device("cpu")
        self.partition: int | None = None  # the partition whose units are built
        self.saved: dict[str, Any] = {}  # what rebuilds them: p, z, metric state when built
        self.part = self.units = self.used = self.order = None
        self.summary: dict[str, Any] = {}

    def on_train_start(self, state: TrainState) -> None:
        self.network, self.device = state.model, state.device
        self.objective.to(state.device)

    def set_epoch(self, epoch: int) -> None:
        p = epoch // self.schedule.epochs_per_partition
        self.summary = {"partition": p}
        if self.partition != p:
            part = partition_indices(self.pool, self.schedule, self.config.seed, p)  # (N,)
            if self.saved.get("partition") == p:  # resumed inside partition p: rebuild its units
                current = {k: v.clone() for k, v in self.objective.state_dict().items()}
                self.objective.load_state_dict(self.saved["metric_state"])
                with torch.random.fork_rng(
                    devices=[self.device] if self.device.type == "cuda" else []
                ):
                    _set_rng(
                        self.saved["rng"], self.device
                    )  # prepare may draw (LabelledTriplets' negatives)
                    self._build(p, part, self.saved["z"].to(self.device))
                self.objective.load_state_dict(current)
            else:
                self._new_partition(p, part)
        _set_requires_grad(self.objective, False)  # fix L, learn θ by back-propagation
        gen = stream_generator(self.config.seed, "ssdml-units", epoch)
        self.order = self.used[torch.randperm(len(self.used), generator=gen).to(self.device)]  # type: ignore[index]

    def _build(self, p: int, part: Tensor, z: Tensor) -> None:
        """Units of partition ``p`` (pool indices ``part`` ``(N,)``) from its embedding
        ``z`` ``(N, d)``."""
        self.part = part
        units = self.objective.prepare(z, self.pool.labels[self.part].to(self.device)).to(
            self.device
        )  # (U, s)
        if units.dim() != 2 or units.shape[1] != self.objective.unit_size or len(units) == 0:
            raise ValueError(
                f"{type(self.objective).__name__}.prepare returned units of shape "
                f"{tuple(units.shape)}; expected a non-empty (U, {self.objective.unit_size}) "
                "index tensor"
            )
        used = torch.arange(len(units))  # (U',) the unit rows trained on
        if self.schedule.max_units is not None and len(units) > self.schedule.max_units:
            gen = stream_generator(self.config.seed, "ssdml-subset", p)
            used = torch.randperm(len(units), generator=gen)[: self.schedule.max_units]
        self.units, self.used, self.partition = units, used.to(self.device), p

    def _new_partition(self, p: int, part: Tensor) -> None:
        """Embed partition ``p`` (pool indices ``part`` ``(N,)``), build its units and learn ``L``
        on them with ``θ`` fixed."""
        t0 = time.perf_counter()
        z, _ = embed(
            self.network, None, self.pool.for_mining(part), self.config.eval_batch_size, self.device
        )  # (N, d)
        z = z.to(self.device)
        self.saved = {
            "partition": p,
            "z": z.cpu(),
            "rng": _get_rng(self.device),
            "metric_state": {
                k: v.detach().clone().cpu() for k, v in self.objective.state_dict().items()
            },
        }
        _set_requires_grad(
            self.objective, True
        )  # fix θ, learn L (the metric step of the given SSDML method)
        self._build(p, part, z)
        extra = (
            self.diagnose(self.units[self.used].cpu(), part) if self.diagnose is not None else {}
        )  # type: ignore[index]
        metric_loss = None
        for me in range(self.schedule.metric_epochs):
            gen = stream_generator(self.config.seed, "ssdml-metric", p, me)
            order = self.used[torch.randperm(len(self.used), generator=gen).to(self.device)]  # type: ignore[index]
            total, count = torch.zeros((), device=self.device), 0
            for rows in order.split(self.config.batch_size):
                loss = self.objective.unit_loss(z[self.units[rows]], rows)  # type: ignore[index]  # z fixed
                self.metric_opt.zero_grad(set_to_none=True)
                loss.backward()
                self.metric_opt.step()
                total, count = total + loss.detach() * len(rows), count + len(rows)
            metric_loss = float(total) / count
        self.summary.update(
            units=len(self.units),
            units_used=len(self.used),
            nodes=len(part),
            metric_loss=metric_loss,
            prepare_seconds=time.perf_counter() - t0,
            **extra,
        )

    def __len__(self) -> int:
        """Mini-batches in the current epoch (0 before the first :meth:`set_epoch`)."""
        return 0 if self.used is None else math.ceil(len(self.used) / self.config.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        for rows in self.order.split(self.config.batch_size):  # type: ignore[union-attr]
            uniq, inverse = torch.unique(self.units[rows], return_inverse=True)  # type: ignore[index]  # (M,), (b, s)
            self.loss.rows, self.loss.inverse = rows, inverse.to(self.device)
            yield self.part[uniq.cpu()].tolist()  # type: ignore[index]

    def epoch_summary(self, state: TrainState) -> dict[str, Any]:
        return self.summary

    def state_dict(self) -> dict[str, Any]:
        return {"saved": self.saved, "metric_opt": self.metric_opt.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.saved = state["saved"]
        self.metric_opt.load_state_dict(state["metric_opt"])

    def __repr__(self) -> str:
        return f"PartitionUnits({type(self.objective).__name__}, {self.schedule})"


def _get_rng(device: torch.device) -> dict[str, Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng(state: dict[str, Tensor], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _set_requires_grad(module: nn.Module, flag: bool) -> None:
    for param in module.parameters():
        param.requires_grad_(flag)


def train_ssdml(
    network: nn.Module,
    objective: PartitionObjective,
    labelled: Dataset,
    unlabelled: Dataset | None,
    eval_set: Dataset | None,
    config: TrainConfig,
    schedule: PartitionSchedule,
    *,
    spec: dict[str, Any] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = True,
    eval_at_start: bool = True,
    progress: bool | None = None,
    name: str | None = None,
    diagnose: Callable[[Tensor, Tensor], dict[str, float]] | None = None,
    val_set: Dataset | None = None,
) -> RunRecord:
    """Train ``network`` (``x -> z``, ``(B, d)``) and ``objective.metric`` (``L``) by Algorithm 1,
    with :func:`dmlnb.training.train` (the book's one training loop) driven by
    :class:`PartitionUnits`.

    Args:
        network: maps images to the (L2-normalised) embedding ``z`` the graph is built on.
        objective: the method (:class:`~dmlnb.ssdml.base.PartitionObjective`).
        labelled: labelled training set (``labels`` ``>= 0``, ``(x, y)`` items).
        unlabelled: unlabelled training set (its labels are ignored), or ``None``.
        eval_set: evaluated every ``config.eval_every`` epochs and at the end (``None``: never),
            as ``Lᵀ f_θ(x)`` with Euclidean distances (the metric the method learns).
        config: ``epochs`` (total), ``batch_size`` (units per mini-batch), optimiser, seed, ...
        schedule: the :class:`PartitionSchedule` (stored in the record's ``spec``).
        spec: the run's specification stored in the record (:mod:`dmlnb.runs`); default
            :func:`run_spec` of ``schedule`` and the objective's ``repr``. It must name the
            schedule (a resumed run must continue the same one).
        run_dir: folder of ``record.json``, ``checkpoint.pt`` and ``best.pt`` (``None``: nothing
            written).
        resume: continue from ``run_dir``'s checkpoint when it holds the same run.
        eval_at_start: evaluate before training (history row ``epoch == 0``, the "Initial" row).
        progress: tqdm bar over steps (``None``: :func:`dmlnb.env.show_progress`).
        name: the record's name.
        diagnose: ``diagnose(units (U, s), pool_indices (N,)) -> dict`` added to the first history
            row of each partition (e.g. the purity of mined triplets against hidden labels).
        val_set: validation classes held out of the training classes (``splits.validation``),
            evaluated like ``eval_set`` whenever it is; the best epoch is chosen on it when
            ``config.select_on == "validation"`` (:func:`dmlnb.training.train`).
    """
    check_dataset_labels(labelled, "labelled")
    if config.steps_per_epoch is not None:
        raise ValueError(
            f"config.steps_per_epoch is {config.steps_per_epoch}; an Algorithm 1 epoch is one "
            "pass over the partition's units: pass config.replace(steps_per_epoch=None)"
        )
    pool = TrainingPool(labelled, unlabelled)
    if len(pool.labels) < 2:
        raise ValueError("Algorithm 1 needs at least two training examples")
    torch.manual_seed(config.seed)
    loss = UnitLoss(objective)
    sampler = PartitionUnits(pool, loss, schedule, config, diagnose)
    return train(
        network,
        loss,
        pool.dataset,
        eval_set,
        config,
        sampler=sampler,
        run_dir=run_dir,
        resume=resume,
        eval_at_start=eval_at_start,
        progress=progress,
        name=name or "ssdml",
        spec=spec if spec is not None else run_spec(schedule, {"objective": repr(objective)}),
        eval_model=nn.Sequential(network, objective.metric),
        eval_distance="euclidean",
        allow_unlabelled=True,
        val_set=val_set,
    )
