"""Every loss of :mod:`dmlnb.losses` registered as a method (:mod:`dmlnb.methods`).

A class is registered as it is: its constructor's arguments are the method's hyper-parameters
(``num_classes``, ``embedding_dim`` and ``centroids`` come from the run). Where a constructor
takes an object (a miner) or a context parameter that is really a choice, a small factory here
exposes the choice as a plain argument instead.

==========================  ==========================================================
method                      factory
==========================  ==========================================================
``"contrastive"``           :class:`~dmlnb.losses.ContrastiveLoss`
``"triplet"``               :class:`~dmlnb.losses.TripletLoss`
``"lifted"``                :class:`~dmlnb.losses.LiftedStructureLoss`
``"npair"``                 :class:`~dmlnb.losses.NPairLoss`
``"angular"``               :class:`~dmlnb.losses.AngularLoss`
``"margin"``                :func:`margin_loss` (:class:`~dmlnb.losses.MarginLoss`)
``"multi-similarity"``      :class:`~dmlnb.losses.MultiSimilarityLoss`
``"soft-triple"``           :class:`~dmlnb.losses.SoftTripleLoss`
``"proxy-nca"``             :class:`~dmlnb.losses.ProxyNCALoss`
``"normalized-softmax"``    :class:`~dmlnb.losses.NormalizedSoftmaxLoss`
``"easy-positive"``         :func:`~dmlnb.losses.easy_positive_loss` (the paper's variants)
``"facility-location"``     :class:`~dmlnb.losses.FacilityLocationLoss`
``"discriminative"``        :class:`~dmlnb.losses.DiscriminativeLoss` (centroids from the run)
==========================  ==========================================================
"""

from __future__ import annotations

from dmlnb.losses.angular import AngularLoss
from dmlnb.losses.contrastive import ContrastiveLoss
from dmlnb.losses.discriminative import DiscriminativeLoss
from dmlnb.losses.easy_positive import easy_positive_loss
from dmlnb.losses.facility_location import FacilityLocationLoss
from dmlnb.losses.lifted import LiftedStructureLoss
from dmlnb.losses.margin import MarginLoss
from dmlnb.losses.multi_similarity import MultiSimilarityLoss
from dmlnb.losses.npair import NPairLoss
from dmlnb.losses.proxy_nca import ProxyNCALoss
from dmlnb.losses.soft_triple import SoftTripleLoss
from dmlnb.losses.softmax import NormalizedSoftmaxLoss
from dmlnb.losses.triplet import TripletLoss
from dmlnb.methods import register

__all__ = ["margin_loss"]


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
    return MarginLoss(margin=margin, beta=beta, learn_beta=learn_beta,
                      num_classes=num_classes if per_class_beta else None, nu=nu, sampling=sampling)  # type: ignore[arg-type]


register("contrastive", ContrastiveLoss)
register("triplet", TripletLoss)
register("lifted", LiftedStructureLoss)
register("npair", NPairLoss)
register("angular", AngularLoss)
register("margin", margin_loss)
register("multi-similarity", MultiSimilarityLoss)
register("soft-triple", SoftTripleLoss)
register("proxy-nca", ProxyNCALoss)
register("normalized-softmax", NormalizedSoftmaxLoss)
register("easy-positive", easy_positive_loss)
register("facility-location", FacilityLocationLoss)
register("discriminative", DiscriminativeLoss)
