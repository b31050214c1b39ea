"""The options every benchmark loader takes (see :mod:`dmlnb.data.image_folders`): the crops
(:class:`Crops`), the decoded cache's side (:func:`cache_side`), and the decorator that registers
a benchmark's reader as a loader taking them (:func:`image_loader`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dmlnb.data.base import DatasetSplits
from dmlnb.data.decoded import default_cache_size
from dmlnb.data.image_folders.pipelines import check_crops
from dmlnb.data.registry import register_loader

__all__ = ["Crops", "cache_side", "Build", "image_loader"]


@dataclass(frozen=True)
class Crops:
    """The crop options of a loader (see the module docstring), checked."""

    image_size: int
    resize: int | None = None
    padding: int = 0

    def __post_init__(self) -> None:
        check_crops(self.image_size, self.resize, self.padding)


def cache_side(decoded_cache: bool, cache_size: int | None, crops: Crops) -> int | None:
    """The decoded cache's side for the loader options, or ``None`` for the PIL path; an error
    names the option and the fix."""
    image_size = crops.image_size
    if not isinstance(decoded_cache, bool):
        raise TypeError(
            f"dataset option decoded_cache must be True (decode once into a cache, crop on the "
            f"GPU) or False (decode every access with PIL), got {decoded_cache!r}"
        )
    if not decoded_cache:
        if cache_size is not None:
            raise ValueError(
                f"dataset option cache_size={cache_size!r} only applies with decoded_cache=True; "
                "drop cache_size or set decoded_cache=True"
            )
        return None
    if cache_size is None:
        return default_cache_size(image_size) if crops.resize is None else crops.resize
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
        raise ValueError(
            f"dataset option cache_size must be a positive int (pixels of the cached square "
            f"images, e.g. {default_cache_size(image_size)} for image_size={image_size}) or None "
            f"for that default, got {cache_size!r}"
        )
    return cache_size


#: A benchmark's reader, ``build(root, crops, cache_side) -> DatasetSplits``
#: (:func:`image_loader`).
Build = Callable[[Path, Crops, "int | None"], DatasetSplits]


def image_loader(name: str) -> Callable[[Build], Callable[..., DatasetSplits]]:
    """Register ``build(root, crops, cache_side)`` under ``name`` as a loader that takes the options
    of every benchmark (see the module docstring: ``image_size``, ``resize``, ``padding``,
    ``decoded_cache``, ``cache_size``), checked into the crops and the decoded cache's side
    (``None``: the PIL path); the loader keeps ``build``'s name and docstring."""

    def decorator(build: Build) -> Callable[..., DatasetSplits]:
        def load(
            root: Path,
            *,
            image_size: int = 224,
            resize: int | None = None,
            padding: int = 0,
            decoded_cache: bool = True,
            cache_size: int | None = None,
        ) -> DatasetSplits:
            crops = Crops(image_size, resize, padding)
            return build(root, crops, cache_side(decoded_cache, cache_size, crops))

        return register_loader(name, load, build)

    return decorator
