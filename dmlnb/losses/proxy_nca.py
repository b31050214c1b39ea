"""Proxy-NCA loss: NCA against one learnable proxy per class (Movshovitz-Attias et al. 2017)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = ["ProxyNCALoss"]


class ProxyNCALoss(MetricLoss):
    r"""Proxy-NCA loss (Movshovitz-Attias, Toshev, Leung, Ioffe & Singh, "No Fuss Distance Metric
    Learning using Proxies", ICCV 2017).

    One learnable proxy :math:`p_c` per class. With L2-normalised embeddings :math:`\hat x_i` and
    proxies :math:`\hat p_c`, :math:`d(x, p) = \lVert \hat x - \hat p \rVert^2` and scale
    :math:`s`, the paper's NCA over proxies keeps the positive proxy *out* of the denominator:

    .. math::

        \ell_i = -\log \frac{\exp(-s\, d(x_i, p_{y_i}))}{\sum_{c \ne y_i} \exp(-s\, d(x_i, p_c))},
        \qquad \mathcal{L} = \frac{1}{B} \sum_i \ell_i .

    This form is unbounded below (it keeps pushing once the positive proxy wins) and needs at
    least two classes. ``exclude_positive=False`` puts the positive proxy in the denominator,
    i.e. the usual softmax cross-entropy over the logits :math:`-s\,d(x_i, p_c)`: that is PML's
    ``ProxyNCALoss`` (``softmax_scale = s``; its ``LpDistance(power=2)`` normalises both sides).
    The two differ by :math:`\ell^{\text{paper}}_i = \ell^{\text{PML}}_i +
    \log\big(1 - e^{-\ell^{\text{PML}}_i}\big)`.

    Scale: with embeddings and proxies of fixed norm :math:`N` (the paper's setting) the logits
    are :math:`-N^2 \lVert \hat x - \hat p\rVert^2`, so :math:`s = N^2`. The paper gives no value;
    the default 1 is PML's ``softmax_scale``. Proxies are initialised :math:`\mathcal{N}(0, 1)`
    (PML's default) from the global torch RNG.

    Args:
        num_classes: number of training classes ``C`` (labels must lie in ``[0, C)``).
        embedding_dim: embedding dimension ``D``.
        scale: :math:`s`, multiplies the squared distances (PML ``softmax_scale`` default 1).
        exclude_positive: paper's denominator without the positive proxy (``True``) or the
            softmax cross-entropy of PML (``False``).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar; ``proxies (C, D)``.
    """

    class_parameters = "one proxy per class"
    uses_pair_masks = False

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        scale: float = 1.0,
        exclude_positive: bool = True,
    ) -> None:
        super().__init__()
        if num_classes < 1 or embedding_dim < 1:
            raise ValueError(
                f"num_classes and embedding_dim must be >= 1, got {num_classes}, {embedding_dim}"
            )
        if exclude_positive and num_classes < 2:
            raise ValueError(
                "exclude_positive=True needs num_classes >= 2 (the denominator sums over the "
                "other classes' proxies); use exclude_positive=False for a single class"
            )
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.scale = float(scale)
        self.exclude_positive = exclude_positive
        self.proxies = nn.Parameter(torch.randn(num_classes, embedding_dim))  # (C, D)

    def extra_repr(self) -> str:
        return (
            f"num_classes={self.num_classes}, embedding_dim={self.embedding_dim}, "
            f"scale={self.scale}, exclude_positive={self.exclude_positive}"
        )

    def logits(self, embeddings: Tensor) -> Tensor:
        """Logits ``-scale * ||x^ - p^||^2`` ``(B, C)`` of embeddings ``(B, D)``."""
        dtype = torch.promote_types(embeddings.dtype, self.proxies.dtype)
        x = l2_normalize(embeddings.to(dtype))  # (B, D)
        p = F.normalize(self.proxies.to(dtype), dim=1)  # (C, D)
        return -self.scale * euclidean_distance(x, p, squared=True)  # (B, C)

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None) -> Tensor:
        z = self.logits(embeddings)  # (B, C)
        if not self.exclude_positive:
            return F.cross_entropy(z, labels)
        positive = labels[:, None] == torch.arange(
            self.num_classes, device=labels.device
        )  # (B, C) one-hot, no host read
        z_pos = z.gather(1, labels[:, None]).squeeze(1)  # (B,)
        z_neg = torch.logsumexp(z.masked_fill(positive, float("-inf")), dim=1)  # (B,)
        return (z_neg - z_pos).mean()
