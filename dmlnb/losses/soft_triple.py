"""SoftTriple loss: a softmax over classes with several centres each (Qian et al., ICCV 2019)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, cosine_similarity

__all__ = ["SoftTripleLoss"]


class _RelaxedSimilarity(torch.autograd.Function):
    r"""The softmax-weighted mean over the centres, ``(B, K, C) -> (B, C)``, with an analytic
    backward.

    Forward: :math:`p_k = \operatorname{softmax}_k(s_k / \gamma)`,
    :math:`\mathcal{S}' = \sum_k p_k s_k`. Backward:
    :math:`\partial \mathcal{S}' / \partial s_k = p_k \big(1 + (s_k - \mathcal{S}')/\gamma\big)`.
    The centres lie on the middle axis, so every reduction runs over whole contiguous
    ``(B, C)`` slices (a softmax over a last axis of ``K = 10`` is many times slower on a CPU).
    """

    @staticmethod
    def forward(ctx, s: Tensor, gamma: float) -> Tensor:  # type: ignore[override]
        p = torch.softmax(s / gamma, dim=1)  # (B, K, C) over the K centres
        relaxed = (p * s).sum(dim=1)  # (B, C)
        ctx.save_for_backward(s, p, relaxed)
        ctx.gamma = gamma
        return relaxed

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        s, p, relaxed = ctx.saved_tensors
        d_s = torch.sub(s, relaxed[:, None]).div_(ctx.gamma).add_(1.0)  # (B, K, C)
        return d_s.mul_(p).mul_(grad[:, None]), None


class SoftTripleLoss(MetricLoss):
    r"""SoftTriple loss (Qian, Shang, Sun, Hu, Li & Jin, "SoftTriple Loss: Deep Metric Learning
    Without Triplet Sampling", ICCV 2019).

    Each class ``c`` has ``K`` learnable centres :math:`w_c^k` (unit-normalised when used). With
    L2-normalised embeddings :math:`x_i`, the similarity to class ``c`` relaxes the max over its
    centres into a softmax-weighted mean,

    .. math::

        S_{i,c}^k = x_i^\top w_c^k, \qquad
        \mathcal{S}'_{i,c} = \sum_k
            \frac{\exp(S_{i,c}^k/\gamma)}{\sum_{k'} \exp(S_{i,c}^{k'}/\gamma)} \, S_{i,c}^k ,

    and the loss is a cross-entropy with margin :math:`\delta` on the true class, scaled by
    :math:`\lambda`, plus a regulariser that merges redundant centres:

    .. math::

        \ell_i = -\log \frac{\exp(\lambda(\mathcal{S}'_{i,y_i} - \delta))}
            {\exp(\lambda(\mathcal{S}'_{i,y_i} - \delta))
             + \sum_{c \ne y_i}\exp(\lambda \mathcal{S}'_{i,c})},
        \qquad
        \mathcal{L} = \frac{1}{B}\sum_i \ell_i
            + \frac{\tau}{C K (K-1)}
              \sum_c \sum_{t<s} \sqrt{2 + \varepsilon - 2\, w_c^{t\top} w_c^s} .

    The regulariser is off when ``tau == 0`` or ``K == 1``; :math:`\varepsilon` (``reg_eps``,
    1e-5 in the authors' code) keeps its gradient finite when two centres coincide. With
    ``reg_eps=torch.finfo(dtype).tiny`` it is PML's ``SparseCentersRegularizer`` (weight
    :math:`\tau`) on PML's ``SoftTripleLoss``; PML stores the centres as ``fc`` of shape
    ``(D, C*K)``, class-major, i.e. ``fc = weight.reshape(C*K, D).T``.

    Initialisation matches the authors' code and PML (``kaiming_uniform_(a=sqrt(5))`` on the
    ``(D, C*K)`` matrix): uniform in :math:`\pm 1/\sqrt{CK}`, drawn from the global torch RNG.

    Args:
        num_classes: number of training classes ``C`` (labels must lie in ``[0, C)``).
        embedding_dim: embedding dimension ``D``.
        centers_per_class: ``K`` (paper and PML 10).
        la: :math:`\lambda`, the logit scale (paper and PML 20).
        gamma: :math:`\gamma`, the centre-softmax temperature (paper and PML 0.1).
        tau: :math:`\tau`, the centre regulariser weight (paper 0.2; PML has none by default).
        margin: :math:`\delta` (paper and PML 0.01).
        reg_eps: :math:`\varepsilon` inside the regulariser's square root (authors' code 1e-5).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar; ``weight (C, K, D)``.
    """

    class_parameters = "K centres per class"
    uses_pair_masks = False

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        centers_per_class: int = 10,
        la: float = 20.0,
        gamma: float = 0.1,
        tau: float = 0.2,
        margin: float = 0.01,
        reg_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_classes < 1 or embedding_dim < 1 or centers_per_class < 1:
            raise ValueError(
                "num_classes, embedding_dim and centers_per_class must be >= 1, got "
                f"{num_classes}, {embedding_dim}, {centers_per_class}"
            )
        if gamma <= 0:
            raise ValueError(f"gamma must be > 0 (a softmax temperature), got {gamma}")
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.centers_per_class = centers_per_class
        self.la = float(la)
        self.gamma = float(gamma)
        self.tau = float(tau)
        self.margin = float(margin)
        self.reg_eps = float(reg_eps)
        bound = 1.0 / math.sqrt(num_classes * centers_per_class)
        self.weight = nn.Parameter(
            torch.empty(num_classes, centers_per_class, embedding_dim).uniform_(-bound, bound)
        )  # (C, K, D)

    def extra_repr(self) -> str:
        return (
            f"num_classes={self.num_classes}, embedding_dim={self.embedding_dim}, "
            f"centers_per_class={self.centers_per_class}, la={self.la}, gamma={self.gamma}, "
            f"tau={self.tau}, margin={self.margin}, reg_eps={self.reg_eps}"
        )

    def centers(self) -> Tensor:
        """The L2-normalised class centres ``(C, K, D)`` (class representatives, e.g. for PROFS's
        hard negative class mining)."""
        return F.normalize(self.weight, dim=2)

    def class_similarity(self, embeddings: Tensor) -> Tensor:
        r"""The relaxed similarity :math:`\mathcal{S}'` ``(B, C)`` of embeddings ``(B, D)``
        (:class:`_RelaxedSimilarity` on the ``(B, K, C)`` similarities to the centres)."""
        C, K, D = self.weight.shape
        dtype = embeddings.dtype  # promote_types is an operator call: made only when they differ
        if dtype != self.weight.dtype:
            dtype = torch.promote_types(dtype, self.weight.dtype)
        w = self.weight.transpose(0, 1).reshape(K * C, D).to(dtype)  # (K*C, D) centre k of class c
        s = cosine_similarity(embeddings.to(dtype), w).view(-1, K, C)  # (B, K, C)
        return _RelaxedSimilarity.apply(s, self.gamma)  # (B, C)

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None) -> Tensor:
        s = self.class_similarity(embeddings)  # (B, C)
        one_hot = labels[:, None] == torch.arange(
            self.num_classes, device=labels.device
        )  # (B, C), no host read
        loss = F.cross_entropy(
            self.la * s.add(one_hot, alpha=-self.margin), labels
        )  # la (s - delta one_hot)
        if self.tau > 0 and self.centers_per_class > 1:
            loss = loss + self.tau * self.center_regularizer()
        return loss

    def center_regularizer(self) -> Tensor:
        r"""Mean over classes and centre pairs ``t < s`` of
        :math:`\sqrt{2 + \varepsilon - 2 w^{t\top} w^s}`, i.e. the sum divided by
        :math:`C K (K - 1)` (the authors' and PML's normalisation); a scalar."""
        C, K, _ = self.weight.shape
        w = self.centers()  # (C, K, D)
        gram = (w @ w.transpose(1, 2)).clamp(max=1.0)  # (C, K, K)
        t, s = torch.triu_indices(K, K, offset=1, device=w.device)  # (K(K-1)/2,) x 2
        dist = torch.sqrt(2.0 + self.reg_eps - 2.0 * gram[:, t, s])  # (C, K(K-1)/2)
        return dist.sum() / (C * K * (K - 1))
