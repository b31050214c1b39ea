"""Deep-LRML (Hoi, Liu and Chang 2010) and the weighted-pair machinery of the graph baselines.

LRML, ISDML, APLLR and APIT all score a partition ``X_L ∪ X_U^(p)`` by a weighted sum of squared
Mahalanobis distances over pairs, plus (for some) a regulariser on ``M``:

    J(M) = Σ_{i<j} C_ij δ²_M(z_i, z_j) + R(M),

where ``C`` ``(N, N)`` is symmetric and collects the labelled-pair terms and the Laplacian
regulariser ``Tr(M X 𝓛 Xᵀ) = ½ Σ_ij W_ij δ²_M(z_i, z_j) = Σ_{i<j} W_ij δ²_M``. The units of
Algorithm 1 are the pairs ``i < j`` with ``C_ij ≠ 0`` (the kNN graph's edges and the labelled
pairs): :class:`WeightedPairObjective` stores their weights in ``prepare`` and ``unit_loss`` sums
``C_u δ²`` over a mini-batch plus ``R(M) · b / U``, so the sum over one epoch of the partition's
units is exactly ``J``.
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from torch import Tensor

from dmlnb.pairs import pair_masks
from dmlnb.ssdml.base import LinearMetric, PartitionObjective
from dmlnb.ssdml.graph import knn_affinity

__all__ = [
    "check_partition",
    "labelled_pair_masks",
    "upper_pairs",
    "log_pdet",
    "WeightedPairObjective",
    "DeepLRML",
]


def check_partition(z: Tensor, labels: Tensor, dim: int) -> None:
    """Validate ``prepare``'s inputs: ``z`` ``(N, dim)`` float, ``labels`` ``(N,)`` integer."""
    if z.dim() != 2 or z.shape[1] != dim:
        raise ValueError(
            f"z must be (N, {dim}) embeddings (the metric's dim), got shape {tuple(z.shape)}"
        )
    if labels.dim() != 1 or labels.shape[0] != z.shape[0]:
        raise ValueError(f"labels must be (N,) = ({z.shape[0]},), got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor (-1 = unlabelled), got {labels.dtype}")


def labelled_pair_masks(labels: Tensor) -> tuple[Tensor, Tensor]:
    """``(same, different)`` ``(N, N)`` bool masks of the labelled pairs ``i ≠ j`` (both labelled)
    with equal / different labels; ``labels`` ``(N,)`` with ``-1`` for unlabelled."""
    known = labels >= 0  # (N,)
    both = known[:, None] & known[None, :]  # (N, N)
    masks = pair_masks(labels)
    return masks.positive & both, masks.negative & both


def upper_pairs(C: Tensor) -> tuple[Tensor, Tensor]:
    """The pairs ``i < j`` with ``C_ij ≠ 0`` of a symmetric ``C`` ``(N, N)``: units ``(U, 2)`` long
    (row-major order) and their weights ``C_ij`` ``(U,)``."""
    nz = (C != 0).nonzero()  # (nnz, 2)
    units = nz[nz[:, 0] < nz[:, 1]]  # (U, 2)
    return units, C[units[:, 0], units[:, 1]]


def log_pdet(L: Tensor) -> Tensor:
    """``log det(Lᵀ L)`` for ``L`` ``(d, l)``: ``log |M|`` for ``M = L Lᵀ`` when ``l = d``, and its
    pseudo-determinant (product of the non-zero eigenvalues) when ``l < d``."""
    return torch.linalg.slogdet(L.t() @ L).logabsdet


class WeightedPairObjective(PartitionObjective):
    """``J = Σ_{i<j} C_ij s(L) δ²_L(z_i, z_j) + R(L)`` over the pairs of one partition.

    Subclasses implement :meth:`pair_weights` (``C`` ``(N, N)``), and may override
    :meth:`distance_scale` (``s(L)``, default 1) and :meth:`regulariser` (``R(L)``, default 0).
    ``unit_loss`` on a mini-batch of ``b`` of the ``U`` units returns
    ``Σ_batch C_u s δ²_u + R · b / U``: summed over one epoch it is ``J``.
    """

    unit_size = 2

    def __init__(self, metric: LinearMetric) -> None:
        super().__init__(metric)
        self.weights: Tensor | None = None  # (U,) C_ij of the current partition's units

    @abstractmethod
    def pair_weights(self, z: Tensor, labels: Tensor) -> Tensor:
        """``C`` ``(N, N)`` symmetric, zero diagonal, on ``z``'s device and dtype."""

    def distance_scale(self) -> Tensor | float:
        """``s(L)``: a factor on every distance (a reparametrisation of ``M``); default 1."""
        return 1.0

    def regulariser(self) -> Tensor | float:
        """``R(L)``, the partition-level regulariser of ``M``; default 0."""
        return 0.0

    def prepare(self, z: Tensor, labels: Tensor) -> Tensor:
        """``z`` ``(N, d)`` detached, ``labels`` ``(N,)`` -> units ``(U, 2)``; stores ``C_u``."""
        check_partition(z, labels, self.metric.dim)
        C = self.pair_weights(z.detach(), labels)  # (N, N)
        units, self.weights = upper_pairs(C)
        return units

    def unit_loss(self, z: Tensor, rows: Tensor) -> Tensor:
        """``z`` ``(b, 2, d)`` pair embeddings of ``units[rows]`` -> scalar."""
        if self.weights is None:
            name = type(self).__name__
            raise RuntimeError(f"{name}.unit_loss before prepare(); call prepare(z, labels) first")
        d2 = self.metric.sq_dist(z[:, 0], z[:, 1])  # (b,)
        pair_sum = (self.weights[rows].to(d2.dtype) * d2).sum() * self.distance_scale()
        return pair_sum + self.regulariser() * (rows.numel() / max(self.weights.numel(), 1))


