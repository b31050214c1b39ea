"""Mining quality on fixed features: how often the triplets the proposed method would mine are
right against the hidden classes, for the paper's affinity ``W`` and the alternatives the
chapter's diagnosis compares it with.

For a partition with features ``z`` ``(N, d)`` (L2-normalised here, as the paper builds its graph
on the L2-normalised representation before ``L``), the labels the method sees ``labels`` ``(N,)``
(``-1`` unlabelled) and the hidden classes ``targets`` ``(N,)``, :func:`mining_quality` builds the
kNN graph, the affinities and the triplets exactly as
:meth:`~dmlnb.ssdml.angular.AngularSSDML.prepare` does, and measures

* ``knn_same``: the share of the ``k`` neighbours of an anchor that have its class (how pure the
  neighbourhood the mining sorts is),
* ``pos_same``: the share of mined positives that have the anchor's class,
* ``neg_other``: the share of mined negatives that have another class,
* ``triplet_correct``: the share of triplets with both right.

``affinity="random"`` sorts each neighbourhood by a random symmetric matrix instead of ``W``:
the chance level of the sorting, on the same neighbourhoods (with ``negatives="outside"`` it
changes only which neighbours are the positives).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.ssdml.graph import (
    initial_affinity,
    knn_indices,
    propagated_affinity,
    transition_from_indices,
)
from dmlnb.ssdml.mining import neighbourhood_triplets

__all__ = ["AFFINITIES", "mining_quality"]

#: What sorts the neighbourhoods: the propagated ``W`` or a random symmetric matrix (chance).
AFFINITIES = ("propagated", "random")


def mining_quality(
    z: Tensor,
    labels: Tensor,
    targets: Tensor,
    *,
    k: int,
    gamma: float,
    propagation: str = "one-sided",
    negatives: str = "neighbourhood",
    affinity: str = "propagated",
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """The mined triplets of one partition against its hidden classes (module docstring).

    Args:
        z: ``(N, d)`` fixed features (raw pixels, a network's output), L2-normalised here.
        labels: ``(N,)`` the labels the method sees, ``-1`` for unlabelled.
        targets: ``(N,)`` the hidden classes of every row (``>= 0``).
        k, gamma: the kNN size and the propagation weight ``γ``.
        propagation: ``"one-sided"`` (the paper) or ``"two-sided"``
            (:func:`~dmlnb.ssdml.graph.propagated_affinity`).
        negatives: ``"neighbourhood"`` (the paper) or ``"outside"``
            (:func:`~dmlnb.ssdml.mining.neighbourhood_triplets`).
        affinity: ``"propagated"`` (``W``) or ``"random"`` (:data:`AFFINITIES`, chance).
        generator: the random draws (random affinities, outside negatives).

    Returns:
        ``{"knn_same", "pos_same", "neg_other", "triplet_correct"}``, shares in ``[0, 1]``.
    """
    if z.dim() != 2 or labels.shape != (z.shape[0],) or targets.shape != (z.shape[0],):
        raise ValueError(
            f"need z (N, d), labels (N,) and targets (N,); got {tuple(z.shape)}, "
            f"{tuple(labels.shape)}, {tuple(targets.shape)}"
        )
    if bool((targets < 0).any()):
        raise ValueError(
            "targets must hold every row's hidden class (>= 0); pass the unlabelled rows' true "
            "classes"
        )
    if affinity not in AFFINITIES:
        raise ValueError(f"affinity must be one of {AFFINITIES}, got {affinity!r}")
    z = F.normalize(z.detach().float(), dim=1)  # (N, d)
    idx = knn_indices(z, k)  # (N, k)
    if affinity == "random":
        R = torch.rand(len(z), len(z), generator=generator)  # (N, N)
        W = 0.5 * (R + R.T)
    else:
        W = propagated_affinity(
            initial_affinity(labels), transition_from_indices(idx, z.dtype), gamma, propagation
        )
    trip = neighbourhood_triplets(W, idx, negatives, generator=generator)  # (U, 3)
    y = targets[trip]  # (U, 3)
    pos, neg = y[:, 1] == y[:, 0], y[:, 2] != y[:, 0]  # (U,) each
    return {
        "knn_same": float((targets[idx] == targets[:, None]).float().mean()),
        "pos_same": float(pos.float().mean()),
        "neg_other": float(neg.float().mean()),
        "triplet_correct": float((pos & neg).float().mean()),
    }
