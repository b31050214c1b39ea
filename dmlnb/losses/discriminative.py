"""The discriminative loss: a linear-time upper bound on the triplet loss, with fixed centroids.

Source: T.-T. Do, T. Tran, I. Reid, V. Kumar, T. Hoang, G. Carneiro, "A Theoretically Sound Upper
Bound on the Triplet Loss for Improving the Efficiency of Deep Distance Metric Learning",
CVPR 2019 (Sec. 3, Lemma 3.1, Table 3).

Notation: ``N`` embeddings ``x_i`` on the unit sphere with labels ``y_i in {0..C-1}``, one fixed
centroid ``c_m`` per class, Euclidean (not squared) distances. The paper starts from the
simplified triplet loss over *all* triplets of the set (Eq. 1-2, no margin, no hinge)::

    L_t = sum_{i, j != i: y_j = y_i} sum_{k: y_k != y_i} ( |x_i - x_j| - |x_i - x_k| )

(``j != i``: the count of these triplets is the lemma's ``H``), bounds every term by the
triangle inequality (Eq. 5-6)::

    l_d(i, j, k) = |x_i - c_{y_i}| - |x_i - c_{y_k}| + |x_j - c_{y_i}| + |x_k - c_{y_k}|

and, for a balanced set (``n = N / C`` samples in every class), sums them in closed form (Eq. 8)::

    L_d = G * sum_i ( |x_i - c_{y_i}| - 1 / (3 (C - 1)) * sum_{m != y_i} |x_i - c_m| ),
    G = 3 (C - 1) (N/C - 1) N/C.

Lemma 3.1: if ``|x_i - c_{y_i}| <= eps / 2`` for all ``i``, ``kappa_min`` / ``kappa_max`` are the
smallest / largest distance between two centroids and ``H = (N/C - 1) N (N - N/C)``, then
``0 <= L_d - L_t <= H (kappa_max - kappa_min + 3 eps)``.

The centroids are fixed before training (one-hot vectors, or K-means on points drawn uniformly
on the sphere, Sec. 3.2), so the loss costs ``O(N C)``: no pair or triplet term.

Beside the loss, the rest of the method: :class:`CentroidNet`, the paper's network (backbone ->
FC(D) -> FC(C), trained at the last layer and evaluated at the second-to-last, Sec. 4.2, Table 2);
:class:`LemmaTracker`, a training hook that evaluates Lemma 3.1 while the network trains; and
:class:`BackboneLR`, the paper's ten times smaller learning rate of the pretrained backbone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits
from torch import Tensor, nn

from dmlnb.checks import check_batch
from dmlnb.evaluation import compute_embeddings
from dmlnb.hooks import Hook, TrainState
from dmlnb.losses.base import MetricLoss
from dmlnb.models import EmbeddingNet
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize, pair_masks

__all__ = [
    "DiscriminativeLoss",
    "onehot_centroids",
    "kmeans_sphere_centroids",
    "centroid_distance_stats",
    "triplet_loss_all",
    "lemma31_bound",
    "CentroidNet",
    "LemmaTracker",
    "BackboneLR",
]


def onehot_centroids(num_classes: int, dim: int) -> Tensor:
    """One-hot centroids (Sec. 3.2): ``c_m = e_m``, shape ``(C, D)``, needs ``D >= C``.

    Every pair of centroids is at distance ``sqrt(2)`` (``kappa_min = kappa_max``).
    """
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if dim < num_classes:
        raise ValueError(
            f"one-hot centroids need dim >= num_classes, got dim={dim} < {num_classes}; "
            "use an embedding (or last layer) of at least C dimensions, or K-means centroids"
        )
    return torch.eye(num_classes, dim)  # (C, D)


def kmeans_sphere_centroids(
    num_classes: int,
    dim: int,
    seed: int = 0,
    n_points: int | None = None,
    n_iter: int = 100,
) -> Tensor:
    """K-means centroids (Sec. 3.2): cluster points drawn uniformly on the unit sphere.

    ``n_points`` points are drawn with i.i.d. standard normal coordinates and L2-normalised
    (Marsaglia 1972), clustered into ``C`` groups by K-means (k-means++ init, one run of at most
    ``n_iter`` Lloyd iterations, scikit-learn, one thread), and the cluster means are
    L2-normalised.
    The paper does not give ``n_points``. The distance statistics of these centroids at
    ``C = D = 100`` vary with the draw, so one draw does not settle whether they differ from its
    Table 3's: the discriminative chapter prints seed 0's beside the paper's and the spread
    ``kappa_max - kappa_min`` of several draws
    (:func:`dmlnb.experiments.discriminative.kmeans_draws`).

    Returns ``(C, D)`` float32 unit vectors; deterministic given ``seed``.
    """
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    n_points = 100 * num_classes if n_points is None else n_points
    if n_points < num_classes:
        raise ValueError(f"n_points ({n_points}) must be >= num_classes ({num_classes})")
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((n_points, dim))  # (P, D)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    km = KMeans(n_clusters=num_classes, n_init=1, max_iter=n_iter, random_state=seed)
    with threadpool_limits(limits=1):  # bit-reproducible, and no OpenMP spinning on busy CPUs
        centres = torch.from_numpy(km.fit(points).cluster_centers_)  # (C, D)
    return F.normalize(centres, dim=1).float()


def centroid_distance_stats(centroids: Tensor) -> dict[str, float]:
    """Min, max, mean and (population) std of the ``C (C - 1) / 2`` centroid distances (Table 3)."""
    c = _check_centroids(centroids).double()
    d = torch.cdist(c, c, compute_mode="donot_use_mm_for_euclid_dist")  # (C, C)
    iu = torch.triu_indices(len(c), len(c), offset=1, device=c.device)
    pairs = d[iu[0], iu[1]]  # (C (C - 1) / 2,)
    return {
        "min": pairs.min().item(),
        "max": pairs.max().item(),
        "mean": pairs.mean().item(),
        "std": pairs.std(correction=0).item(),
    }


class DiscriminativeLoss(MetricLoss):
    """Do et al.'s discriminative loss (Eq. 8) against fixed centroids, averaged over the batch.

    ``loss = mean_i ( |x_i - c_{y_i}| - 1 / (3 (C - 1)) * sum_{m != y_i} |x_i - c_m| )``

    i.e. Eq. 8 without its constant ``G`` and divided by the batch size: over a balanced set of
    ``N`` samples, ``L_d = G * N * loss``. ``G`` only rescales the learning rate; the mean keeps
    the loss scale independent of ``N``. The value can be negative (the push term).

    Args:
        centroids: ``(C, D)`` fixed class centroids (``C >= 2``), e.g. :func:`onehot_centroids`
            or :func:`kmeans_sphere_centroids`. Stored as a buffer: saved with the module, moved by
            ``.to()``, never trained.
        normalize: L2-normalise the embeddings first (the paper's ``|x| = 1``).

    ``compute(embeddings (B, D), labels (B,) in [0, C)) -> scalar``; cost ``O(B C D)``.
    """

    centroids: Tensor
    class_parameters = "one centroid per class"
    uses_pair_masks = False

    def __init__(self, centroids: Tensor, normalize: bool = True) -> None:
        super().__init__()
        self.register_buffer("centroids", _check_centroids(centroids).detach().clone())
        self.normalize = normalize

    @property
    def num_classes(self) -> int:  # type: ignore[override]
        return self.centroids.shape[0]

    @property
    def embedding_dim(self) -> int:  # type: ignore[override]
        return self.centroids.shape[1]

    def extra_repr(self) -> str:
        c, d = self.centroids.shape
        return f"num_classes={c}, dim={d}, normalize={self.normalize}"

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        c = self.centroids.to(x)  # (C, D)
        return _eq8_terms(euclidean_distance(x, c), labels).mean()


def triplet_loss_all(
    embeddings: Tensor,
    labels: Tensor,
    margin: float | None = None,
    chunk_size: int = 256,
    normalize: bool = True,
) -> float:
    """The triplet loss summed over all triplets of a set, ``L_t`` of Eq. 1-2 (float64, no grad).

    ``margin=None`` (the paper's simplified form, the quantity Lemma 3.1 bounds)::

        L_t = sum_{i, j != i: y_j = y_i, k: y_k != y_i} ( |x_i - x_j| - |x_i - x_k| )

    A float ``margin`` gives the usual hinged triplet loss over the same triplets,
    ``sum max(0, |x_i - x_j| - |x_i - x_k| + margin)`` (a sum, as in Eq. 1; divide by the
    triplet count for a mean).

    Computed exactly without a triplet tensor: anchors are processed ``chunk_size`` at a time
    (memory ``O(chunk_size * N)``). Without hinge the sum factorises per anchor,
    ``|neg(i)| * sum_j |x_i - x_j| - |pos(i)| * sum_k |x_i - x_k|``; with the hinge, each anchor's
    negative distances are sorted once and every positive reads its hinge sum from a prefix sum
    (``O(N^2 log N)`` time). Distances are exact differences (no ``|x|^2 + |y|^2 - 2 x.y``
    cancellation), so the value can be checked against the lemma's bounds.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    x = _prepare(embeddings, labels, normalize)  # (N, D) float64
    n = x.shape[0]
    total = x.new_zeros(())
    cols = torch.arange(n, device=x.device)  # (N,)
    for start in range(0, n, chunk_size):
        rows = cols[start : start + chunk_size]  # (A,)
        d = _exact_distance(x[rows], x)  # (A, N)
        masks = pair_masks(labels[rows], labels)
        pos = masks.positive & (rows[:, None] != cols[None, :])  # (A, N), j != i
        neg = masks.negative  # (A, N)
        if margin is None:
            pos_sum = (d * pos).sum(dim=1)  # (A,)
            neg_sum = (d * neg).sum(dim=1)  # (A,)
            total += (neg.sum(dim=1) * pos_sum - pos.sum(dim=1) * neg_sum).sum()
        else:
            neg_sorted = d.masked_fill(~neg, float("inf")).sort(dim=1).values  # (A, N)
            prefix = F.pad(neg_sorted.masked_fill(~neg_sorted.isfinite(), 0.0).cumsum(1), (1, 0))
            threshold = d + margin  # (A, N): hinge active for d_ik < d_ij + margin
            count = torch.searchsorted(neg_sorted, threshold)  # (A, N)
            hinge = count * threshold - prefix.gather(1, count)  # (A, N)
            total += (hinge * pos).sum()
    return total.item()


def lemma31_bound(
    embeddings: Tensor,
    labels: Tensor,
    centroids: Tensor,
    chunk_size: int = 256,
    normalize: bool = True,
) -> dict[str, float]:
    """Every quantity of Lemma 3.1 on a balanced labelled set (float64, no grad).

    Returns a dict with

    * ``L_t``: Eq. 1-2 over all ``H`` triplets (:func:`triplet_loss_all`, no margin);
    * ``L_d``: Eq. 8 with its constant ``G = 3 (C - 1) (N/C - 1) N/C``;
    * ``gap``: ``L_d - L_t``;
    * ``kappa_min``, ``kappa_max``: smallest / largest distance between two distinct centroids;
    * ``eps``: the smallest ``eps`` satisfying the lemma's assumption,
      ``2 * max_i |x_i - c_{y_i}|``;
    * ``H``: ``(N/C - 1) N (N - N/C)``, the number of triplets;
    * ``bound``: ``H (kappa_max - kappa_min + 3 eps)``.

    The lemma states ``0 <= gap <= bound``. Eq. 8 equals the sum of Eq. 6 over all triplets only
    for a balanced set, so every one of the ``C`` classes must have the same number of samples.
    """
    c = _check_centroids(centroids)
    x = _prepare(embeddings, labels, normalize, c)  # (N, D) float64
    c = c.to(x)  # (C, D)
    n_classes, n = c.shape[0], x.shape[0]
    counts = torch.bincount(labels, minlength=n_classes)  # (C,)
    if not bool((counts == counts[0]).all()) or counts[0].item() == 0:
        raise ValueError(
            "Eq. 8 and Lemma 3.1 assume a balanced set: each of the C = "
            f"{n_classes} classes needs N/C samples, got counts from {counts.min().item()} to "
            f"{counts.max().item()}; subsample every class to the same size"
        )
    per_class = n // n_classes
    dist = _exact_distance(x, c)  # (N, C)
    g = 3.0 * (n_classes - 1) * (per_class - 1) * per_class
    l_d = g * _eq8_terms(dist, labels).sum().item()
    l_t = triplet_loss_all(x, labels, chunk_size=chunk_size, normalize=False)
    stats = centroid_distance_stats(c)
    eps = 2.0 * dist.gather(1, labels[:, None]).max().item()
    h = float((per_class - 1) * n * (n - per_class))
    return {
        "L_t": l_t,
        "L_d": l_d,
        "gap": l_d - l_t,
        "kappa_min": stats["min"],
        "kappa_max": stats["max"],
        "eps": eps,
        "H": h,
        "bound": h * (stats["max"] - stats["min"] + 3.0 * eps),
    }


def _eq8_terms(dist: Tensor, labels: Tensor) -> Tensor:
    """``(N,)`` bracket of Eq. 8 from the ``(N, C)`` sample-to-centroid distances."""
    n_classes = dist.shape[1]
    own = dist.gather(1, labels.long()[:, None]).squeeze(1)  # (N,)
    others = dist.sum(dim=1) - own  # (N,)
    return own - others / (3.0 * (n_classes - 1))


def _exact_distance(x: Tensor, y: Tensor) -> Tensor:
    """``(A, R)`` Euclidean distance from coordinate differences (no matmul cancellation)."""
    return torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")


def _prepare(
    embeddings: Tensor, labels: Tensor, normalize: bool, centroids: Tensor | None = None
) -> Tensor:
    """Checked ``(N, D)`` float64 copy of ``embeddings`` (L2-normalised if ``normalize``);
    with ``centroids (C, D)`` the width must be ``D`` and the labels in ``[0, C)``."""
    if centroids is None:
        check_batch(embeddings, labels)
    else:
        n_classes, dim = centroids.shape
        check_batch(embeddings, labels, dim, n_classes, "the centroids", "one centroid per class")
    x = embeddings.detach().double()  # (N, D)
    return l2_normalize(x) if normalize else x


def _check_centroids(centroids: Tensor) -> Tensor:
    if centroids.dim() != 2 or centroids.shape[0] < 2:
        raise ValueError(
            f"centroids must be (C, D) with C >= 2 classes, got shape {tuple(centroids.shape)}"
        )
    if not torch.isfinite(centroids).all():
        raise ValueError("centroids contain NaN or Inf")
    return centroids


class CentroidNet(nn.Module):
    """The paper's network (Sec. 4.2): backbone -> FC(D) -> FC(C).

    In training mode :meth:`forward` returns the last, ``C``-dimensional layer (the discriminative
    loss L2-normalises it and compares it with the fixed centroids); in eval mode it returns the
    layer named by :attr:`eval_layer`: ``"penultimate"`` (the ``D``-dimensional FC output, the
    embedding the paper evaluates, Table 2) or ``"last"``.
    :func:`dmlnb.evaluation.compute_embeddings` switches to eval mode, so the training loop
    evaluates the penultimate layer.

    ``net`` is an :class:`~dmlnb.models.EmbeddingNet` whose trunk is ``backbone -> FC(D)`` and
    whose head is ``FC(D -> C)``: ``net.features(x)`` is the penultimate layer.
    """

    def __init__(self, net: EmbeddingNet, eval_layer: str = "penultimate") -> None:
        super().__init__()
        self.net = net
        self.eval_layer = eval_layer

    @property
    def eval_layer(self) -> str:
        return self._eval_layer

    @eval_layer.setter
    def eval_layer(self, value: str) -> None:
        if value not in ("penultimate", "last"):
            raise ValueError(f"eval_layer must be 'penultimate' or 'last', got {value!r}")
        self._eval_layer = value

    def features(self, x: Tensor) -> Tensor:
        """The penultimate (``D``-dimensional) layer ``(B, D)``."""
        return self.net.features(x)

    def forward(self, x: Tensor) -> Tensor:
        if self.training or self.eval_layer == "last":
            return self.net(x)  # (B, C)
        return self.net.features(x)  # (B, D)

    def extra_repr(self) -> str:
        return f"eval_layer={self.eval_layer!r}"


class LemmaTracker(Hook):
    """Evaluates Lemma 3.1 on a balanced labelled set during training.

    Before the first step and after every ``every`` epochs, the last-layer embeddings of
    ``dataset`` are computed in eval mode and :func:`dmlnb.losses.discriminative.lemma31_bound`
    gives ``L_t`` (all triplets, Eq. 1-2), ``L_d`` (Eq. 8), ``eps``, ``kappa_min/max`` and the bound
    ``H (kappa_max - kappa_min + 3 eps)``. One row per evaluation in :attr:`rows` (with ``epoch``,
    ``step`` and ``eps_mean = 2 mean_i |x_i - c_{y_i}|``); the rows are checkpointed with the run.
    The work happens outside the timed part of an epoch.
    """

    def __init__(
        self, dataset: Any, centroids: Tensor, every: int = 1, batch_size: int = 512
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.dataset = dataset
        self.centroids = centroids.detach().cpu()
        self.every = int(every)
        self.batch_size = int(batch_size)
        self.rows: list[dict[str, float]] = []

    def __repr__(self) -> str:
        return (
            f"LemmaTracker(n={len(self.dataset)}, classes={self.centroids.shape[0]}, "
            f"every={self.every})"
        )

    def measure(self, model: nn.Module) -> dict[str, float]:
        """Lemma 3.1's quantities for ``model``'s last layer on the tracked set."""
        previous = getattr(model, "eval_layer", None)
        if previous is not None:
            model.eval_layer = "last"
        try:
            emb, lab = compute_embeddings(model, self.dataset, batch_size=self.batch_size)
        finally:
            if previous is not None:
                model.eval_layer = previous
        out = lemma31_bound(emb, lab, self.centroids)
        x = l2_normalize(emb.double())
        own = (x - self.centroids.double()[lab]).norm(dim=1)  # (N,)
        out["eps_mean"] = 2.0 * own.mean().item()
        return out

    def _record(self, state: TrainState, epoch: int) -> None:
        row = {"epoch": float(epoch), "step": float(state.step)}
        row.update(self.measure(state.model))
        self.rows.append(row)

    def on_train_start(self, state: TrainState) -> None:
        if not self.rows:
            self._record(state, 0)

    def on_epoch_end(self, state: TrainState) -> None:
        if (state.epoch + 1) % self.every == 0:
            state.step += 1  # the step count after the epoch's last step
            try:
                self._record(state, state.epoch + 1)
            finally:
                state.step -= 1

    def state_dict(self) -> dict[str, Any]:
        return {"rows": [{str(k): float(v) for k, v in r.items()} for r in self.rows]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows = [dict(r) for r in state.get("rows", [])]


class BackboneLR(Hook):
    """The paper's learning rates for SGD: the backbone learns ``factor`` times slower than the new
    FC layers, with weight decay ``weight_decay`` on every model parameter.

    After ``backward`` it sets ``grad <- grad + wd * p`` on the model's parameters and multiplies
    the backbone's by ``factor``. With plain SGD (momentum included) and the configuration's own
    ``weight_decay = 0`` this is exactly SGD with a ``factor`` times smaller learning rate on the
    backbone and weight decay ``wd`` everywhere; resuming needs no extra state.
    """

    def __init__(
        self, backbone: Sequence[nn.Parameter], factor: float = 0.1, weight_decay: float = 0.0
    ) -> None:
        self.backbone = list(backbone)
        self.factor = float(factor)
        self.weight_decay = float(weight_decay)

    def __repr__(self) -> str:
        return f"BackboneLR(factor={self.factor}, weight_decay={self.weight_decay})"

    def after_backward(self, state: TrainState) -> None:
        with torch.no_grad():
            if self.weight_decay:
                for p in state.model.parameters():
                    if p.grad is not None:
                        p.grad.add_(p, alpha=self.weight_decay)
            for p in self.backbone:
                if p.grad is not None:
                    p.grad.mul_(self.factor)
