"""The metric and the partition objective shared by SSDML and its five deep baselines.

Dutta, Harandi and Sekhar (AAAI 2021) learn a deep embedding ``z = f_θ(x) ∈ R^d`` together with
a metric on it,

    δ²_L(z_i, z_j) = (z_i - z_j)ᵀ L Lᵀ (z_i - z_j) = ‖Lᵀ (z_i - z_j)‖²,   L ∈ R^{d × l},  l ≤ d,

(``M = L Lᵀ`` for the baselines, which learn a PSD matrix; the proposed method constrains
``Lᵀ L = I``). Every method is trained by Algorithm 1: draw a random partition of the unlabelled
data, build whatever the method needs on ``X_L ∪ X_U^(p)`` (a kNN graph, propagated affinities,
mined triplets, pairs), then draw mini-batches of *units* (triplets, pairs, ...) from that
partition. :class:`PartitionObjective` is that contract: ``prepare`` sees the whole partition once
(detached embeddings), ``unit_loss`` scores a mini-batch of its units with gradients.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrizations

__all__ = ["LinearMetric", "PartitionObjective"]


class LinearMetric(nn.Module):
    """The metric layer ``z ↦ Lᵀ z`` with ``L ∈ R^{d × l}``; optionally orthogonal (``Lᵀ L = I_l``).

    The orthogonal constraint uses :func:`torch.nn.utils.parametrizations.orthogonal`: ``L`` stays
    on the Stiefel manifold for any optimiser, instead of being projected after each step.

    Args:
        dim: ``d``, the embedding size.
        out_dim: ``l <= d`` (default ``d``).
        orthogonal: constrain ``Lᵀ L = I``.
    """

    def __init__(self, dim: int, out_dim: int | None = None, orthogonal: bool = False) -> None:
        super().__init__()
        out_dim = dim if out_dim is None else out_dim
        if not 1 <= out_dim <= dim:
            raise ValueError(f"metric out_dim must be in [1, dim={dim}], got {out_dim}")
        self.dim, self.out_dim, self.orthogonal = dim, out_dim, orthogonal
        self.proj = nn.Linear(dim, out_dim, bias=False)  # weight (l, d) = Lᵀ
        with torch.no_grad():  # start at the identity on the first l coordinates
            self.proj.weight.copy_(torch.eye(out_dim, dim))
        if orthogonal:
            parametrizations.orthogonal(self.proj)

    @property
    def L(self) -> Tensor:
        """``(d, l)`` the metric factor."""
        return self.proj.weight.t()

    @property
    def M(self) -> Tensor:
        """``(d, d)`` the PSD metric ``L Lᵀ``."""
        L = self.L
        return L @ L.t()

    def forward(self, z: Tensor) -> Tensor:
        """``(..., d) -> (..., l)``: ``Lᵀ z``."""
        return self.proj(z)

    def sq_dist(self, a: Tensor, b: Tensor) -> Tensor:
        """``δ²_L(a, b)`` for broadcastable ``(..., d)`` inputs; returns ``(...)``."""
        return self.proj(a - b).pow(2).sum(-1)


class PartitionObjective(nn.Module, ABC):
    """One semi-supervised metric-learning objective, trained partition by partition.

    Subclasses set ``unit_size`` (3 for triplets, 2 for pairs, 1 for single examples) and own a
    :class:`LinearMetric` as ``self.metric`` (its parameters are the ``L`` / ``M`` of the paper).

    Protocol (Algorithm 1), per partition:

    1. ``units = objective.prepare(z, labels)`` with ``z`` ``(N, d)`` the detached embeddings of the
       labelled examples followed by the partition's unlabelled ones and ``labels`` ``(N,)`` long,
       ``-1`` for unlabelled. It returns ``(U, unit_size)`` long indices into ``0..N-1`` and keeps
       whatever per-partition state it needs (affinities, unit weights, unit kinds) on ``self``.
    2. For mini-batches of unit rows ``rows`` ``(b,)``: ``objective.unit_loss(z_units, rows)`` with
       ``z_units`` ``(b, unit_size, d)`` the current embeddings (with gradients) of
       ``units[rows]``; returns a scalar.
    """

    unit_size: int

    def __init__(self, metric: LinearMetric) -> None:
        super().__init__()
        self.metric = metric

    @abstractmethod
    def prepare(self, z: Tensor, labels: Tensor) -> Tensor:
        """``z (N, d)``, ``labels (N,)`` (-1 = unlabelled) -> units ``(U, unit_size)`` long."""

    @abstractmethod
    def unit_loss(self, z: Tensor, rows: Tensor) -> Tensor:
        """``z (b, unit_size, d)`` embeddings of the units ``rows (b,)`` -> scalar loss."""
