"""Omniglot (Lake, Salakhutdinov & Tenenbaum, Science 2015): hand-drawn characters of 50 alphabets,
20 drawings per character; one class per (alphabet, character).

Two registered sets, both read straight from the official zip archives (no extraction, so the
data folder may be read-only):

* ``omniglot-small``: ``images_background_small1.zip`` (5 alphabets, 136 characters) for training
  and the alphabets of ``images_background_small2.zip`` that small1 lacks (Japanese_(katakana),
  Sanskrit, Tagalog: 106 characters) for testing. Greek and Latin are in both archives and stay
  on the training side, so no alphabet is shared.
* ``omniglot``: the full ``images_background.zip`` (964 characters) / ``images_evaluation.zip``
  (659 characters) split that ``torchvision.datasets.Omniglot`` downloads.

Images are resized to ``image_size`` with PIL's antialiasing bilinear filter and inverted, so
strokes are bright (1) on a 0 background; tensors are ``(N, 1, image_size, image_size)`` in
[0, 1]. Each archive is decoded once per process (``functools.lru_cache``) and once per machine
(a ``.pt`` file under :func:`dmlnb.data.cache.cache_dir`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.datasets import Omniglot
from torchvision.datasets.utils import download_url

from dmlnb.data.base import DatasetSplits, InMemoryDataset, decode_image, remap_labels
from dmlnb.data.cache import cached, file_fingerprint
from dmlnb.data.registry import missing_files_error, register_loader
from dmlnb.data.semisup import semi_supervised

__all__ = ["load_omniglot_small", "load_omniglot"]

SOURCE = "https://github.com/brendenlake/omniglot (folder python/)"
RAW_URL = "https://raw.githubusercontent.com/brendenlake/omniglot/master/python"
SMALL_SHA256 = {
    "images_background_small1.zip": (
        "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4"
    ),
    "images_background_small2.zip": (
        "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f"
    ),
}
_CACHE_VERSION = 1


def _decode_zip(path: Path, image_size: int) -> dict:
    """Decode every PNG of an Omniglot archive.

    Returns ``{"images": (N, S, S) uint8, strokes bright; "labels": (N,) long index into
    "classes"; "classes": ["Alphabet/characterNN", ...] sorted}``.
    """
    with zipfile.ZipFile(path) as archive:
        members = sorted(n for n in archive.namelist() if n.endswith(".png"))
        if not members:
            raise ValueError(f"{path} holds no PNG images; is it an Omniglot archive?")
        keys = ["/".join(Path(m).parts[-3:-1]) for m in members]  # "Alphabet/characterNN"
        pixels = np.empty((len(members), image_size, image_size), dtype=np.uint8)
        for i, member in enumerate(members):
            grey = decode_image(io.BytesIO(archive.read(member)), "L", name=f"{member} in {path}")
            if grey.size != (image_size, image_size):
                grey = grey.resize((image_size, image_size), Image.Resampling.BILINEAR)
            pixels[i] = np.asarray(grey)
    classes = sorted(set(keys))
    index = {c: i for i, c in enumerate(classes)}
    return {
        "images": 255 - torch.from_numpy(pixels),  # (N, S, S) inverted: strokes 255, paper 0
        "labels": torch.tensor([index[k] for k in keys], dtype=torch.long),  # (N,)
        "classes": classes,
    }


@functools.lru_cache(maxsize=8)
def _decoded(path: str, image_size: int, fingerprint: tuple) -> dict:
    key = {"file": list(fingerprint), "image_size": image_size, "version": _CACHE_VERSION}
    return cached(
        f"omniglot-{Path(path).stem}-{image_size}", key, lambda: _decode_zip(Path(path), image_size)
    )


def _archive(path: Path, image_size: int) -> dict:
    """Decoded archive, from the in-process or the file cache when the file is unchanged."""
    return _decoded(str(path), image_size, tuple(file_fingerprint(path)))


def _dataset(archive: dict, alphabets: set[str] | None) -> tuple[InMemoryDataset, list[str]]:
    """The items of ``archive`` whose alphabet is in ``alphabets`` (all if ``None``), labels
    remapped to ``0..C-1``; returns the dataset and the class name of each label."""
    classes = archive["classes"]
    keep_class = torch.tensor(
        [alphabets is None or c.split("/")[0] in alphabets for c in classes], dtype=torch.bool
    )  # (K,)
    keep = keep_class[archive["labels"]]  # (N,)
    labels, originals = remap_labels(archive["labels"][keep])
    images = archive["images"][keep].unsqueeze(1).float() / 255.0  # (N', 1, S, S) in [0, 1]
    return InMemoryDataset(images, labels), [classes[i] for i in originals.tolist()]


def _splits(
    name: str,
    train: tuple[InMemoryDataset, list[str]],
    test: tuple[InMemoryDataset, list[str]],
    labelled_per_class: int | None,
    seed: int,
) -> DatasetSplits:
    """The train/test splits from ``(dataset, class names)`` pairs, semi-supervised if asked."""
    splits = DatasetSplits(
        name, train[0], test[0], class_names={"train": train[1], "test": test[1]}
    )
    if labelled_per_class is not None:
        splits = semi_supervised(splits, labelled_per_class, seed)
    return splits


def _check_size(image_size: int) -> None:
    if not 1 <= image_size <= 105:
        raise ValueError(
            f"image_size must be in 1..105 (the drawings are 105x105), got {image_size}"
        )


def _fetch_small(folder: Path, filename: str) -> None:
    download_url(f"{RAW_URL}/{filename}", str(folder), filename)
    path = folder / filename
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SMALL_SHA256[filename]:
        path.unlink()
        raise OSError(f"downloaded {path} has sha256 {digest}, expected {SMALL_SHA256[filename]}")


#: An Omniglot set's reader: ``parts(root, image_size, download) -> (train, test)``, each
#: ``(dataset, class names)`` (:func:`_omniglot_loader`).
_Parts = tuple[tuple[InMemoryDataset, list[str]], tuple[InMemoryDataset, list[str]]]


def _omniglot_loader(
    name: str,
) -> Callable[[Callable[[Path, int, bool], _Parts]], Callable[..., DatasetSplits]]:
    """Register ``parts(root, image_size, download)`` under ``name`` as a loader that takes the
    options of both Omniglot sets: ``image_size`` (checked), ``labelled_per_class`` and ``seed``
    (a semi-supervised split, :func:`_splits`) and ``download``; the loader keeps ``parts``'s name
    and docstring."""

    def decorator(parts: Callable[[Path, int, bool], _Parts]) -> Callable[..., DatasetSplits]:
        def load(
            root: Path,
            *,
            image_size: int = 28,
            labelled_per_class: int | None = None,
            seed: int = 0,
            download: bool = False,
        ) -> DatasetSplits:
            _check_size(image_size)
            return _splits(name, *parts(root, image_size, download), labelled_per_class, seed)

        return register_loader(name, load, parts)

    return decorator


@_omniglot_loader("omniglot-small")
def load_omniglot_small(root: Path, image_size: int, download: bool) -> _Parts:
    """Omniglot's two small background archives, split class-disjointly by alphabet.

    Train: the 5 alphabets of small1 (Balinese, Early_Aramaic, Greek, Korean, Latin; 136 classes,
    2,720 images). Test: the small2 alphabets absent from small1 (Japanese_(katakana), Sanskrit,
    Tagalog; 106 classes, 2,120 images).

    Args:
        root: data root; the archives are expected in ``<root>/omniglot/``.
        image_size: side of the resized square images.
        labelled_per_class: if set, keep that many labelled training drawings per character and
            move the rest to ``unlabelled``.
        seed: seed of the labelled draw.
        download: fetch missing archives from the Omniglot GitHub repository.
    """
    folder = root / "omniglot"
    for filename in SMALL_SHA256:
        if not (folder / filename).is_file():
            if not download:
                raise missing_files_error(
                    "omniglot-small",
                    folder / filename,
                    f"{SOURCE}, {RAW_URL}/{filename}",
                    downloadable=True,
                )
            _fetch_small(folder, filename)
    small1 = _archive(folder / "images_background_small1.zip", image_size)
    small2 = _archive(folder / "images_background_small2.zip", image_size)
    train_alphabets = {c.split("/")[0] for c in small1["classes"]}
    test_alphabets = {c.split("/")[0] for c in small2["classes"]} - train_alphabets
    return _dataset(small1, None), _dataset(small2, test_alphabets)


@_omniglot_loader("omniglot")
def load_omniglot(root: Path, image_size: int, download: bool) -> _Parts:
    """Full Omniglot: background set (30 alphabets, 964 classes, 19,280 images) for training,
    evaluation set (20 other alphabets, 659 classes, 13,180 images) for testing.

    Args:
        root: data root; the archives are expected where ``torchvision.datasets.Omniglot(
            root=<root>/omniglot)`` keeps them: ``<root>/omniglot/omniglot-py/images_*.zip``.
        image_size, labelled_per_class, seed: as for ``omniglot-small``.
        download: fetch (and check) the archives with ``torchvision.datasets.Omniglot``.
    """
    folder = root / "omniglot" / Omniglot.folder
    parts = []
    for background in (True, False):
        name = "images_background" if background else "images_evaluation"
        path = folder / f"{name}.zip"
        if not path.is_file():
            if not download:
                raise missing_files_error(
                    "omniglot", path, f"{SOURCE}, {RAW_URL}/{name}.zip", downloadable=True
                )
            Omniglot(str(root / "omniglot"), background=background, download=True)
        parts.append(_archive(path, image_size))
    return _dataset(parts[0], None), _dataset(parts[1], None)
