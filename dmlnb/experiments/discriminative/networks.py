"""The chapter's networks and losses: the paper's two-layer network (backbone -> FC(D) -> FC(C)),
the baselines' one-layer head, fixed centroids, the balanced subset Lemma 3.1 is tracked on."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from dmlnb.experiments.discriminative.spec import (
    CLUSTERING_GAMMA,
    CLUSTERING_REFINEMENT,
    loss_method,
)
from dmlnb.losses.discriminative import (
    CentroidNet,
    kmeans_sphere_centroids,
    onehot_centroids,
)
from dmlnb.models import EmbeddingNet, build_model
from dmlnb.profiles import TrainConfig

__all__ = [
    "build_network",
    "backbone_parameters",
    "make_centroids",
    "method_config",
    "build_loss",
    "balanced_subset",
]


# --------------------------------------------------------------------------- networks


def _embedding_net(
    config: TrainConfig, input_shape: tuple[int, int, int], arch: str | None
) -> EmbeddingNet:
    """:func:`dmlnb.models.build_model`'s network ``arch`` (default ``config.model``) at
    ``config``'s embedding size, normalisation, weights and width."""
    return build_model(
        arch or config.model,
        input_shape,
        config.embedding_dim,
        normalize=config.normalize,
        pretrained=config.pretrained,
        width=config.width,
    )


def _backbone(
    config: TrainConfig, input_shape: tuple[int, int, int], arch: str | None
) -> tuple[nn.Module, int]:
    """The backbone of ``arch`` (default ``config.model``) and its output size."""
    base = _embedding_net(config, input_shape, arch)  # only its trunk is kept
    if (arch or config.model) == "vgg16":
        # Sec. 4.5: max-pool the last convolutional layer -> 512-d (no fc6 / fc7).
        conv = base.trunk.features  # type: ignore[union-attr]
        return nn.Sequential(conv, nn.AdaptiveMaxPool2d(1), nn.Flatten()), 512
    return base.trunk, base.feature_dim


def build_network(
    method: str,
    config: TrainConfig,
    input_shape: tuple[int, int, int],
    num_classes: int,
    arch: str | None = None,
) -> nn.Module:
    """The seeded network of ``method`` (a key of :data:`METHODS` values).

    ``discriminative``: :class:`CentroidNet` (backbone -> FC(``embedding_dim``) -> FC(C)).
    Other methods: :func:`dmlnb.models.build_model` (backbone -> FC(``embedding_dim``),
    L2-normalised when ``config.normalize``). ``arch`` replaces ``config.model`` (``"vgg16"``: the
    paper's max-pooled conv5 variant, Sec. 4.5).
    """
    torch.manual_seed(config.seed)
    if method == "discriminative":
        backbone, feature_dim = _backbone(config, input_shape, arch)
        trunk = nn.Sequential(backbone, nn.Linear(feature_dim, config.embedding_dim))
        return CentroidNet(EmbeddingNet(trunk, config.embedding_dim, num_classes, normalize=False))
    if arch == "vgg16":
        backbone, feature_dim = _backbone(config, input_shape, arch)
        return EmbeddingNet(backbone, feature_dim, config.embedding_dim, normalize=config.normalize)
    return _embedding_net(config, input_shape, arch)


def backbone_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The pretrained part's parameters: everything except the new FC layer(s)."""
    net = model.net if isinstance(model, CentroidNet) else model
    trunk = net.trunk  # type: ignore[union-attr]
    if isinstance(model, CentroidNet):
        trunk = trunk[0]  # (backbone, FC(D)): the FC is new
    return list(trunk.parameters())


def make_centroids(kind: str, num_classes: int, seed: int = 0) -> Tensor:
    """``(C, C)`` centroids: ``"onehot"`` or ``"kmeans"`` (K-means on the unit sphere, D = C,
    as in the paper's Table 3)."""
    if kind == "onehot":
        return onehot_centroids(num_classes, num_classes)
    if kind == "kmeans":
        return kmeans_sphere_centroids(num_classes, num_classes, seed=seed)
    raise ValueError(f"centroids must be 'onehot' or 'kmeans', got {kind!r}")


def method_config(method: str, config: TrainConfig) -> TrainConfig:
    """Per-method changes to the shared configuration: N-pair trains unnormalised embeddings
    (Sohn's L2 penalty keeps their norm in check); everything else is shared."""
    if method == "npair":
        return config.replace(normalize=False)
    return config


def build_loss(
    method: str,
    num_classes: int,
    embedding_dim: int,
    centroids: Tensor | None = None,
    clustering_gamma: float = CLUSTERING_GAMMA,
    clustering_refinement: str = CLUSTERING_REFINEMENT,
) -> nn.Module:
    """The loss of ``method`` (:func:`loss_method`); seeded by the caller. The discriminative
    loss's ``centroids`` default to one-hot ones."""
    if method == "discriminative" and centroids is None:
        centroids = onehot_centroids(num_classes, num_classes)
    return loss_method(method, clustering_gamma, clustering_refinement).build(
        num_classes=num_classes, embedding_dim=embedding_dim, centroids=centroids
    )


# --------------------------------------------------------------------------- lemma tracking


def balanced_subset(dataset: Any, per_class: int | None = None, seed: int = 0) -> Any:
    """A subset with the same number of samples in every class (Eq. 8 and Lemma 3.1 need it).

    ``per_class`` defaults to the smallest class size; samples are drawn at random (seeded).
    A dataset that is already balanced at that size is returned whole.
    """
    labels = torch.as_tensor(dataset.labels).cpu()
    counts = torch.bincount(labels)
    counts = counts[counts > 0]
    k = int(counts.min()) if per_class is None else int(per_class)
    if k > int(counts.min()):
        raise ValueError(f"per_class={k} exceeds the smallest class ({int(counts.min())} samples)")
    if per_class is None and bool((counts == k).all()):
        return dataset
    g = torch.Generator().manual_seed(seed)
    keep = []
    for c in torch.unique(labels).tolist():
        idx = torch.nonzero(labels == c).squeeze(1)
        keep.append(idx[torch.randperm(idx.numel(), generator=g)[:k]])
    return dataset.subset(torch.sort(torch.cat(keep)).values)
