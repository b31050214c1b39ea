"""A run's checkpoints as the loop writes and resumes them: after every epoch ``checkpoint.pt``
(everything a resumed run needs: weights, optimiser, schedule, scaler, hooks, RNG states, the
step and the record), ``best.pt`` (the weights) when the epoch improved, then ``record.json``;
resuming loads them back after checking the run is the same one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from dmlnb.checkpoints import load_checkpoint, restore_rng_state, rng_state, save_checkpoint
from dmlnb.hooks import Hook
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord, environment_info

__all__ = ["TrainedState"]


@dataclass
class TrainedState:
    """What a checkpoint saves and a resumed run loads back (``scaler`` ``None`` without one)."""

    model: nn.Module
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler | None
    hooks: Sequence[Hook]

    def resume(
        self,
        ckpt_path: Path,
        record: RunRecord,
        config: TrainConfig,
        device: torch.device,
    ) -> tuple[RunRecord, int, dict[str, Any]]:
        """Load ``ckpt_path`` into this state; ``(the record it holds, resumed for ``device``
        when epochs are left, its epoch, the checkpoint)``.

        Raises:
            ValueError: the checkpoint's run has another configuration or fingerprint than
                ``record`` (the new run's), or another number of hooks with epochs left.
        """
        run_dir = ckpt_path.parent
        ckpt = load_checkpoint(ckpt_path)
        saved = RunRecord.from_data(ckpt.get("record"), f"{ckpt_path}['record']")
        if saved.config != record.data["config"] or saved.data.get(
            "fingerprint"
        ) != record.data.get("fingerprint"):
            raise ValueError(
                f"{run_dir} holds a run with a different configuration or method specification; "
                "pass a new run_dir, or resume=False to overwrite it"
            )
        self.model.load_state_dict(ckpt["model"])
        self.loss_fn.load_state_dict(ckpt["loss"])
        self.optimizer.load_state_dict(
            ckpt["optimizer"]
        )  # casts the state to the parameters' device
        self.scheduler.load_state_dict(ckpt["scheduler"])
        if self.scaler is not None and ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        hooks = self.hooks
        left = int(ckpt["epoch"]) < config.epochs and not saved.stopped_early  # epochs to train
        if len(ckpt["hooks"]) != len(hooks) and left:
            raise ValueError(
                f"{ckpt_path} holds the state of {len(ckpt['hooks'])} hooks, this run has "
                f"{len(hooks)} ({[type(h).__name__ for h in hooks]}); pass the same hooks, or a "
                "new run_dir"
            )
        for hook, hook_state in zip(hooks, ckpt["hooks"]):
            hook.load_state_dict(hook_state)
        restore_rng_state(ckpt, device, ckpt_path)
        start_epoch = int(ckpt["epoch"])
        if left:
            saved.resume(environment_info(device), start_epoch)
        return saved, start_epoch, ckpt

    def save(
        self,
        run_dir: Path,
        *,
        epoch: int,
        step: int,
        improved: bool,
        device: torch.device,
        record: RunRecord,
    ) -> None:
        """After epoch ``epoch`` (1-based, ``step`` the next step's number): ``best.pt`` when it
        ``improved``, ``checkpoint.pt``, then ``record.json`` (so a finished record always has its
        checkpoint)."""
        if improved:
            save_checkpoint(
                {
                    "model": self.model.state_dict(),
                    "loss": self.loss_fn.state_dict(),
                    "epoch": epoch,
                },
                run_dir / "best.pt",
            )
        save_checkpoint(
            {
                "model": self.model.state_dict(),
                "loss": self.loss_fn.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                "hooks": [h.state_dict() for h in self.hooks],
                **rng_state(device),
                "epoch": epoch,
                "step": step,
                "record": record.data,
            },
            run_dir / "checkpoint.pt",
        )
        record.save()  # after the checkpoint: a finished record.json always has one
