"""Labelled datasets and the train/test bundle every loader returns.

Two storage forms cover every dataset of the book:

* :class:`InMemoryDataset` holds the whole set as one normalised float32 tensor ``(N, C, H, W)``.
  Small sets (digits, Omniglot, MNIST, CIFAR-10) live here; the training loop draws batches with
  :meth:`InMemoryDataset.get_batch` (one indexing op, no per-item ``DataLoader`` overhead).
* :class:`ImageFileDataset` keeps file paths and decodes each image on access (CUB-200-2011,
  Cars196, Stanford Online Products, In-Shop), for use with a ``DataLoader``.
* :class:`dmlnb.data.cached_images.CachedImageDataset` (the image-folder loaders' default) reads
  those images from a decoded, memory-mapped uint8 cache and crops whole batches on the training
  device with ``get_batch(indices, device=, generator=)``.

A loader returns a :class:`DatasetSplits`: a class-disjoint (or, for the semi-supervised sets,
same-class) train/test pair, plus the optional query/gallery and unlabelled parts, and, when
asked for (:func:`dmlnb.data.validation.hold_out_classes`), a validation split of classes held
out of the training set.

Every dataset has :meth:`for_evaluation`: the same items with the deterministic evaluation
preprocessing (a training set's random crops and flips replaced by the test crop), which a split
cut out of a training set is evaluated with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset

__all__ = [
    "LabelledDataset",
    "InMemoryDataset",
    "ImageFileDataset",
    "DatasetSplits",
    "remap_labels",
    "decode_image",
]


def decode_image(
    source: str | Path | IO[bytes], mode: str = "RGB", name: str | None = None
) -> Image.Image:
    """``source`` (a path or an open binary file) decoded in full by PIL and converted to ``mode``.

    Raises:
        FileNotFoundError: no such file.
        OSError: the file is truncated or not an image; the message names ``name`` (default: the
            path) and what to do.
    """
    try:
        with Image.open(source) as image:
            return image.convert(mode)  # convert() decodes every pixel: truncation shows here
    except FileNotFoundError:
        raise
    except (OSError, SyntaxError, ValueError) as err:  # PIL reports broken files with all three
        label = name if name is not None else str(source)
        raise OSError(
            f"cannot decode image {label}: {err}; the file is truncated or corrupt, "
            f"extract or download it again"
        ) from err


def remap_labels(labels: Tensor) -> tuple[Tensor, Tensor]:
    """Map arbitrary integer labels ``(N,)`` to ``0..C-1`` in sorted order of the originals.

    Returns ``(remapped (N,) long, originals (C,) long)`` with ``originals[remapped] == labels``.
    """
    originals, remapped = torch.unique(labels, sorted=True, return_inverse=True)  # (C,), (N,)
    return remapped.long(), originals.long()


def _as_labels(labels: Tensor | Sequence[int], n: int) -> Tensor:
    labels = torch.as_tensor(labels)
    if labels.dim() != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},), got {tuple(labels.shape)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise TypeError(f"labels must be an integer tensor, got dtype {labels.dtype}")
    return labels.long()


class LabelledDataset(Dataset):
    """A dataset of ``(image (C, H, W) float32, int label)`` items with all labels at hand.

    Attributes:
        labels: ``(N,)`` long. Samplers read it to build class-balanced batches; ``-1`` marks an
            unlabelled item (see :attr:`DatasetSplits.unlabelled`).
    """

    labels: Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        raise NotImplementedError

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one item as the model receives it."""
        raise NotImplementedError

    @property
    def num_classes(self) -> int:
        """Number of distinct labels, ``-1`` (unlabelled) not counted."""
        return int(torch.unique(self.labels[self.labels >= 0]).numel())


