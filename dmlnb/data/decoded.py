"""A decoded-image cache: every image of a file list decoded once, resized to ``S x S`` uint8 and
kept in one memory-mapped ``.npy`` file, so that training reads pixels instead of decoding JPEGs.

:func:`decoded_images` returns a :class:`DecodedImages`: ``pixels`` ``(N, 3, S, S)`` uint8 (a
read-only ``numpy.memmap``: the operating system pages it in and shares it between processes)
and ``sizes`` ``(N, 2)``, each original ``(width, height)`` (crop boxes are drawn in the original
coordinates, :mod:`dmlnb.data.crops`).

* Resizing squashes the whole image to ``S x S`` (aspect ratio not kept; the crops undo it) with
  PIL's antialiased bicubic filter. ``S`` is a parameter; :func:`default_cache_size` gives
  ``round(image_size * 288 / 224)`` (288 for 224-pixel crops), so that a typical crop is
  resampled from at least as many pixels as it has.
* Files: ``<cache_dir>/decoded-<name>-<S>px-<hash>.npy`` and ``... .sizes.npy``, under
  :func:`dmlnb.data.cache.cache_dir` (``$DMLNB_CACHE``). The hash covers the relative paths, every
  file's size and modification time (:func:`dmlnb.data.cache.files_fingerprint`: 0.3 to 0.8 s for
  100,000 files on a local disk), ``S`` and the format version, so a changed, added or removed
  image makes a new entry.
  ``N * 3 * S^2`` bytes: 1.5 GB for CUB-200-2011's 5,864 training images at ``S = 288``.
* Built in parallel (DataLoader workers that write their rows straight into the file), written
  under a temporary name and renamed when complete; an unreadable entry is rebuilt with a warning.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from dmlnb.data.base import decode_image
from dmlnb.data.cache import atomic_path, cache_dir, cache_path, files_fingerprint
from dmlnb.env import show_progress

__all__ = ["DecodedImages", "decoded_images", "default_cache_size", "decode_resized"]

_FORMAT = 1  # bump when the stored pixels change meaning (filter, layout)
_RESAMPLE = Image.Resampling.BICUBIC
_IMAGES_PER_WORKER = 64  # fewer images than this per worker are decoded in-process


def default_cache_size(image_size: int) -> int:
    """``round(image_size * 288 / 224)``: the cache side ``S`` for ``image_size`` crops."""
    return round(image_size * 288 / 224)


def decode_resized(path: Path, size: int) -> tuple[np.ndarray, tuple[int, int]]:
    """``(pixels (3, size, size) uint8, (width, height) of the original)`` of one image file
    (decoded by :func:`dmlnb.data.base.decode_image`, RGB; errors name the file)."""
    image = decode_image(path)
    resized = image.resize((size, size), _RESAMPLE)
    return np.asarray(resized).transpose(2, 0, 1), image.size


class DecodedImages:
    """Images decoded to ``S x S``: ``pixels`` ``(N, 3, S, S)`` uint8 (read-only memory map of
    ``file``), ``sizes`` ``(N, 2)`` long (original width, height), decoded from the files
    ``root / rel_paths[k]``.

    Pickling stores the file name, not the pixels (a worker process maps the file again).
    """

    def __init__(self, file: Path, sizes: Tensor, root: Path, rel_paths: Sequence[str]) -> None:
        self.file = file
        self.sizes = sizes
        self.root = root
        self.rel_paths = list(rel_paths)
        self.pixels: np.ndarray = np.load(file, mmap_mode="r")
        expected = (len(self.rel_paths), 3)
        if (
            self.pixels.dtype != np.uint8
            or self.pixels.ndim != 4
            or self.pixels.shape[:2] != expected
        ):
            raise ValueError(
                f"{file} holds {self.pixels.dtype} {self.pixels.shape}, not ({expected[0]}, 3, S, "
                "S) uint8"
            )
        if tuple(sizes.shape) != (len(self), 2) or (len(self) and int(sizes.min()) < 1):
            raise ValueError(
                f"the sizes beside {file} are not ({len(self)}, 2) positive (width, height)"
            )

    @property
    def size(self) -> int:
        """The cache side ``S``."""
        return int(self.pixels.shape[-1])

    def __len__(self) -> int:
        return len(self.rel_paths)

    def path(self, row: int) -> Path:
        """The source file of ``row``."""
        return self.root / self.rel_paths[row]

    def read(self, rows: Tensor, out: Tensor | None = None) -> Tensor:
        """Pixels of ``rows`` ``(B,)`` as ``(B, 3, S, S)`` uint8 on the CPU, written into ``out``
        when given (e.g. pinned memory, for an asynchronous copy to the GPU)."""
        shape = (rows.numel(), *self.pixels.shape[1:])
        if out is None:
            out = torch.empty(shape, dtype=torch.uint8)
        elif tuple(out.shape) != shape or out.dtype != torch.uint8:
            raise ValueError(f"out must be {shape} uint8, got {tuple(out.shape)} {out.dtype}")
        np.take(self.pixels, rows.numpy(), axis=0, out=out.numpy(), mode="clip")  # rows are valid
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "sizes": self.sizes,
            "root": self.root,
            "rel_paths": self.rel_paths,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["file"], state["sizes"], state["root"], state["rel_paths"])  # type: ignore[misc]


class _DecodeJob(Dataset):
    """Item ``k``: decode ``root / rel_paths[k]`` into row ``k`` of the ``.npy`` file ``out``
    (mapped once per process); returns the original ``(width, height)`` ``(2,)``."""

    def __init__(self, root: Path, rel_paths: Sequence[str], size: int, out: Path) -> None:
        self.root, self.rel_paths, self.size, self.out = root, rel_paths, size, out
        self._pixels: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.rel_paths)

    def __getitem__(self, k: int) -> Tensor:
        if self._pixels is None:
            self._pixels = np.load(self.out, mmap_mode="r+")
        self._pixels[k], size = decode_resized(self.root / self.rel_paths[k], self.size)
        return torch.tensor(size)


def _decode_all(job: _DecodeJob, workers: int, desc: str, progress: bool) -> Tensor:
    """Run ``job`` into its new ``.npy`` file; returns the sizes ``(N, 2)``."""
    from tqdm import tqdm

    n = len(job)
    np.lib.format.open_memmap(
        job.out, mode="w+", dtype=np.uint8, shape=(n, 3, job.size, job.size)
    ).flush()
    loader = DataLoader(job, batch_size=16, num_workers=workers)
    sizes = []
    with tqdm(total=n, desc=desc, disable=not progress, leave=False) as bar:
        for chunk in loader:  # (b, 2)
            sizes.append(chunk)
            bar.update(len(chunk))
    return torch.cat(sizes).long()  # (N, 2)


def _open(images: Path, sizes: Path, root: Path, rel_paths: Sequence[str]) -> DecodedImages | None:
    """The cache entry if both files are present and readable; ``None`` (and a warning for a
    damaged one) otherwise."""
    if not (images.is_file() and sizes.is_file()):
        return None
    try:
        return DecodedImages(images, torch.from_numpy(np.load(sizes)).long(), root, rel_paths)
    except (OSError, ValueError, EOFError) as err:  # truncated, foreign or mismatched: rebuild
        warnings.warn(
            f"rebuilding the unreadable decoded-image cache {images}: {err}", stacklevel=3
        )
        return None


def _unwritable(folder: Path, why: str) -> OSError:
    return OSError(
        f"cannot write the decoded-image cache in {folder}: {why}. Set the environment variable "
        "DMLNB_CACHE to a writable folder with enough free space, or pass the dataset option "
        "decoded_cache=False to decode the image files on every access instead"
    )


def decoded_images(
    root: Path,
    rel_paths: Sequence[str],
    size: int,
    *,
    name: str,
    workers: int | None = None,
    progress: bool | None = None,
) -> DecodedImages:
    """The images ``root / rel_paths[k]`` decoded to ``size x size``, from the cache or built
    into it (see the module docstring).

    Args:
        root: the dataset folder; ``rel_paths`` are relative to it (and part of the cache key, so
            the data may move to another root).
        size: the cache side ``S``.
        name: readable part of the file name (e.g. ``"cub200-train"``).
        workers: decoding processes; default one per available CPU core, at most one per 64
            images (none for small sets: decoded in this process).
        progress: show a tqdm bar while building (default: :func:`dmlnb.env.show_progress`).

    Raises:
        FileNotFoundError: an image file is missing (names it).
        OSError: an image cannot be decoded (names it), or the cache folder cannot be written or
            has too little free space (names the folder, ``DMLNB_CACHE`` and
            ``decoded_cache=False``).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"the cache size must be a positive int, got {size!r}")
    n = len(rel_paths)
    key = {"format": _FORMAT, "size": size, "files": files_fingerprint(root, rel_paths)}
    images = cache_path(f"decoded-{name}-{size}px", key, ".npy")
    sizes = images.with_suffix(".sizes.npy")
    found = _open(images, sizes, root, rel_paths)
    if found is not None:
        return found
    folder = cache_dir()
    need = n * 3 * size * size
    try:
        folder.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(folder).free
    except OSError as err:
        raise _unwritable(folder, str(err)) from err
    if free < need:
        raise _unwritable(
            folder,
            f"{n} images at {size}x{size} need {need / 1e9:.2f} GB, {free / 1e9:.2f} GB are free",
        )
    if workers is None:
        cores = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1
        )
        workers = min(cores, n // _IMAGES_PER_WORKER)
    progress = show_progress(progress)
    try:
        with atomic_path(images) as tmp_images:
            job = _DecodeJob(root, rel_paths, size, tmp_images)
            found_sizes = _decode_all(job, workers, f"decoding {name} to {size}px", progress)
            with atomic_path(sizes) as tmp_sizes, open(tmp_sizes, "wb") as f:
                np.save(f, found_sizes.numpy().astype(np.int32))
    except PermissionError as err:
        raise _unwritable(folder, str(err)) from err
    return DecodedImages(images, found_sizes, root, rel_paths)
