"""The optimiser and the learning-rate schedule of a run, built from its configuration."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dmlnb.profiles import OPTIMIZERS, TrainConfig

__all__ = ["build_optimizer", "build_scheduler"]


def build_optimizer(
    config: TrainConfig, model: nn.Module, loss_fn: nn.Module
) -> torch.optim.Optimizer:
    """The configured optimiser over the model's and the loss's parameters.

    Parameter groups: the model's parameters at ``lr`` (first, so ``param_groups[0]`` holds the
    base rate); with ``head_lr_scale != 1`` the embedding head's (``model.head``) in a group of
    their own at ``head_lr_scale * lr``; the loss's at ``loss_lr`` (default ``lr``). Adam and AdamW
    use ``betas``. (A learning-rate factor must be a group for Adam: scaling the gradients, as
    :class:`~dmlnb.losses.discriminative.BackboneLR` does for SGD, leaves Adam's steps unchanged.)

    When every parameter is on a CUDA device, Adam, AdamW and SGD use their fused implementation
    (one kernel per step instead of one per parameter; same update up to rounding); elsewhere
    PyTorch's default (``foreach``) implementation.

    Raises:
        ValueError: ``head_lr_scale != 1`` for a model without an ``nn.Module`` ``head``.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": trainable}]
    if config.head_lr_scale != 1.0:
        head = getattr(model, "head", None)
        if not isinstance(head, nn.Module):
            raise ValueError(
                f"head_lr_scale={config.head_lr_scale:g} needs model.head (an nn.Module, as "
                f"dmlnb.models.EmbeddingNet has), {type(model).__name__} has none; use "
                "head_lr_scale=1.0"
            )
        in_head = {id(p) for p in head.parameters()}
        groups = [
            {"params": [p for p in trainable if id(p) not in in_head]},
            {
                "params": [p for p in trainable if id(p) in in_head],
                "lr": config.head_lr_scale * config.lr,
            },
        ]
    loss_params = [p for p in loss_fn.parameters() if p.requires_grad]
    if loss_params:
        groups.append({"params": loss_params, "lr": config.loss_lr or config.lr})
    name, lr, wd = config.optimizer, config.lr, config.weight_decay
    params = [p for g in groups for p in g["params"]]
    fused = bool(params) and all(
        p.is_cuda and p.is_floating_point() for p in params
    )  # one kernel per step
    betas = tuple(config.betas)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=betas, weight_decay=wd, fused=fused or None)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, weight_decay=wd, fused=fused or None)
    if name == "sgd":
        return torch.optim.SGD(
            groups, lr=lr, momentum=config.momentum, weight_decay=wd, fused=fused or None
        )
    if name == "rmsprop":
        return torch.optim.RMSprop(groups, lr=lr, momentum=config.momentum, weight_decay=wd)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {list(OPTIMIZERS)}")


def build_scheduler(
    config: TrainConfig, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.MultiStepLR:
    """The step schedule of ``config``: the rate times ``lr_gamma`` at each of ``lr_milestones``
    (a fraction ``< 1`` of ``epochs``, rounded and at least 1, or an epoch number)."""
    milestones = sorted(
        {max(1, round(f * config.epochs)) if f < 1 else int(f) for f in config.lr_milestones}
    )
    return torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=milestones, gamma=config.lr_gamma
    )
