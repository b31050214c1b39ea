"""The batches of a training epoch: the default sampler, an epoch's first ``n`` batches drawn
lazily, and the batches' tensors (cropped on the device for cached images, gathered in one go
for in-memory sets, a ``DataLoader`` otherwise)."""

from __future__ import annotations

from typing import Iterable, Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.prefetch import prefetch
from dmlnb.profiles import TrainConfig
from dmlnb.samplers import stream_generator

__all__ = ["default_sampler", "EpochBatches", "load_batches"]


class _Indexed(Dataset):
    """Wraps a labelled dataset so items carry their index: ``(x, y, i)``."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Tensor, int, int]:
        x, y = self.dataset[i]
        return x, y, i


def load_batches(
    dataset: Dataset,
    batches: Iterable[list[int]],
    num_workers: int,
    pin: bool,
    *,
    device: torch.device,
    seed: int,
    epoch: int,
    ahead: int,
) -> Iterable:
    """Yield ``(x (B,...), y (B,), indices (B,))`` for the given index lists.

    A :class:`CachedImageDataset` crops batch ``t`` on ``device`` with a generator seeded by
    ``(seed, epoch, t)`` (so the batches of an epoch depend only on ``(seed, epoch)``, also after
    a resume) and builds ``ahead`` batches in a background thread while the model computes
    (``ahead=0`` when the sampler must see each step before drawing the next batch).
    """
    if isinstance(dataset, CachedImageDataset):

        def load(t: int, idx: list[int]) -> tuple[Tensor, Tensor, Tensor]:
            index = torch.as_tensor(idx, dtype=torch.long)  # (B,)
            x, y = dataset.get_batch(
                index, device=device, generator=stream_generator(seed, "augment", epoch, t)
            )
            return x, y, index

        yield from prefetch(load, batches, device, ahead)
        return
    if hasattr(dataset, "get_batch"):  # in-memory fast path: one gather per batch
        for idx in batches:
            index = torch.as_tensor(idx, dtype=torch.long)
            x, y = dataset.get_batch(index)
            yield x, y, index
        return
    loader = DataLoader(
        _Indexed(dataset),
        batch_sampler=batches,
        num_workers=num_workers,
        pin_memory=pin,
        persistent_workers=False,
    )
    yield from loader


def default_sampler(labels: Tensor, config: TrainConfig) -> Sampler:
    """The loop's sampler when none is given: :class:`~dmlnb.samplers.MPerClassSampler` with
    ``config.m_per_class``, ``config.batch_size`` and ``config.seed``."""
    from dmlnb.samplers import MPerClassSampler

    return MPerClassSampler(
        labels, m=config.m_per_class, batch_size=config.batch_size, seed=config.seed
    )


class EpochBatches:
    """The first ``n`` batches of a sampler's current epoch, drawn lazily (cycling the sampler if
    its epoch is shorter), so a sampler that is also a hook sees every step's embeddings before
    it builds the next batch."""

    def __init__(self, sampler: Sampler, n: int) -> None:
        self.sampler, self.n = sampler, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[list[int]]:
        produced = 0
        while produced < self.n:
            before = produced
            for batch in self.sampler:
                yield list(batch)
                produced += 1
                if produced == self.n:
                    return
            if produced == before:
                raise ValueError(
                    f"{self.sampler!r} yielded no batch; check batch_size against the data"
                )
