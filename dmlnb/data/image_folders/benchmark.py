"""Where a benchmark lives and how its images become datasets (:class:`Benchmark`): the decoded
cache and crops on the device, or PIL files decoded on access; the five benchmarks of
:mod:`dmlnb.data.image_folders`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from dmlnb.data.base import ImageFileDataset, LabelledDataset, remap_labels
from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.decoded import decoded_images
from dmlnb.data.image_folders.options import Crops
from dmlnb.data.image_folders.pipelines import image_transforms
from dmlnb.data.registry import missing_files_error

__all__ = ["Benchmark", "CUB", "CARS", "SOP", "INSHOP", "HOTELS"]


@dataclass(frozen=True)
class Benchmark:
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
        crops: Crops,
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
        crops: Crops,
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
CUB = Benchmark(
    "cub200",
    "CUB_200_2011",
    "https://www.vision.caltech.edu/datasets/cub_200_2011/ (CUB_200_2011.tgz)",
    "<root>/CUB_200_2011/images.txt, image_class_labels.txt, images/<class>/<file>.jpg",
)
CARS = Benchmark(
    "cars196",
    "Cars196",
    "https://ai.stanford.edu/~jkrause/cars/car_dataset.html (car_ims.tgz, cars_annos.mat)",
    "<root>/Cars196/cars_annos.mat and <root>/Cars196/car_ims/<file>.jpg",
)
SOP = Benchmark(
    "sop",
    "Stanford_Online_Products",
    "https://cvgl.stanford.edu/projects/lifted_struct/ (Stanford_Online_Products.zip)",
    "<root>/Stanford_Online_Products/Ebay_train.txt, Ebay_test.txt, <category>_final/<file>.JPG",
)
INSHOP = Benchmark(
    "inshop",
    "In-Shop",
    "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html "
    "(Eval/list_eval_partition.txt and the unzipped Img/img.zip)",
    "<root>/In-Shop/list_eval_partition.txt and <root>/In-Shop/img/<...>.jpg",
)
HOTELS = Benchmark(
    "hotels50k",
    "Hotels-50K",
    "https://github.com/GWUvision/Hotels-50K (training images fetched by input/download_train.py "
    "into images/train; the test images of test.tar.gz unpacked in images/)",
    "<root>/Hotels-50K/images/train/<chain_id>/<hotel_id>/<data_source>/<image_id>.jpg and "
    "<root>/Hotels-50K/images/test/unoccluded/<chain_id>/<hotel_id>/<data_source>/<image_id>.jpg",
)
