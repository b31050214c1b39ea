"""The supervised baselines of Table 5 (Dutta, Harandi and Sekhar, AAAI 2021): the metric ``L``
trained on the labelled examples only, by Algorithm 1 like the proposed method, so that the
table measures what the unlabelled data adds."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.ssdml.angular import smooth_angular_loss
from dmlnb.ssdml.base import LinearMetric, PartitionObjective

__all__ = ["LabelledTriplets", "SoftmaxPretraining"]


class LabelledTriplets(PartitionObjective):
    """The supervised baselines of Table 5, trained on the labelled part only.

    Units are triplets of labelled examples: every ordered positive pair ``(a, p)`` with one
    negative drawn uniformly per pair and partition (torch's global generator, seeded).
    ``loss="triplet"``: ``[δ²_L(a, p) − δ²_L(a, n) + margin]_+`` (FaceNet, squared distances);
    ``loss="angular"``: Eq. (3) (the angular loss of Wang et al. 2017 in its triplet form).
    ``L`` is unconstrained.
    """

    unit_size = 3

    def __init__(
        self,
        dim: int,
        out_dim: int | None,
        loss: str,
        margin: float = 0.2,
        alpha_degrees: float = 40.0,
    ) -> None:
        super().__init__(LinearMetric(dim, out_dim))
        if loss not in ("triplet", "angular"):
            raise ValueError(f"loss must be 'triplet' or 'angular', got {loss!r}")
        self.loss, self.margin, self.alpha_degrees = loss, margin, alpha_degrees

    def prepare(self, z: Tensor, labels: Tensor) -> Tensor:
        """``(P, 3)`` triplets over the labelled rows (``labels >= 0``) of the partition."""
        known = torch.nonzero(labels >= 0).squeeze(1)  # (N_L,)
        y = labels[known]
        same = y[:, None] == y[None, :]  # (N_L, N_L)
        pos = same & ~torch.eye(len(y), dtype=torch.bool, device=y.device)
        a, p = torch.nonzero(pos, as_tuple=True)  # (P,), (P,)
        neg_w = (~same[a]).float()  # (P, N_L)
        if len(a) == 0 or not bool((neg_w.sum(1) > 0).all()):
            raise ValueError(
                "the labelled set needs two classes with >= 2 examples each to form triplets"
            )
        n = torch.multinomial(neg_w, 1).squeeze(1)  # (P,)
        return torch.stack([known[a], known[p], known[n]], dim=1)

    def unit_loss(self, z: Tensor, rows: Tensor) -> Tensor:
        if self.loss == "angular":
            return smooth_angular_loss(self.metric, z, self.alpha_degrees)
        a, p, n = z.unbind(1)
        return F.relu(self.metric.sq_dist(a, p) - self.metric.sq_dist(a, n) + self.margin).mean()


class SoftmaxPretraining(nn.Module):
    """The CIFAR-10 pre-training of the paper (Sec. 5): a linear softmax classifier on the
    embedding ``z`` in place of ``L``, trained with cross-entropy on the labelled images before
    Algorithm 1 (a loss for :func:`dmlnb.training.train`).

    Shapes: ``embeddings (B, d)``, ``labels (B,)`` -> scalar; ``linear.weight (C, d)``.
    """

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, num_classes)

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return F.cross_entropy(self.linear(embeddings), labels)