def knn_graph(z: Tensor, k: int) -> Tensor:
    """Heat-kernel kNN affinities ``(N, N)`` (:func:`dmlnb.ssdml.graph.knn_affinity`) with ``k``
    capped at ``N - 1``; all zeros for a partition of fewer than two examples."""
    n = z.shape[0]
    if n < 2:
        return z.new_zeros(n, n)
    return knn_affinity(z, min(k, n - 1))


class DeepLRML(WeightedPairObjective):
    """Deep-LRML: Laplacian regularised metric learning (Hoi, Liu and Chang 2010), Eq. (2) of
    Dutta et al. (2021), trained by Algorithm 1:

        min_{M ⪰ 0, log|M| ≥ 0}  γ_S Σ_{(i,j) ∈ S} δ²_M(z_i, z_j) − γ_D Σ_{(i,j) ∈ D} δ²_M(z_i, z_j)
                                 + ½ Σ_ij W_ij δ²_M(z_i, z_j),

    ``S`` / ``D`` the unordered labelled pairs with equal / different labels, ``W`` the symmetric
    heat-kernel affinities of the kNN graph on the partition's (detached) embeddings
    (:func:`dmlnb.ssdml.graph.knn_affinity`), so the last term is ``Tr(M X 𝓛 Xᵀ)``. ``M = L Lᵀ``
    is PSD by construction.

    Deviation (parametrisation only): the weights are written as

        γ_S = gamma_s · Ω / |S|,   γ_D = gamma_d · Ω / |D|,   Ω = Σ_{i<j} W_ij,

    i.e. ``gamma_s`` / ``gamma_d`` weigh the *mean* similar / dissimilar distance against the
    graph's total affinity, so that one value serves any partition size and label budget (the
    paper gives none). This matters: the objective is linear in ``M``, and it is unbounded below
    (the metric collapses onto one direction) as soon as the dissimilar term outweighs the
    Laplacian in some direction; with eq. (2)'s raw sums and ``γ_D = 1`` that already happens with
    100 labels (4950 pairs). Defaults ``gamma_s = gamma_d = 0.01`` keep it bounded on ℓ2-normalised
    embeddings (mean dissimilar distances are 5–20 times the mean neighbour distance).

    Deviation: ``log|M| ≥ 0`` is enforced as the equality ``log|M| = 0`` by a scale
    reparametrisation: distances use ``M̃ = M / |M|^{1/l}`` (``|M| = det(Lᵀ L)``, the
    pseudo-determinant when ``l < d``), i.e. every ``δ²`` is multiplied by
    ``s(L) = exp(−log det(Lᵀ L) / l)``. The objective is linear in ``M``, so at any finite
    minimiser the constraint is active and the two problems coincide; the learned ``L`` is then
    defined up to a scale, which no ranking or kNN evaluation sees. The original solves an SDP
    for ``M`` alone; here ``L`` and the network are learned by SGD (Algorithm 1), so the network's
    embeddings must be bounded (ℓ2-normalised as in the paper) for the dissimilar term not to
    diverge. The labelled sums run over unordered pairs; ``k = 10`` as the paper's graph.
    Without graph edges (``Ω = 0``) ``Ω = 1`` is used.

    Args:
        metric: the :class:`LinearMetric` (``M = L Lᵀ``).
        gamma_s, gamma_d: weights of the mean similar / dissimilar labelled distances relative
            to the total graph affinity ``Ω`` (see above).
        k: neighbours of the kNN graph (capped at ``N - 1``).
    """

    def __init__(
        self, metric: LinearMetric, gamma_s: float = 0.01, gamma_d: float = 0.01, k: int = 10
    ) -> None:
        super().__init__(metric)
        if gamma_s < 0 or gamma_d < 0:
            raise ValueError(f"gamma_s and gamma_d must be >= 0, got {gamma_s}, {gamma_d}")
        if k < 1:
            raise ValueError(f"k must be >= 1 neighbours, got {k}")
        self.gamma_s, self.gamma_d, self.k = gamma_s, gamma_d, k

    def graph_affinity(self, z: Tensor) -> Tensor:
        """``W`` ``(N, N)`` of the Laplacian regulariser: the heat-kernel kNN affinities."""
        return knn_graph(z, self.k)

    def pair_weights(self, z: Tensor, labels: Tensor) -> Tensor:
        W = self.graph_affinity(z)  # (N, N)
        omega = float(W.sum()) / 2 or 1.0  # Σ_{i<j} W_ij
        same, diff = labelled_pair_masks(labels)  # (N, N) each
        n_same, n_diff = max(int(same.sum()) // 2, 1), max(int(diff.sum()) // 2, 1)
        labelled = self.gamma_s / n_same * same.to(z.dtype) - self.gamma_d / n_diff * diff.to(
            z.dtype
        )
        return W + omega * labelled

    def distance_scale(self) -> Tensor:
        return torch.exp(-log_pdet(self.metric.L) / self.metric.out_dim)
