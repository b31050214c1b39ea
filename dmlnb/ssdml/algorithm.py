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

Records: the run's :class:`~dmlnb.records.RunRecord` has one history row per epoch (``loss``,
``partition``, timings, ``metrics`` every ``config.eval_every`` epochs, the learned embedding
``Lᵀ z`` evaluated with Euclidean distances, the metric the method learns). With ``run_dir`` it
is rewritten atomically every epoch; a checkpoint after every partition lets an interrupted run
resume from its last finished partition and end exactly where an uninterrupted run would on the
same device (every random draw depends only on ``(seed, partition)`` or ``(seed, epoch)``).
Checkpoints are loaded and saved, run folders repaired after a crash and device changes recorded
exactly as in :func:`dmlnb.training.train` (the same functions: :mod:`dmlnb.checkpoints`,
:meth:`~dmlnb.records.RunRecord.resume`); the record says "finished" on disk only once the
final checkpoint is written.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn
from torch.utils.data import ConcatDataset, Dataset, Subset
from tqdm import tqdm

from dmlnb.checkpoints import load_checkpoint, prepare_run_dir, restore_rng_state, rng_state, save_checkpoint
from dmlnb.data.base import InMemoryDataset
from dmlnb.evaluation import compute_embeddings, evaluate
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord, environment_info, utc_now
from dmlnb.samplers import stream_generator
from dmlnb.ssdml.base import PartitionObjective
from dmlnb.training import (
    LossMeter,
    build_optimizer,
    check_dataset_labels,
    check_training_allowed,
    mixed_precision,
    resolve_device,
    show_progress,
)

__all__ = ["PartitionSchedule", "run_config", "TrainingPool", "partition_indices", "embed", "evaluate_embedding",
           "train_ssdml"]


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


def run_config(config: TrainConfig, schedule: PartitionSchedule, spec: dict[str, Any]) -> dict[str, Any]:
    """The configuration stored in (and compared against) an SSDML run record: the
    :class:`TrainConfig` fields at the top level (as every run record of the book), plus
    ``schedule`` and ``method``."""
    return {**config.to_dict(), "schedule": schedule.to_dict(), "method": dict(spec)}


class TrainingPool:
    """Labelled examples (indices ``0..N_L-1``) followed by the unlabelled ones, one index space."""

    def __init__(self, labelled: Dataset, unlabelled: Dataset | None) -> None:
        y_l = torch.as_tensor(labelled.labels).long().cpu()  # type: ignore[attr-defined]
        if (y_l < 0).any():
            raise ValueError("the labelled set holds labels < 0; unlabelled data goes in `unlabelled`")
        n_u = 0 if unlabelled is None else len(unlabelled)  # type: ignore[arg-type]
        self.num_labelled, self.num_unlabelled = len(y_l), n_u
        self.labels = torch.cat([y_l, torch.full((n_u,), -1, dtype=torch.long)])  # (N_L + N_U,)
        parts = [labelled] if unlabelled is None else [labelled, unlabelled]
        if all(isinstance(d, InMemoryDataset) for d in parts):
            images = torch.cat([d.images.cpu() for d in parts])  # type: ignore[attr-defined]
            self.dataset: Dataset = InMemoryDataset(images, self.labels)
        else:
            self.dataset = ConcatDataset(parts)

    def subset(self, idx: Tensor) -> Dataset:
        if isinstance(self.dataset, InMemoryDataset):
            return self.dataset.subset(idx)
        return Subset(self.dataset, idx.tolist())

    def images(self, idx: Tensor) -> Tensor:
        """``(B, C, H, W)`` images of pool indices ``idx`` ``(B,)``."""
        if isinstance(self.dataset, InMemoryDataset):
            return self.dataset.get_batch(idx)[0]
        return torch.stack([self.dataset[int(i)][0] for i in idx])


def embed(network: nn.Module, metric: nn.Module | None, dataset: Dataset, batch_size: int,
          device: torch.device | None = None) -> tuple[Tensor, Tensor]:
    """``(embeddings (N, l), labels (N,))``: ``Lᵀ f_θ(x)`` (``metric=None``: ``f_θ(x)``) on CPU."""
    model = network if metric is None else nn.Sequential(network, metric)
    return compute_embeddings(model, dataset, batch_size=batch_size, device=device)


def evaluate_embedding(network: nn.Module, metric: nn.Module | None, dataset: Dataset,
                       config: TrainConfig, device: torch.device | None = None) -> dict[str, float]:
    """The configured metrics of ``Lᵀ f_θ(x)`` with Euclidean distances (the learned ``δ_L``)."""
    emb, lab = embed(network, metric, dataset, config.eval_batch_size, device)
    return evaluate(emb, lab, ks=config.eval_ks, metrics=config.eval_metrics, seed=config.seed, metric="euclidean")


