"""Issue #16, item 5: a loss's step makes no host read when its value checks are deferred (the
training loop on a GPU), and a deferred check still stops a bad batch with the error an
immediate check raises.

On the CPU a host read costs nothing, so it is counted instead of timed: :class:`HostReads`
records every call that needs a tensor's value on the host (``bool(t)``, ``t.item()``,
``t.tolist()``, ``nonzero``, ``unique``, boolean-mask indexing, ...). On CUDA the same steps run
under ``torch.cuda.set_sync_debug_mode("error")``, which raises on a real synchronisation.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.overrides import TorchFunctionMode

from dmlnb.checks import DeferredChecks, NonFiniteError, check_finite_loss, deferred_checks
from dmlnb.losses import (
    AngularLoss,
    ContrastiveLoss,
    DiscriminativeLoss,
    EasyPositiveLoss,
    LiftedStructureLoss,
    MarginLoss,
    MultiSimilarityLoss,
    NormalizedSoftmaxLoss,
    NPairLoss,
    ProxyNCALoss,
    SoftTripleLoss,
    TripletLoss,
)
from dmlnb.losses.discriminative import onehot_centroids

B, D, C = 32, 16, 8

#: every loss and mining variant whose step must be free of host reads
LOSSES: dict[str, Callable[[], torch.nn.Module]] = {
    "contrastive": lambda: ContrastiveLoss(),
    "contrastive (mean)": lambda: ContrastiveLoss(reduction="mean"),
    "contrastive (hard)": lambda: ContrastiveLoss(mining="hard"),
    "triplet (all)": lambda: TripletLoss(),
    "triplet (hard)": lambda: TripletLoss(mining="hard"),
    "triplet (semi-hard)": lambda: TripletLoss(mining="semihard"),
    "lifted": lambda: LiftedStructureLoss(),
    "n-pair": lambda: NPairLoss(),
    "angular": lambda: AngularLoss(),
    "margin (all triplets)": lambda: MarginLoss(sampling="all_triplets"),
    "margin (distance weighted)": lambda: MarginLoss(),
    "margin (per class)": lambda: MarginLoss(num_classes=C),
    "multi-similarity": lambda: MultiSimilarityLoss(),
    "easy-positive": lambda: EasyPositiveLoss(),
    "soft-triple": lambda: SoftTripleLoss(C, D),
    "proxy-nca": lambda: ProxyNCALoss(C, D),
    "normalized-softmax": lambda: NormalizedSoftmaxLoss(C, D),
    "discriminative": lambda: DiscriminativeLoss(onehot_centroids(C, D)),
}

_READS = {
    "__bool__",
    "item",
    "tolist",
    "__int__",
    "__float__",
    "__index__",
    "nonzero",
    "argwhere",
    "unique",
    "unique_consecutive",
    "masked_select",
    "numpy",
    "repeat_interleave",
}


class HostReads(TorchFunctionMode):
    """Records the tensor calls that read values back to the host (``seen``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = getattr(func, "__name__", str(func))
        kwargs = kwargs or {}
        if name in _READS and not (
            name == "repeat_interleave" and kwargs.get("output_size") is not None
        ):
            self.seen.append(name)
        elif name == "__getitem__" and _has_bool_index(args[1] if len(args) > 1 else None):
            self.seen.append("boolean-mask indexing")
        return func(*args, **kwargs)


def _has_bool_index(index: object) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def batch(seed: int = 0, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, D, generator=g).to(device).requires_grad_(True)  # (B, D)
    return x, (torch.arange(B) % C).to(device)  # (B,)


@pytest.mark.parametrize("name", list(LOSSES))
def test_a_deferred_loss_step_reads_nothing_back(name: str) -> None:
    loss_fn = LOSSES[name]()
    x, y = batch()
    checks = DeferredChecks(torch.device("cpu"))
    with deferred_checks(checks), HostReads() as reads:
        loss = loss_fn(x, y)
        loss.backward()
    assert reads.seen == [], f"{name} read {reads.seen} back to the host"
    checks.raise_if_failed()  # a good batch passes
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all()


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(LOSSES))
def test_a_deferred_loss_step_does_not_synchronise_cuda(name: str) -> None:
    loss_fn = LOSSES[name]().cuda()
    x, y = batch(device="cuda")
    loss_fn(x, y).backward()  # warm-up: lazy initialisation may synchronise once
    x.grad = None
    checks = DeferredChecks(torch.device("cuda"))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with deferred_checks(checks):
            loss_fn(x, y).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    checks.raise_if_failed()


def test_deferred_non_finite_embeddings_raise_the_immediate_error_at_the_read() -> None:
    x, y = batch()
    bad = x.detach().clone()
    bad[3, 1] = float("nan")
    with pytest.raises(NonFiniteError) as immediate:
        TripletLoss()(bad, y)
    checks = DeferredChecks(torch.device("cpu"))
    with deferred_checks(checks):
        checks.step = 7
        TripletLoss()(x, y)  # a good step first
        checks.step = 8
        TripletLoss()(bad, y)  # no error yet
        checks.step = 9
        TripletLoss()(x, y)
        with pytest.raises(NonFiniteError) as deferred:
            checks.raise_if_failed()
    assert str(deferred.value) == str(immediate.value)
    checks.raise_if_failed()  # the read cleared the failure


def test_deferred_label_range_error_is_the_immediate_one() -> None:
    x, y = batch()
    y_bad = y.clone()
    y_bad[0] = C + 3
    with pytest.raises(ValueError) as immediate:
        ProxyNCALoss(C, D)(x, y_bad)
    checks = DeferredChecks(torch.device("cpu"))
    with deferred_checks(checks):
        ProxyNCALoss(C, D)(x, y_bad)
    with pytest.raises(ValueError) as deferred:
        checks.raise_if_failed()
    assert str(deferred.value) == str(immediate.value) and "num_classes" in str(deferred.value)


def test_deferred_non_finite_loss_names_the_loss() -> None:
    checks = DeferredChecks(torch.device("cpu"))
    with deferred_checks(checks):
        check_finite_loss(torch.tensor(float("inf")), "SomeLoss")
    with pytest.raises(FloatingPointError, match="SomeLoss produced a non-finite loss"):
        checks.raise_if_failed()


def test_checks_are_immediate_again_outside_the_block() -> None:
    with deferred_checks(DeferredChecks(torch.device("cpu"))):
        pass
    with pytest.raises(NonFiniteError):
        TripletLoss()(torch.full((4, 3), float("nan")), torch.tensor([0, 0, 1, 1]))
