"""The image-retrieval benchmarks of deep metric learning, read from their official layouts.

==================  ==================================================  ==========================
name                expected under the data root                        class-disjoint split
==================  ==================================================  ==========================
``cub200``          ``CUB_200_2011/{images.txt, image_class_labels.txt,  classes 1-100 / 101-200
                    images/}``
``cars196``         ``Cars196/{cars_annos.mat, car_ims/}``              classes 1-98 / 99-196
``sop``             ``Stanford_Online_Products/{Ebay_train.txt,          official files
                    Ebay_test.txt, <category>_final/}``
``inshop``          ``In-Shop/{list_eval_partition.txt, img/}``          train / query + gallery
``hotels50k``       ``Hotels-50K/images/{train/, test/unoccluded/}``     none: test hotels are
                                                                        training hotels (query:
                                                                        test, gallery: train)
==================  ==================================================  ==========================

Labels are remapped to ``0..C-1`` per split (in the order of the original class ids). Every
loader takes the options ``image_size`` (side of the crops, default 224), ``resize`` and
``padding`` (the crops), ``decoded_cache`` and ``cache_size``:

* ``resize=None`` (the default): the train crop is ``RandomResizedCrop(image_size)`` + a
  horizontal flip, the test crop the centre ``image_size`` square of the image resized to a
  short side of ``round(image_size * 256 / 224)``;
* ``resize=R``: the square crops of the papers that resize every image to ``R x R`` (aspect
  ratio not kept; :mod:`dmlnb.data.crops`): train, pad by ``padding`` black pixels (default 0)
  and cut a random ``image_size`` square + the flip; test, the centre ``image_size`` square.
  Easy Positive: ``image_size=256, resize=256, padding=10``; facility location:
  ``image_size=227, resize=256``.
* ``decoded_cache=True`` (the default): each split is decoded once into the memory-mapped cache
  of :mod:`dmlnb.data.decoded` (``cache_size`` pixels square, default
  ``round(image_size * 288 / 224)``, or ``R`` with ``resize=R``, whose square crops then copy
  cache pixels; under ``$DMLNB_CACHE``) and served by a
  :class:`dmlnb.data.cached_images.CachedImageDataset`, which crops whole batches on the
  training device (fast enough to keep a GPU busy; see that module for how its crops differ
  from torchvision's).
* ``decoded_cache=False``: an :class:`ImageFileDataset` decodes each file on access with the PIL
  transforms of :func:`image_transforms` (for a ``DataLoader`` with workers).

Both use the standard crops of the DML literature (:mod:`dmlnb.data.crops`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.io
import torch
from torchvision import transforms

from dmlnb.data.base import DatasetSplits, ImageFileDataset, LabelledDataset, remap_labels
from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.crops import (
    CROP_RATIO,
    CROP_SCALE,
    IMAGENET_MEAN,
    IMAGENET_STD,
    check_square_crop,
    test_resize,
)
from dmlnb.data.decoded import decoded_images, default_cache_size
from dmlnb.data.registry import missing_files_error, register_dataset

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "image_transforms"]


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
    _check_crops(image_size, resize, padding)
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


def _check_crops(image_size: int, resize: int | None, padding: int) -> None:
    """The crop options (see the module docstring); an error names the value and the fix."""
    _check_image_size(image_size)
    if resize is not None:
        check_square_crop(image_size, resize, padding)
    elif padding != 0:
        raise ValueError(
            f"dataset option padding={padding!r} pads the square crops only; set resize too, or "
            "padding=0"
        )


@dataclass(frozen=True)
class _Crops:
    """The crop options of a loader (see the module docstring), checked."""

    image_size: int
    resize: int | None = None
    padding: int = 0

    def __post_init__(self) -> None:
        _check_crops(self.image_size, self.resize, self.padding)


def _cache_side(decoded_cache: bool, cache_size: int | None, crops: _Crops) -> int | None:
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
#: (:func:`_image_loader`).
_Build = Callable[[Path, _Crops, "int | None"], DatasetSplits]


def _image_loader(name: str) -> Callable[[_Build], Callable[..., DatasetSplits]]:
    """Register ``build(root, crops, cache_side)`` under ``name`` as a loader that takes the options
    of every benchmark (see the module docstring: ``image_size``, ``resize``, ``padding``,
    ``decoded_cache``, ``cache_size``), checked into the crops and the decoded cache's side
    (``None``: the PIL path); the loader keeps ``build``'s name and docstring."""

    def decorator(build: _Build) -> Callable[..., DatasetSplits]:
        def load(
            root: Path,
            *,
            image_size: int = 224,
            resize: int | None = None,
            padding: int = 0,
            decoded_cache: bool = True,
            cache_size: int | None = None,
        ) -> DatasetSplits:
            crops = _Crops(image_size, resize, padding)
            return build(root, crops, _cache_side(decoded_cache, cache_size, crops))

        load.__name__ = load.__qualname__ = build.__name__
        load.__doc__, load.__module__ = build.__doc__, build.__module__
        return register_dataset(name)(load)

    return decorator


