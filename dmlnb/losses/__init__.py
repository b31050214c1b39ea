"""Batch losses, one module per family; each class documents the paper's equation it implements.

Every loss is a :class:`MetricLoss`: ``loss(embeddings (B, D), labels (B,)) -> scalar``, built on
the shared pair mechanism of :mod:`dmlnb.pairs`.

======================  ==================================================================
module                  losses
======================  ==================================================================
``contrastive``         :class:`ContrastiveLoss` (Hadsell et al. 2006)
``triplet``             :class:`TripletLoss` — batch-all, batch-hard, FaceNet semi-hard
``lifted``              :class:`LiftedStructureLoss` (Song et al. 2016)
``npair``               :class:`NPairLoss` (Sohn 2016)
``angular``             :class:`AngularLoss` (Wang et al. 2017)
``margin``              :class:`MarginLoss`, :class:`DistanceWeightedMiner` (Wu et al. 2017)
``multi_similarity``    :class:`MultiSimilarityLoss`, :class:`MultiSimilarityMiner`
                        (Wang et al. 2019)
``soft_triple``         :class:`SoftTripleLoss` (Qian et al. 2019)
``proxy_nca``           :class:`ProxyNCALoss` (Movshovitz-Attias et al. 2017)
``softmax``             :class:`NormalizedSoftmaxLoss` (Zhai & Wu 2019)
``easy_positive``       :class:`EasyPositiveLoss`, :func:`easy_positive_loss` (Xuan et al. 2020)
``discriminative``      :class:`DiscriminativeLoss`, its network ``CentroidNet``, the Lemma 3.1
                        tools and hooks ``LemmaTracker``, ``BackboneLR`` (Do et al. 2019)
``facility_location``   :class:`FacilityLocationLoss`, its inference and hooks
                        (:class:`MarginDecayHook`, ``InsideLossHook``) (Song et al. 2017)
======================  ==================================================================
"""

from dmlnb.losses.angular import AngularLoss
from dmlnb.losses.base import MetricLoss, zero_loss
from dmlnb.losses.contrastive import ContrastiveLoss
from dmlnb.losses.discriminative import DiscriminativeLoss
from dmlnb.losses.easy_positive import EasyPositiveLoss, easy_positive_loss
from dmlnb.losses.facility_location import FacilityLocationLoss, MarginDecayHook
from dmlnb.losses.lifted import LiftedStructureLoss
from dmlnb.losses.margin import DistanceWeightedMiner, MarginLoss
from dmlnb.losses.multi_similarity import MultiSimilarityLoss, MultiSimilarityMiner
from dmlnb.losses.npair import NPairLoss
from dmlnb.losses.proxy_nca import ProxyNCALoss
from dmlnb.losses.soft_triple import SoftTripleLoss
from dmlnb.losses.softmax import NormalizedSoftmaxLoss
from dmlnb.losses.triplet import TripletLoss

__all__ = [
    "MetricLoss",
    "zero_loss",
    "ContrastiveLoss",
    "TripletLoss",
    "LiftedStructureLoss",
    "NPairLoss",
    "AngularLoss",
    "MarginLoss",
    "DistanceWeightedMiner",
    "MultiSimilarityLoss",
    "MultiSimilarityMiner",
    "SoftTripleLoss",
    "ProxyNCALoss",
    "NormalizedSoftmaxLoss",
    "EasyPositiveLoss",
    "easy_positive_loss",
    "DiscriminativeLoss",
    "FacilityLocationLoss",
    "MarginDecayHook",
]
