"""The clustering metrics, NMI (:func:`nmi_clustering`, :func:`nmi`) and the pairwise F1
(:func:`f1_clustering`), from the sparse contingency table of clusters and classes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dmlnb.checks import check_labels
from dmlnb.evaluation.inputs import (
    KMeansBackend,
    NMIAverage,
    checked,
)
from dmlnb.evaluation.k_means import kmeans

__all__ = ["nmi_clustering", "nmi", "f1_clustering"]


def _contingency(cluster_ids: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Sparse contingency table of two partitions of ``N`` items.

    Returns ``(n_ij (nnz, 3), a (C,), b (K,))``: one row ``(count, class i, cluster j)`` per
    non-zero cell, the class sizes ``a_i`` and the cluster sizes ``b_j`` (all int64, CPU).
    O(N log N) time and O(N) memory: no dense ``C x K`` table.
    """
    check_labels(cluster_ids, None, "cluster_ids")
    check_labels(labels, cluster_ids.shape[0], "labels", of="cluster id")
    if labels.numel() == 0:
        raise ValueError("cluster_ids and labels are empty; pass at least one item")
    _, cls = torch.unique(labels.cpu(), return_inverse=True)  # (N,) in [0, C)
    _, clu = torch.unique(cluster_ids.cpu(), return_inverse=True)  # (N,) in [0, K)
    n_clusters = int(clu.max()) + 1
    cells, counts = torch.unique(cls * n_clusters + clu, return_counts=True)  # (nnz,), (nnz,)
    table = torch.stack([counts, cells // n_clusters, cells % n_clusters], dim=1)  # (nnz, 3)
    return table, torch.bincount(cls), torch.bincount(clu)


def _entropy(sizes: Tensor) -> Tensor:
    """Shannon entropy (nats) of a partition with group ``sizes (C,)``."""
    p = sizes.double() / sizes.sum()  # (C,)
    return -(p * p.log()).sum()


def nmi_clustering(
    cluster_ids: Tensor, labels: Tensor, average: NMIAverage = "arithmetic"
) -> float:
    """Normalised mutual information of a clustering and the class labels,

        NMI = I(Y; Omega) / avg(H(Y), H(Omega)),
        I = sum_ij (n_ij / N) log(N n_ij / (a_i b_j)),

    with ``avg`` the arithmetic mean ``(H1 + H2) / 2`` (sklearn's ``normalized_mutual_info_score``
    default, used by PML and Roth et al. 2020) or the geometric mean ``sqrt(H1 H2)`` (the
    definition in Song et al. 2017, "Deep Metric Learning via Facility Location", Sec. 3). Natural
    logarithms; the ratio does not depend on the base.

    Edge cases follow sklearn: both partitions a single group -> 1.0; exactly one of them a
    single group (``I = 0``) -> 0.0.

    Args: ``cluster_ids (N,)`` and ``labels (N,)``, integer. Returns: NMI in [0, 1].
    """
    if average not in ("arithmetic", "geometric"):
        raise ValueError(f"average must be 'arithmetic' or 'geometric', got {average!r}")
    table, a, b = _contingency(cluster_ids, labels)
    if a.numel() == 1 and b.numel() == 1:
        return 1.0
    if a.numel() == 1 or b.numel() == 1:
        return 0.0
    n = float(a.sum())
    n_ij = table[:, 0].double()  # (nnz,)
    outer = a[table[:, 1]].double() * b[table[:, 2]].double()  # (nnz,) a_i b_j
    mi = ((n_ij / n) * (n * n_ij / outer).log()).sum().clamp_min(0.0)
    h_class, h_cluster = _entropy(a), _entropy(b)
    if average == "arithmetic":
        norm = (h_class + h_cluster) / 2
    else:
        norm = (h_class * h_cluster).sqrt()
    return float(mi / norm)


def nmi(
    embeddings: Tensor,
    labels: Tensor,
    n_clusters: int | None = None,
    seed: int = 0,
    backend: KMeansBackend = "auto",
    average: NMIAverage = "arithmetic",
) -> float:
    """NMI of a k-means clustering of ``embeddings (N, D)`` against ``labels (N,)``.

    ``n_clusters`` defaults to the number of distinct labels (the standard protocol); the
    clustering is :func:`kmeans` (20 iterations, ``seed``, ``backend``) on the embeddings as
    given, and the score :func:`nmi_clustering` with ``average``.
    """
    x, y = checked(embeddings, labels)
    assert y is not None
    k = int(torch.unique(y).numel()) if n_clusters is None else int(n_clusters)
    assignments, _ = kmeans(x, k, seed=seed, backend=backend)
    return nmi_clustering(assignments, y, average)


def f1_clustering(cluster_ids: Tensor, labels: Tensor) -> float:
    """Pairwise F1 of a clustering against the classes (Song et al. 2016, Sec. 5).

    A pair of items is a true positive when it shares a cluster and a class. With the contingency
    table ``n_ij`` (class i, cluster j), class sizes ``a_i`` and cluster sizes ``b_j``:

        TP = sum_ij C(n_ij, 2),  P = TP / sum_j C(b_j, 2),  R = TP / sum_i C(a_i, 2),
        F1 = 2PR / (P + R) = 2 TP / (sum_j C(b_j, 2) + sum_i C(a_i, 2)).

    The last form is used: it is defined whenever any pair shares a cluster or a class. When none
    does (every item alone in both partitions) the partitions agree on every pair and 1.0 is
    returned. O(N log N) time via the sparse contingency table; never an ``N x N`` matrix.

    Args: ``cluster_ids (N,)`` and ``labels (N,)``, integer. Returns: F1 in [0, 1].
    """
    table, a, b = _contingency(cluster_ids, labels)

    def pairs(sizes: Tensor) -> int:
        return int((sizes * (sizes - 1) // 2).sum())

    tp, same_class, same_cluster = pairs(table[:, 0]), pairs(a), pairs(b)
    if same_class + same_cluster == 0:
        return 1.0
    return 2.0 * tp / (same_class + same_cluster)
