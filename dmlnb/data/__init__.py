"""Datasets of the book behind one call: ``load_dataset(name, root=None, **options)``.

>>> from dmlnb.data import load_dataset
>>> splits = load_dataset("digits")              # class-disjoint: digits 0-4 / 5-9
>>> splits.train.get_batch(torch.arange(4))      # (images (4, 1, 8, 8), labels (4,))
>>> load_dataset("omniglot-small", validation=0.2).validation   # 27 of the 136 training classes

Registered names: ``digits``, ``omniglot-small``, ``omniglot``, ``mnist``, ``fashion-mnist``,
``cifar10``, ``cub200``, ``cars196``, ``sop``, ``inshop``, ``hotels50k`` (see
:func:`available_datasets`). Files are looked up under :func:`data_root` (argument, else
``$DMLNB_DATA``, else ``~/.cache/dmlnb``).
"""

from dmlnb.data.base import (
    DatasetSplits,
    ImageFileDataset,
    InMemoryDataset,
    LabelledDataset,
    gather_images,
    remap_labels,
)
from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.registry import (
    SPLIT_OPTIONS,
    available_datasets,
    data_root,
    load_dataset,
    missing_files_error,
    register_dataset,
)
from dmlnb.data.semisup import semi_supervised, split_labelled_per_class
from dmlnb.data.validation import hold_out_classes, validation_classes

# Loader modules register their datasets on import (imported for that, after the names above).
# isort: split
from dmlnb.data import digits, image_folders, omniglot, torchvision_sets  # noqa: F401

__all__ = [
    "LabelledDataset",
    "InMemoryDataset",
    "ImageFileDataset",
    "CachedImageDataset",
    "DatasetSplits",
    "gather_images",
    "remap_labels",
    "load_dataset",
    "register_dataset",
    "available_datasets",
    "data_root",
    "missing_files_error",
    "semi_supervised",
    "split_labelled_per_class",
    "hold_out_classes",
    "validation_classes",
    "SPLIT_OPTIONS",
]
