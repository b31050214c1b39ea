"""The SSDML chapter: figures."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from dmlnb.data.base import LabelledDataset, gather_images
from dmlnb.plots import retrieval_grid


def retrieval_figure(extras: Mapping[str, Any], test: LabelledDataset, title: str):
    """Figure 3 for one run: its fixed test ``queries`` ``(Q,)`` and their five nearest
    ``neighbours`` ``(Q, 5)`` (the record's extras) as a :func:`~dmlnb.plots.retrieval_grid`.

    Only the images shown are decoded (:func:`~dmlnb.data.base.gather_images`), so file-backed
    test sets (CUB-200-2011, Cars196) work as well as in-memory ones.
    """
    queries = torch.as_tensor(extras["queries"], dtype=torch.long)  # (Q,)
    neighbours = torch.as_tensor(extras["neighbours"], dtype=torch.long)  # (Q, K)
    rows, inverse = torch.unique(
        torch.cat([queries, neighbours.flatten()]), return_inverse=True
    )  # (R,), (Q + Q K,)
    images, labels = gather_images(test, rows), test.labels.cpu()[rows]  # (R, C, H, W), (R,)
    q, nb = inverse[: len(queries)], inverse[len(queries) :].view_as(neighbours)  # (Q,), (Q, K)
    return retrieval_grid(images[q], labels[q], images, labels, nb, title=title)
