"""Margin-based loss with distance weighted negative sampling (Wu et al., ICCV 2017)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.checks import check_square
from dmlnb.losses.base import MetricLoss, check_choices
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = ["MarginLoss", "DistanceWeightedMiner", "margin_loss"]

_SAMPLINGS = ("distance_weighted", "all_pairs", "all_triplets")


class DistanceWeightedMiner:
    r"""Distance weighted negative sampling (Wu et al., "Sampling Matters in Deep Embedding
    Learning", ICCV 2017, Sec. 4).

    For points spread uniformly on the unit sphere of :math:`\mathbb{R}^n`, pairwise distances
    follow :math:`q(d) \propto d^{\,n-2} \left(1 - d^2/4\right)^{(n-3)/2}`. Sampling negatives
    with weights :math:`q(d)^{-1}` spreads them over all distances instead of concentrating them
    near :math:`\sqrt{2}`:

    .. math::

        \Pr(n \mid a) \propto \begin{cases}
            q(\max(D_{an}, c))^{-1} = \max(D_{an}, c)^{\,2-n}
                \left(1 - \max(D_{an}, c)^2/4\right)^{(3-n)/2}
                & y_n \ne y_a,\ D_{an} < c_{nz} \\
            0 & \text{otherwise,}
        \end{cases}

    with the distance clamped at ``cutoff`` :math:`c` (the paper's :math:`\lambda` clipping of
    the weight, against high-variance samples) and zero weight at or beyond
    ``nonzero_loss_cutoff`` :math:`c_{nz}` (negatives that far give no margin-loss gradient).
    The weights are computed in log space, so large embedding dimensions ``n`` do not overflow.

    As in the authors' code (and the PROFS paper's reading of it, "one negative pair for each
    positive pair as in [48]"), every anchor draws one negative, with replacement, for each of its
    positives. An anchor whose negatives all lie beyond ``nonzero_loss_cutoff`` draws uniformly
    among its negatives (the authors' fallback). Anchors without a positive or a negative draw
    nothing.

    Randomness comes from a private :class:`torch.Generator` seeded with ``seed``, created on the
    distance matrix's device (and re-created, with the same seed, if the device changes), so runs
    are reproducible and independent of the global RNG.

    Args:
        cutoff: lower clamp :math:`c` of the distance in the weight (paper 0.5).
        nonzero_loss_cutoff: negatives at this distance or farther get weight 0 (paper 1.4).
        seed: seed of the sampler's generator.
    """

    def __init__(
        self, cutoff: float = 0.5, nonzero_loss_cutoff: float = 1.4, seed: int = 0
    ) -> None:
        if not 0.0 <= cutoff < nonzero_loss_cutoff:
            raise ValueError(
                f"need 0 <= cutoff < nonzero_loss_cutoff, got cutoff={cutoff}, "
                f"nonzero_loss_cutoff={nonzero_loss_cutoff}"
            )
        self.cutoff = float(cutoff)
        self.nonzero_loss_cutoff = float(nonzero_loss_cutoff)
        self.seed = int(seed)
        self._generator: torch.Generator | None = None

    def __repr__(self) -> str:
        return (
            f"DistanceWeightedMiner(cutoff={self.cutoff}, "
            f"nonzero_loss_cutoff={self.nonzero_loss_cutoff}, seed={self.seed})"
        )

    def probabilities(self, distance: Tensor, negative: Tensor, dim: int) -> Tensor:
        """Sampling distribution ``(B, B)`` of each anchor's negative (rows sum to 1; an anchor
        without a negative gets a row of 0).

        Args:
            distance: ``(B, B)`` Euclidean distances between L2-normalised embeddings.
            negative: ``(B, B)`` bool mask of negative pairs.
            dim: embedding dimension ``n``.
        """
        check_square(distance, "distance", (negative,))
        if dim < 1:
            raise ValueError(f"dim (the embedding dimension n) must be >= 1, got {dim}")
        with torch.no_grad():
            dtype = torch.promote_types(distance.dtype, torch.float32)  # half precision overflows
            d = distance.to(dtype).clamp_min(self.cutoff)  # (B, B)
            tiny = torch.finfo(d.dtype).tiny
            log_w = (2.0 - dim) * torch.log(d) + 0.5 * (3.0 - dim) * torch.log(
                (1.0 - 0.25 * d * d).clamp_min(tiny)
            )  # (B, B)
            admissible = negative & (d < self.nonzero_loss_cutoff)  # (B, B)
            has_admissible = admissible.any(dim=1, keepdim=True)  # (B, 1)
            allowed = torch.where(has_admissible, admissible, negative)  # (B, B)
            log_w = torch.where(has_admissible, log_w, torch.zeros_like(log_w))  # uniform fallback
            log_w = log_w.masked_fill(~allowed, float("-inf"))  # (B, B)
            probs = torch.softmax(log_w, dim=1)  # (B, B); NaN rows where nothing is allowed
            return torch.where(allowed.any(dim=1, keepdim=True), probs, torch.zeros_like(probs))

    def __call__(self, distance: Tensor, masks: PairMasks, dim: int) -> Tensor:
        """Sample negatives: returns ``(B, B)`` counts, entry ``(a, n)`` = how many times negative
        ``n`` was drawn for anchor ``a`` (row sums = number of positives of ``a``, or 0).

        Args:
            distance: ``(B, B)`` Euclidean distances between L2-normalised embeddings.
            masks: the batch's positive / negative pair masks.
            dim: embedding dimension ``n``.
        """
        probs = self.probabilities(distance, masks.negative, dim)  # (B, B)
        num_draws = masks.positive.sum(dim=1)  # (B,)
        num_draws = num_draws * masks.has_negative  # (B,) no negative: nothing to draw
        max_draws = (
            probs.shape[0] - 1
        )  # (static) the most positives an anchor can have: no host read
        counts = torch.zeros_like(probs)  # (B, B)
        if max_draws == 0:
            return counts
        # rows without a negative get a dummy uniform row; their draws are discarded below
        valid = probs.sum(dim=1, keepdim=True) > 0  # (B, 1)
        sampling = torch.where(valid, probs, torch.ones_like(probs))  # (B, B)
        draws = torch.multinomial(
            sampling, max_draws, replacement=True, generator=self._generator_on(probs.device)
        )  # (B, max_draws)
        keep = torch.arange(max_draws, device=probs.device) < num_draws[:, None]  # (B, max_draws)
        return counts.scatter_add_(1, draws, keep.to(counts.dtype))

    def _generator_on(self, device: torch.device) -> torch.Generator:
        if self._generator is None or self._generator.device != device:
            self._generator = torch.Generator(device=device)
            self._generator.manual_seed(self.seed)
        return self._generator


class MarginLoss(MetricLoss):
    r"""Margin-based loss (Wu, Manmatha, Smola & Krähenbühl, "Sampling Matters in Deep Embedding
    Learning", ICCV 2017, Sec. 5).

    With :math:`D_{ij}` the Euclidean distance between L2-normalised embeddings, :math:`y_{ij}=+1`
    for a positive pair and :math:`-1` for a negative pair, margin :math:`\alpha` and a learnable
    boundary :math:`\beta` (global, or one :math:`\beta_c` per class of the anchor ``i``):

    .. math::

        \ell(i, j) = \left[\alpha + y_{ij}\,(D_{ij} - \beta_{y_i})\right]_+ ,
        \qquad
        \mathcal{L} = \frac{\sum_{(i,j)} w_{ij}\,\big(\ell(i, j) + \nu\,\beta_{y_i}\big)}
                           {\sum_{(i,j)} w_{ij}\,[\ell(i, j) > 0]} ,

    i.e. the sum is normalised by the number of non-zero pair terms (the authors' code and PML);
    the :math:`\nu\beta` regulariser sits inside the pair sum as in the paper (default
    :math:`\nu = 0`). A batch with no non-zero term gives a graph-attached 0.

    Which pairs, with which multiplicity :math:`w_{ij}` (``sampling``):

    * ``"distance_weighted"`` (paper): every positive pair once, plus, for each positive pair
      ``(a, p)``, one negative of ``a`` drawn by :class:`DistanceWeightedMiner` (a negative
      drawn twice counts twice). This is the authors' triplet batch ``(a, p, n)``.
    * ``"all_pairs"``: every positive and every negative pair once (the paper's formula with no
      sampling).
    * ``"all_triplets"``: every triplet :math:`(a, p, n)` of the batch contributes
      :math:`\ell(a, p) + \ell(a, n)`, so a positive pair counts once per negative of its anchor
      and a negative pair once per positive: PML's ``MarginLoss`` without a miner
      (``triplets_per_anchor="all"``).

    Differences from PML's ``MarginLoss``: ``learn_beta`` defaults to ``True`` (the paper learns
    :math:`\beta`; PML's default is ``False``); with class-specific :math:`\beta`, PML counts the
    regulariser once per triplet, ours once per pair term (two per triplet), so ours with
    :math:`\nu` equals PML with :math:`2\nu` under ``"all_triplets"``; with a global
    :math:`\beta`, PML adds :math:`\nu\beta` un-normalised, ours normalises it like the pair terms.

    Args:
        margin: :math:`\alpha` (paper and PML 0.2).
        beta: initial :math:`\beta` (paper and PML 1.2).
        learn_beta: make :math:`\beta` an ``nn.Parameter`` (paper); otherwise a fixed buffer.
        num_classes: one :math:`\beta` per class (labels must then lie in ``[0, num_classes)``);
            ``None`` for a single global :math:`\beta`.
        nu: weight :math:`\nu` of the :math:`\beta` regulariser (PML default 0).
        sampling: ``"distance_weighted"`` (paper), ``"all_pairs"`` or ``"all_triplets"`` (PML).
        miner: the :class:`DistanceWeightedMiner` used with ``"distance_weighted"`` (default: the
            paper's cutoffs 0.5 / 1.4, seed 0).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: only allowed pairs get a term or are sampled (anchor = row).
    """

    supports_pair_filter = True
    class_parameters = "class-specific beta"

    beta: Tensor

    def __init__(
        self,
        margin: float = 0.2,
        beta: float = 1.2,
        learn_beta: bool = True,
        num_classes: int | None = None,
        nu: float = 0.0,
        sampling: Literal["distance_weighted", "all_pairs", "all_triplets"] = "distance_weighted",
        miner: DistanceWeightedMiner | None = None,
    ) -> None:
        super().__init__()
        check_choices(sampling=(sampling, _SAMPLINGS))
        if miner is not None and sampling != "distance_weighted":
            raise ValueError(
                f"a miner is only used with sampling='distance_weighted', got sampling={sampling!r}"
            )
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"num_classes must be a positive int or None, got {num_classes}")
        self.margin = float(margin)
        self.nu = float(nu)
        self.num_classes = num_classes
        self.sampling = sampling
        self.miner = (miner or DistanceWeightedMiner()) if sampling == "distance_weighted" else None
        init = torch.full((num_classes or 1,), float(beta))  # (C,) or (1,)
        if learn_beta:
            self.beta = nn.Parameter(init)
        else:
            self.register_buffer("beta", init)

    def extra_repr(self) -> str:
        return (
            f"margin={self.margin}, nu={self.nu}, num_classes={self.num_classes}, "
            f"sampling={self.sampling!r}, miner={self.miner}"
        )

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        x = l2_normalize(embeddings)  # (B, D)
        d = euclidean_distance(x)  # (B, B)
        w_pos, w_neg = self._pair_weights(d.detach(), masks, embeddings.shape[1])  # (B, B) x 2
        beta = self._anchor_beta(labels)  # (B, 1); type promotion keeps float32 beta exact
        pos_terms = F.relu(self.margin + d - beta)  # (B, B)
        neg_terms = F.relu(self.margin - d + beta)  # (B, B)
        active = (w_pos * (pos_terms > 0)).sum() + (w_neg * (neg_terms > 0)).sum()  # ()
        total = (w_pos * pos_terms).sum() + (w_neg * neg_terms).sum()  # ()
        if self.nu != 0.0:
            total = total + self.nu * ((w_pos + w_neg) * beta).sum()
        loss = total / active.clamp_min(1.0)
        return torch.where(active > 0, loss, loss * 0.0)  # no active term: graph-attached 0

    def _pair_weights(self, d: Tensor, masks: PairMasks, dim: int) -> tuple[Tensor, Tensor]:
        """Multiplicities ``(B, B)`` of the positive and of the negative pair terms (at least
        float32: triplet counts reach ~B^3 and would overflow half precision)."""
        dtype = torch.promote_types(d.dtype, torch.float32)
        pos = masks.positive.to(dtype)  # (B, B)
        neg = masks.negative.to(dtype)  # (B, B)
        if self.sampling == "all_pairs":
            return pos, neg
        if self.sampling == "all_triplets":
            n_pos = pos.sum(dim=1, keepdim=True)  # (B, 1)
            n_neg = neg.sum(dim=1, keepdim=True)  # (B, 1)
            return pos * n_neg, neg * n_pos
        assert self.miner is not None
        return pos, self.miner(d, masks, dim)

    def _anchor_beta(self, labels: Tensor) -> Tensor:
        """:math:`\\beta` of each anchor's class, ``(B, 1)``."""
        if self.num_classes is None:
            return self.beta.expand(labels.shape[0])[:, None]
        return self.beta[labels][:, None]


def margin_loss(
    num_classes: int,
    *,
    margin: float = 0.2,
    beta: float = 1.2,
    learn_beta: bool = True,
    per_class_beta: bool = False,
    nu: float = 0.0,
    sampling: str = "distance_weighted",
) -> MarginLoss:
    """Wu et al.'s margin loss (:class:`~dmlnb.losses.MarginLoss`) with its own distance-weighted
    miner; ``per_class_beta``: one learned ``beta`` per training class (``num_classes`` from the
    run) instead of one for all."""
    return MarginLoss(
        margin=margin,
        beta=beta,
        learn_beta=learn_beta,
        num_classes=num_classes if per_class_beta else None,
        nu=nu,
        sampling=sampling,
    )  # type: ignore[arg-type]
