"""The record a new run starts: its name, configuration, specification, environment and what it
is made of (the network, loss, sampler, hooks and sets, in words)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset, Sampler

from dmlnb.hooks import Hook
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord, environment_info
from dmlnb.training.inputs import check_dataset_labels

__all__ = ["new_record"]


def new_record(
    model: nn.Module,
    loss_fn: nn.Module,
    sampler: Sampler,
    hooks: Sequence[Hook],
    train_set: Dataset,
    val_set: Dataset | None,
    config: TrainConfig,
    *,
    device: torch.device,
    run_dir: Path | None,
    name: str | None,
    spec: dict[str, Any] | None,
) -> RunRecord:
    """A new :class:`~dmlnb.records.RunRecord` for a run of these parts (``name`` default: the
    folder's name or ``"run"``), its ``components`` saying what it is made of."""
    components: dict[str, Any] = {
        "model": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "loss": repr(loss_fn),
        "sampler": repr(sampler),
        "hooks": [repr(h) for h in hooks],
        "train_set": f"{type(train_set).__name__} of {len(train_set)} items",  # type: ignore[arg-type]
    }
    if val_set is not None:
        val_labels = check_dataset_labels(val_set, "val_set")
        components["val_set"] = (
            f"{type(val_set).__name__} of {len(val_set)} items, "  # type: ignore[arg-type]
            f"{int(torch.unique(val_labels).numel())} classes"
        )
    return RunRecord.new(
        name=name or (run_dir.name if run_dir is not None else "run"),
        config=config.to_dict(),
        components=components,
        environment=environment_info(device),
        spec=spec,
    )
