"""The DML image crops as batched tensor operations: boxes drawn like torchvision's, applied to a
whole batch in one ``grid_sample``.

The train crop is ``RandomResizedCrop(size, scale=CROP_SCALE, ratio=CROP_RATIO)`` followed by a
horizontal flip with probability 1/2; the test crop resizes the short side to
:func:`test_resize` and takes the centre ``size x size`` square. Both then normalise with the
ImageNet mean and standard deviation (:func:`dmlnb.data.image_folders.image_transforms` is the
PIL pipeline of the same crops).

The *square* crops (a loader's ``resize`` option) are the other scheme of the DML papers: the
whole image is resized to a ``resize x resize`` square (its aspect ratio not kept), then the
train crop pads it by ``padding`` black pixels on every side and cuts a random ``size x size``
square (+ the flip): torchvision's ``Resize((resize, resize))``, ``RandomCrop(size,
padding=padding)``, ``RandomHorizontalFlip()`` (:func:`square_crop_boxes`); the test crop is
its centre ``size x size`` square, ``CenterCrop(size)`` (:func:`square_centre_boxes`). Easy
Positive (Xuan et al. 2020, Sec. 5.1) resizes to 256 x 256 and crops 256 from the image padded
by 10 pixels; the facility-location paper (Song et al. 2017, Sec. 3.5) resizes to 256 x 256
and crops 227, at random for training and in the centre for testing.

A box ``(x0, y0, w, h)`` is given in the pixel coordinates of the *original* image (``W x H``,
pixel ``k`` covering ``[k, k + 1)``), so the crops do not depend on how the image is stored:
:func:`crop_theta` maps boxes to the normalised coordinates of any stored resampling of the
whole image (e.g. the ``S x S`` decoded cache of :mod:`dmlnb.data.decoded`) and
:func:`crop_batch` samples every box of the batch at once (bilinear, ``align_corners=False``,
border pixels repeated).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "CROP_SCALE",
    "CROP_RATIO",
    "test_resize",
    "crop_description",
    "crop_options",
    "random_resized_crop_boxes",
    "centre_crop_boxes",
    "check_square_crop",
    "square_crop_boxes",
    "square_centre_boxes",
    "horizontal_flips",
    "crop_theta",
    "crop_batch",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_SCALE = (0.08, 1.0)
"""Range of the crop's area as a fraction of the image's (torchvision's default)."""
CROP_RATIO = (3 / 4, 4 / 3)
"""Range of the crop's aspect ratio ``w / h`` (torchvision's default)."""
_ATTEMPTS = 10  # torchvision's tries before it falls back to a centre crop


def test_resize(image_size: int) -> int:
    """The short side the test transform resizes to before its centre crop:
    ``round(size * 256 / 224)``."""
    return round(image_size * 256 / 224)


def crop_options(dataset_options: Mapping[str, Any]) -> tuple[int, int | None, int]:
    """``(image_size, resize, padding)`` of an image-folder dataset's options (the loaders'
    defaults where an option is not given: no ``resize``, no ``padding``)."""
    return (
        dataset_options["image_size"],
        dataset_options.get("resize"),
        dataset_options.get("padding", 0),
    )


def crop_description(image_size: int, resize: int | None = None, padding: int = 0) -> str:
    """What the image loaders do to a training and a test image at ``image_size``, in words (the
    deviations tables quote it), as :func:`dmlnb.data.image_folders.image_transforms` does it: the
    random resized crop and flip and the test resize and centre crop, or with ``resize=R`` the
    square crops (train: a random crop of the R x R image padded by ``padding`` px, and a flip;
    test: its centre crop)."""
    if resize is not None:
        padded = f", padded by {padding} px on each side," if padding else ","
        return (
            f"train: resized to {resize} x {resize}{padded} a random {image_size} x {image_size} "
            f"crop and a random horizontal flip; test: resized to {resize} x {resize}, centre "
            f"crop {image_size} x {image_size}"
        )
    return (
        f"train: a random crop of {CROP_SCALE[0]:.0%}-{CROP_SCALE[1]:.0%} of the image's area, "
        f"aspect {CROP_RATIO[0]:.2f}-{CROP_RATIO[1]:.2f}, resized to {image_size} x {image_size}, "
        "and a random horizontal flip; test: the short side resized to "
        f"{test_resize(image_size)}, centre crop {image_size} x {image_size}"
    )


def _check_sizes(sizes: Tensor) -> Tensor:
    if sizes.dim() != 2 or sizes.shape[1] != 2:
        raise ValueError(f"sizes must be (B, 2) (width, height), got shape {tuple(sizes.shape)}")
    if sizes.numel() and int(sizes.min()) < 1:
        raise ValueError(f"image sizes must be positive, got a minimum of {int(sizes.min())}")
    return sizes.to(torch.float64)


def random_resized_crop_boxes(
    sizes: Tensor,
    generator: torch.Generator | None = None,
    scale: tuple[float, float] = CROP_SCALE,
    ratio: tuple[float, float] = CROP_RATIO,
) -> Tensor:
    """Boxes ``(B, 4)`` float64 ``(x0, y0, w, h)`` drawn as ``RandomResizedCrop.get_params`` draws
    them for images of ``sizes`` ``(B, 2)`` ``(width, height)``, all rows at once.

    Per image: up to 10 tries of an area fraction uniform in ``scale`` and a log aspect ratio
    uniform in ``log(ratio)`` (float32 draws and ``exp``, then ``round(sqrt(...))`` in float64,
    exactly torchvision's arithmetic); the first try whose ``w x h`` fits is placed at a uniform
    integer offset; if none fits, torchvision's centre-crop fallback. The draws come from
    ``generator`` (default: torch's global generator) in another order than torchvision's loop,
    so the boxes have torchvision's distribution, not its exact stream.
    """
    wh = _check_sizes(sizes)  # (B, 2)
    width, height = wh[:, 0], wh[:, 1]  # (B,), (B,)
    n = wh.shape[0]
    lo, hi = torch.log(torch.tensor(ratio)).tolist()  # float32 logs, as torchvision
    area_u = torch.empty(n, _ATTEMPTS).uniform_(
        scale[0], scale[1], generator=generator
    )  # (B, T) float32
    log_u = torch.empty(n, _ATTEMPTS).uniform_(lo, hi, generator=generator)  # (B, T) float32
    offset_u = torch.rand(n, 2, generator=generator, dtype=torch.float64)  # (B, 2) in [0, 1)
    target = (width * height)[:, None] * area_u.double()  # (B, T)
    aspect = torch.exp(log_u).double()  # (B, T): exp in float32, as torchvision
    w = torch.round(torch.sqrt(target * aspect))  # (B, T) half to even, as Python's round
    h = torch.round(torch.sqrt(target / aspect))  # (B, T)
    fits = (w > 0) & (w <= width[:, None]) & (h > 0) & (h <= height[:, None])  # (B, T)
    first = fits.to(torch.uint8).argmax(
        dim=1, keepdim=True
    )  # (B, 1): first fitting try (0 if none)
    w, h = w.gather(1, first)[:, 0], h.gather(1, first)[:, 0]  # (B,), (B,)
    y0 = torch.floor(offset_u[:, 0] * (height - h + 1))  # (B,) uniform in 0..H-h
    x0 = torch.floor(offset_u[:, 1] * (width - w + 1))  # (B,) uniform in 0..W-w
    # torchvision's fallback: the whole image, cut to the nearest allowed aspect ratio, centred
    in_ratio = width / height  # (B,)
    low, high = min(ratio), max(ratio)
    fw = torch.where(
        in_ratio < low, width, torch.where(in_ratio > high, torch.round(height * high), width)
    )  # (B,)
    fh = torch.where(in_ratio < low, torch.round(width / low), height)  # (B,)
    found = fits.any(dim=1)  # (B,)
    boxes = torch.stack([x0, y0, w, h], dim=1)  # (B, 4)
    fallback = torch.stack(
        [
            torch.div(width - fw, 2, rounding_mode="floor"),
            torch.div(height - fh, 2, rounding_mode="floor"),
            fw,
            fh,
        ],
        dim=1,
    )  # (B, 4)
    return torch.where(found[:, None], boxes, fallback)


def centre_crop_boxes(sizes: Tensor, image_size: int) -> Tensor:
    """Boxes ``(B, 4)`` float64 ``(x0, y0, w, h)`` of the test transform for images of ``sizes``
    ``(B, 2)`` ``(width, height)``: torchvision's ``Resize(test_resize(image_size))`` output size
    (short side ``R``, long side ``int(R * long / short)``) and ``CenterCrop(image_size)`` offsets
    (``round((side - size) / 2)``), mapped back to the original pixel coordinates."""
    wh = _check_sizes(sizes)  # (B, 2)
    width, height = wh[:, 0], wh[:, 1]  # (B,), (B,)
    r = float(test_resize(image_size))
    portrait = width <= height  # (B,): the width is the short side
    long_side = torch.floor(r * torch.maximum(width, height) / torch.minimum(width, height))  # (B,)
    new_w = torch.where(portrait, torch.full_like(width, r), long_side)  # (B,)
    new_h = torch.where(portrait, long_side, torch.full_like(height, r))  # (B,)
    left = torch.round((new_w - image_size) / 2)  # (B,) in resized pixels
    top = torch.round((new_h - image_size) / 2)  # (B,)
    sx, sy = width / new_w, height / new_h  # (B,): original pixels per resized pixel
    return torch.stack([left * sx, top * sy, image_size * sx, image_size * sy], dim=1)  # (B, 4)


def check_square_crop(image_size: int, resize: int, padding: int = 0) -> None:
    """Raise a ``ValueError`` naming the value and the fix unless ``size x size`` crops can be cut
    from a ``resize x resize`` square padded by ``padding`` (train) and from the square itself
    (test): positive ints with ``resize >= image_size`` and ``padding >= 0``."""
    for name, value, low in (
        ("image_size", image_size, 1),
        ("resize", resize, 1),
        ("padding", padding, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if resize < image_size:
        raise ValueError(
            f"resize={resize} is smaller than image_size={image_size}: the test crop is the centre "
            f"image_size square of the resize x resize image; use resize >= {image_size}"
        )


def square_crop_boxes(
    sizes: Tensor,
    image_size: int,
    resize: int,
    padding: int = 0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Boxes ``(B, 4)`` float64 ``(x0, y0, w, h)`` of the square train crop for images of
    ``sizes`` ``(B, 2)`` ``(width, height)``: ``Resize((resize, resize))`` then
    ``RandomCrop(image_size, padding=padding)``.

    In the square's pixels the box is ``(j - padding, i - padding, image_size, image_size)``
    with ``i``, ``j`` uniform integers in ``0..resize + 2 padding - image_size`` (RandomCrop's
    offsets in the padded square); it is mapped back to the original pixels (``x * W / resize``,
    ``y * H / resize``). Up to ``padding`` square pixels of it lie outside the image: crop with
    ``crop_batch(..., padding_mode="zeros")`` so that they are black, as RandomCrop's padding.
    The offsets come from ``generator`` (default: torch's global generator).
    """
    wh = _check_sizes(sizes)  # (B, 2)
    check_square_crop(image_size, resize, padding)
    span = resize + 2 * padding - image_size  # offsets 0..span in the padded square
    offsets = torch.randint(
        0, span + 1, (wh.shape[0], 2), generator=generator
    ).double()  # (B, 2): i (y), j (x)
    scale = wh / resize  # (B, 2): original pixels per square pixel, (x, y)
    corner = offsets.flip(1) - padding  # (B, 2): (x0, y0) in the square
    return torch.cat([corner * scale, image_size * scale], dim=1)  # (B, 4)


def square_centre_boxes(sizes: Tensor, image_size: int, resize: int) -> Tensor:
    """Boxes ``(B, 4)`` float64 ``(x0, y0, w, h)`` of the square test crop for images of
    ``sizes`` ``(B, 2)``: ``Resize((resize, resize))`` then ``CenterCrop(image_size)``, whose
    offset is ``round((resize - image_size) / 2)`` (half to even) on both axes, mapped back to
    the original pixels."""
    wh = _check_sizes(sizes)  # (B, 2)
    check_square_crop(image_size, resize)
    offset = float(round((resize - image_size) / 2))
    scale = wh / resize  # (B, 2)
    return torch.cat([offset * scale, image_size * scale], dim=1)  # (B, 4)


def horizontal_flips(n: int, generator: torch.Generator | None = None) -> Tensor:
    """``(n,)`` bool, each ``True`` with probability 1/2 (``RandomHorizontalFlip``'s
    ``rand < 0.5``)."""
    return torch.rand(n, generator=generator) < 0.5


def crop_theta(sizes: Tensor, boxes: Tensor, flips: Tensor | None = None) -> Tensor:
    """Affine matrices ``(B, 2, 3)`` float32 for ``F.affine_grid(..., align_corners=False)`` that
    sample box ``boxes[b]`` (``(x0, y0, w, h)`` in the pixels of an image of ``sizes[b]`` =
    ``(width, height)``) from any resampling of the whole image, mirrored where ``flips[b]``.

    Output pixel ``p`` of ``s`` (normalised ``u = (2p + 1) / s - 1``) is the original coordinate
    ``x0 + (p + 1/2) w / s``, i.e. the normalised input coordinate
    ``(w / W) u + (2 x0 + w) / W - 1``; a flip negates the slope.
    """
    wh = _check_sizes(sizes)  # (B, 2)
    if boxes.shape != (wh.shape[0], 4):
        raise ValueError(
            f"boxes must be ({wh.shape[0]}, 4) (x0, y0, w, h), got shape {tuple(boxes.shape)}"
        )
    box = boxes.to(torch.float64)  # (B, 4)
    slope = box[:, 2:] / wh  # (B, 2): (w / W, h / H)
    centre = (2 * box[:, :2] + box[:, 2:]) / wh - 1  # (B, 2)
    if flips is not None:
        slope[:, 0] = torch.where(flips.to(torch.bool), -slope[:, 0], slope[:, 0])
    theta = torch.zeros(wh.shape[0], 2, 3, dtype=torch.float64)  # (B, 2, 3)
    theta[:, 0, 0], theta[:, 1, 1] = slope[:, 0], slope[:, 1]
    theta[:, :, 2] = centre
    return theta.float()


def crop_batch(
    pixels: Tensor,
    theta: Tensor,
    size: int,
    mean: tuple[float, ...] = IMAGENET_MEAN,
    std: tuple[float, ...] = IMAGENET_STD,
    padding_mode: str = "border",
) -> Tensor:
    """Crop, resize and flip every image of a batch in one op and normalise it.

    Args:
        pixels: ``(B, C, S, S')`` uint8 (0-255) or float images (0-1 scale times
            255), on any device.
        theta: ``(B, 2, 3)`` from :func:`crop_theta`, on the same device.
        size: output side.
        mean, std: per-channel normalisation of ``pixels / 255``.
        padding_mode: what a box reads outside the image: ``"border"`` (the border pixels
            repeated) or ``"zeros"`` (black, pixel value 0: the padding of the square crops).

    Returns:
        ``(B, C, size, size)`` float32 ``(pixels / 255 - mean) / std`` sampled bilinearly
        (``grid_sample``, ``align_corners=False``; no antialiasing).
    """
    if padding_mode not in ("border", "zeros"):
        raise ValueError(f"padding_mode must be 'border' or 'zeros', got {padding_mode!r}")
    if pixels.dim() != 4 or theta.shape != (pixels.shape[0], 2, 3):
        raise ValueError(
            f"pixels must be (B, C, H, W) and theta (B, 2, 3); got {tuple(pixels.shape)} and "
            f"{tuple(theta.shape)}"
        )
    b, c = pixels.shape[:2]
    grid = F.affine_grid(
        theta.float(), [b, c, size, size], align_corners=False
    )  # (B, size, size, 2)
    out = F.grid_sample(
        pixels.float(), grid, mode="bilinear", padding_mode=padding_mode, align_corners=False
    )  # (B, C, size, size)
    if len(mean) != c or len(std) != c:
        raise ValueError(
            f"mean and std need {c} values (one per channel), got {len(mean)} and {len(std)}"
        )
    for k in range(c):  # Python scalars: no host-to-device copy that could stall the stream
        out[:, k].mul_(1 / (255 * std[k])).sub_(mean[k] / std[k])  # (B, size, size)
    return out
