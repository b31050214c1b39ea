"""A run from its configuration alone: the configured dataset and network, trained by
:func:`dmlnb.training.train` and evaluated on the sets the dataset has."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from torch import nn
from torch.utils.data import Sampler

from dmlnb.hooks import Hook
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord
from dmlnb.training.loop import train

__all__ = ["evaluation_sets", "fit"]


def evaluation_sets(splits: Any) -> tuple[Any, Any]:
    """What a run of ``splits`` (:class:`dmlnb.data.DatasetSplits`) is evaluated on:
    ``(query, gallery)`` when the dataset has both (In-Shop), else ``(test, None)`` (the test
    set against itself)."""
    if splits.query is not None and splits.gallery is not None:
        return splits.query, splits.gallery
    return splits.test, None


def fit(
    config: TrainConfig,
    loss_fn: nn.Module,
    *,
    data_root: str | Path | None = None,
    splits: Any = None,
    sampler: Sampler | None = None,
    hooks: Sequence[Hook] = (),
    run_dir: str | Path | None = None,
    **train_kwargs: Any,
) -> tuple[nn.Module, RunRecord]:
    """Load the configured dataset, build the configured model (seeded) and :func:`train` it.

    Returns ``(model, record)``. ``splits`` may be passed to reuse an already loaded
    :class:`dmlnb.data.DatasetSplits`. Its ``validation`` split (``dataset_options={"validation":
    ...}``), when present, is evaluated beside the test set and can select the best epoch
    (``config.select_on``).
    """
    from dmlnb.data import load_dataset
    from dmlnb.models import configured_model

    if splits is None:
        splits = load_dataset(config.dataset, root=data_root, **config.dataset_options)
    model = configured_model(config, splits.input_shape)
    eval_set, gallery = evaluation_sets(splits)
    record = train(
        model,
        loss_fn,
        splits.train,
        eval_set,
        config,
        sampler=sampler,
        hooks=hooks,
        gallery_set=gallery,
        run_dir=run_dir,
        val_set=splits.validation,
        **train_kwargs,
    )
    return model, record
