"""Structured facility-location clustering loss.

Song, Jegelka, Rathod, Murphy, "Deep Metric Learning via Facility Location", CVPR 2017.

A batch of ``B`` embeddings with ``C`` distinct labels is scored as a clustering. With the
distance matrix ``d`` ``(B, B)`` (``d[i, j] = ||f(x_i) - f(x_j)||``) and a set ``S`` of ``C``
medoid indices:

* facility location (Eq. 4): ``F(X, S) = - sum_i min_{j in S} d[i, j]``;
* cluster assignment (Eq. 7): ``g(S)[i] = argmin_k d[i, S[k]]``;
* oracle score (Eq. 5): ``F~(X, y) = sum_c max_{j: y_j = c} - sum_{i: y_i = c} d[i, j]``
  (the ground-truth clustering scored with its per-class medoids);
* structured margin (Eq. 8-10): ``Delta = 1 - NMI(g(S), y)`` with
  ``NMI = MI / sqrt(H(g(S)) H(y))``;
* loss (Eq. 6): ``[max_{|S| = C} {F(X, S) + gamma Delta(g(S), y)} - F~(X, y)]_+``.

The inner maximisation ("loss-augmented inference") is NP-hard; it is solved approximately by the
greedy Algorithm 1 followed by the PAM-like swap refinement Algorithm 2, in one of two forms
(``refinement=``, see :func:`loss_augmented_inference`):

* ``"paper"`` (the default): Algorithm 2 as the paper lists it, and TF's ``cluster_loss`` runs
  it. Each pass assigns ``y_PAM = g(S)`` once; then for each cluster ``k``, ``S[k]`` becomes the
  member ``j`` of cluster ``k`` of ``y_PAM`` maximising ``F(X_k, {j}) + gamma Delta(g(S minus
  S[k] plus j), y)`` (line 4, ``X_k`` the cluster's members). An update can lower the objective
  ``A(S) = F(X, S) + gamma Delta(g(S), y)``; a pass cannot take ``A`` below its value at the
  pass's start (for a metric ``d``, :func:`paper_pass`), so ``A`` ends at or above the greedy's.
* ``"full"`` (the variant): a swap is scored with the full objective ``A`` (the quantity of
  Lemma 1's proof), clusters are re-assigned after every swap, and a medoid is swapped only when
  ``A`` strictly rises, so Lemma 1 holds at every swap. The facility-location and
  discriminative-loss chapters trained their committed runs with it (their experiment modules
  pass it explicitly) until they are retrained.

Both forms, and the greedy, score every candidate of a step at once: one ``(n_candidates, B)``
tensor of new nearest-medoid distances and one batch of contingency tables give ``F`` and NMI
for all candidates (no call per candidate). Entropies are read per point from the counts of its
cell, so scoring ``n`` candidates costs ``O(n (B + C))`` time. The greedy scores all ``B``
points at each of its ``C`` steps. A refinement step scores the cluster's members, ``C`` steps
per pass (gathering them is a ``nonzero``: free on the CPU, a host read on an accelerator;
``"paper"`` runs so on every device). On CUDA ``"full"`` runs in rounds of static shapes, one
per swap plus one (:func:`refine_round`): a round scores every point as medoid of its own
cluster against the current medoids, all clusters' visits at once, and makes
the first swap that the sequential passes would make, with the same result. Nothing reads back
to the host inside the greedy, a round or the final scores, each of which replays one CUDA graph;
each round reads back whether it swapped. The kernels launched, a few microseconds each, set
the time on a GPU: about ``33 C`` for the greedy and ``71`` per round. A whole inference costs
``O(T C B (B + C))`` time for ``T`` passes, ``O(B (B + C))`` memory.
:func:`exhaustive_inference` solves the maximisation exactly on tiny batches.

Conventions (those of TensorFlow's ``contrib.losses.metric_learning.cluster_loss``, the authors'
reference): non-squared Euclidean distance on L2-normalised embeddings, ``C`` = number of distinct
labels in the batch, 5 refinement passes, the margin term carries no gradient, and the loss is a
sum over the batch (not a mean). Ties in the assignment go to the earliest medoid in ``S`` and
every medoid is assigned to its own cluster (as in TF, so duplicates cannot empty a cluster).
"""

from __future__ import annotations

from dmlnb.losses.facility_location.hooks import InsideLossHook, MarginDecayHook
from dmlnb.losses.facility_location.inference import (
    exhaustive_inference,
    loss_augmented_inference,
)
from dmlnb.losses.facility_location.inputs import REFINEMENTS
from dmlnb.losses.facility_location.loss import FacilityLocationLoss
from dmlnb.losses.facility_location.nmi import augmented_objective, nmi_from_assignment
from dmlnb.losses.facility_location.scores import (
    cluster_assignment,
    facility_score,
    oracle_score,
)

__all__ = [
    "facility_score",
    "oracle_score",
    "cluster_assignment",
    "nmi_from_assignment",
    "augmented_objective",
    "loss_augmented_inference",
    "exhaustive_inference",
    "FacilityLocationLoss",
    "MarginDecayHook",
    "InsideLossHook",
    "REFINEMENTS",
]
