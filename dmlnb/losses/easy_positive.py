"""Easy Positive triplet mining with the NCA loss, and its hard-positive / batch-all relatives.

Source: H. Xuan, A. Stylianou, R. Pless, "Improved Embeddings with Easy Positive Triplet
Mining", WACV 2020 (Sec. 3-4), and the authors' code (littleredxh/EasyPositiveHardNegative,
``EPHNLoss``).

Embeddings are L2-normalised and compared by cosine similarity ``S_ij = f(x_i)^T f(x_j)``. For an
anchor ``a``, a positive ``p`` (same label) and a set of negatives ``N`` (other labels), every
variant is the NCA loss of Sec. 2.2 / 4 with the temperature ``T`` of Sec. 5.1 (0.1)::

    l(a, p, N) = -log( exp(S_ap/T) / (exp(S_ap/T) + sum_{n in N} exp(S_an/T)) )
               = softplus( logsumexp_{n in N}(S_an/T) - S_ap/T )

The variants differ in which positives and negatives enter (Sec. 3, Sec. 4 equations):

=======  ==================================  ==========================================
name     positive(s) per anchor              negatives
=======  ==================================  ==========================================
EP       easy: argmax_p S_ap  (L_EP)         all negatives of the anchor
EPHN     easy                  (L_EPHN)      hard: argmax_n S_an
EPSHN    easy                  (L_EPSHN)     semi-hard: argmax_n S_an over S_an < S_ap
HP       hard: argmin_p S_ap   (L_HP)        all
HPHN     hard                  (L_HPHN)      hard
BA       all (one term per positive pair)    all
=======  ==================================  ==========================================

With two images per class ("group size" n = 2) each anchor has one positive, so EP = HP = BA is
the N-pair loss (Sohn 2016) and EPHN = HPHN (Sec. 6.1).

Conventions taken from the authors' code (not written in the paper):

* duplicates: a positive with ``S_ap > duplicate_threshold`` (0.9999) is never used (it is the
  same image, or a copy of it, and carries no signal);
* ``drop_nonpositive``: a term whose chosen positive similarity, or chosen (hard / semi-hard)
  negative similarity, is ``<= 0`` is dropped. The authors' ``EPHNLoss`` (EPHN and EPSHN, the only
  variants in their code) does this; the paper's equations do not, so the factory turns it on
  for EPHN / EPSHN only. With ``negative="all"`` only the positive is checked;
* semi-hard: see below;
* the batch loss is the mean over the kept terms (one per anchor, or one per positive pair for
  ``positive="all"``). An anchor (pair) with no eligible positive or no (semi-hard) negative has no
  term. A batch with no kept term gives a graph-attached 0 (the authors' code would give NaN).

Semi-hard negatives, ``semihard=``:

* ``"strict"`` (the default, the paper's): Sec. 3.1 defines the semi-hard negative as the nearest
  negative *farther* than the positive, ``argmin_{n: d_an > d_ap} d_an``; on the unit sphere
  ``d^2 = 2 - 2 S``, so the candidates are the negatives with ``S_an < S_ap`` strictly, and a
  negative tied with the positive is not one;
* ``"inclusive"`` (the variant): candidates ``S_an <= S_ap``, as the authors' code, which drops
  the negatives with ``S_an > S_ap`` and keeps the ties.

The two differ only where a negative's similarity equals the positive's exactly, which is
where an embedding collapses (``S_an = S_ap``, a term of ``ln 2``): there ``"inclusive"`` takes
the tied negative, ``"strict"`` the most similar negative strictly below it, or no term when
there is none. The Easy Positive chapter runs the paper's ``"strict"`` rule and, beside it,
EPSHN with ``"inclusive"`` (``dmlnb.experiments.easy_positive``, ``Study.semihard``).

Selection uses the detached similarities; the gradient flows through the selected ones.

Relation to pytorch-metric-learning: ``BatchEasyHardMiner(pos_strategy, neg_strategy)`` +
``NTXentLoss(temperature=0.1)`` gives the same value and gradient (tested) when no term is
dropped and there are no duplicates. Otherwise PML differs: its easy positive is the duplicate
itself, it never drops non-positive similarities, it rejects semi-hard with ``"all"`` positives,
and it returns 0 when at most one (anchor, positive) and one (anchor, negative) pair is mined.
Its semi-hard negative needs ``S_an < S_ap`` strictly, as ``semihard="strict"``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import MetricLoss, check_choices
from dmlnb.pairs import PairMasks, cosine_similarity

__all__ = ["EasyPositiveLoss", "easy_positive_loss", "VARIANTS", "SEMIHARD_RULES"]

POSITIVE_STRATEGIES = ("easy", "hard", "all")
NEGATIVE_STRATEGIES = ("hard", "semihard", "all")
#: Semi-hard candidate rules: ``"strict"`` ``S_an < S_ap`` (Sec. 3.1, default), ``"inclusive"``
#: ``S_an <= S_ap`` (the authors' code).
SEMIHARD_RULES = ("strict", "inclusive")

#: The paper's variants: name -> (positive, negative, drop_nonpositive).
VARIANTS: dict[str, tuple[str, str, bool]] = {
    "EP": ("easy", "all", False),
    "EPHN": ("easy", "hard", True),
    "EPSHN": ("easy", "semihard", True),
    "HP": ("hard", "all", False),
    "HPHN": ("hard", "hard", False),
    "BA": ("all", "all", False),
}


class EasyPositiveLoss(MetricLoss):
    """NCA loss over mined (anchor, positive, negatives) tuples (Xuan et al. 2020, Sec. 4).

    ``loss = mean over kept terms of softplus(logsumexp_{n in N(a,p)} S_an/T - S_ap/T)``.

    Args:
        positive: ``"easy"`` (most similar positive, Sec. 3.4), ``"hard"`` (least similar,
            Sec. 3.3) or ``"all"`` (every positive pair is a term, Batch All).
        negative: ``"hard"`` (most similar negative, Sec. 3.1), ``"semihard"`` (most similar
            negative less similar than the positive, Sec. 3.1; see ``semihard``) or ``"all"``
            (every negative in the denominator, the N-pair / NCA form).
        temperature: ``T`` of the NCA softmax (paper: 0.1 in all experiments).
        duplicate_threshold: positives with similarity above it are never used; ``None``
            keeps them (authors: 0.9999).
        drop_nonpositive: drop terms whose chosen positive or chosen negative similarity is
            ``<= 0`` (authors' code).
        semihard: the semi-hard candidates of ``negative="semihard"`` (ignored otherwise):
            ``"strict"`` ``S_an < S_ap`` (the paper's, default) or ``"inclusive"``
            ``S_an <= S_ap`` (the authors' code); see the module docstring.

    ``compute(embeddings (B, D), labels (B,)) -> scalar``.

    Pair filter: the positives and negatives of an anchor (row) are its allowed pairs.
    """

    supports_pair_filter = True

    def __init__(
        self,
        positive: str = "easy",
        negative: str = "hard",
        temperature: float = 0.1,
        duplicate_threshold: float | None = 0.9999,
        drop_nonpositive: bool = True,
        semihard: str = "strict",
    ) -> None:
        super().__init__()
        check_choices(
            positive=(positive, POSITIVE_STRATEGIES),
            negative=(negative, NEGATIVE_STRATEGIES),
            semihard=(semihard, SEMIHARD_RULES),
        )
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.positive = positive
        self.negative = negative
        self.temperature = float(temperature)
        self.duplicate_threshold = duplicate_threshold
        self.drop_nonpositive = drop_nonpositive
        self.semihard = semihard

    def extra_repr(self) -> str:
        # semihard is shown where it acts (negative="semihard") only.
        semihard = f", semihard={self.semihard!r}" if self.negative == "semihard" else ""
        return (
            f"positive={self.positive!r}, negative={self.negative!r}, "
            f"temperature={self.temperature}, duplicate_threshold={self.duplicate_threshold}, "
            f"drop_nonpositive={self.drop_nonpositive}{semihard}"
        )

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        sim = cosine_similarity(embeddings)  # (B, B)
        s = sim.detach()  # (B, B) selection only
        eligible = masks.positive  # (B, B)
        if self.duplicate_threshold is not None:
            eligible = eligible & (s <= self.duplicate_threshold)
        terms = self._positive_terms(s, eligible)  # (B, B) the (a, p) terms
        log_neg, has_neg = self._negative_logsumexp(sim, s, masks.negative)  # (B, B|1) each
        keep = terms & has_neg  # (B, B)
        if self.drop_nonpositive:
            keep = keep & (s > 0)
        per_term = F.softplus(log_neg - sim / self.temperature)  # (B, B)
        # every entry of per_term is finite, so masking keeps the gradient NaN-free; an empty
        # keep gives 0 / 1 = a graph-attached 0.
        total = per_term.masked_fill(~keep, 0.0).sum()
        return total / keep.sum().clamp_min(1)

    def _positive_terms(self, s: Tensor, eligible: Tensor) -> Tensor:
        """``(B, B)`` bool: the (anchor, positive) pairs that get a loss term."""
        if self.positive == "all":
            return eligible
        if self.positive == "easy":
            idx = s.masked_fill(~eligible, float("-inf")).argmax(dim=1, keepdim=True)  # (B, 1)
        else:
            idx = s.masked_fill(~eligible, float("inf")).argmin(dim=1, keepdim=True)  # (B, 1)
        chosen = torch.zeros_like(eligible).scatter_(1, idx, True)  # (B, B)
        return chosen & eligible  # an anchor without eligible positive keeps no term

    def _negative_logsumexp(
        self, sim: Tensor, s: Tensor, negative: Tensor
    ) -> tuple[Tensor, Tensor]:
        """``logsumexp_{n in N(a,p)} S_an / T`` and whether ``N(a,p)`` is usable.

        Returns tensors of shape ``(B, 1)`` (the same negatives for every positive of an anchor:
        ``"all"``, ``"hard"``) or ``(B, B)`` indexed by (anchor, positive) (``"semihard"``).
        Entries where no negative exists are finite placeholders, flagged ``False``.
        """
        t = self.temperature
        has_neg = negative.any(dim=1, keepdim=True)  # (B, 1)
        if self.negative == "all":
            logits = (sim / t).masked_fill(~negative, float("-inf"))  # (B, B)
            logits = logits.masked_fill(~has_neg, 0.0)  # no all -inf row (NaN gradient)
            return torch.logsumexp(logits, dim=1, keepdim=True), has_neg  # (B, 1) each
        if self.negative == "hard":
            idx = s.masked_fill(~negative, float("-inf")).argmax(dim=1, keepdim=True)  # (B, 1)
            s_an = sim.gather(1, idx)  # (B, 1)
            ok = has_neg
        else:  # semihard: per (a, p), the most similar negative with S_an < S_ap (or <=)
            neg_sorted, order = s.masked_fill(~negative, float("inf")).sort(dim=1)  # (B, B)
            inclusive = self.semihard == "inclusive"
            # (B, B) [a, p]: how many negatives of a have S_an < S_ap (strict) or <= S_ap
            n_below = torch.searchsorted(neg_sorted, s.contiguous(), right=inclusive)
            idx = order.gather(1, (n_below - 1).clamp_min(0))  # (B, B) column of S_an
            s_an = sim.gather(1, idx)  # (B, B)
            ok = n_below > 0  # (B, B); +inf padding never counts, so n_below > 0 means a negative
        if self.drop_nonpositive:
            ok = ok & (s_an.detach() > 0)
        return s_an / t, ok


def easy_positive_loss(
    name: str,
    *,
    temperature: float = 0.1,
    duplicate_threshold: float | None = 0.9999,
    drop_nonpositive: bool | None = None,
    semihard: str = "strict",
) -> EasyPositiveLoss:
    """The paper's named variant as an :class:`EasyPositiveLoss`.

    ``name`` is one of ``"EP"``, ``"EPHN"``, ``"EPSHN"``, ``"HP"``, ``"HPHN"``, ``"BA"`` (see
    :data:`VARIANTS`); ``drop_nonpositive=None`` takes the variant's default (``True`` for the
    authors' EPHN / EPSHN only); ``semihard`` is EPSHN's candidate rule (``"strict"``, the
    paper's, or ``"inclusive"``, the authors' code; see :class:`EasyPositiveLoss`).
    """
    if name not in VARIANTS:
        raise ValueError(f"unknown Easy Positive variant {name!r}; choose one of {list(VARIANTS)}")
    positive, negative, drop = VARIANTS[name]
    return EasyPositiveLoss(
        positive=positive,
        negative=negative,
        temperature=temperature,
        duplicate_threshold=duplicate_threshold,
        drop_nonpositive=drop if drop_nonpositive is None else drop_nonpositive,
        semihard=semihard,
    )
