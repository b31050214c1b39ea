"""Embedding a dataset with a model, in order, in eval mode (:func:`compute_embeddings`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from dmlnb.allocator import keep_freed_memory
from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.prefetch import prefetch

__all__ = ["compute_embeddings"]


def _batches(
    dataset: Any, batch_size: int, device: torch.device, num_workers: int
) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield ``(images (B, C, H, W), labels (B,))`` in dataset order."""
    n = len(dataset)
    if isinstance(
        dataset, CachedImageDataset
    ):  # cropped on the device, the next batch read meanwhile
        chunks = [
            torch.arange(start, min(start + batch_size, n)) for start in range(0, n, batch_size)
        ]
        yield from prefetch(lambda _, idx: dataset.get_batch(idx, device=device), chunks, device)
        return
    if hasattr(dataset, "get_batch"):  # in-memory fast path: one indexing op per batch
        for start in range(0, n, batch_size):
            images, labels = dataset.get_batch(torch.arange(start, min(start + batch_size, n)))
            yield images, torch.as_tensor(labels)
        return
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
    )
    for images, labels in loader:
        yield images, torch.as_tensor(labels)


def compute_embeddings(
    model: nn.Module,
    dataset: Any,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    num_workers: int = 0,
) -> tuple[Tensor, Tensor]:
    """Embed every item of ``dataset`` in order.

    The model runs in eval mode under ``torch.inference_mode()``; afterwards the train/eval flag of
    **every submodule** is restored as it was (so e.g. BatchNorm layers frozen in eval mode inside
    a training model stay frozen).

    Args:
        model: maps images ``(B, C, H, W)`` to embeddings ``(B, D)``.
        dataset: a ``dmlnb.data.LabelledDataset``-like object: ``len(dataset)``,
            ``dataset[i] -> (image (C, H, W), label)``; if it has ``get_batch(indices (B,)) ->
            (images, labels)`` (an ``InMemoryDataset``) that is used instead of a DataLoader; a
            ``CachedImageDataset`` crops its batches on ``device``.
        batch_size: images per forward pass.
        device: where the model runs; default the device of the model's parameters (CPU if it has
            none).
        num_workers: DataLoader workers (ignored on the ``get_batch`` path).

    Returns:
        ``(embeddings (N, D) float32 on CPU, labels (N,) long on CPU)``.
    """
    n = len(dataset)
    if n == 0:
        raise ValueError("dataset is empty; nothing to embed")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if device is None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cpu":
        keep_freed_memory()  # each batch's activations reuse the last one's memory
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    outputs: list[Tensor] = []
    label_batches: list[Tensor] = []
    try:
        with torch.inference_mode():
            for images, labels in _batches(dataset, batch_size, device, num_workers):
                out = model(images.to(device, non_blocking=True))  # (B, D)
                if out.dim() != 2 or out.shape[0] != images.shape[0]:
                    raise ValueError(
                        f"the model must return (B, D) embeddings, got {tuple(out.shape)} for a "
                        f"batch of {images.shape[0]}; flatten or pool the output"
                    )
                outputs.append(out.float().cpu())
                label_batches.append(labels.long().cpu())
    finally:
        for module, mode in modes:
            module.training = mode
    # concatenated outside inference mode: ordinary tensors, usable in autograd later
    return torch.cat(outputs), torch.cat(label_batches)  # (N, D), (N,)
