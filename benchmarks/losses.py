"""Forward+backward time of every dmlnb loss next to pytorch-metric-learning's equivalent.

    python benchmarks/losses.py        # CPU or the first CUDA device, B, D in {128, 512}
    python benchmarks/losses.py --device cpu --repeats 20 --out results.csv
    python benchmarks/losses.py --ops-only --batch-sizes 128   # operator counts only, no timing

Each row times ``loss(x, y).backward()`` on the same batch (labels: B/4 classes x 4 images) for
ours and for PML under the settings where the two compute the same value (checked here before
timing: the "same value" column). Rows whose PML counterpart follows a different rule say so.
The facility-location rows also report the loss-augmented inference alone. Median of
``--repeats`` timed runs after 3 warm-ups; CUDA runs are synchronised.

The "ours ops" and "PML ops" columns count the ATen operators one ``loss(x, y).backward()``
dispatches, forward and backward (a ``TorchDispatchMode``; autograd runs a CPU backward on the
calling thread, so the mode sees it too), ours with its value checks deferred as the training
loop runs it on a GPU. At these sizes the GPU time of a loss is its per-operator dispatch and
launch cost, so the count is the device-independent proxy for it. Counted on the CPU (the same
operators dispatch on CUDA) on a copy of the batch, after one warm-up call; an operator that is
a composite of others in C++ (``logsumexp``, ``cdist``) counts once. The facility-location loss
is not counted: its CPU path differs from the static-shape one CUDA runs
(``benchmarks/facility_location.py --count-ops`` counts both).
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import pandas as pd
import torch
from timing import median_ms  # benchmarks/timing.py, beside this script
from torch.utils._python_dispatch import TorchDispatchMode

from dmlnb import losses as L
from dmlnb.checks import DeferredChecks, deferred_checks
from dmlnb.losses.discriminative import onehot_centroids
from dmlnb.losses.facility_location import loss_augmented_inference
from dmlnb.pairs import euclidean_distance, l2_normalize


def _pml_pairs(num_classes: int, dim: int):
    """name -> (our loss, PML callable or None, note). Settings chosen so both compute the same
    value."""
    from pytorch_metric_learning import losses as pl
    from pytorch_metric_learning import miners as pm

    def with_miner(loss, miner):
        return _Mined(loss, miner)

    soft_ours = L.SoftTripleLoss(
        num_classes, dim, tau=0.0
    )  # PML's SoftTripleLoss has no centre regulariser by default
    soft_pml = pl.SoftTripleLoss(num_classes, dim)
    proxy_ours = L.ProxyNCALoss(num_classes, dim, exclude_positive=False)
    proxy_pml = pl.ProxyNCALoss(num_classes, dim)
    ns_ours = L.NormalizedSoftmaxLoss(num_classes, dim, temperature=0.05)
    ns_pml = pl.NormalizedSoftmaxLoss(num_classes, dim, temperature=0.05)
    return {
        "contrastive": (
            L.ContrastiveLoss(),
            pl.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0),
            "",
        ),
        "contrastive (hard)": (
            L.ContrastiveLoss(mining="hard"),
            with_miner(pl.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0), pm.BatchHardMiner()),
            "",
        ),
        "triplet (all)": (L.TripletLoss(margin=0.05), pl.TripletMarginLoss(margin=0.05), ""),
        "triplet (hard)": (
            L.TripletLoss(margin=0.05, mining="hard"),
            with_miner(pl.TripletMarginLoss(margin=0.05), pm.BatchHardMiner()),
            "",
        ),
        "triplet (semi-hard)": (
            L.TripletLoss(margin=0.05, mining="semihard"),
            with_miner(
                pl.TripletMarginLoss(margin=0.05),
                pm.TripletMarginMiner(margin=0.05, type_of_triplets="semihard"),
            ),
            "different rule: PML keeps 0 < d_an - d_ap <= m, no fallback",
        ),
        "lifted": (
            L.LiftedStructureLoss(),
            pl.LiftedStructureLoss(neg_margin=1.0, pos_margin=0.0),
            "",
        ),
        "n-pair": (L.NPairLoss(l2_reg=0.0, normalize=True), pl.NPairsLoss(), ""),
        "angular": (L.AngularLoss(alpha_degrees=40.0), pl.AngularLoss(alpha=40), ""),
        "margin": (
            L.MarginLoss(sampling="all_triplets", learn_beta=False),
            pl.MarginLoss(margin=0.2, beta=1.2),
            "",
        ),
        "multi-similarity": (
            L.MultiSimilarityLoss(),
            with_miner(
                pl.MultiSimilarityLoss(alpha=2, beta=50, base=0.5),
                pm.MultiSimilarityMiner(epsilon=0.1),
            ),
            "",
        ),
        "soft-triple": (soft_ours, _copy_soft_triple(soft_ours, soft_pml), ""),
        "proxy-nca": (proxy_ours, _copy_param(proxy_ours.proxies, proxy_pml, "proxies"), ""),
        "normalised softmax": (
            ns_ours,
            _copy_param(ns_ours.weight, ns_pml, "W", transpose=True),
            "",
        ),
        "EPHN": (
            L.easy_positive_loss("EPHN"),
            with_miner(
                pl.NTXentLoss(temperature=0.1),
                pm.BatchEasyHardMiner(pos_strategy="easy", neg_strategy="hard"),
            ),
            "PML keeps anchors with non-positive similarities",
        ),
        "EP": (L.easy_positive_loss("EP"), None, ""),
        "EPSHN": (L.easy_positive_loss("EPSHN"), None, ""),
        "BA (easy-positive family)": (L.easy_positive_loss("BA"), None, ""),
        "discriminative": (
            L.DiscriminativeLoss(onehot_centroids(num_classes, dim))
            if dim >= num_classes
            else None,
            None,
            "one-hot centroids",
        ),
        "facility location": (
            L.FacilityLocationLoss(refinement="full"),
            None,
            "includes loss-augmented inference",
        ),
    }


class _Mined(torch.nn.Module):
    """A PML loss applied to the tuples its miner selects."""

    def __init__(self, loss, miner) -> None:
        super().__init__()
        self.loss, self.miner = loss, miner

    def forward(self, x, y):
        return self.loss(x, y, self.miner(x, y))


def _copy_param(ours: torch.nn.Parameter, pml, name: str, transpose: bool = False):
    with torch.no_grad():
        getattr(pml, name).copy_(ours.T if transpose else ours)
    return pml


def _copy_soft_triple(ours, pml):
    c, k, d = ours.weight.shape
    with torch.no_grad():
        pml.fc.copy_(ours.weight.reshape(c * k, d).T)
    return pml


class _Dispatched(TorchDispatchMode):
    """Counts the ATen operators dispatched inside the ``with`` block (``count``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def count_ops(loss, x: torch.Tensor, y: torch.Tensor, context=contextlib.nullcontext) -> int:
    """ATen operators of one ``loss(x, y).backward()`` (forward and backward) inside ``context()``,
    after one warm-up call (lazy state, e.g. a miner's generator, is made by the first call)."""
    x = x.detach().clone().requires_grad_(True)
    with context():
        loss(x, y).backward()
        with _Dispatched() as counter:
            loss(x, y).backward()
    return counter.count


def _progress(row: dict) -> None:
    def shown(key: str, form: str) -> str:
        return "-" if row.get(key) is None else form.format(row[key])

    print(
        f"  B={row['B']} D={row['D']} {row['loss']}: ours {shown('ours (ms)', '{:.2f} ms')}, "
        f"{shown('ours ops', '{} ops')}; PML {shown('PML (ms)', '{:.2f} ms')}, "
        f"{shown('PML ops', '{} ops')}",
        file=sys.stderr,
        flush=True,
    )


def run(
    device: torch.device,
    batch_sizes: list[int],
    dims: list[int],
    repeats: int,
    deferred: bool = False,
    timed: bool = True,
    ops: bool = True,
) -> pd.DataFrame:
    """The table; with ``deferred`` ours is timed with its value checks deferred (no host read), as
    the training loop runs it on a GPU. ``timed=False`` leaves the time columns empty (operator
    counts only); ``ops=False`` leaves the operator counts empty (:func:`count_ops`, on the CPU,
    ours always with its checks deferred)."""
    checks = DeferredChecks(device)
    context = (lambda: deferred_checks(checks)) if deferred else contextlib.nullcontext
    cpu_checks = DeferredChecks(torch.device("cpu"))
    rows = []
    for b in batch_sizes:
        for d in dims:
            torch.manual_seed(0)
            num_classes = b // 4
            y = torch.arange(num_classes, device=device).repeat_interleave(4)
            x0 = l2_normalize(
                torch.randn(b, d, device=device)
            )  # unit rows: the input DML losses see
            for name, (ours, pml, note) in _pml_pairs(num_classes, d).items():
                if ours is None:
                    continue
                row = {
                    "loss": name,
                    "B": b,
                    "D": d,
                    "ours (ms)": None,
                    "PML (ms)": None,
                    "PML / ours": None,
                    "ours ops": None,
                    "PML ops": None,
                    "same value": None,
                    "note": note,
                }
                if ops and not isinstance(
                    ours, L.FacilityLocationLoss
                ):  # counted on the CPU, before the move
                    row["ours ops"] = count_ops(
                        ours, x0.cpu(), y.cpu(), lambda: deferred_checks(cpu_checks)
                    )
                    cpu_checks.raise_if_failed()
                    if pml is not None:
                        row["PML ops"] = count_ops(pml, x0.cpu(), y.cpu())
                ours = ours.to(device)
                x = x0.clone().requires_grad_(True)
                if timed:
                    with context():
                        row["ours (ms)"] = median_ms(lambda: ours(x, y).backward(), device, repeats)
                    checks.raise_if_failed()
                if pml is not None:
                    pml = pml.to(device)
                    row["same value"] = bool(
                        torch.allclose(ours(x0, y), pml(x0, y), rtol=1e-4, atol=1e-5)
                    )
                    if timed:
                        row["PML (ms)"] = median_ms(lambda: pml(x, y).backward(), device, repeats)
                        row["PML / ours"] = row["PML (ms)"] / row["ours (ms)"]
                rows.append(row)
                _progress(row)
            if timed:
                dist = euclidean_distance(l2_normalize(x0))
                infer_ms = median_ms(
                    lambda: loss_augmented_inference(dist, y, gamma=1.0, refinement="full"),
                    device,
                    repeats,
                )
                rows.append(
                    {
                        "loss": "facility location: inference only",
                        "B": b,
                        "D": d,
                        "ours (ms)": infer_ms,
                        "note": "greedy + 5 PAM passes",
                    }
                )
                _progress(rows[-1])
    table = pd.DataFrame(rows)
    table[["ours ops", "PML ops"]] = table[["ours ops", "PML ops"]].astype(
        "Int64"
    )  # print as integers
    return table


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--dims", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--deferred",
        action="store_true",
        help="time ours with its value checks deferred, as the training loop runs it on a GPU",
    )
    parser.add_argument(
        "--ops-only",
        action="store_true",
        help="count the ATen operators of ours and PML only, no timing",
    )
    parser.add_argument("--out", help="also write the table as CSV here")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    table = run(
        device,
        args.batch_sizes,
        args.dims,
        args.repeats,
        deferred=args.deferred,
        timed=not args.ops_only,
    )
    if args.ops_only:
        table = table.drop(columns=["ours (ms)", "PML (ms)", "PML / ours"])
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU, {torch.get_num_threads()} threads"
    )
    timing = "operator counts only" if args.ops_only else f"median of {args.repeats} runs"
    print(
        f"forward+backward, {timing} (ATen operators counted on the CPU, ours with deferred "
        "checks), "
        f"device: {name}, torch {torch.__version__}"
    )
    with pd.option_context(
        "display.width", 200, "display.max_rows", None, "display.max_colwidth", 60
    ):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.out:
        table.to_csv(args.out, index=False)
    return table


if __name__ == "__main__":
    main()
