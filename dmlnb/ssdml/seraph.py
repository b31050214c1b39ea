"""Deep-SERAPH (Niu et al. 2014): entropy-regularised semi-supervised metric learning."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.ssdml.base import LinearMetric, PartitionObjective
from dmlnb.ssdml.lrml import check_partition

__all__ = ["DeepSERAPH", "pair_entropy"]


def pair_entropy(t: Tensor) -> Tensor:
    """Binary entropy ``−Σ_{y=±1} p(y) log p(y)`` of ``p(y) = 1 / (1 + exp(y t))``, elementwise and
    stable for any ``t`` (``t = δ² − η``): ``p(+1) softplus(t) + p(−1) softplus(−t)``."""
    q = torch.sigmoid(-t)  # p(+1)
    return q * F.softplus(t) + (1.0 - q) * F.softplus(-t)


class DeepSERAPH(PartitionObjective):
    """Deep-SERAPH, Eq. (1) of Dutta et al. (2021) trained by Algorithm 1:

        min_M  − Σ_{(i,j) ∈ P} log p_ij(y_ij) − μ Σ_{(i,j) ∈ U} Σ_{y=±1} p_ij(y) log p_ij(y)
               + λ Tr(M),

        p_ij(y) = 1 / (1 + exp(y (δ²_M(z_i, z_j) − η))),

    ``P`` the unordered labelled pairs (``y_ij = +1`` equal labels, ``−1`` different), ``U`` the
    unordered pairs of the partition's unlabelled examples. The first term is the negative
    log-likelihood of the labelled pairs (the dual of SERAPH's maximum-entropy part), the second
    the entropy of the unlabelled pairs (entropy minimisation), the third the trace-norm
    regulariser (``Tr(M) = ‖L‖_F²``); ``M = L Lᵀ ⪰ 0`` by construction. No graph is built.

    Units are pairs; ``unit_loss`` returns ``Σ_batch w_u ℓ_u + λ Tr(M) b / U`` (``ℓ_u`` the
    unit's NLL or entropy, ``w_u`` 1 or ``μ`` times the sampling weight), so one epoch sums to the
    objective.

    Deviations (the SSDML paper is silent): (i) a partition of ``N_p`` unlabelled examples has
    ``N_p (N_p − 1) / 2`` pairs (40M for the paper's 9k): when that exceeds
    ``max_unlabelled_pairs`` (default 50k, about the unit count of the graph baselines and of the
    proposed method's triplets on such a partition), that many pairs are drawn uniformly (with
    replacement, from torch's global generator, so seeded) and each gets the weight
    ``μ · |U| / max_unlabelled_pairs``, an unbiased estimate of the entropy sum. (ii)
    ``mu=None`` (default) balances the two sums, ``μ = |P| / |U|``; Niu et al. treat ``μ`` as a
    tuned hyper-parameter. (iii) Niu et al. solve
    with an EM-like / projected-gradient scheme; here ``L`` is learned by SGD as in Algorithm 1.
    Defaults ``η = 1`` (mid-range squared distance of ℓ2-normalised embeddings, in ``[0, 4]``)
    and ``λ = 1``; the paper gives no values for the baselines.

    Args:
        metric: the :class:`LinearMetric`.
        eta: the distance threshold ``η > 0``.
        mu: weight ``μ > 0`` of the unlabelled entropy, or ``None`` for ``|P| / |U|``.
        lam: weight ``λ >= 0`` of ``Tr(M)``.
        max_unlabelled_pairs: cap on the unlabelled pairs per partition (``None``: all).
    """

    unit_size = 2

    def __init__(
        self,
        metric: LinearMetric,
        eta: float = 1.0,
        mu: float | None = None,
        lam: float = 1.0,
        max_unlabelled_pairs: int | None = 50_000,
    ) -> None:
        super().__init__(metric)
        if eta <= 0 or lam < 0 or (mu is not None and mu <= 0):
            raise ValueError(
                f"need eta > 0, mu > 0 (or None), lam >= 0; got eta={eta}, mu={mu}, lam={lam}"
            )
        if max_unlabelled_pairs is not None and max_unlabelled_pairs < 1:
            raise ValueError(
                f"max_unlabelled_pairs must be >= 1 or None, got {max_unlabelled_pairs}"
            )
        self.eta, self.mu, self.lam, self.max_unlabelled_pairs = eta, mu, lam, max_unlabelled_pairs
        self.mu_: float | None = None  # the μ used for the current partition
        self.kind: Tensor | None = None  # (U,) +1 / -1 labelled pair, 0 unlabelled pair
        self.weights: Tensor | None = None  # (U,)

    def _unlabelled_pairs(self, idx: Tensor) -> tuple[Tensor, float]:
        """Pairs ``(m, 2)`` of the unlabelled indices ``idx`` ``(n,)`` and ``|U| / m``."""
        n = idx.numel()
        total = n * (n - 1) // 2
        if self.max_unlabelled_pairs is None or total <= self.max_unlabelled_pairs:
            ij = torch.triu_indices(n, n, 1, device=idx.device).t()  # (total, 2)
            return idx[ij], 1.0
        m = self.max_unlabelled_pairs
        a = torch.randint(n, (m,), device=idx.device)
        b = torch.randint(n - 1, (m,), device=idx.device)
        b = b + (b >= a).long()  # uniform over ordered pairs a != b
        ij = torch.stack([torch.minimum(a, b), torch.maximum(a, b)], dim=1)  # (m, 2)
        return idx[ij], total / m

    def prepare(self, z: Tensor, labels: Tensor) -> Tensor:
        """Units ``(|P| + m, 2)``: the labelled pairs, then the (sampled) unlabelled pairs."""
        check_partition(z, labels, self.metric.dim)
        lab = (labels >= 0).nonzero().squeeze(1)  # (N_L,)
        unl = (labels < 0).nonzero().squeeze(1)  # (N_p,)
        ij = torch.triu_indices(lab.numel(), lab.numel(), 1, device=z.device).t()  # (|P|, 2)
        lab_pairs = lab[ij]  # (|P|, 2)
        same = labels[lab_pairs[:, 0]] == labels[lab_pairs[:, 1]]  # (|P|,)
        y = torch.where(same, 1.0, -1.0).to(z.dtype)  # (|P|,)
        unl_pairs, inv_rate = self._unlabelled_pairs(unl)  # (m, 2)
        n_unl_total = unl.numel() * (unl.numel() - 1) // 2
        if self.mu is not None:
            self.mu_ = self.mu
        else:
            self.mu_ = (
                lab_pairs.shape[0] / n_unl_total if lab_pairs.shape[0] and n_unl_total else 1.0
            )
        self.kind = torch.cat([y, y.new_zeros(unl_pairs.shape[0])])  # (U,)
        self.weights = torch.cat(
            [torch.ones_like(y), y.new_full((unl_pairs.shape[0],), self.mu_ * inv_rate)]
        )
        return torch.cat([lab_pairs, unl_pairs])  # (U, 2)

    def unit_loss(self, z: Tensor, rows: Tensor) -> Tensor:
        """``z`` ``(b, 2, d)`` pair embeddings of ``units[rows]`` -> scalar."""
        if self.weights is None or self.kind is None:
            raise RuntimeError(
                "DeepSERAPH.unit_loss before prepare(); call prepare(z, labels) first"
            )
        t = self.metric.sq_dist(z[:, 0], z[:, 1]) - self.eta  # (b,)
        y = self.kind[rows].to(t.dtype)  # (b,)
        nll = F.softplus(y * t)  # (b,) −log p(y): softplus(y (δ² − η))
        per_unit = torch.where(y != 0, nll, pair_entropy(t))  # (b,)
        trace_m = self.metric.L.pow(2).sum()
        reg = self.lam * trace_m * (rows.numel() / max(self.weights.numel(), 1))
        return (self.weights[rows].to(t.dtype) * per_unit).sum() + reg
