"""The readers of the five benchmarks' official layouts, registered as loaders (see
:mod:`dmlnb.data.image_folders` for the layouts, splits and options)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io
import torch

from dmlnb.data.base import DatasetSplits, LabelledDataset
from dmlnb.data.image_folders.benchmark import CARS, CUB, HOTELS, INSHOP, SOP
from dmlnb.data.image_folders.index import Row, read_table
from dmlnb.data.image_folders.options import Crops, image_loader

__all__ = ["load_cub200", "load_cars196", "load_sop", "load_inshop", "load_hotels50k"]


@image_loader("cub200")
def load_cub200(root: Path, crops: Crops, cache_side: int | None) -> DatasetSplits:
    """CUB-200-2011: classes 1-100 train (5,864 images), 101-200 test (5,924 images).

    Options: see the module docstring."""
    folder = root / CUB.folder
    for name in ("images.txt", "image_class_labels.txt"):
        CUB.require(folder / name)
    paths = {row.integer(0, "image id"): row[1] for row in read_table(folder / "images.txt", 2)}
    classes = {
        row.integer(0, "image id"): row.integer(1, "class id")
        for row in read_table(folder / "image_class_labels.txt", 2)
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


@image_loader("cars196")
def load_cars196(root: Path, crops: Crops, cache_side: int | None) -> DatasetSplits:
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


@image_loader("sop")
def load_sop(root: Path, crops: Crops, cache_side: int | None) -> DatasetSplits:
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
        rows = read_table(index, 4, skip=1)
        rel, class_ids = [r[3] for r in rows], [r.integer(1, "class_id") for r in rows]
        parts[split], _ = SOP.split(
            folder, rel, class_ids, part=split, crops=crops, cache_side=cache_side
        )
    return DatasetSplits("sop", parts["train"], parts["test"])


@image_loader("inshop")
def load_inshop(root: Path, crops: Crops, cache_side: int | None) -> DatasetSplits:
    """In-Shop Clothes Retrieval: ``train`` (3,997 items, 25,882 images), ``query`` (14,218) and
    ``gallery`` (12,612 images) of 3,985 other items, from ``list_eval_partition.txt`` (a count
    line, a header line, then ``image_name item_id evaluation_status`` rows).

    Query and gallery share one label map (an item has the same label in both); ``test`` is
    query followed by gallery. Options: see the module docstring.
    """
    folder = root / INSHOP.folder
    index = folder / "list_eval_partition.txt"
    INSHOP.require(index)
    rows = read_table(index, 3, skip=2)
    item_number = {item: n for n, item in enumerate(sorted({r[1] for r in rows}))}
    by_status = {s: [r for r in rows if r[2] == s] for s in ("train", "query", "gallery")}

    def build(rows: list[Row], part: str) -> LabelledDataset:
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


@image_loader("hotels50k")
def load_hotels50k(root: Path, crops: Crops, cache_side: int | None) -> DatasetSplits:
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
