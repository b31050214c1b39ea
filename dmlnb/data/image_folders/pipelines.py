"""The PIL pipelines of the benchmarks' crops (:func:`image_transforms`, for the path that decodes
every file on access) and the check of the crop options (see :mod:`dmlnb.data.image_folders`)."""

from __future__ import annotations

from torchvision import transforms

from dmlnb.data.crops import (
    CROP_RATIO,
    CROP_SCALE,
    IMAGENET_MEAN,
    IMAGENET_STD,
    check_square_crop,
    test_resize,
)

__all__ = ["image_transforms", "check_crops"]


def image_transforms(
    image_size: int = 224, resize: int | None = None, padding: int = 0
) -> tuple[transforms.Compose, transforms.Compose]:
    """``(train, test)`` PIL -> ``(3, image_size, image_size)`` float tensor pipelines.

    ``resize=None``: train ``RandomResizedCrop(image_size, scale=CROP_SCALE, ratio=CROP_RATIO)``
    + horizontal flip; test: resize the short side to ``round(image_size * 256 / 224)`` and
    centre-crop ``image_size``. ``resize=R`` (the square crops): train ``Resize((R, R))``,
    ``RandomCrop(image_size, padding=padding)`` (black padding) + horizontal flip; test
    ``Resize((R, R))``, ``CenterCrop(image_size)``. Both normalise with the ImageNet mean and
    standard deviation (the backbones are ImageNet-pretrained).
    """
    check_crops(image_size, resize, padding)
    normalise = [transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    if resize is not None:
        square = transforms.Resize((resize, resize))
        train = transforms.Compose(
            [
                square,
                transforms.RandomCrop(image_size, padding=padding),
                transforms.RandomHorizontalFlip(),
                *normalise,
            ]
        )
        return train, transforms.Compose([square, transforms.CenterCrop(image_size), *normalise])
    train = transforms.Compose(
        [
            transforms.RandomResizedCrop(image_size, scale=CROP_SCALE, ratio=CROP_RATIO),
            transforms.RandomHorizontalFlip(),
            *normalise,
        ]
    )
    test = transforms.Compose(
        [
            transforms.Resize(test_resize(image_size)),
            transforms.CenterCrop(image_size),
            *normalise,
        ]
    )
    return train, test


def _check_image_size(image_size: int) -> None:
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive int, got {image_size!r}")


def check_crops(image_size: int, resize: int | None, padding: int) -> None:
    """The crop options (see the module docstring); an error names the value and the fix."""
    _check_image_size(image_size)
    if resize is not None:
        check_square_crop(image_size, resize, padding)
    elif padding != 0:
        raise ValueError(
            f"dataset option padding={padding!r} pads the square crops only; set resize too, or "
            "padding=0"
        )