@dataclass(frozen=True)
class _Row:
    """One row of a text index file: its whitespace-separated ``fields`` and ``where`` it is
    (``"path:line"``, for error messages)."""

    fields: list[str]
    where: str

    def __getitem__(self, column: int) -> str:
        return self.fields[column]

    def integer(self, column: int, what: str) -> int:
        """Field ``column`` as an int; a ``ValueError`` naming the file, the line and
        the value if not."""
        try:
            return int(self.fields[column])
        except ValueError:
            raise ValueError(
                f"{self.where}: {what} {self.fields[column]!r} is not an integer; "
                f"fix the line or download the index file again"
            ) from None


def _read_table(path: Path, columns: int, skip: int = 0) -> list[_Row]:
    """The non-blank rows of a whitespace-separated index file after ``skip`` header lines; each
    must have at least ``columns`` fields (a ``ValueError`` names the file and line if not)."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines()[skip:], start=skip + 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < columns:
            raise ValueError(
                f"{path}:{number}: expected {columns} whitespace-separated fields, got "
                f"{len(fields)} in {line!r}; the file is truncated or corrupt, download it again"
            )
        rows.append(_Row(fields, f"{path}:{number}"))
    return rows


@dataclass(frozen=True)
class _Benchmark:
    """Where a benchmark lives and where it comes from (for the missing-file message)."""

    name: str
    folder: str  # under the data root
    source: str
    layout: str

    def require(self, path: Path) -> None:
        if not path.exists():
            raise missing_files_error(
                self.name, path, self.source, downloadable=False, layout=self.layout
            )

    def split(
        self,
        folder: Path,
        rel_paths: Sequence[str],
        class_ids: Sequence[int],
        *,
        part: str,
        crops: _Crops,
        cache_side: int | None,
    ) -> tuple[LabelledDataset, list[int]]:
        """The ``part`` (``"train"``: train crops, else test crops) of ``folder/rel_paths`` with
        labels remapped to ``0..C-1``: a :class:`CachedImageDataset` on a cache of side
        ``cache_side``, or an :class:`ImageFileDataset` when it is ``None``. Also returns the
        original class id of each label."""
        if not rel_paths:
            raise ValueError(f"{self.name}: the index files in {folder} list no image for a split")
        self.require(folder / rel_paths[0])  # images unpacked beside the index files?
        labels, originals = remap_labels(torch.as_tensor(class_ids, dtype=torch.long))  # (N,)
        train = part == "train"
        if cache_side is not None:
            images = decoded_images(folder, rel_paths, cache_side, name=f"{self.name}-{part}")
            dataset = CachedImageDataset(
                images,
                labels,
                crops.image_size,
                train=train,
                resize=crops.resize,
                padding=crops.padding,
            )
            return dataset, originals.tolist()
        train_transform, test_transform = image_transforms(
            crops.image_size, crops.resize, crops.padding
        )
        paths = [folder / p for p in rel_paths]
        shape = (3, crops.image_size, crops.image_size)
        if train:  # augmented; evaluated (a validation split cut out of it) with the test transform
            return ImageFileDataset(
                paths, labels, train_transform, shape, test_transform
            ), originals.tolist()
        return ImageFileDataset(paths, labels, test_transform, shape), originals.tolist()

    def class_disjoint_splits(
        self,
        folder: Path,
        rel_paths: Sequence[str],
        class_ids: Sequence[int],
        *,
        last_train_class: int,
        crops: _Crops,
        cache_side: int | None,
    ) -> tuple[dict[str, LabelledDataset], dict[str, list[int]]]:
        """The ``"train"`` part (the images of class ids up to ``last_train_class``) and the
        ``"test"`` part (the others) of ``folder/rel_paths``, each built by :meth:`split` in the
        order of ``rel_paths``; also the original class id of each label, per part."""
        parts, originals = {}, {}
        for part, is_train in (("train", True), ("test", False)):
            chosen = [i for i, c in enumerate(class_ids) if (c <= last_train_class) == is_train]
            parts[part], originals[part] = self.split(
                folder,
                [rel_paths[i] for i in chosen],
                [class_ids[i] for i in chosen],
                part=part,
                crops=crops,
                cache_side=cache_side,
            )
        return parts, originals


# The benchmarks of the module docstring.
CUB = _Benchmark(
    "cub200",
    "CUB_200_2011",
    "https://www.vision.caltech.edu/datasets/cub_200_2011/ (CUB_200_2011.tgz)",
    "<root>/CUB_200_2011/images.txt, image_class_labels.txt, images/<class>/<file>.jpg",
)
CARS = _Benchmark(
    "cars196",
    "Cars196",
    "https://ai.stanford.edu/~jkrause/cars/car_dataset.html (car_ims.tgz, cars_annos.mat)",
    "<root>/Cars196/cars_annos.mat and <root>/Cars196/car_ims/<file>.jpg",
)
SOP = _Benchmark(
    "sop",
    "Stanford_Online_Products",
    "https://cvgl.stanford.edu/projects/lifted_struct/ (Stanford_Online_Products.zip)",
    "<root>/Stanford_Online_Products/Ebay_train.txt, Ebay_test.txt, <category>_final/<file>.JPG",
)
INSHOP = _Benchmark(
    "inshop",
    "In-Shop",
    "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html "
    "(Eval/list_eval_partition.txt and the unzipped Img/img.zip)",
    "<root>/In-Shop/list_eval_partition.txt and <root>/In-Shop/img/<...>.jpg",
)
HOTELS = _Benchmark(
    "hotels50k",
    "Hotels-50K",
    "https://github.com/GWUvision/Hotels-50K (training images fetched by input/download_train.py "
    "into images/train; the test images of test.tar.gz unpacked in images/)",
    "<root>/Hotels-50K/images/train/<chain_id>/<hotel_id>/<data_source>/<image_id>.jpg and "
    "<root>/Hotels-50K/images/test/unoccluded/<chain_id>/<hotel_id>/<data_source>/<image_id>.jpg",
)


@_image_loader("cub200")
def load_cub200(root: Path, crops: _Crops, cache_side: int | None) -> DatasetSplits:
    """CUB-200-2011: classes 1-100 train (5,864 images), 101-200 test (5,924 images).

    Options: see the module docstring."""
    folder = root / CUB.folder
    for name in ("images.txt", "image_class_labels.txt"):
        CUB.require(folder / name)
    paths = {row.integer(0, "image id"): row[1] for row in _read_table(folder / "images.txt", 2)}
    classes = {
        row.integer(0, "image id"): row.integer(1, "class id")
        for row in _read_table(folder / "image_class_labels.txt", 2)
    }
    ids = sorted(paths)
    missing = [i for i in ids if i not in classes]
    if missing:
        raise ValueError(
            f"{folder / 'image_class_labels.txt'} has no row for image id(s) {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''} listed in {folder / 'images.txt'} "
            f"(e.g. {paths[missing[0]]}); the two index files must list the same ids, "
            f"download them again"
        )
    parts, originals = CUB.class_disjoint_splits(
        folder,
        [f"images/{paths[i]}" for i in ids],
        [classes[i] for i in ids],
        last_train_class=100,
        crops=crops,
        cache_side=cache_side,
    )
    class_folder = {classes[i]: Path(paths[i]).parent.name for i in ids}  # "001.Black_..."
    names = {split: [class_folder[c] for c in originals[split]] for split in parts}
    return DatasetSplits("cub200", parts["train"], parts["test"], class_names=names)


@_image_loader("cars196")
def load_cars196(root: Path, crops: _Crops, cache_side: int | None) -> DatasetSplits:
    """Cars196 (Stanford Cars): classes 1-98 train (8,054 images), 99-196 test (8,131 images).

    ``cars_annos.mat`` holds ``annotations`` (fields ``relative_im_path``, ``class`` 1..196, ...)
    and ``class_names``. Its train/test flag is ignored: the DML protocol splits by class over
    all 16,185 images. Options: see the module docstring.
    """
    folder = root / CARS.folder
    CARS.require(folder / "cars_annos.mat")
    mat = scipy.io.loadmat(folder / "cars_annos.mat", squeeze_me=True)
    annotations = np.atleast_1d(mat["annotations"])
    rel = [str(p) for p in annotations["relative_im_path"]]
    classes = [int(c) for c in annotations["class"]]
    model_names = [str(n) for n in np.atleast_1d(mat.get("class_names", []))]
    parts, originals = CARS.class_disjoint_splits(
        folder, rel, classes, last_train_class=98, crops=crops, cache_side=cache_side
    )
    names = {
        split: [model_names[c - 1] if model_names else str(c) for c in originals[split]]
        for split in parts
    }
    return DatasetSplits("cars196", parts["train"], parts["test"], class_names=names)


@_image_loader("sop")
def load_sop(root: Path, crops: _Crops, cache_side: int | None) -> DatasetSplits:
    """Stanford Online Products by the official ``Ebay_train.txt`` (11,318 classes, 59,551
    images) / ``Ebay_test.txt`` (11,316 classes, 60,502 images); one class per product.

    Index rows are ``image_id class_id super_class_id path`` after one header line. Options: see
    the module docstring.
    """
    folder = root / SOP.folder
    parts = {}
    for split in ("train", "test"):
        index = folder / f"Ebay_{split}.txt"
        SOP.require(index)
        rows = _read_table(index, 4, skip=1)
        rel, class_ids = [r[3] for r in rows], [r.integer(1, "class_id") for r in rows]
        parts[split], _ = SOP.split(
            folder, rel, class_ids, part=split, crops=crops, cache_side=cache_side
        )
    return DatasetSplits("sop", parts["train"], parts["test"])


@_image_loader("inshop")
def load_inshop(root: Path, crops: _Crops, cache_side: int | None) -> DatasetSplits:
    """In-Shop Clothes Retrieval: ``train`` (3,997 items, 25,882 images), ``query`` (14,218) and
    ``gallery`` (12,612 images) of 3,985 other items, from ``list_eval_partition.txt`` (a count
    line, a header line, then ``image_name item_id evaluation_status`` rows).

    Query and gallery share one label map (an item has the same label in both); ``test`` is
    query followed by gallery. Options: see the module docstring.
    """
    folder = root / INSHOP.folder
    index = folder / "list_eval_partition.txt"
    INSHOP.require(index)
    rows = _read_table(index, 3, skip=2)
    item_number = {item: n for n, item in enumerate(sorted({r[1] for r in rows}))}
    by_status = {s: [r for r in rows if r[2] == s] for s in ("train", "query", "gallery")}

    def build(rows: list[_Row], part: str) -> LabelledDataset:
        rel, class_ids = [r[0] for r in rows], [item_number[r[1]] for r in rows]
        return INSHOP.split(folder, rel, class_ids, part=part, crops=crops, cache_side=cache_side)[
            0
        ]

    train = build(by_status["train"], "train")
    test = build(by_status["query"] + by_status["gallery"], "test")  # one label map for both
    n_query = len(by_status["query"])
    query = test.subset(range(n_query))
    gallery = test.subset(range(n_query, len(test)))
    return DatasetSplits("inshop", train, test, query=query, gallery=gallery)


def _hotel_images(folder: Path) -> tuple[list[str], list[int]]:
    """The ``.jpg`` files under ``folder/<chain_id>/<hotel_id>/...`` (any depth below the hotel,
    e.g. the ``<data_source>`` level), sorted, as paths relative to ``folder`` and their hotel ids
    (the second folder level). A ``ValueError`` names a file outside that layout or
    a non-integer id."""
    rel, hotels = [], []
    for path in sorted(folder.rglob("*.jpg")):
        parts = path.relative_to(folder).parts
        if len(parts) < 3 or not parts[1].isdigit():
            raise ValueError(
                f"hotels50k: {path} is not at <chain_id>/<hotel_id>/.../<image_id>.jpg under "
                f"{folder} (the hotel id, the second folder, must be an integer); expected "
                f"layout: {HOTELS.layout}"
            )
        rel.append(path.relative_to(folder).as_posix())
        hotels.append(int(parts[1]))
    if not rel:
        raise ValueError(
            f"hotels50k: no .jpg image under {folder}; expected layout: {HOTELS.layout}"
        )
    return rel, hotels


@_image_loader("hotels50k")
def load_hotels50k(root: Path, crops: _Crops, cache_side: int | None) -> DatasetSplits:
    """Hotels-50K (Stylianou et al., AAAI 2019): one class per hotel. ``train``: the images under
    ``images/train`` (1,027,871 images of 50,000 hotels); the test images are the unoccluded
    TraffickCam images under ``images/test/unoccluded`` (17,954 images of 5,000 hotels, every one a
    training hotel); the occluded copies are not read.

    The split is the dataset's own and the one of Xuan et al. (2020, Sec. 5.2 and Table 3, after
    Stylianou et al.): the test images are the queries (``query``) and the training images the
    gallery (``gallery``: the training images with the test crop), all in one label map (the
    hotel ids in increasing order, ``class_names["train"][y]``); ``test`` is the query followed by
    the gallery. It is not class-disjoint: ``class_names`` gives train and test the same hotels, so
    :func:`dmlnb.data.validation.hold_out_classes` refuses a class-disjoint validation split (a run
    selects its epoch on the test images, ``select_on="test"``). Images are decoded once (one
    cache for all of them). Options: see the module docstring.

    Raises:
        FileNotFoundError: ``images/train`` or ``images/test/unoccluded`` is absent (the message
            names the path, the layout and the source).
        ValueError: an image outside the layout, a folder without images, or a test hotel without
            training images (it could never be retrieved from the gallery).
    """
    folder = root / HOTELS.folder / "images"
    train_dir, test_dir = folder / "train", folder / "test" / "unoccluded"
    for path in (train_dir, test_dir):
        HOTELS.require(path)
    train_rel, train_ids = _hotel_images(train_dir)
    test_rel, test_ids = _hotel_images(test_dir)
    unseen = sorted(set(test_ids) - set(train_ids))
    if unseen:
        raise ValueError(
            f"hotels50k: {len(unseen)} test hotel(s) have no training image under {train_dir} "
            f"(e.g. {unseen[:5]}); the training images are the gallery of every test query, so "
            "download the training images of those hotels (input/download_train.py) or remove "
            "their test images"
        )
    # one dataset, test images first: its training part is `train`, its evaluation view `test`
    every, originals = HOTELS.split(
        folder,
        [f"test/unoccluded/{p}" for p in test_rel] + [f"train/{p}" for p in train_rel],
        test_ids + train_ids,
        part="train",
        crops=crops,
        cache_side=cache_side,
    )
    queries = len(test_rel)
    test = every.for_evaluation()
    names = [str(h) for h in originals]
    return DatasetSplits(
        "hotels50k",
        every.subset(torch.arange(queries, len(every))),
        test,
        query=test.subset(torch.arange(queries)),
        gallery=test.subset(torch.arange(queries, len(test))),
        class_names={"train": names, "test": names},
    )
