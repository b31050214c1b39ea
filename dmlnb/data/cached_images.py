"""File-backed image datasets read from the decoded cache and cropped on batches, on the device
that trains.

:class:`CachedImageDataset` serves the images of a :class:`dmlnb.data.decoded.DecodedImages`
(``S x S`` uint8, memory-mapped) with the crops of :mod:`dmlnb.data.crops`: the train crop
(torchvision's ``RandomResizedCrop`` boxes drawn in the original image's coordinates + a
horizontal flip) or the test crop (short side to ``round(size * 256 / 224)``, centre square);
or, with ``resize``, the square crops (the image resized to ``resize x resize``; train: padded
by ``padding`` black pixels, a random square + the flip; test: the centre square).
:meth:`CachedImageDataset.get_batch` reads a batch's rows (into pinned memory when the target is
a GPU), copies them to the device and crops, resizes, flips and normalises the whole batch in one
``grid_sample`` there; the random boxes come from a ``torch.Generator`` the caller passes, so a
training loop can make batch ``t`` of epoch ``e`` a function of ``(seed, e, t)``.

How the crops differ from torchvision's PIL pipeline
(:func:`dmlnb.data.image_folders.image_transforms`): the box is resampled from the ``S x S`` cache
(itself an antialiased bicubic resize of the whole image, aspect ratio squashed), not from the
original pixels, with a bilinear ``grid_sample`` without antialiasing (torchvision resizes the crop
with an antialiased bilinear filter). The boxes have exactly torchvision's distribution. On natural
images the two differ by a mean absolute error of about 4 grey levels of 255 on detailed photographs
and under 1 on smooth ones (``tests/test_cached_images.py`` asserts the bounds). The square crops on
a cache of side ``resize`` (the loaders' default for them) copy cache pixels, so they differ from
torchvision's ``Resize((resize, resize))`` + ``RandomCrop`` / ``CenterCrop`` only by the resize
filter (the cache's bicubic against Resize's bilinear): about 1.6 grey levels on a
detailed photograph.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from dmlnb.data.base import LabelledDataset
from dmlnb.data.crops import (
    centre_crop_boxes,
    check_square_crop,
    crop_batch,
    crop_theta,
    horizontal_flips,
    random_resized_crop_boxes,
    square_centre_boxes,
    square_crop_boxes,
)
from dmlnb.data.decoded import DecodedImages
from dmlnb.data.prefetch import to_device

__all__ = ["CachedImageDataset"]


class CachedImageDataset(LabelledDataset):
    """Images of a decoded cache, cropped to ``image_size`` on batches.

    Args:
        images: the decoded cache (``M`` images).
        labels: ``(N,)`` integer labels of the dataset's items.
        image_size: side of the crops (``input_shape`` is ``(3, image_size, image_size)``).
        train: the random train crop + flip; else the deterministic test crop.
        rows: ``(N,)`` the cache row of each item (default ``0..M-1``; :meth:`subset` selects rows).
        resize: ``None``: the RandomResizedCrop / short-side-resize crops; an int: the square
            crops of a ``resize x resize`` image (:func:`dmlnb.data.crops.square_crop_boxes`,
            :func:`~dmlnb.data.crops.square_centre_boxes`). With a cache of side ``resize`` a
            square crop copies cache pixels (no resampling).
        padding: the square train crop's black padding on every side (``resize`` only).
    """

    def __init__(
        self,
        images: DecodedImages,
        labels: Tensor | Sequence[int],
        image_size: int,
        *,
        train: bool,
        rows: Tensor | None = None,
        resize: int | None = None,
        padding: int = 0,
    ) -> None:
        if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
            raise ValueError(f"image_size must be a positive int, got {image_size!r}")
        if resize is not None:
            check_square_crop(image_size, resize, padding)
        elif padding != 0:
            raise ValueError(
                f"padding={padding!r} pads the square crops only; set resize too, or padding=0"
            )
        self.images = images
        self.rows = (
            torch.arange(len(images))
            if rows is None
            else torch.as_tensor(rows, dtype=torch.long).cpu()
        )
        labels = torch.as_tensor(labels)
        if labels.dim() != 1 or labels.shape[0] != self.rows.shape[0]:
            raise ValueError(
                f"labels must have shape ({self.rows.shape[0]},), got {tuple(labels.shape)}"
            )
        if labels.dtype.is_floating_point or labels.dtype == torch.bool:
            raise TypeError(f"labels must be an integer tensor, got dtype {labels.dtype}")
        self.labels = labels.long().cpu()
        self.image_size = image_size
        self.train = train
        self.resize = resize
        self.padding = padding

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (3, self.image_size, self.image_size)

    @property
    def paths(self) -> list[Path]:
        """The source file of each item."""
        return [self.images.path(r) for r in self.rows.tolist()]

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        """One item ``(image (3, size, size) float32 on the CPU, label)``; the train crop draws from
        torch's global generator, as torchvision's transforms do."""
        x, y = self.get_batch(torch.tensor([index]))
        return x[0], int(y[0])

    def get_batch(
        self,
        indices: Tensor,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Images ``(B, 3, size, size)`` float32 and labels ``(B,)`` long of ``indices`` ``(B,)``,
        on ``device`` (default the CPU), cropped there in one op.

        ``generator`` (a CPU generator; default torch's global one) draws the train boxes and
        flips; the test crop draws nothing.
        """
        n = self.rows.shape[0]
        idx = torch.as_tensor(indices, dtype=torch.long).cpu().reshape(-1)  # (B,)
        if idx.numel() and (int(idx.min()) < -n or int(idx.max()) >= n):
            raise IndexError(
                f"indices must lie in [-{n}, {n}) for a dataset of {n} items, got "
                f"{idx.tolist()[:8]}"
            )
        target = torch.device(device) if device is not None else torch.device("cpu")
        rows = self.rows[idx]  # (B,)
        sizes = self.images.sizes[rows]  # (B, 2)
        if self.resize is not None and self.train:
            boxes = square_crop_boxes(
                sizes, self.image_size, self.resize, self.padding, generator
            )  # (B, 4)
            flips = horizontal_flips(len(rows), generator)  # (B,)
        elif self.resize is not None:
            boxes, flips = square_centre_boxes(sizes, self.image_size, self.resize), None  # (B, 4)
        elif self.train:
            boxes = random_resized_crop_boxes(sizes, generator)  # (B, 4)
            flips = horizontal_flips(len(rows), generator)  # (B,)
        else:
            boxes, flips = centre_crop_boxes(sizes, self.image_size), None  # (B, 4)
        theta = crop_theta(sizes, boxes, flips)  # (B, 2, 3)
        side = self.images.size
        buffer = torch.empty(
            (len(rows), 3, side, side), dtype=torch.uint8, pin_memory=target.type == "cuda"
        )
        pixels = to_device(self.images.read(rows, out=buffer), target)  # (B, 3, S, S) uint8
        padding_mode = "border" if self.resize is None else "zeros"  # the square crops pad black
        x = crop_batch(
            pixels, to_device(theta, target), self.image_size, padding_mode=padding_mode
        )  # (B, 3, size, size)
        return x, to_device(self.labels[idx], target)

    def _like(
        self, labels: Tensor | Sequence[int], rows: Tensor, train: bool
    ) -> CachedImageDataset:
        """A dataset of the same cache and crops with other labels, rows or train flag."""
        return CachedImageDataset(
            self.images,
            labels,
            self.image_size,
            train=train,
            rows=rows,
            resize=self.resize,
            padding=self.padding,
        )

    def subset(self, indices: Tensor | Sequence[int]) -> CachedImageDataset:
        """A new dataset holding the items ``indices`` (same cache, crop and labels)."""
        idx = torch.as_tensor(indices, dtype=torch.long)  # (M,)
        return self._like(self.labels[idx], self.rows[idx], self.train)

    def relabel(self, labels: Tensor | Sequence[int]) -> CachedImageDataset:
        """The same images and crop with ``labels`` ``(N,)`` (e.g. all ``-1`` to hide them)."""
        return self._like(labels, self.rows, self.train)

    def for_evaluation(self) -> CachedImageDataset:
        """The same items with the deterministic test crop (no random crop or flip)."""
        return self._like(self.labels, self.rows, False)
