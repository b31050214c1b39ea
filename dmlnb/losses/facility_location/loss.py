"""The structured facility-location clustering loss, Eq. (6) (:class:`FacilityLocationLoss`)."""

from __future__ import annotations

import time

import torch
from torch import Tensor

from dmlnb.losses.base import MetricLoss
from dmlnb.losses.facility_location.inference import infer_medoids
from dmlnb.losses.facility_location.inputs import (
    check_gamma,
    check_passes,
    check_refinement,
    encode_labels,
)
from dmlnb.losses.facility_location.scores import facility_unchecked, oracle_of_codes
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = ["FacilityLocationLoss"]


class FacilityLocationLoss(MetricLoss):
    """Structured facility-location clustering loss, Eq. (6) (Song et al., CVPR 2017).

    ``loss = [F(X, S_pred) + gamma (1 - NMI(g(S_pred), y)) - F~(X, y)]_+`` where ``S_pred`` comes
    from :func:`loss_augmented_inference` (greedy + PAM, no gradient) and ``F~`` is the oracle
    score with per-class medoids. The gradient (Eq. 11-13) flows through the distances
    ``d[i, j*(i)]`` to the chosen medoids and ``d[i, medoid(y_i)]``; the NMI margin is a constant.
    The loss is a sum over the batch, as in the paper and the TF reference.

    Args:
        margin_multiplier: ``gamma`` (>= 0). The paper decays it exponentially (rate 0.94); set
            ``loss.margin_multiplier`` from a training hook.
        pam_passes: refinement passes ``T`` of Algorithm 2 (paper: 5).
        normalize: L2-normalise embeddings before the (non-squared) Euclidean distance (paper:
            yes). Zero-norm embeddings stay at the origin (no NaN).
        refinement: the form of Algorithm 2, ``"paper"`` (the paper's listing, default) or
            ``"full"`` (swaps scored with the full objective, Lemma 1 at every swap; the form of
            the committed runs of the facility-location and discriminative-loss chapters); see
            :func:`loss_augmented_inference`.

    After each call, :attr:`last_stats` holds floats ``loss``, ``oracle_score`` (``F~``),
    ``predicted_score`` (``F(X, S_pred)``), ``augmented_score`` (``F + gamma (1 - NMI)``),
    ``nmi``, ``greedy_objective``, ``refined_objective``, ``pam_swaps``, ``inference_seconds``
    (on CUDA measured with CUDA events, so that a step reads its stats back once, in one
    ``tolist``), ``margin_multiplier``; :attr:`last_medoids` holds ``S_pred`` ``(C,)``.
    """

    uses_pair_masks = False

    def __init__(
        self,
        margin_multiplier: float = 1.0,
        pam_passes: int = 5,
        normalize: bool = True,
        refinement: str = "paper",
    ) -> None:
        super().__init__()
        self.margin_multiplier = margin_multiplier
        self.pam_passes = check_passes(pam_passes)
        self.normalize = normalize
        self.refinement = check_refinement(refinement)
        self.last_stats: dict[str, float] = {}
        self.last_medoids: Tensor | None = None

    @property
    def margin_multiplier(self) -> float:
        """``gamma``, the weight of the NMI margin; settable (e.g. decayed during training)."""
        return self._margin_multiplier

    @margin_multiplier.setter
    def margin_multiplier(self, value: float) -> None:
        self._margin_multiplier = check_gamma(value)

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        dist = euclidean_distance(x)  # (B, B)
        gamma = self.margin_multiplier
        if dist.is_cuda:  # events time the inference without a synchronisation of their own
            start_event, end_event = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start_event.record()
        start = time.perf_counter()
        codes, num_classes = encode_labels(labels)
        medoids, values, swaps = infer_medoids(
            dist.detach(), codes, num_classes, gamma, self.pam_passes, refinement=self.refinement
        )  # (C,), (3,): A(greedy), A(refined), NMI
        seconds = time.perf_counter() - start
        if dist.is_cuda:
            end_event.record()
        predicted = facility_unchecked(dist, medoids)
        oracle, _ = oracle_of_codes(dist, codes, num_classes)
        augmented = predicted + (gamma * (1.0 - values[2])).to(predicted.dtype)
        loss = torch.relu(augmented - oracle)
        scores = torch.stack([loss, oracle, predicted, augmented]).detach().double()  # (4,)
        read = torch.cat([scores, values]).tolist()  # the step's one host read of the stats
        if dist.is_cuda:  # the read has passed both events
            seconds = start_event.elapsed_time(end_event) / 1e3
        self.last_medoids = medoids
        self.last_stats = {
            **dict(zip(("loss", "oracle_score", "predicted_score", "augmented_score"), read[:4])),
            **dict(zip(("greedy_objective", "refined_objective", "nmi"), read[4:])),
            "pam_swaps": float(swaps),
            "inference_seconds": seconds,
            "margin_multiplier": gamma,
        }
        return loss

    def extra_repr(self) -> str:
        # Run records keep this repr (not in their fingerprints); it always names the refinement.
        return (
            f"margin_multiplier={self.margin_multiplier}, pam_passes={self.pam_passes}, "
            f"normalize={self.normalize}, refinement={self.refinement!r}"
        )
