"""A run's evaluations: the model's metrics on a query set (and gallery), and the entries an
evaluation adds to an epoch's row (the test set and, with one, the validation set)."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from dmlnb.evaluation import compute_embeddings, evaluate
from dmlnb.profiles import TrainConfig

__all__ = ["evaluate_model", "evaluation_row"]


def evaluate_model(
    model: nn.Module,
    eval_set: Dataset,
    config: TrainConfig,
    gallery_set: Dataset | None = None,
    device: torch.device | None = None,
    distance: str = "cosine",
) -> dict[str, float]:
    """Embed ``eval_set`` (and ``gallery_set``) and compute the configured metrics with
    ``distance`` (``"cosine"`` or ``"euclidean"``)."""
    emb, lab = compute_embeddings(model, eval_set, batch_size=config.eval_batch_size, device=device)
    kwargs: dict[str, Any] = {}
    if gallery_set is not None:
        g_emb, g_lab = compute_embeddings(
            model, gallery_set, batch_size=config.eval_batch_size, device=device
        )
        kwargs = {"gallery_embeddings": g_emb, "gallery_labels": g_lab}
    return evaluate(
        emb,
        lab,
        ks=config.eval_ks,
        metrics=config.eval_metrics,
        seed=config.seed,
        metric=distance,
        **kwargs,
    )  # type: ignore[arg-type]


def _timed(
    model: nn.Module,
    query: Dataset,
    gallery: Dataset | None,
    config: TrainConfig,
    device: torch.device,
    distance: str,
) -> dict[str, float]:
    t0 = time.perf_counter()
    metrics = evaluate_model(model, query, config, gallery, device, distance)
    metrics["eval_seconds"] = time.perf_counter() - t0
    return metrics


def evaluation_row(
    model: nn.Module,
    eval_set: Dataset,
    gallery_set: Dataset | None,
    val_set: Dataset | None,
    config: TrainConfig,
    device: torch.device,
    distance: str,
) -> dict[str, Any]:
    """The row entries of one evaluation: ``metrics`` (the test set) and, with a ``val_set``,
    ``val_metrics`` (the validation set as query and gallery), each with its ``eval_seconds``."""
    out = {"metrics": _timed(model, eval_set, gallery_set, config, device, distance)}
    if val_set is not None:
        out["val_metrics"] = _timed(model, val_set, None, config, device, distance)
    return out
