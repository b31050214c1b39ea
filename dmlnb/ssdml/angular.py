"""The proposed method: affinity-propagated triplets + the smooth angular objective (Eq. 3).

Per partition (``prepare``): kNN graph ``Q`` on the detached embeddings, ``W0`` from the labels,
``W* = (1 - γ)(I - γQ)^{-1} W0``, ``W = (W* + W*ᵀ)/2``, triplets from each anchor's sorted
neighbourhood (:mod:`dmlnb.ssdml.mining`). Two options that are not the paper's default: the
two-sided reading of the propagation (:func:`~dmlnb.ssdml.graph.propagated_affinity`) and
negatives drawn from outside the neighbourhood (:func:`~dmlnb.ssdml.mining.neighbourhood_triplets`).
Per mini-batch of ``T_b`` triplets (``unit_loss``), Eq. (3) of Dutta, Harandi and Sekhar (2021) (the
angular triplet of Wang et al. 2017):

    J = Σ_i log(1 + exp(m_i)),
    m_i = δ²_L(z_i, z⁺_i) - 4 tan²α · δ²_L(z⁻_i, (z_i + z⁺_i)/2),
    δ²_L(a, b) = ‖Lᵀ(a - b)‖²,   L ∈ R^{d × l},  Lᵀ L = I_l (optional, for the ablation).
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor

from dmlnb.ssdml.base import LinearMetric, PartitionObjective
from dmlnb.ssdml.graph import (
    PROPAGATIONS,
    initial_affinity,
    knn_indices,
    propagated_affinity,
    transition_from_indices,
)
from dmlnb.ssdml.mining import NEGATIVES, neighbourhood_triplets

__all__ = ["AngularSSDML", "smooth_angular_loss"]


def smooth_angular_loss(metric: LinearMetric, z: Tensor, alpha_degrees: float) -> Tensor:
    """Eq. (3) averaged over the mini-batch: ``z`` ``(T_b, 3, d)`` = (anchor, positive, negative).

    The paper sums over the ``T_b`` triplets; the mean is the same objective with the learning
    rate divided by ``T_b`` (constant), and keeps the scale independent of the batch size.
    """
    if z.dim() != 3 or z.shape[1] != 3:
        raise ValueError(f"z must be (T_b, 3, d) triplets, got shape {tuple(z.shape)}")
    a, p, n = z.unbind(1)  # (T_b, d) each
    t2 = math.tan(math.radians(alpha_degrees)) ** 2
    m = metric.sq_dist(a, p) - 4.0 * t2 * metric.sq_dist(n, 0.5 * (a + p))  # (T_b,)
    return F.softplus(m).mean()


class AngularSSDML(PartitionObjective):
    """The proposed SSDML objective (units are mined triplets).

    Args:
        dim: ``d``, size of the network's (L2-normalised) embedding ``z``.
        out_dim: ``l <= d``, the metric's output size (paper: 64 for MNIST, 32 for CIFAR-10, 128
            for CUB / Cars).
        alpha_degrees: the angle ``α`` of Eq. (3) (paper: 40° small images, 45° fine-grained).
        k: neighbours of the kNN graph and of the mining neighbourhood (paper: 10, or 50).
        gamma: ``γ`` of affinity propagation (paper: 0.99).
        orthogonal: ``Lᵀ L = I`` (the paper's choice; ``False`` is Table 4's "w/o orth").
        solver: linear solver of the propagation (see
            :func:`~dmlnb.ssdml.graph.propagate_affinity`).
        propagation: ``"one-sided"`` (the paper's formula) or ``"two-sided"``
            (:func:`~dmlnb.ssdml.graph.propagated_affinity`).
        negatives: ``"neighbourhood"`` (the paper) or ``"outside"`` the neighbourhood, drawn from
            torch's global generator (seeded by the run;
            :func:`~dmlnb.ssdml.mining.neighbourhood_triplets`).

    After :meth:`prepare`, ``self.affinity`` ``(N, N)`` holds ``W`` and ``self.triplets``
    ``(U, 3)`` the mined units.
    """

    unit_size = 3

    def __init__(
        self,
        dim: int,
        out_dim: int | None = None,
        alpha_degrees: float = 40.0,
        k: int = 10,
        gamma: float = 0.99,
        orthogonal: bool = True,
        solver: str = "auto",
        propagation: str = "one-sided",
        negatives: str = "neighbourhood",
    ) -> None:
        super().__init__(LinearMetric(dim, out_dim, orthogonal=orthogonal))
        if not 0.0 < alpha_degrees < 90.0:
            raise ValueError(f"alpha_degrees must be in (0, 90), got {alpha_degrees}")
        if k < 2:
            raise ValueError(f"k must be >= 2 (half positives, half negatives), got {k}")
        if propagation not in PROPAGATIONS:
            raise ValueError(f"propagation must be one of {PROPAGATIONS}, got {propagation!r}")
        if negatives not in NEGATIVES:
            raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
        self.alpha_degrees, self.k, self.gamma, self.solver = float(alpha_degrees), k, gamma, solver
        self.propagation, self.negatives = propagation, negatives
        self.affinity: Tensor | None = None
        self.triplets: Tensor | None = None

    def prepare(self, z: Tensor, labels: Tensor) -> Tensor:
        """kNN graph, affinity propagation, symmetrisation, mining -> ``(N ⌊k/2⌋, 3)`` triplets."""
        if z.shape[0] != labels.shape[0]:
            raise ValueError(f"z has {z.shape[0]} rows but labels has {labels.shape[0]}")
        z = z.detach().float()
        idx = knn_indices(z, self.k)  # (N, k)
        Q = transition_from_indices(idx, z.dtype)  # (N, N)
        W0 = initial_affinity(labels.to(z.device))  # (N, N)
        W = propagated_affinity(W0, Q, self.gamma, self.propagation, solver=self.solver)  # (N, N)
        self.affinity = W
        self.triplets = neighbourhood_triplets(W, idx, self.negatives)  # (U, 3)
        return self.triplets

    def unit_loss(self, z: Tensor, rows: Tensor) -> Tensor:
        """Eq. (3) on the triplets ``rows`` whose embeddings are ``z`` ``(b, 3, d)``."""
        return smooth_angular_loss(self.metric, z, self.alpha_degrees)

    def extra_repr(self) -> str:
        return (
            f"alpha={self.alpha_degrees}, k={self.k}, gamma={self.gamma}, "
            f"orthogonal={self.metric.orthogonal}, out_dim={self.metric.out_dim}, "
            f"propagation={self.propagation}, negatives={self.negatives}"
        )
