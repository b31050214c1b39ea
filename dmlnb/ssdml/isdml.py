"""Deep-ISDML (Ying et al. 2017): LRML's objective with a density-adapted Laplacian regulariser."""

from __future__ import annotations

from torch import Tensor

from dmlnb.ssdml.graph import normalized_affinity
from dmlnb.ssdml.lrml import DeepLRML, knn_graph

__all__ = ["DeepISDML"]


class DeepISDML(DeepLRML):
    """Deep-ISDML: like :class:`~dmlnb.ssdml.lrml.DeepLRML` (same labelled min-max terms, same
    ``log|M| ≥ 0`` reparametrisation, ``M = L Lᵀ ⪰ 0``), but the Laplacian regulariser scales each
    affinity by the densities around its two end points,

        ½ Σ_ij W̃_ij δ²_M(z_i, z_j),   W̃_ij = ρ̄ W_ij / sqrt(ρ_i ρ_j),   ρ_i = Σ_j W_ij,

    with ``W`` the heat-kernel kNN affinities, ``ρ_i`` the kernel-density (degree) estimate at
    ``z_i`` and ``ρ̄`` its mean (:func:`dmlnb.ssdml.graph.normalized_affinity` times ``ρ̄``): pairs
    in dense regions, which a plain Laplacian over-weights, are down-weighted and isolated points
    keep their links, while ``ρ̄`` keeps the regulariser's total weight against the labelled terms
    that of LRML's (``Ω`` is then the same, so ``gamma_s``, ``gamma_d`` mean the same in both).

    Deviation: Ying et al. optimise a manifold-preserving objective intrinsically on the SPD cone
    (Riemannian gradient). Dutta et al. (2021) describe ISDML only as "similar to LRML, but taking
    into account the density around an example while computing the Laplacian regulariser"; this
    class implements exactly that description, with the density adaptation of the symmetric
    normalised Laplacian (``D^{-1/2} W D^{-1/2}``, rescaled by the mean degree ``ρ̄``), and learns
    ``L`` by (stochastic) gradient descent as Algorithm 1 does for every baseline. Defaults as
    Deep-LRML (no values in the paper).
    """

    def graph_affinity(self, z: Tensor) -> Tensor:
        """``W̃ = ρ̄ D^{-1/2} W D^{-1/2}`` ``(N, N)`` of the heat-kernel kNN affinities ``W``."""
        W = knn_graph(z, self.k)  # (N, N)
        return W.sum(dim=1).mean() * normalized_affinity(W) if W.numel() else W