def partition_indices(pool: TrainingPool, schedule: PartitionSchedule, seed: int, p: int) -> Tensor:
    """Pool indices ``(N_L + N_p,)`` of partition ``p``: all labelled examples, then chunk
    ``p mod n`` of sweep ``p // n`` of the shuffled unlabelled pool (``n`` chunks per sweep)."""
    n_u = pool.num_unlabelled
    size = min(schedule.partition_size, n_u)
    labelled = torch.arange(pool.num_labelled)
    if size == 0:
        return labelled
    chunks = max(1, n_u // size)
    order = torch.randperm(n_u, generator=stream_generator(seed, "ssdml-sweep", p // chunks))  # (N_U,)
    chunk = order[(p % chunks) * size:(p % chunks + 1) * size]  # (N_p,)
    return torch.cat([labelled, pool.num_labelled + chunk.sort().values])


def _unit_embeddings(network: nn.Module, pool: TrainingPool, part: Tensor, units: Tensor, device: torch.device,
                     autocast: Any) -> Tensor:
    """Embeddings ``(b, s, d)`` (with gradients) of ``units`` ``(b, s)``; each image once."""
    uniq, inverse = torch.unique(units, return_inverse=True)  # (M,), (b, s)
    x = pool.images(part[uniq.cpu()]).to(device, non_blocking=True)  # (M, C, H, W)
    with autocast:
        out = network(x)
    return out.float()[inverse.to(device)]  # (b, s, d)


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
) -> RunRecord:
    """Train ``network`` (``x -> z``, ``(B, d)``) and ``objective.metric`` (``L``) by Algorithm 1.

    Args:
        network: maps images to the (L2-normalised) embedding ``z`` the graph is built on.
        objective: the method (:class:`~dmlnb.ssdml.base.PartitionObjective`).
        labelled: labelled training set (``labels`` ``>= 0``, ``(x, y)`` items).
        unlabelled: unlabelled training set (its labels are ignored), or ``None``.
        eval_set: evaluated every ``config.eval_every`` epochs and at the end (``None``: never).
        config: ``epochs`` (total), ``batch_size`` (units per mini-batch), optimiser, seed, ...
        schedule: the :class:`PartitionSchedule`.
        spec: the method's settings, stored in the record's configuration (reload key).
        run_dir: folder of ``record.json``, ``checkpoint.pt`` and ``best.pt`` (``None``: nothing
            written).
        resume: continue from ``run_dir``'s checkpoint when it holds the same configuration.
        eval_at_start: evaluate before training (history row ``epoch == 0``, the "Initial" row).
        progress: tqdm bar over epochs (``None``: :func:`dmlnb.training.show_progress`).
        name: the record's name.
        diagnose: ``diagnose(units (U, s), pool_indices (N,)) -> dict`` added to the first history
            row of each partition (e.g. the purity of mined triplets against hidden labels).
    """
    check_dataset_labels(labelled, "labelled")
    device = resolve_device(config.device)
    run_dir = prepare_run_dir(run_dir) if run_dir is not None else None
    torch.manual_seed(config.seed)
    network.to(device)
    objective.to(device)
    pool = TrainingPool(labelled, unlabelled)
    if len(pool.labels) < 2:
        raise ValueError("Algorithm 1 needs at least two training examples")
    net_opt = build_optimizer(config, network, nn.Module())
    metric_opt = torch.optim.Adam([p for p in objective.parameters() if p.requires_grad], lr=config.loss_lr or config.lr)
    autocast, scaler = mixed_precision(device, config.amp)
    cfg = run_config(config, schedule, spec or {"objective": repr(objective)})
    record = RunRecord.new(
        name=name or (run_dir.name if run_dir is not None else "ssdml"),
        config=cfg,
        components={
            "network": type(network).__name__,
            "parameters": sum(p.numel() for p in network.parameters()),
            "objective": repr(objective),
            "labelled": pool.num_labelled,
            "unlabelled": pool.num_unlabelled,
        },
        environment=environment_info(device),
    )
    ckpt_path = run_dir / "checkpoint.pt" if run_dir is not None else None
    start_partition = 0
    num_partitions = math.ceil(config.epochs / schedule.epochs_per_partition)
    if resume and ckpt_path is not None and ckpt_path.exists():
        ckpt = load_checkpoint(ckpt_path)
        saved = RunRecord.from_data(ckpt.get("record"), f"{ckpt_path}['record']")
        if saved.config == record.data["config"]:
            network.load_state_dict(ckpt["network"])
            objective.load_state_dict(ckpt["objective"])
            net_opt.load_state_dict(ckpt["net_opt"])  # casts the state to the parameters' device
            metric_opt.load_state_dict(ckpt["metric_opt"])
            restore_rng_state(ckpt, device, ckpt_path)
            record = saved
            start_partition = int(ckpt["partition"])
            if start_partition < num_partitions:
                record.resume(environment_info(device), min(config.epochs, start_partition * schedule.epochs_per_partition))
    if start_partition < num_partitions:
        first = start_partition * schedule.epochs_per_partition + 1
        check_training_allowed(run_dir, f"epochs {first}-{config.epochs} of {record.data['name']!r}")
    if run_dir is not None:
        record.path = run_dir / "record.json"
        if start_partition > 0:
            record.save_if_stale()  # the checkpoint may be newer than record.json (a crash between)

    def run_eval() -> dict[str, float]:
        t0 = time.perf_counter()
        metrics = evaluate_embedding(network, objective.metric, eval_set, config, device)  # type: ignore[arg-type]
        metrics["eval_seconds"] = time.perf_counter() - t0
        return metrics

    if eval_at_start and start_partition == 0 and eval_set is not None:
        record.add_epoch({"epoch": 0, "partition": None, "loss": None, "train_seconds": 0.0, "metrics": run_eval()},
                         config.select_metric)
    bar = tqdm(total=config.epochs, initial=min(config.epochs, start_partition * schedule.epochs_per_partition),
               disable=not show_progress(progress) or start_partition >= num_partitions, desc=record.data["name"], leave=False)
    try:
        for p in range(start_partition, num_partitions):
            t_prep = time.perf_counter()
            part = partition_indices(pool, schedule, config.seed, p)  # (N,)
            z, _ = embed(network, None, pool.subset(part), config.eval_batch_size, device)  # (N, d)
            units = objective.prepare(z.to(device), pool.labels[part].to(device)).to(device)  # (U, s)
            if units.dim() != 2 or units.shape[1] != objective.unit_size or len(units) == 0:
                raise ValueError(
                    f"{type(objective).__name__}.prepare returned units of shape {tuple(units.shape)}; "
                    f"expected a non-empty (U, {objective.unit_size}) index tensor"
                )
            used = torch.arange(len(units))  # (U',) the unit rows trained on
            if schedule.max_units is not None and len(units) > schedule.max_units:
                used = torch.randperm(len(units), generator=stream_generator(config.seed, "ssdml-subset", p))[:schedule.max_units]
            used = used.to(device)
            extra = diagnose(units[used].cpu(), part) if diagnose is not None else {}
            z_dev = z.to(device)
            metric_loss = None
            # fix θ, learn L (the metric-learning step of the given SSDML method)
            for me in range(schedule.metric_epochs):
                order = used[torch.randperm(len(used), generator=stream_generator(config.seed, "ssdml-metric", p, me)).to(device)]
                total, count = 0.0, 0
                for rows in order.split(config.batch_size):
                    loss = objective.unit_loss(z_dev[units[rows]], rows)  # z fixed
                    metric_opt.zero_grad(set_to_none=True)
                    loss.backward()
                    metric_opt.step()
                    total, count = total + float(loss.detach()) * len(rows), count + len(rows)
                metric_loss = total / count
            prepare_seconds = time.perf_counter() - t_prep
            # fix L, learn θ by back-propagation
            _set_requires_grad(objective, False)
            first_epoch = p * schedule.epochs_per_partition
            for epoch in range(first_epoch, min(first_epoch + schedule.epochs_per_partition, config.epochs)):
                network.train()
                t0 = time.perf_counter()
                order = used[torch.randperm(len(used), generator=stream_generator(config.seed, "ssdml-units", epoch)).to(device)]
                meter = LossMeter(device)
                for step, rows in enumerate(order.split(config.batch_size)):
                    z_units = _unit_embeddings(network, pool, part, units[rows], device, autocast)  # (b, s, d)
                    loss = objective.unit_loss(z_units, rows)
                    net_opt.zero_grad(set_to_none=True)
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.step(net_opt)
                        scaler.update()
                    else:
                        loss.backward()
                        net_opt.step()
                    meter.add(loss.detach(), len(rows), step)
                    if meter.due():
                        meter.read(epoch)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                row: dict[str, Any] = {
                    "epoch": epoch + 1, "partition": p, "loss": meter.epoch_mean(epoch),
                    "train_seconds": time.perf_counter() - t0, "lr": net_opt.param_groups[0]["lr"], "metrics": None,
                }
                if epoch == first_epoch:
                    row.update(units=len(units), units_used=len(used), nodes=len(part), metric_loss=metric_loss,
                               prepare_seconds=prepare_seconds, **extra)
                    row["train_seconds"] += prepare_seconds
                last = epoch + 1 == config.epochs
                if eval_set is not None and ((epoch + 1) % config.eval_every == 0 or last):
                    row["metrics"] = run_eval()
                improved = record.add_epoch(row, config.select_metric)
                if last:
                    record.finish(utc_now())
                if run_dir is not None:
                    if improved:
                        save_checkpoint({"network": network.state_dict(), "objective": objective.state_dict(),
                                         "epoch": epoch + 1}, run_dir / "best.pt")
                    if not last:  # the finished record is written after the final checkpoint
                        record.save()
                bar.update(1)
                bar.set_postfix(partition=p, loss=f"{row['loss']:.4f}", refresh=False)
            _set_requires_grad(objective, True)
            if run_dir is not None:
                save_checkpoint(
                    {
                        "network": network.state_dict(), "objective": objective.state_dict(),
                        "net_opt": net_opt.state_dict(), "metric_opt": metric_opt.state_dict(),
                        **rng_state(device),
                        "partition": p + 1, "record": record.data,
                    },
                    ckpt_path,  # type: ignore[arg-type]
                )
                record.save()
    finally:
        _set_requires_grad(objective, True)
        bar.close()
    if record.data["status"] != "finished":
        record.finish(utc_now())
        if run_dir is not None:
            record.save()
    return record
