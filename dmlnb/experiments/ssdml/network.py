"""The SSDML chapter: network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from dmlnb.data import DatasetSplits, load_dataset
from dmlnb.data.semisup import semi_supervised
from dmlnb.experiments.ssdml.settings import METHODS, SEMI_SUPERVISED, Setting
from dmlnb.methods import MethodCall, call
from dmlnb.models import build_model, in_training_format
from dmlnb.profiles import TrainConfig
from dmlnb.ssdml.base import PartitionObjective
from dmlnb.training import train

__all__ = [
    "POOLED_BACKBONES",
    "NormalizedFeatures",
    "build_network",
    "build_objective",
    "embedding_spectrum",
    "load_splits",
    "objective_method",
    "pretrain_softmax",
    "triplet_purity",
]

# --------------------------------------------------------------------------- data and models


def load_splits(
    setting: Setting, config: TrainConfig, seed: int, data_root: str | Path | None = None
) -> DatasetSplits:
    """The dataset with ``labelled_per_class`` labelled training examples per class (seeded draw).
    A validation hold-out (``config.dataset_options["validation"]``) is drawn first, when the
    dataset is loaded, so neither the labelled nor the unlabelled part holds a validation class;
    its images stay in ``splits.validation``."""
    splits = load_dataset(config.dataset, root=data_root, **config.dataset_options)
    return semi_supervised(splits, setting.labelled_per_class, seed=seed)


def build_network(config: TrainConfig, input_shape: tuple[int, int, int]) -> tuple[nn.Module, int]:
    """``(f_θ, d)``: the network whose L2-normalised output ``z`` ``(B, d)`` the graph and ``L``
    see (seeded by the caller). For the paper's networks (``ssdml-mnist``, ``ssdml-cifar``) it is
    the trunk up to the L2 normalisation, so ``L`` plays the paper's ``L`` layer; for the
    pretrained backbones of the fine-grained protocol (:data:`POOLED_BACKBONES`) it is the
    backbone's pooled features, L2-normalised, with no layer between them and ``L`` (the paper:
    R-MAC -> ``L``; ``d`` is the backbone's feature size, ``embedding_dim`` is not used); for the
    small CNN of the CPU profiles it is backbone -> FC(``embedding_dim``) -> L2 (as the paper's
    MNIST network's FC(500 x 128) -> L2). The network is in the memory format the training loop
    gives it (:func:`dmlnb.models.in_training_format`), so one evaluated without training (the
    network at initialisation, the mining diagnosis's features) embeds as the
    runs' evaluations do."""
    model = build_model(
        config.model,
        input_shape,
        config.embedding_dim,
        normalize=True,
        pretrained=config.pretrained,
        width=config.width,
    )
    if config.model.startswith("ssdml"):
        network, dim = model.trunk, model.feature_dim
    elif config.model in POOLED_BACKBONES:
        network, dim = NormalizedFeatures(model.trunk), model.feature_dim
    else:
        network, dim = model, config.embedding_dim
    return in_training_format(network, config), dim


#: Backbones whose pooled features feed ``L`` directly (:func:`build_network`).
POOLED_BACKBONES = ("googlenet",)


class NormalizedFeatures(nn.Module):
    """``x -> trunk(x) / ‖trunk(x)‖``: ``(B, C, H, W) -> (B, F)``, the L2-normalised pooled
    features of a backbone, with no embedding layer."""

    def __init__(self, trunk: nn.Module) -> None:
        super().__init__()
        self.trunk = trunk

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.trunk(x), dim=1)  # (B, F)


def objective_method(method: str, setting: Setting, alpha: float | None = None) -> MethodCall:
    """The registered method (:mod:`dmlnb.ssdml.methods`) that ``method`` trains in ``setting``,
    with every argument; part of its runs' fingerprints. ``alpha`` (default ``setting.alpha``)
    is an argument only of the methods whose objective reads it (the angular ones)."""
    alpha = setting.alpha if alpha is None else alpha
    if method in ("ours", "ours-noorth", "ours-outside"):
        negatives = "outside" if method == "ours-outside" else setting.negatives
        return call(
            "ssdml-angular",
            metric_dim=setting.metric_dim,
            alpha_degrees=alpha,
            k=setting.k,
            gamma=setting.gamma,
            orthogonal=method != "ours-noorth",
            propagation=setting.propagation,
            negatives=negatives,
        )
    if method in ("triplet", "angular"):
        angle = {"alpha_degrees": alpha} if method == "angular" else {}
        return call(
            "ssdml-labelled",
            metric_dim=setting.metric_dim,
            loss=method,
            **angle,
            **setting.baseline_hyper.get(method, {}),
        )
    if method in SEMI_SUPERVISED:
        return call(method, metric_dim=setting.metric_dim, **setting.baseline_hyper.get(method, {}))
    raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS.values())}")


