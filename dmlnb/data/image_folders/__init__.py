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

from dmlnb.data.crops import IMAGENET_MEAN, IMAGENET_STD
from dmlnb.data.image_folders.loaders import (
    load_cars196,
    load_cub200,
    load_hotels50k,
    load_inshop,
    load_sop,
)
from dmlnb.data.image_folders.pipelines import image_transforms

#: The loaders are registered when ``loaders`` is imported (here, by :mod:`dmlnb.data`).
__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "image_transforms",
    "load_cub200",
    "load_cars196",
    "load_sop",
    "load_inshop",
    "load_hotels50k",
]
