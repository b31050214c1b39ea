"""Forward+backward time of every dmlnb loss next to pytorch-metric-learning's equivalent.

    python benchmarks/losses.py                    # CPU or the first CUDA device, B in {128, 512}, D in {128, 512}
    python benchmarks/losses.py --device cpu --repeats 20 --out results.csv

Each row times ``loss(x, y).backward()`` on the same batch (labels: B/4 classes x 4 images) for
ours and for PML under the settings where the two compute the same value (checked here before
timing: the "same value" column). Rows whose PML counterpart follows a different rule say so.
The facility-location rows also report the loss-augmented inference alone. Median of
``--repeats`` timed runs after 3 warm-ups; CUDA runs are synchronised.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import pandas as pd
import torch

from timing import median_ms  # benchmarks/timing.py, beside this script

from dmlnb import losses as L
from dmlnb.checks import DeferredChecks, deferred_checks
from dmlnb.losses.discriminative import onehot_centroids
from dmlnb.losses.facility_location import loss_augmented_inference
from dmlnb.pairs import euclidean_distance, l2_normalize


def _pml_pairs(num_classes: int, dim: int):
    """name -> (our loss, PML callable or None, note). Settings chosen so both compute the same value."""
    from pytorch_metric_learning import losses as pl
    from pytorch_metric_learning import miners as pm

    def with_miner(loss, miner):
        return _Mined(loss, miner)

    soft_ours = L.SoftTripleLoss(num_classes, dim, tau=0.0)  # PML's SoftTripleLoss has no centre regulariser by default
    soft_pml = pl.SoftTripleLoss(num_classes, dim)
    proxy_ours = L.ProxyNCALoss(num_classes, dim, exclude_positive=False)
    proxy_pml = pl.ProxyNCALoss(num_classes, dim)
    ns_ours = L.NormalizedSoftmaxLoss(num_classes, dim, temperature=0.05)
    ns_pml = pl.NormalizedSoftmaxLoss(num_classes, dim, temperature=0.05)
    return {
        "contrastive": (L.ContrastiveLoss(), pl.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0), ""),
        "contrastive (hard)": (L.ContrastiveLoss(mining="hard"), with_miner(pl.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0), pm.BatchHardMiner()), ""),
        "triplet (all)": (L.TripletLoss(margin=0.05), pl.TripletMarginLoss(margin=0.05), ""),
        "triplet (hard)": (L.TripletLoss(margin=0.05, mining="hard"), with_miner(pl.TripletMarginLoss(margin=0.05), pm.BatchHardMiner()), ""),
        "triplet (semi-hard)": (
            L.TripletLoss(margin=0.05, mining="semihard"),
            with_miner(pl.TripletMarginLoss(margin=0.05), pm.TripletMarginMiner(margin=0.05, type_of_triplets="semihard")),
            "different rule: PML keeps 0 < d_an - d_ap <= m, no fallback",
        ),
        "lifted": (L.LiftedStructureLoss(), pl.LiftedStructureLoss(neg_margin=1.0, pos_margin=0.0), ""),
        "n-pair": (L.NPairLoss(l2_reg=0.0, normalize=True), pl.NPairsLoss(), ""),
        "angular": (L.AngularLoss(alpha_degrees=40.0), pl.AngularLoss(alpha=40), ""),
        "margin": (L.MarginLoss(sampling="all_triplets", learn_beta=False), pl.MarginLoss(margin=0.2, beta=1.2), ""),
        "multi-similarity": (L.MultiSimilarityLoss(), with_miner(pl.MultiSimilarityLoss(alpha=2, beta=50, base=0.5), pm.MultiSimilarityMiner(epsilon=0.1)), ""),
        "soft-triple": (soft_ours, _copy_soft_triple(soft_ours, soft_pml), ""),
        "proxy-nca": (proxy_ours, _copy_param(proxy_ours.proxies, proxy_pml, "proxies"), ""),
        "normalised softmax": (ns_ours, _copy_param(ns_ours.weight, ns_pml, "W", transpose=True), ""),
        "EPHN": (
            L.easy_positive_loss("EPHN"),
            with_miner(pl.NTXentLoss(temperature=0.1), pm.BatchEasyHardMiner(pos_strategy="easy", neg_strategy="hard")),
            "PML keeps anchors with non-positive similarities",
        ),
        "EP": (L.easy_positive_loss("EP"), None, ""),
        "EPSHN": (L.easy_positive_loss("EPSHN"), None, ""),
        "BA (easy-positive family)": (L.easy_positive_loss("BA"), None, ""),
        "discriminative": (L.DiscriminativeLoss(onehot_centroids(num_classes, dim)) if dim >= num_classes else None, None, "one-hot centroids"),
        "facility location": (L.FacilityLocationLoss(), None, "includes loss-augmented inference"),
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


def _progress(row: dict) -> None:
    pml = f"{row['PML (ms)']:.2f}" if row.get("PML (ms)") is not None else "-"
    print(f"  B={row['B']} D={row['D']} {row['loss']}: ours {row['ours (ms)']:.2f} ms, PML {pml} ms", file=sys.stderr, flush=True)


def run(device: torch.device, batch_sizes: list[int], dims: list[int], repeats: int, deferred: bool = False) -> pd.DataFrame:
    """The table; with ``deferred`` ours runs with its value checks deferred (no host read), as the
    training loop runs it on a GPU."""
    checks = DeferredChecks(device)
    context = (lambda: deferred_checks(checks)) if deferred else contextlib.nullcontext
    rows = []
    for b in batch_sizes:
        for d in dims:
            torch.manual_seed(0)
            num_classes = b // 4
            y = torch.arange(num_classes, device=device).repeat_interleave(4)
            x0 = l2_normalize(torch.randn(b, d, device=device))  # unit rows: the input DML losses see
            for name, (ours, pml, note) in _pml_pairs(num_classes, d).items():
                if ours is None:
                    continue
                ours = ours.to(device)
                x = x0.clone().requires_grad_(True)
                with context():
                    ours_ms = median_ms(lambda: ours(x, y).backward(), device, repeats)
                checks.raise_if_failed()
                row = {"loss": name, "B": b, "D": d, "ours (ms)": ours_ms, "PML (ms)": None, "PML / ours": None, "same value": None, "note": note}
                if pml is not None:
                    pml = pml.to(device)
                    same = torch.allclose(ours(x0, y), pml(x0, y), rtol=1e-4, atol=1e-5)
                    pml_ms = median_ms(lambda: pml(x, y).backward(), device, repeats)
                    row.update({"PML (ms)": pml_ms, "PML / ours": pml_ms / ours_ms, "same value": bool(same)})
                rows.append(row)
                _progress(row)
            dist = euclidean_distance(l2_normalize(x0))
            infer_ms = median_ms(lambda: loss_augmented_inference(dist, y, gamma=1.0), device, repeats)
            rows.append({"loss": "facility location: inference only", "B": b, "D": d, "ours (ms)": infer_ms, "note": "greedy + 5 PAM passes"})
            _progress(rows[-1])
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--dims", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--deferred", action="store_true",
                        help="time ours with its value checks deferred, as the training loop runs it on a GPU")
    parser.add_argument("--out", help="also write the table as CSV here")
    args = parser.parse_args()
    device = torch.device(args.device)
    table = run(device, args.batch_sizes, args.dims, args.repeats, deferred=args.deferred)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"forward+backward, median of {args.repeats} runs, device: {name}, torch {torch.__version__}")
    with pd.option_context("display.width", 200, "display.max_rows", None, "display.max_colwidth", 60):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
