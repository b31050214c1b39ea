"""Time of the facility-location loss-augmented inference (greedy Algorithm 1 + PAM Algorithm 2).

    python benchmarks/facility_location.py                     # CPU or the first CUDA device
    python benchmarks/facility_location.py --device cpu --repeats 20 --batch-sizes 64 128

Each row times ``loss_augmented_inference(dist, labels, gamma=1, refinement="full")`` (the form
of Algorithm 2 that has the static-shape path and CUDA graphs; 5 PAM passes, early stop) on one
batch of ``B`` unit embeddings (128-d, ``m`` images per class around ``B / m`` random class
centres, noise 1: a batch that leaves PAM work to do): median milliseconds of ``--repeats``
runs after 3 warm-ups (the first call on CUDA also captures the CUDA graphs), CUDA synchronised;
``pam_swaps`` is the number of PAM swaps made. ``ops``, ``kernels`` and ``reads`` count the ATen
operators one call dispatches, on the CPU on the same batch, for the path the device runs (on
CUDA the static-shape path, whose kernels its CUDA graphs replay): all, those that would launch
a GPU kernel (views, allocations and CPU scalars do not; under CUDA graphs, a few microseconds
each, they set the time) and those that read back to the host (``item``, ``nonzero``,
``unique``; the one ``tolist`` of the stats is not dispatched on the CPU). ``--count-ops`` also
prints the counts of both paths at B = 128, m = 4 (C = 32).
"""

from __future__ import annotations

import argparse
import math

import pandas as pd
import torch
from timing import median_ms  # benchmarks/timing.py, beside this script
from torch.utils._python_dispatch import TorchDispatchMode

from dmlnb.losses.facility_location import loss_augmented_inference
from dmlnb.pairs import euclidean_distance, l2_normalize

# ATen operators whose result the host must wait for.
_HOST_READS = {
    "_local_scalar_dense",
    "nonzero",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "is_nonzero",
}
# Operators that allocate or make a CPU scalar without launching a kernel (views
# are found by is_view).
_NO_KERNEL = {
    "empty",
    "new_empty",
    "empty_like",
    "empty_strided",
    "lift_fresh",
    "scalar_tensor",
    "_local_scalar_dense",
}


class _OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched inside the ``with`` block: all, those that would launch
    a GPU kernel (not views, allocations or CPU scalars), host reads."""

    def __init__(self) -> None:
        super().__init__()
        self.ops, self.kernels, self.reads = 0, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops += 1
        self.kernels += not func.is_view and name not in _NO_KERNEL
        self.reads += name in _HOST_READS
        return func(*args, **(kwargs or {}))


def batch(
    b: int, per_class: int, device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dist (B, B) float32, labels (B,))``: ``per_class`` unit embeddings around each of
    ``B / m`` random centres."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.arange(b // per_class).repeat_interleave(per_class)  # (B,)
    centres = torch.randn(b // per_class, 128, generator=gen)  # (C, 128)
    x = l2_normalize(centres[labels] + torch.randn(b, 128, generator=gen))  # (B, 128)
    return euclidean_distance(x).to(device), labels.to(device)


def count_ops(b: int = 128, per_class: int = 4) -> dict[str, _OpCounter]:
    """Operator counts of one CPU call: the default CPU path (which scores a cluster's members
    only) and the static-shape path that CUDA runs (and captures in graphs), forced with
    ``static_shapes=True`` on the same batch, the proxy for its kernel launches."""
    dist, labels = batch(b, per_class, torch.device("cpu"))
    calls = {
        "loss_augmented_inference (CPU path)": lambda: loss_augmented_inference(
            dist, labels, 1.0, refinement="full"
        ),
        "static-shape path (CUDA's)": lambda: loss_augmented_inference(
            dist, labels, 1.0, static_shapes=True, refinement="full"
        ),
    }
    counts = {}
    with torch.no_grad():
        for name, call in calls.items():
            call()
            with _OpCounter() as counts[name]:
                call()
    return counts


def call_ops(dist: torch.Tensor, labels: torch.Tensor, static_shapes: bool) -> _OpCounter:
    """Operator counts of one call on the CPU copy of the batch (the second call: the first
    warms up)."""
    dist, labels = dist.cpu(), labels.cpu()
    with torch.no_grad():
        loss_augmented_inference(dist, labels, 1.0, static_shapes=static_shapes, refinement="full")
        with _OpCounter() as counter:
            loss_augmented_inference(
                dist, labels, 1.0, static_shapes=static_shapes, refinement="full"
            )
    return counter


def run(
    device: torch.device, batch_sizes: list[int], per_class: list[int], repeats: int
) -> pd.DataFrame:
    rows = []
    for m in per_class:
        for b in batch_sizes:
            dist, labels = batch(b, m, device)
            _, stats = loss_augmented_inference(dist, labels, 1.0, refinement="full")
            ms = median_ms(
                lambda: loss_augmented_inference(dist, labels, 1.0, refinement="full"),
                device,
                repeats,
                slow_seconds=math.inf,
            )
            ops = call_ops(dist, labels, static_shapes=device.type == "cuda")
            rows.append(
                {
                    "B": b,
                    "m": m,
                    "C": b // m,
                    "ms": ms,
                    "pam_swaps": int(stats["pam_swaps"]),
                    "ops": ops.ops,
                    "kernels": ops.kernels,
                    "reads": ops.reads,
                }
            )
            print(f"  B={b} m={m}: {ms:.2f} ms, {ops.kernels} kernels", flush=True)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--per-class", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--count-ops",
        action="store_true",
        help="also count the ATen operators of both paths at B=128",
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.count_ops:
        for name, c in count_ops().items():
            print(
                f"one call at B=128, C=32, {name}: {c.ops} ATen operators, {c.kernels} launching "
                f"kernels, {c.reads} host reads"
            )
    table = run(device, args.batch_sizes, args.per_class, args.repeats)
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(
        f"loss_augmented_inference, median of {args.repeats} runs, device: {name}, torch "
        f"{torch.__version__}"
    )
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return table


if __name__ == "__main__":
    main()
