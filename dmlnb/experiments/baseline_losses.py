"""The baseline losses that several chapters compare with, as registered methods
(:mod:`dmlnb.methods`) with the settings of their papers, so that every chapter trains the same
baseline and names it the same way in its runs' fingerprints:

* :func:`semihard_triplet`: FaceNet's semi-hard triplet loss (Schroff et al., CVPR 2015);
* :func:`lifted_structure`: the lifted structured loss (Oh Song et al., CVPR 2016);
* :func:`npair`: the N-pair loss with its L2 penalty (Sohn, NeurIPS 2016).

Each returns a :class:`~dmlnb.methods.MethodCall`; ``.build()`` makes a fresh loss, which takes
embeddings ``(B, D)`` and labels ``(B,)`` and returns a scalar.
"""

from __future__ import annotations

from dmlnb.methods import MethodCall, call

__all__ = ["semihard_triplet", "lifted_structure", "npair"]


def semihard_triplet() -> MethodCall:
    """FaceNet's rule: margin 0.2 on squared Euclidean distances, each positive pair's
    semi-hard negative, mean over the positive pairs."""
    return call("triplet", margin=0.2, mining="semihard", distance="squared", reduction="mean")


def lifted_structure(normalize: bool = True) -> MethodCall:
    """Negative margin 1 (the paper's); ``normalize``: L2-normalise the embeddings first."""
    return call("lifted", neg_margin=1.0, normalize=normalize)


def npair(normalize: bool = False, pairs: str = "first", penalty: str = "squared") -> MethodCall:
    """Sohn's setting: an L2 penalty of 0.02 on the embeddings, which are unnormalised unless
    ``normalize``; ``pairs``: Sohn's one pair per class (``"first"``) or every positive pair
    (``"all"``, the facility-location paper's Eq. 3); ``penalty``: on the squared norms
    (``"squared"``, Sohn's) or on the norms (``"norm"``, Eq. 3), see
    :class:`~dmlnb.losses.NPairLoss`."""
    return call("npair", l2_reg=0.02, normalize=normalize, pairs=pairs, penalty=penalty)