class InMemoryDataset(LabelledDataset):
    """All images in one tensor: ``images`` ``(N, C, H, W)`` float32 (already normalised) and
    ``labels`` ``(N,)`` long, on the same device.
    """

    def __init__(self, images: Tensor, labels: Tensor | Sequence[int]) -> None:
        if images.dim() != 4:
            raise ValueError(
                f"images must be (N, C, H, W), got shape {tuple(images.shape)}; add the channel "
                "axis with images.unsqueeze(1) for grey-scale data"
            )
        if images.dtype != torch.float32:
            raise TypeError(f"images must be float32 (normalised), got {images.dtype}")
        self.images = images
        self.labels = _as_labels(labels, images.shape[0]).to(images.device)

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.images[index], int(self.labels[index])

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.images.shape[1:])  # type: ignore[return-value]

    def get_batch(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        """Images ``(B, C, H, W)`` and labels ``(B,)`` of ``indices`` ``(B,)`` in one gather.

        For a set on a GPU, CPU indices are copied from pinned memory without blocking: a copy
        from ordinary memory would wait for every queued kernel, a host synchronisation per step."""
        if self.images.is_cuda and not indices.is_cuda:
            indices = indices.pin_memory()
        idx = indices.to(self.images.device, non_blocking=True)  # (B,)
        return self.images[idx], self.labels[idx]

    def subset(self, indices: Tensor | Sequence[int]) -> InMemoryDataset:
        """A new dataset holding the items ``indices`` (labels kept as they are)."""
        idx = torch.as_tensor(indices, dtype=torch.long, device=self.images.device)  # (M,)
        return InMemoryDataset(self.images[idx], self.labels[idx])

    def relabel(self, labels: Tensor | Sequence[int]) -> InMemoryDataset:
        """The same images with ``labels`` ``(N,)`` (e.g. all ``-1`` to hide them)."""
        return InMemoryDataset(self.images, torch.as_tensor(labels).to(self.images.device))

    def to(self, device: torch.device | str) -> InMemoryDataset:
        """The same dataset on ``device`` (e.g. the GPU, so batches need no host copy)."""
        return InMemoryDataset(self.images.to(device), self.labels.to(device))

    def for_evaluation(self) -> InMemoryDataset:
        """The dataset itself: in-memory images carry no augmentation."""
        return self


class ImageFileDataset(LabelledDataset):
    """Images decoded from files on access: PIL opens each path, converts it to RGB and
    ``transform`` turns it into a ``(C, H, W)`` float32 tensor.

    Args:
        paths: ``N`` image file paths.
        labels: ``(N,)`` integer labels.
        transform: PIL image -> tensor (e.g. the ``torchvision.transforms`` pipelines of
            :func:`dmlnb.data.image_folders.image_transforms`).
        input_shape: ``(C, H, W)`` that ``transform`` produces; if ``None`` it is read off the
            first item.
        eval_transform: the deterministic transform the same images are evaluated with when
            ``transform`` augments (a training set's; :meth:`for_evaluation` uses it); ``None``:
            ``transform`` is already deterministic.
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        labels: Tensor | Sequence[int],
        transform: Callable[[Image.Image], Tensor],
        input_shape: tuple[int, int, int] | None = None,
        eval_transform: Callable[[Image.Image], Tensor] | None = None,
    ) -> None:
        self.paths = [Path(p) for p in paths]
        self.labels = _as_labels(labels, len(self.paths))
        self.transform = transform
        self.eval_transform = eval_transform
        self._input_shape = input_shape

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.transform(decode_image(self.paths[index])), int(self.labels[index])

    @property
    def input_shape(self) -> tuple[int, int, int]:
        if self._input_shape is None:
            self._input_shape = tuple(self[0][0].shape)  # type: ignore[assignment]
        return self._input_shape  # type: ignore[return-value]

    def subset(self, indices: Tensor | Sequence[int]) -> ImageFileDataset:
        """A new dataset holding the items ``indices`` with the same transform."""
        idx = torch.as_tensor(indices, dtype=torch.long)  # (M,)
        paths = [self.paths[i] for i in idx.tolist()]
        return ImageFileDataset(
            paths, self.labels[idx], self.transform, self._input_shape, self.eval_transform
        )

    def relabel(self, labels: Tensor | Sequence[int]) -> ImageFileDataset:
        """The same files and transform with ``labels`` ``(N,)`` (e.g. all ``-1`` to hide them)."""
        return ImageFileDataset(
            self.paths, labels, self.transform, self._input_shape, self.eval_transform
        )

    def for_evaluation(self) -> ImageFileDataset:
        """The same files and labels decoded with ``eval_transform`` (itself when there is none)."""
        if self.eval_transform is None:
            return self
        return ImageFileDataset(self.paths, self.labels, self.eval_transform, self._input_shape)


@dataclass
class DatasetSplits:
    """What :func:`dmlnb.data.load_dataset` returns.

    Attributes:
        name: registry name of the dataset.
        train: the (labelled) training set; labels ``0..C_train-1``.
        test: the evaluation set; the standard protocol uses it as query and gallery at once.
            Labels ``0..C_test-1`` (for class-disjoint splits these are *other* classes than the
            train labels with the same numbers).
        query, gallery: separate query and gallery sets (In-Shop); ``None`` otherwise. When set,
            ``test`` is their concatenation (query first) with the same labels.
        unlabelled: semi-supervised training data whose ``labels`` are all ``-1``.
        unlabelled_targets: ``(U,)`` long, the hidden true labels of ``unlabelled`` (in the
            train label space), for diagnostics only.
        class_names: ``{"train": [...], "test": [...]}`` (and ``"validation"`` with a validation
            split), the original class name of each remapped label of that split
            (``class_names["test"][y]``), when the source has names.
        validation: images of classes held out of the training set (labels ``0..V-1``, other
            classes than ``train``'s and ``test``'s), for choosing the epoch and settings without
            looking at the test classes; evaluated as query and gallery at once, with the
            evaluation preprocessing. ``None`` unless asked for
            (:func:`dmlnb.data.validation.hold_out_classes`, ``load_dataset(..., validation=)``).
    """

    name: str
    train: LabelledDataset
    test: LabelledDataset
    query: LabelledDataset | None = None
    gallery: LabelledDataset | None = None
    unlabelled: LabelledDataset | None = None
    unlabelled_targets: Tensor | None = None
    class_names: dict[str, list[str]] | None = None
    validation: LabelledDataset | None = None

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one training image."""
        return self.train.input_shape

    @property
    def num_train_classes(self) -> int:
        """Number of labelled training classes (e.g. the number of proxies a proxy loss needs)."""
        return self.train.num_classes


def gather_images(
    dataset: LabelledDataset,
    indices: Tensor | Sequence[int] | None = None,
    size: int | None = None,
    batch_size: int = 256,
) -> Tensor:
    """Images of ``dataset`` as one tensor ``(M, C, H', W')`` on the CPU, e.g. for a raw-pixel
    baseline, a t-SNE of pixels or a retrieval grid.

    Works for in-memory datasets (one gather) and file-backed ones (decoded in batches).
    ``indices`` selects items (default: all); ``size`` resizes to ``size x size`` with
    antialiasing, which keeps raw pixels of 224-px datasets to a tractable dimension.
    """
    import torch.nn.functional as F

    idx = (
        torch.arange(len(dataset))
        if indices is None
        else torch.as_tensor(indices, dtype=torch.long)
    )
    parts = []
    for start in range(0, idx.numel(), batch_size):
        chunk = idx[start : start + batch_size]  # (b,)
        if hasattr(dataset, "get_batch"):
            images = dataset.get_batch(chunk)[0].cpu()  # (b, C, H, W)
        else:
            images = torch.stack([dataset[int(i)][0] for i in chunk])  # (b, C, H, W)
        if size is not None and tuple(images.shape[-2:]) != (size, size):
            images = F.interpolate(
                images, size=(size, size), mode="bilinear", antialias=True, align_corners=False
            )
        parts.append(images)
    return torch.cat(parts)
