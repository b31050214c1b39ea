"""The baseline losses that several chapters compare with, built in one place with the settings of
their papers, so that every chapter trains the same baseline:

* :func:`semihard_triplet_loss`: FaceNet's semi-hard triplet loss (Schroff et al., CVPR 2015);
* :func:`lifted_structure_loss`: the lifted structured loss (Oh Song et al., CVPR 2016);
* :func:`npair_loss`: the N-pair loss with its L2 penalty (Sohn, NeurIPS 2016).

Each call builds a fresh module. The losses take embeddings ``(B, D)`` and labels ``(B,)`` and
return a scalar.
"""

from __future__ import annotations

from dmlnb.losses import LiftedStructureLoss, NPairLoss, TripletLoss

__all__ = ["semihard_triplet_loss", "lifted_structure_loss", "npair_loss"]


def semihard_triplet_loss() -> TripletLoss:
    """FaceNet's rule: margin 0.2 on squared Euclidean distances, each positive pair's
    semi-hard negative, mean over the positive pairs."""
    return TripletLoss(margin=0.2, mining="semihard", distance="squared", reduction="mean")


def lifted_structure_loss(normalize: bool = True) -> LiftedStructureLoss:
    """Negative margin 1 (the paper's); ``normalize``: L2-normalise the embeddings first."""
    return LiftedStructureLoss(neg_margin=1.0, normalize=normalize)


def npair_loss(normalize: bool = False, pairs: str = "first", penalty: str = "squared") -> NPairLoss:
    """Sohn's setting: an L2 penalty of 0.02 on the embeddings, which are unnormalised unless
    ``normalize``; ``pairs``: Sohn's one pair per class (``"first"``) or every positive pair
    (``"all"``, the facility-location paper's Eq. 3); ``penalty``: on the squared norms
    (``"squared"``, Sohn's) or on the norms (``"norm"``, Eq. 3), see :class:`~dmlnb.losses.NPairLoss`."""
    return NPairLoss(l2_reg=0.02, normalize=normalize, pairs=pairs, penalty=penalty)
