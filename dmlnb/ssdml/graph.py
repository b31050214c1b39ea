"""Graphs on one partition ``X_L ∪ X_U^(p)``: kNN affinities, Laplacians, affinity propagation.

Every function takes and returns dense tensors on the input's device and dtype. ``N`` is the
partition size (``N_L + N_p``, about 9k in the paper), so an ``(N, N)`` matrix is fine but an
explicit ``(N, N)`` inverse is never formed: affinity propagation (Liu et al. 2010; Dutta and
Sekhar 2018),

    W* = (1 - γ) (I - γ Q)^{-1} W0,

is a linear solve with ``N`` right-hand sides (LU, or conjugate gradients for a symmetric ``Q``).

The paper's text allows two readings of the propagation (:data:`PROPAGATIONS`,
:func:`propagated_affinity`):

* ``"one-sided"`` (the default, the paper's closed form as printed): ``W* = (1-γ)(I-γQ)^{-1} W0``,
  a random walk with restart from the first index only. A pair of two unlabelled points ``(i, j)``
  then gets ``W*_ij = (1-γ)[(I-γQ)^{-1}]_ij``, graph proximity without label information (column
  ``j`` of ``W0`` is the unit vector ``e_j``).
* ``"two-sided"``: the paper's sentence "the flow of information from the non-zero entries of
  ``W0`` (representing the labeled pairs) to the zero entries (representing the unlabeled
  pairs)" read literally, so that the walk runs from both ends of a pair:
  ``W* = (1-γ)² (I-γQ)^{-1} W0 (I-γQ)^{-ᵀ}``, i.e. ``W*_ij = Σ_ab P_ia W0_ab P_jb`` with the
  row-stochastic ``P = (1-γ)(I-γQ)^{-1}``: the expected label agreement of where walks from
  ``i`` and from ``j`` restart. Symmetric by construction.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dmlnb.pairs import euclidean_distance

__all__ = [
    "knn_indices",
    "knn_transition",
    "transition_from_indices",
    "knn_affinity",
    "normalized_affinity",
    "graph_laplacian",
    "initial_affinity",
    "propagate_affinity",
    "symmetrize",
    "PROPAGATIONS",
    "propagated_affinity",
]

#: The two readings of the paper's affinity propagation (module docstring); the
#: first is the default.
PROPAGATIONS = ("one-sided", "two-sided")

#: ``solver="auto"`` uses conjugate gradients above this many nodes when ``Q`` is symmetric.
CG_MIN_NODES = 4096


def _check_z_k(z: Tensor, k: int) -> None:
    if z.dim() != 2:
        raise ValueError(f"z must be (N, d) embeddings, got shape {tuple(z.shape)}")
    if not 1 <= k < z.shape[0]:
        raise ValueError(f"k must be in [1, N-1] = [1, {z.shape[0] - 1}] neighbours, got k={k}")


def _check_square(A: Tensor, name: str) -> None:
    if A.dim() != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square (N, N) matrix, got shape {tuple(A.shape)}")


def knn_indices(z: Tensor, k: int) -> Tensor:
    """``(N, k)`` long: the ``k`` Euclidean nearest neighbours of each row of ``z`` ``(N, d)``,
    nearest first, the point itself excluded."""
    _check_z_k(z, k)
    d2 = euclidean_distance(z, squared=True)  # (N, N)
    d2.diagonal().fill_(float("inf"))
    return d2.topk(k, dim=1, largest=False).indices  # (N, k)


def transition_from_indices(idx: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """``Q`` ``(N, N)`` with ``Q_ij = 1/k`` for each of the ``k`` neighbours
    ``idx[i]`` ``(N, k)``."""
    n, k = idx.shape
    Q = torch.zeros(n, n, dtype=dtype, device=idx.device)  # (N, N)
    return Q.scatter_(1, idx, 1.0 / k)


def knn_transition(z: Tensor, k: int) -> Tensor:
    """The paper's neighbourhood matrix ``Q`` ``(N, N)``: ``Q_ij = 1/k`` if ``z_j ∈ N_k(z_i)``,
    else 0. Row-stochastic and in general **not** symmetric."""
    return transition_from_indices(knn_indices(z, k), z.dtype)


def knn_affinity(z: Tensor, k: int) -> Tensor:
    """Symmetric kNN heat-kernel affinities ``A`` ``(N, N)`` with a zero diagonal.

    ``A_ij = exp(-‖z_i - z_j‖² / σ²)`` if ``j ∈ N_k(i)`` or ``i ∈ N_k(j)`` (the union, so ``A`` is
    symmetric), else 0. Bandwidth: ``σ²`` is the mean squared distance from a point to its ``k``
    nearest neighbours (over all ``N k`` such pairs), a global scale-free choice that makes a
    typical neighbour's affinity ``≈ e^{-1}`` whatever the embedding's scale (LRML and ISDML use a
    heat kernel on the kNN graph; the paper does not give the bandwidth).
    """
    _check_z_k(z, k)
    d2 = euclidean_distance(z, squared=True)  # (N, N)
    d2.diagonal().fill_(float("inf"))
    knn_d2, idx = d2.topk(k, dim=1, largest=False)  # (N, k)
    sigma2 = knn_d2.mean().clamp_min(torch.finfo(z.dtype).tiny)
    mask = torch.zeros_like(d2, dtype=torch.bool).scatter_(1, idx, True)  # (N, N)
    mask = mask | mask.T
    return torch.where(mask, torch.exp(-d2 / sigma2), torch.zeros_like(d2))  # (N, N)


def normalized_affinity(A: Tensor) -> Tensor:
    """``D^{-1/2} A D^{-1/2}`` ``(N, N)`` with ``D = diag(A 1)``; zero-degree rows stay zero."""
    _check_square(A, "A")
    deg = A.sum(dim=1)  # (N,)
    inv_sqrt = torch.where(
        deg > 0, deg.clamp_min(torch.finfo(A.dtype).tiny).rsqrt(), torch.zeros_like(deg)
    )
    return inv_sqrt[:, None] * A * inv_sqrt[None, :]  # (N, N)


def graph_laplacian(A: Tensor) -> Tensor:
    """The unnormalised Laplacian ``D - A`` ``(N, N)``, ``D = diag(A 1)``; for symmetric ``A``,
    ``Tr(Zᵀ (D - A) Z) = ½ Σ_ij A_ij ‖z_i - z_j‖²``."""
    _check_square(A, "A")
    return torch.diag(A.sum(dim=1)) - A  # (N, N)


def initial_affinity(labels: Tensor) -> Tensor:
    """The paper's ``W0`` ``(N, N)`` from ``labels`` ``(N,)`` (``-1`` = unlabelled).

    ``W0_ij = +1`` for ``i ≠ j`` both labelled with ``y_i = y_j``, ``-1`` for both labelled with
    ``y_i ≠ y_j``, ``+1`` on the diagonal, 0 otherwise. Float32 on the labels' device.
    """
    if labels.dim() != 1:
        raise ValueError(f"labels must be 1-D (N,), got shape {tuple(labels.shape)}")
    known = labels >= 0  # (N,)
    both = known[:, None] & known[None, :]  # (N, N)
    same = labels[:, None] == labels[None, :]  # (N, N)
    one = torch.ones(labels.shape[0], labels.shape[0], device=labels.device)  # (N, N)
    W0 = torch.where(both, torch.where(same, one, -one), torch.zeros_like(one))  # (N, N)
    W0.diagonal().fill_(1.0)
    return W0


def _cg(A_mul, B: Tensor, tol: float, max_iter: int) -> Tensor:
    """Conjugate gradients for ``A X = B`` (``A`` SPD, applied by ``A_mul``), all ``R`` columns
    of ``B`` ``(N, R)`` at once with their own step sizes."""
    X = torch.zeros_like(B)  # (N, R)
    Rres = B.clone()  # (N, R)
    P = Rres.clone()  # (N, R)
    rs = (Rres * Rres).sum(0)  # (R,)
    stop = (tol * B.norm(dim=0)).pow(2)  # (R,)
    tiny = torch.finfo(B.dtype).tiny
    for _ in range(max_iter):
        if bool((rs <= stop).all()):
            break
        AP = A_mul(P)  # (N, R)
        alpha = rs / (P * AP).sum(0).clamp_min(tiny)  # (R,)
        X = X + alpha * P
        Rres = Rres - alpha * AP
        rs_new = (Rres * Rres).sum(0)  # (R,)
        P = Rres + (rs_new / rs.clamp_min(tiny)) * P
        rs = rs_new
    return X


def propagate_affinity(
    W0: Tensor,
    Q: Tensor,
    gamma: float,
    solver: str = "auto",
    tol: float = 1e-6,
    max_iter: int = 1000,
) -> Tensor:
    """Affinity propagation ``W* = (1 - γ)(I - γ Q)^{-1} W0`` ``(N, N)`` without an inverse.

    Args:
        W0: ``(N, N)`` initial affinities (:func:`initial_affinity`).
        Q: ``(N, N)`` neighbourhood matrix: the paper's row-stochastic :func:`knn_transition`, or a
            symmetric one such as :func:`normalized_affinity` (spectral radius ``<= 1`` either way,
            so ``I - γQ`` is non-singular for ``0 < γ < 1``).
        gamma: ``γ ∈ (0, 1)``.
        solver: ``"solve"`` (LU, any ``Q``), ``"cg"`` (conjugate gradients, symmetric ``Q`` only:
            ``I - γQ`` is then SPD with eigenvalues in ``[1 - γ, 1 + γ]``), or ``"auto"`` (CG for a
            symmetric ``Q`` with more than ``CG_MIN_NODES`` nodes, else LU).
        tol, max_iter: CG's relative residual tolerance per column and iteration cap.
    """
    _check_square(W0, "W0")
    _check_square(Q, "Q")
    if W0.shape != Q.shape:
        raise ValueError(f"W0 {tuple(W0.shape)} and Q {tuple(Q.shape)} must have the same shape")
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma must be in (0, 1), got {gamma}")
    if solver not in ("auto", "solve", "cg"):
        raise ValueError(f"solver must be 'auto', 'solve' or 'cg', got {solver!r}")
    W0 = W0.to(Q.dtype)
    n = Q.shape[0]
    symmetric = bool(torch.allclose(Q, Q.T))
    if solver == "auto":
        solver = "cg" if symmetric and n > CG_MIN_NODES else "solve"
    if solver == "cg":
        if not symmetric:
            raise ValueError(
                "solver='cg' needs a symmetric Q (I - γQ must be SPD); use solver='solve'"
            )
        X = _cg(lambda P: P - gamma * (Q @ P), W0, tol, max_iter)  # (N, N)
    else:
        A = torch.eye(n, dtype=Q.dtype, device=Q.device) - gamma * Q  # (N, N)
        X = torch.linalg.solve(A, W0)  # (N, N)
    return (1.0 - gamma) * X


def symmetrize(W: Tensor) -> Tensor:
    """``(W + Wᵀ) / 2`` ``(N, N)``."""
    _check_square(W, "W")
    return 0.5 * (W + W.T)


def propagated_affinity(
    W0: Tensor, Q: Tensor, gamma: float, propagation: str = "one-sided", solver: str = "auto"
) -> Tensor:
    """The symmetric affinities ``W`` ``(N, N)`` the mining sorts by, under one reading of the
    propagation (:data:`PROPAGATIONS`, module docstring):

    * ``"one-sided"``: ``W = sym((1-γ)(I-γQ)^{-1} W0)`` (the paper's formula, then its
      symmetrisation ``(W* + W*ᵀ)/2``);
    * ``"two-sided"``: ``W = sym((1-γ)² (I-γQ)^{-1} W0 (I-γQ)^{-ᵀ})``, two solves of
      :func:`propagate_affinity` (rows, then columns).
    """
    if propagation not in PROPAGATIONS:
        raise ValueError(f"propagation must be one of {PROPAGATIONS}, got {propagation!r}")
    W = propagate_affinity(W0, Q, gamma, solver=solver)  # (N, N) rows propagated
    if propagation == "two-sided":
        W = propagate_affinity(W.T.contiguous(), Q, gamma, solver=solver).T  # (N, N) columns too
    return symmetrize(W)