def build_objective(
    method: str, setting: Setting, dim: int, alpha: float | None = None
) -> PartitionObjective:
    """The :class:`PartitionObjective` of ``method`` on ``dim``-dimensional ``z``
    (:func:`objective_method`)."""
    return objective_method(method, setting, alpha).build(embedding_dim=dim)


# --------------------------------------------------------------------------- diagnostics


def embedding_spectrum(x: Tensor) -> dict[str, Any]:
    """Collapse measures of an embedding ``x`` ``(N, l)``: singular values of the centred
    embedding (normalised to sum 1) and its effective rank ``exp(H(σ / Σσ))`` (Roy and
    Vetterli 2007), between 1 (all points on a line) and ``l`` (a flat spectrum)."""
    x = x.double()
    s = torch.linalg.svdvals(x - x.mean(0, keepdim=True))  # (min(N, l),)
    p = s / s.sum().clamp_min(1e-300)
    entropy = -(p * torch.log(p.clamp_min(1e-300))).sum()
    return {"singular_values": p.tolist(), "effective_rank": float(torch.exp(entropy))}


def triplet_purity(targets: Tensor) -> Any:
    """``diagnose`` callback for :func:`~dmlnb.ssdml.algorithm.train_ssdml`: with the hidden true
    labels ``targets`` ``(N_L + N_U,)`` of the pool, the share of mined triplets whose positive
    has the anchor's class (``pos_same``), whose negative has it (``neg_same``), and both right."""

    def diagnose(units: Tensor, part: Tensor) -> dict[str, float]:
        if units.shape[1] != 3:
            return {}
        y = targets[part[units]]  # (U, 3)
        pos, neg = y[:, 0] == y[:, 1], y[:, 0] == y[:, 2]
        return {
            "pos_same": float(pos.float().mean()),
            "neg_same": float(neg.float().mean()),
            "triplet_correct": float((pos & ~neg).float().mean()),
        }

    return diagnose


def pretrain_softmax(
    network: nn.Module,
    dim: int,
    dataset: Dataset,
    num_classes: int,
    config: TrainConfig,
    epochs: int,
) -> None:
    """CIFAR-10 in the paper: the network with a softmax classifier in place of ``L``
    (:class:`~dmlnb.ssdml.supervised.SoftmaxPretraining`), trained on ``dataset`` (the labelled
    images, ``num_classes`` classes) for ``epochs`` epochs by :func:`dmlnb.training.train` (the
    run's optimiser settings, nothing written: the run's checkpoint holds the network from then
    on)."""
    from dmlnb.ssdml.supervised import SoftmaxPretraining

    pretrain = config.replace(
        epochs=epochs, steps_per_epoch=None, lr_milestones=()
    )  # no evaluation
    train(
        network,
        SoftmaxPretraining(dim, num_classes),
        dataset,
        None,
        pretrain,
        progress=False,
        name="softmax pre-training",
    )
