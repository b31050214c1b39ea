"""Metrics of the standard deep metric learning evaluation protocol.

The protocol (Song et al. 2016, "Deep Metric Learning via Lifted Structured Feature Embedding";
Musgrave et al. 2020, "A Metric Learning Reality Check") embeds a class-disjoint test set and
scores the embedding two ways:

* **retrieval** -- Recall@K (the query itself excluded; In-Shop uses a separate gallery) and
  MAP@R;
* **clustering** -- k-means with one cluster per test class, then NMI and the pairwise F1 of the
  clustering against the classes.

Everything is memory-bounded: neighbour search runs in query chunks (one ``(chunk, G)`` score
matrix at a time), the k-means assignment step in point chunks, and NMI / F1 use the sparse
contingency table (only its non-zero cells), never an ``N x N`` matrix.

Nearest-neighbour order is deterministic: by similarity descending (cosine) or distance ascending
(Euclidean), ties broken by the **lower gallery index**, identically for every ``chunk_size`` and
in float32 as in float64 (exact duplicate gallery rows get bit-identical scores).

Input is checked (:mod:`dmlnb.checks`) before any computation or native call (faiss): embeddings
``(N, D)`` floating point with ``N, D >= 1`` and finite, labels ``(N,)`` integer and ``>= 0`` (a
``-1``, "unlabelled", is rejected: filter those samples out), ``K`` at most the gallery size.
Huge or tiny finite embeddings are handled by exact power-of-two rescaling.
"""

from __future__ import annotations

from dmlnb.evaluation.clustering import f1_clustering, nmi, nmi_clustering
from dmlnb.evaluation.embeddings import compute_embeddings
from dmlnb.evaluation.inputs import METRIC_NAMES as METRIC_NAMES
from dmlnb.evaluation.inputs import KMeansBackend as KMeansBackend
from dmlnb.evaluation.inputs import Metric as Metric
from dmlnb.evaluation.inputs import NMIAverage as NMIAverage
from dmlnb.evaluation.k_means import kmeans
from dmlnb.evaluation.neighbours import knn
from dmlnb.evaluation.protocol import evaluate
from dmlnb.evaluation.retrieval import map_at_r, recall_at_k

__all__ = [
    "compute_embeddings",
    "knn",
    "recall_at_k",
    "kmeans",
    "nmi",
    "nmi_clustering",
    "f1_clustering",
    "map_at_r",
    "evaluate",
]
